//! CSV (RFC 4180, `\n` line ends): a header row of the schema's field
//! names, then one row per record. Null is an empty cell and an empty
//! string a quoted one (`""`), so that readers can tell them apart; dates
//! are `2024-01-31`, times `13:45:00.000`, timestamps
//! `2024-01-31T13:45:00.000Z`, decimals plain digits, bytes base64, and
//! nested values (structs, arrays, maps) their JSON.

use crate::compress::{Compression, Encoder};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, NaiveTime};
use spillway_sdk::data::{Data, Schema};

pub struct CsvWriter {
    encoder: Encoder,
}

impl CsvWriter {
    pub fn new(schema: &Schema, compression: Compression) -> CsvWriter {
        let mut encoder = compression.encoder();
        let header: Vec<String> = schema.fields().iter().map(|f| quote(&f.name)).collect();
        encoder.write(header.join(",").as_bytes());
        encoder.write(b"\n");
        CsvWriter { encoder }
    }

    /// Rows already conformed to the schema (fields in its order).
    pub fn write_rows(&mut self, rows: &[Data]) {
        let mut line = String::new();
        for row in rows {
            line.clear();
            if let Data::Struct(fields) = row {
                for (i, (_, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        line.push(',');
                    }
                    line.push_str(&cell(value));
                }
            }
            line.push('\n');
            self.encoder.write(line.as_bytes());
        }
    }

    pub fn ready(&self) -> usize {
        self.encoder.ready()
    }

    pub fn buffered(&self) -> usize {
        self.encoder.buffered()
    }

    pub fn take(&mut self) -> Vec<u8> {
        self.encoder.take()
    }

    pub fn finish(self) -> Vec<u8> {
        self.encoder.finish()
    }
}

fn quote(text: &str) -> String {
    if text.is_empty() || text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

fn cell(value: &Data) -> String {
    match value {
        Data::Null => String::new(),
        Data::String(s) => quote(s),
        Data::Boolean(b) => b.to_string(),
        Data::Float32(v) => v.to_string(),
        Data::Float64(v) => v.to_string(),
        Data::Bytes(b) => BASE64.encode(b),
        Data::Date(days) => DateTime::from_timestamp(*days as i64 * 86_400, 0)
            .map_or_else(|| days.to_string(), |t| t.format("%Y-%m-%d").to_string()),
        Data::Time(ms) => {
            NaiveTime::from_num_seconds_from_midnight_opt((*ms / 1000) as u32, (*ms % 1000) as u32 * 1_000_000)
                .map_or_else(|| ms.to_string(), |t| t.format("%H:%M:%S%.3f").to_string())
        }
        Data::Timestamp(ms) => DateTime::from_timestamp_millis(*ms)
            .map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
        Data::Decimal(d) => d.to_string(),
        Data::Array(_) | Data::Map(_) | Data::Struct(_) => quote(&value.to_json().to_string()),
        other => other.as_i64().map_or_else(String::new, |i| i.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_sdk::data::Decimal;

    #[test]
    fn cells() {
        assert_eq!(cell(&Data::Null), "");
        assert_eq!(cell(&Data::String(String::new())), "\"\"");
        assert_eq!(cell(&Data::String("a,\"b\"".into())), "\"a,\"\"b\"\"\"");
        assert_eq!(cell(&Data::Date(19723)), "2024-01-01");
        assert_eq!(cell(&Data::Time(49_500_123)), "13:45:00.123");
        assert_eq!(cell(&Data::Timestamp(1_704_067_200_001)), "2024-01-01T00:00:00.001Z");
        assert_eq!(cell(&Data::Decimal(Decimal { unscaled: -12345, scale: 2 })), "-123.45");
        assert_eq!(cell(&Data::Int8(-3)), "-3");
        assert_eq!(cell(&Data::Array(vec![Data::Int64(1)])), "[1]");
    }
}
