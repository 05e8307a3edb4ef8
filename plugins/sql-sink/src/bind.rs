//! A cell's value as the parameter its column takes: the `value` variant
//! follows both the field's Connect schema and the column's type in the
//! catalogue (a string into a PostgreSQL `uuid` column is a `uuid`, anything
//! into a `json`/`jsonb` column is `json`, ...). A value that cannot fit
//! its column is an `Err` with the reason.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use spillway_sdk::data::{Data, Decimal};
use spillway_sdk::sql::{Dialect, Value};

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// What a column holds, from its catalogue type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An integer column, with the range it takes.
    Int {
        min: i64,
        max: i64,
    },
    Float,
    Decimal,
    Bool,
    Text,
    Bytes,
    Json,
    Uuid,
    Date,
    Time,
    Timestamp,
    /// A type the sink does not know (an enum, `inet`, ...): the value is
    /// bound as its schema says and the database converts it.
    Other,
}

const ANY_INT: Kind = Kind::Int { min: i64::MIN, max: i64::MAX };

/// The kind of a column whose catalogue type is `data_type` (lower case,
/// as `describe-table` gives it: `bigint`, `character varying(20)`,
/// `decimal(65,2)`, `int unsigned`, ...).
pub fn kind(dialect: Dialect, data_type: &str) -> Kind {
    let ty = data_type.trim().to_ascii_lowercase();
    let base = match ty.find('(') {
        Some(i) => format!("{}{}", &ty[..i], ty[i..].find(')').map_or("", |j| &ty[i + j + 1..])),
        None => ty.clone(),
    };
    let base = base.split_whitespace().collect::<Vec<_>>().join(" ");
    let unsigned = base.ends_with(" unsigned") || base.ends_with(" zerofill");
    let word = base.trim_end_matches(" zerofill").trim_end_matches(" unsigned");
    let int = |bits: u32| {
        if unsigned {
            Kind::Int { min: 0, max: if bits >= 64 { i64::MAX } else { (1i64 << bits) - 1 } }
        } else if bits >= 64 {
            ANY_INT
        } else {
            Kind::Int { min: -(1i64 << (bits - 1)), max: (1i64 << (bits - 1)) - 1 }
        }
    };
    if dialect == Dialect::Sqlite {
        // SQLite's integers are 64-bit whatever the declared type; other
        // types follow its affinity rules.
        return match word {
            "boolean" | "bool" => Kind::Bool,
            "date" => Kind::Date,
            "time" => Kind::Time,
            "timestamp" | "datetime" => Kind::Timestamp,
            "json" | "jsonb" => Kind::Json,
            "uuid" => Kind::Uuid,
            "decimal" | "numeric" => Kind::Decimal,
            _ if word.contains("int") => ANY_INT,
            _ if word.contains("char") || word.contains("clob") || word.contains("text") => Kind::Text,
            _ if word.contains("blob") => Kind::Bytes,
            _ if word.contains("real") || word.contains("floa") || word.contains("doub") => Kind::Float,
            "" => Kind::Other,
            _ => Kind::Decimal,
        };
    }
    match word {
        "tinyint" if dialect == Dialect::Mysql && ty.starts_with("tinyint(1)") && !unsigned => Kind::Bool,
        "tinyint" => int(8),
        "smallint" | "int2" | "smallserial" | "serial2" => int(16),
        "mediumint" => int(24),
        "integer" | "int" | "int4" | "serial" | "serial4" => int(32),
        "bigint" | "int8" | "bigserial" | "serial8" => int(64),
        "real" | "float" | "float4" | "float8" | "double" | "double precision" => Kind::Float,
        "numeric" | "decimal" | "dec" | "fixed" => Kind::Decimal,
        "boolean" | "bool" => Kind::Bool,
        "text" | "varchar" | "char" | "character" | "character varying" | "nvarchar" | "nchar" | "tinytext"
        | "mediumtext" | "longtext" | "citext" | "name" | "bpchar" | "enum" | "set" => Kind::Text,
        "bytea" | "blob" | "tinyblob" | "mediumblob" | "longblob" | "binary" | "varbinary" => Kind::Bytes,
        "json" | "jsonb" => Kind::Json,
        "uuid" => Kind::Uuid,
        "date" => Kind::Date,
        "time" | "time without time zone" | "time with time zone" | "timetz" => Kind::Time,
        "timestamp" | "timestamp without time zone" | "timestamp with time zone" | "timestamptz" | "datetime" => {
            Kind::Timestamp
        }
        _ => Kind::Other,
    }
}

/// [`bind`], moving a string's or bytes' buffer into the parameter
/// where it goes as it is.
pub fn bind_owned(data: Data, kind: Kind) -> Result<Value, String> {
    Ok(match (data, kind) {
        (Data::String(s), Kind::Text | Kind::Other) => Value::Text(s),
        (Data::String(s), Kind::Uuid) if is_uuid(&s) => Value::Uuid(s),
        (Data::String(s), Kind::Bytes) => Value::Bytes(s.into_bytes()),
        (Data::Bytes(b), Kind::Bytes | Kind::Other) => Value::Bytes(b),
        (data, kind) => return bind(&data, kind),
    })
}

/// The parameter for `data` in a column of `kind`; `Err` says why it
/// does not fit (the caller names the field and the column).
pub fn bind(data: &Data, kind: Kind) -> Result<Value, String> {
    if data.is_null() {
        return Ok(Value::Null);
    }
    let no = || Err(format!("{} does not fit", data.kind()));
    Ok(match kind {
        Kind::Other => natural(data),
        Kind::Json => Value::Json(json_text(data)),
        Kind::Int { min, max } => {
            let v = match data {
                Data::Boolean(b) => *b as i64,
                Data::Float32(_) | Data::Float64(_) | Data::Decimal(_) => match integral(data) {
                    Some(v) => v,
                    None => return Err(format!("{} {} is not a whole number", data.kind(), plain(data))),
                },
                other => match other.as_i64() {
                    Some(v) => v,
                    None => return no(),
                },
            };
            if v < min || v > max {
                return Err(format!("{v} is out of the column's range {min}..={max}"));
            }
            Value::Int(v)
        }
        Kind::Float => match data {
            Data::Float32(v) => Value::Double(*v as f64),
            Data::Float64(v) => Value::Double(*v),
            Data::Decimal(d) => Value::Double(d.to_f64()),
            other => match other.as_i64() {
                Some(v) => Value::Double(v as f64),
                None => return no(),
            },
        },
        Kind::Decimal => match data {
            Data::Decimal(d) => Value::Decimal(d.to_string()),
            // Rust prints floats without exponents, in their shortest exact form.
            Data::Float32(v) if v.is_finite() => Value::Decimal(v.to_string()),
            Data::Float64(v) if v.is_finite() => Value::Decimal(v.to_string()),
            Data::Float32(_) | Data::Float64(_) => return Err(format!("{} is not a number", plain(data))),
            // Exact numbers sent as text, as producers do to keep their digits.
            Data::String(s) if is_number_text(s.trim()) && Decimal::parse(s.trim(), 0).is_ok() => {
                Value::Decimal(s.trim().to_string())
            }
            Data::String(_) => return Err("a string that is not a number does not fit".into()),
            other => match other.as_i64() {
                Some(v) => Value::Decimal(v.to_string()),
                None => return no(),
            },
        },
        Kind::Bool => match data {
            Data::Boolean(b) => Value::Boolean(*b),
            other => match other.as_i64() {
                Some(0) => Value::Boolean(false),
                Some(1) => Value::Boolean(true),
                _ => return no(),
            },
        },
        Kind::Text => match data {
            Data::String(s) => Value::Text(s.clone()),
            Data::Bytes(_) => return no(),
            Data::Array(_) | Data::Map(_) | Data::Struct(_) => Value::Text(json_text(data)),
            // Numbers and booleans as their text; dates and times as what
            // they are, rendered by the database.
            Data::Date(_) | Data::Time(_) | Data::Timestamp(_) => natural(data),
            other => Value::Text(plain(other)),
        },
        Kind::Bytes => match data {
            Data::Bytes(b) => Value::Bytes(b.clone()),
            Data::String(s) => Value::Bytes(s.as_bytes().to_vec()),
            _ => return no(),
        },
        Kind::Uuid => match data {
            Data::String(s) if is_uuid(s) => Value::Uuid(s.clone()),
            Data::String(s) => return Err(format!("'{}' is not a UUID", clip(s))),
            Data::Bytes(b) if b.len() == 16 => Value::Uuid(uuid_text(b)),
            _ => return no(),
        },
        Kind::Date => match data {
            Data::Date(days) => Value::Date(*days),
            Data::String(s) => match parse_date(s.trim()) {
                Some(days) => Value::Date(days),
                None => return Err(format!("'{}' is not an ISO-8601 date (2024-01-31)", clip(s))),
            },
            _ => return no(),
        },
        Kind::Time => match data {
            Data::Time(ms) => Value::Time(*ms as i64 * 1000),
            Data::String(s) => match parse_time(s.trim()) {
                Some(micros) => Value::Time(micros),
                None => return Err(format!("'{}' is not an ISO-8601 time (13:45:00.123)", clip(s))),
            },
            _ => return no(),
        },
        Kind::Timestamp => match data {
            Data::Timestamp(ms) => Value::Timestamp(ms.saturating_mul(1000)),
            Data::Date(days) => Value::Timestamp(*days as i64 * MICROS_PER_DAY),
            Data::String(s) => match parse_timestamp(s.trim()) {
                Some(micros) => Value::Timestamp(micros),
                None => {
                    return Err(format!("'{}' is not an ISO-8601 timestamp (2024-01-31T13:45:00Z)", clip(s)));
                }
            },
            _ => return no(),
        },
    })
}

/// A value bound as its schema says, for a column of a type the sink
/// does not know.
pub fn natural(data: &Data) -> Value {
    match data {
        Data::Null => Value::Null,
        Data::Boolean(b) => Value::Boolean(*b),
        Data::Int8(_) | Data::Int16(_) | Data::Int32(_) | Data::Int64(_) => Value::Int(data.as_i64().unwrap_or(0)),
        Data::Float32(v) => Value::Double(*v as f64),
        Data::Float64(v) => Value::Double(*v),
        Data::String(s) => Value::Text(s.clone()),
        Data::Bytes(b) => Value::Bytes(b.clone()),
        Data::Date(days) => Value::Date(*days),
        Data::Time(ms) => Value::Time(*ms as i64 * 1000),
        Data::Timestamp(ms) => Value::Timestamp(ms.saturating_mul(1000)),
        Data::Decimal(d) => Value::Decimal(d.to_string()),
        Data::Array(_) | Data::Map(_) | Data::Struct(_) => Value::Json(json_text(data)),
    }
}

/// A number or boolean as text (a decimal exactly; floats as Rust's
/// shortest round-trip form).
fn plain(data: &Data) -> String {
    match data {
        Data::Boolean(b) => b.to_string(),
        Data::Float32(v) => v.to_string(),
        Data::Float64(v) => v.to_string(),
        Data::Decimal(d) => d.to_string(),
        other => other.as_i64().map(|v| v.to_string()).unwrap_or_else(|| other.kind().to_string()),
    }
}

/// A float or decimal that is a whole number within `i64`.
fn integral(data: &Data) -> Option<i64> {
    match data {
        Data::Float32(v) => float_integral(*v as f64),
        Data::Float64(v) => float_integral(*v),
        Data::Decimal(d) => {
            let mut unscaled = d.unscaled;
            if d.scale >= 0 {
                let p = 10i128.checked_pow(d.scale as u32)?;
                if unscaled % p != 0 {
                    return None;
                }
                unscaled /= p;
            } else {
                unscaled = unscaled.checked_mul(10i128.checked_pow(d.scale.unsigned_abs())?)?;
            }
            i64::try_from(unscaled).ok()
        }
        _ => None,
    }
}

fn float_integral(v: f64) -> Option<i64> {
    // i64's range: -2^63 is exact as a float, 2^63 is just past the end.
    (v.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&v)).then_some(v as i64)
}

/// `-12.5`, `3`, `1e-3`: a plain number, not `NaN` or hex.
fn is_number_text(s: &str) -> bool {
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    digits.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        && digits.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
}

fn clip(s: &str) -> String {
    if s.chars().count() <= 64 { s.to_string() } else { format!("{}...", s.chars().take(64).collect::<String>()) }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    match b.len() {
        36 => b
            .iter()
            .enumerate()
            .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { *c == b'-' } else { c.is_ascii_hexdigit() }),
        32 => b.iter().all(u8::is_ascii_hexdigit),
        _ => false,
    }
}

fn uuid_text(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// The JSON document of a value, for a json/jsonb column: nested values as
/// JSON, a string as a JSON string, decimals as exact numbers, bytes as
/// base64, dates, times and timestamps as ISO-8601 text, a map with
/// string keys as an object and any other map as `[key, value]` pairs.
pub fn json_text(data: &Data) -> String {
    let mut out = String::new();
    write_json(data, &mut out);
    out
}

fn write_json(data: &Data, out: &mut String) {
    let string = |s: &str, out: &mut String| out.push_str(&serde_json::Value::from(s).to_string());
    match data {
        Data::Null => out.push_str("null"),
        Data::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
        Data::Int8(_) | Data::Int16(_) | Data::Int32(_) | Data::Int64(_) => out.push_str(&plain(data)),
        Data::Float32(v) if v.is_finite() => out.push_str(&serde_json::Value::from(*v as f64).to_string()),
        Data::Float64(v) if v.is_finite() => out.push_str(&serde_json::Value::from(*v).to_string()),
        Data::Float32(_) | Data::Float64(_) => out.push_str("null"),
        Data::Decimal(d) => out.push_str(&d.to_string()),
        Data::String(s) => string(s, out),
        Data::Bytes(b) => string(&BASE64.encode(b), out),
        Data::Date(days) => string(&format_date(*days), out),
        Data::Time(ms) => string(&format_time(*ms as i64 * 1000), out),
        Data::Timestamp(ms) => string(&format_timestamp(ms.saturating_mul(1000)), out),
        Data::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Data::Map(entries) if entries.iter().all(|(k, _)| matches!(k, Data::String(_))) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if let Data::String(k) = k {
                    string(k, out);
                }
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
        Data::Map(entries) => {
            out.push('[');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('[');
                write_json(k, out);
                out.push(',');
                write_json(v, out);
                out.push(']');
            }
            out.push(']');
        }
        Data::Struct(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(k, out);
                out.push(':');
                write_json(v, out);
            }
            out.push('}');
        }
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + if m <= 2 { 1 } else { 0 }, m, d)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

pub fn format_time(micros: i64) -> String {
    let s = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    format!("{:02}:{:02}:{:02}.{:06}", s / 3600, s / 60 % 60, s % 60, frac)
}

pub fn format_timestamp(micros: i64) -> String {
    let days = micros.div_euclid(MICROS_PER_DAY);
    format!("{}T{}Z", format_date(days as i32), format_time(micros.rem_euclid(MICROS_PER_DAY)))
}

fn number(s: &str, len: usize) -> Option<i64> {
    (s.len() == len && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// `YYYY-MM-DD` as days since the epoch.
pub fn parse_date(s: &str) -> Option<i32> {
    let mut parts = s.splitn(3, '-');
    let (y, m, d) = (number(parts.next()?, 4)?, number(parts.next()?, 2)?, number(parts.next()?, 2)?);
    if !(1..=12).contains(&m) || d < 1 || d > days_in_month(y, m) {
        return None;
    }
    i32::try_from(days_from_civil(y, m, d)).ok()
}

/// `HH:MM[:SS[.fraction]]` as microseconds since midnight.
pub fn parse_time(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').unwrap_or(s);
    let (clock, fraction) = match s.split_once('.') {
        Some((clock, fraction)) => (clock, Some(fraction)),
        None => (s, None),
    };
    let mut parts = clock.split(':');
    let h = number(parts.next()?, 2)?;
    let m = number(parts.next()?, 2)?;
    let sec = match parts.next() {
        Some(sec) => number(sec, 2)?,
        None if fraction.is_none() => 0,
        None => return None,
    };
    if parts.next().is_some() || h > 23 || m > 59 || sec > 59 {
        return None;
    }
    let micros = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            format!("{f:0<6}")[..6].parse::<i64>().ok()?
        }
        Some(_) => return None,
    };
    Some(((h * 60 + m) * 60 + sec) * 1_000_000 + micros)
}

/// `YYYY-MM-DD[(T| )HH:MM[:SS[.fraction]]][Z|±HH[:MM]]` as microseconds
/// since the epoch, UTC; without an offset the time is UTC.
pub fn parse_timestamp(s: &str) -> Option<i64> {
    if s.len() == 10 {
        return Some(parse_date(s)? as i64 * MICROS_PER_DAY);
    }
    let (date, rest) = (s.get(..10)?, s.get(10..)?);
    let days = parse_date(date)? as i64;
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (clock, offset_secs) = if let Some(clock) = rest.strip_suffix(['Z', 'z']) {
        (clock, 0)
    } else if let Some(i) = rest.rfind(['+', '-']) {
        let (clock, offset) = rest.split_at(i);
        let sign = if offset.starts_with('-') { -1 } else { 1 };
        let digits = offset[1..].replace(':', "");
        let (h, m) = match digits.len() {
            2 => (number(&digits, 2)?, 0),
            4 => (number(&digits[..2], 2)?, number(&digits[2..], 2)?),
            _ => return None,
        };
        (clock, sign * (h * 3600 + m * 60))
    } else {
        (rest, 0)
    };
    let micros = parse_time(clock)?;
    Some(days * MICROS_PER_DAY + micros - offset_secs * 1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(v: Result<Value, String>) -> String {
        match v {
            Ok(v) => format!("{v:?}"),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn kinds_from_catalogue_types() {
        use Dialect::{Mysql, Postgres, Sqlite};
        let cases = [
            (Postgres, "bigint", ANY_INT),
            (Postgres, "integer", Kind::Int { min: i32::MIN as i64, max: i32::MAX as i64 }),
            (Postgres, "smallint", Kind::Int { min: -32768, max: 32767 }),
            (Postgres, "double precision", Kind::Float),
            (Postgres, "numeric(10,2)", Kind::Decimal),
            (Postgres, "character varying(20)", Kind::Text),
            (Postgres, "jsonb", Kind::Json),
            (Postgres, "json", Kind::Json),
            (Postgres, "uuid", Kind::Uuid),
            (Postgres, "timestamp with time zone", Kind::Timestamp),
            (Postgres, "time without time zone", Kind::Time),
            (Postgres, "bytea", Kind::Bytes),
            (Postgres, "interval", Kind::Other),
            (Postgres, "point", Kind::Other),
            (Postgres, "mood", Kind::Other),
            (Mysql, "tinyint(1)", Kind::Bool),
            (Mysql, "tinyint(4)", Kind::Int { min: -128, max: 127 }),
            (Mysql, "int(10) unsigned", Kind::Int { min: 0, max: u32::MAX as i64 }),
            (Mysql, "decimal(65,2)", Kind::Decimal),
            (Mysql, "datetime(6)", Kind::Timestamp),
            (Mysql, "time(6)", Kind::Time),
            (Mysql, "varchar(255)", Kind::Text),
            (Mysql, "longtext", Kind::Text),
            (Mysql, "varbinary(255)", Kind::Bytes),
            (Mysql, "json", Kind::Json),
            (Mysql, "enum('a','b')", Kind::Text),
            (Sqlite, "integer", ANY_INT),
            (Sqlite, "int", ANY_INT),
            (Sqlite, "text", Kind::Text),
            (Sqlite, "varchar(10)", Kind::Text),
            (Sqlite, "real", Kind::Float),
            (Sqlite, "blob", Kind::Bytes),
            (Sqlite, "numeric", Kind::Decimal),
            (Sqlite, "", Kind::Other),
            (Sqlite, "jsonb", Kind::Json),
        ];
        for (dialect, ty, expected) in cases {
            assert_eq!(kind(dialect, ty), expected, "{dialect:?} {ty}");
        }
    }

    #[test]
    fn binding_follows_the_column() {
        let s = |v: &str| Data::String(v.into());
        let nested = Data::Struct(vec![("a".into(), Data::Int32(1)), ("b".into(), Data::Array(vec![s("x")]))]);
        let uuid = "123e4567-e89b-12d3-a456-426614174000";
        let cases: Vec<(Data, Kind, &str)> = vec![
            (s(uuid), Kind::Uuid, "Value::Uuid(\"123e4567-e89b-12d3-a456-426614174000\")"),
            (s(uuid), Kind::Text, "Value::Text(\"123e4567-e89b-12d3-a456-426614174000\")"),
            (s("nope"), Kind::Uuid, "error: 'nope' is not a UUID"),
            (Data::Bytes((0..16).collect()), Kind::Uuid, "Value::Uuid(\"00010203-0405-0607-0809-0a0b0c0d0e0f\")"),
            (nested.clone(), Kind::Json, r#"Value::Json("{\"a\":1,\"b\":[\"x\"]}")"#),
            (nested.clone(), Kind::Text, r#"Value::Text("{\"a\":1,\"b\":[\"x\"]}")"#),
            (nested.clone(), Kind::Other, r#"Value::Json("{\"a\":1,\"b\":[\"x\"]}")"#),
            (s("hi"), Kind::Json, r#"Value::Json("\"hi\"")"#),
            (Data::Int64(5), Kind::Json, r#"Value::Json("5")"#),
            (Data::Decimal(Decimal { unscaled: -1234, scale: 2 }), Kind::Decimal, "Value::Decimal(\"-12.34\")"),
            (Data::Decimal(Decimal { unscaled: -1234, scale: 2 }), Kind::Json, "Value::Json(\"-12.34\")"),
            (Data::Decimal(Decimal { unscaled: 1200, scale: 2 }), ANY_INT, "Value::Int(12)"),
            (
                Data::Decimal(Decimal { unscaled: 1234, scale: 2 }),
                ANY_INT,
                "error: Decimal 12.34 is not a whole number",
            ),
            (Data::Int32(7), Kind::Decimal, "Value::Decimal(\"7\")"),
            (Data::Float64(2.5), Kind::Decimal, "Value::Decimal(\"2.5\")"),
            (s("12.50"), Kind::Decimal, "Value::Decimal(\"12.50\")"),
            (s("twelve"), Kind::Decimal, "error: a string that is not a number does not fit"),
            (Data::Date(19723), Kind::Date, "Value::Date(19723)"),
            (Data::Time(3_600_000), Kind::Time, "Value::Time(3600000000)"),
            (Data::Timestamp(1_704_067_200_123), Kind::Timestamp, "Value::Timestamp(1704067200123000)"),
            (Data::Date(1), Kind::Timestamp, "Value::Timestamp(86400000000)"),
            (Data::Timestamp(0), Kind::Json, "Value::Json(\"\\\"1970-01-01T00:00:00.000000Z\\\"\")"),
            (s("2024-01-01"), Kind::Date, "Value::Date(19723)"),
            (s("2024-01-01T00:00:01.5+01:00"), Kind::Timestamp, "Value::Timestamp(1704063601500000)"),
            (s("13:45"), Kind::Time, "Value::Time(49500000000)"),
            (s("yesterday"), Kind::Date, "error: 'yesterday' is not an ISO-8601 date (2024-01-31)"),
            (Data::Int64(1), Kind::Timestamp, "error: int64 does not fit"),
            (Data::Int64(5), Kind::Float, "Value::Double(5.0)"),
            (Data::Int32(5), ANY_INT, "Value::Int(5)"),
            (Data::Float64(3.0), ANY_INT, "Value::Int(3)"),
            (Data::Float64(3.5), ANY_INT, "error: float64 3.5 is not a whole number"),
            (s("12"), ANY_INT, "error: string does not fit"),
            (
                Data::Int64(40_000),
                Kind::Int { min: -32768, max: 32767 },
                "error: 40000 is out of the column's range -32768..=32767",
            ),
            (Data::Boolean(true), ANY_INT, "Value::Int(1)"),
            (Data::Boolean(true), Kind::Bool, "Value::Boolean(true)"),
            (Data::Int64(0), Kind::Bool, "Value::Boolean(false)"),
            (Data::Int64(2), Kind::Bool, "error: int64 does not fit"),
            (Data::Int64(42), Kind::Text, "Value::Text(\"42\")"),
            (Data::Bytes(vec![1]), Kind::Text, "error: bytes does not fit"),
            (Data::Bytes(vec![1]), Kind::Bytes, "Value::Bytes([1])"),
            (s("ab"), Kind::Bytes, "Value::Bytes([97, 98])"),
            (Data::Null, Kind::Uuid, "Value::Null"),
            (Data::Int16(3), Kind::Other, "Value::Int(3)"),
            (s("happy"), Kind::Other, "Value::Text(\"happy\")"),
        ];
        for (data, kind, expected) in cases {
            assert_eq!(show(bind(&data, kind)), expected, "{data:?} into {kind:?}");
            assert_eq!(show(bind_owned(data.clone(), kind)), expected, "{data:?} into {kind:?}, owned");
        }
    }

    #[test]
    fn json_of_every_kind_of_value() {
        let value = Data::Struct(vec![
            ("b".into(), Data::Bytes(vec![0, 1, 2])),
            ("f".into(), Data::Float32(1.5)),
            ("nan".into(), Data::Float64(f64::NAN)),
            ("m".into(), Data::Map(vec![(Data::Int32(1), Data::String("one".into()))])),
            ("s".into(), Data::Map(vec![(Data::String("k\"".into()), Data::Null)])),
            ("d".into(), Data::Date(0)),
            ("t".into(), Data::Time(1)),
        ]);
        assert_eq!(
            json_text(&value),
            r#"{"b":"AAEC","f":1.5,"nan":null,"m":[[1,"one"]],"s":{"k\"":null},"d":"1970-01-01","t":"00:00:00.001000"}"#
        );
        let parsed: serde_json::Value = serde_json::from_str(&json_text(&value)).unwrap();
        assert_eq!(parsed["s"]["k\""], serde_json::Value::Null);
    }

    #[test]
    fn iso_dates_and_times() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2000-02-29"), Some(11016));
        assert_eq!(parse_date("2023-02-29"), None);
        assert_eq!(parse_date("2024-1-01"), None);
        assert_eq!(parse_time("00:00:00.000001"), Some(1));
        assert_eq!(parse_time("23:59:59"), Some(86_399_000_000));
        assert_eq!(parse_time("24:00:00"), None);
        assert_eq!(parse_timestamp("2024-01-01T00:00:00Z"), Some(1_704_067_200_000_000));
        assert_eq!(parse_timestamp("2024-01-01 00:00:00"), Some(1_704_067_200_000_000));
        assert_eq!(parse_timestamp("2024-01-01T01:00:00+0100"), Some(1_704_067_200_000_000));
        assert_eq!(parse_timestamp("2023-12-31T23:00:00-01:00"), Some(1_704_067_200_000_000));
        assert_eq!(parse_timestamp("2024-01-01"), Some(1_704_067_200_000_000));
        assert_eq!(parse_timestamp("2024-01-01T"), None);
        assert_eq!(parse_timestamp("2024-01-01X00:00"), None);
        assert_eq!(format_timestamp(-1), "1969-12-31T23:59:59.999999Z");
        for days in [-1, 0, 59, 19723, 2_000_000] {
            assert_eq!(parse_date(&format_date(days)), Some(days), "{days}");
        }
    }
}
