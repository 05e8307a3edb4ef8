//! Apache Kafka's TimestampConverter: a timestamp (the whole key or value,
//! or one field) between Unix time, a formatted string and Connect's Date,
//! Time and Timestamp.

use super::records::chrono_format;
use super::{BuildError, Class, Side, both_sides};
use crate::data::{Data, Fields};
use crate::{Record, Transform};
use chrono::{DateTime, NaiveDate, NaiveDateTime, Timelike, Utc};
use serde_json::{Value, json};
use spillway_config::{ConfigDef, Importance, KeyDef, Type, Validator, Values};

const LOGICAL: &str = "org.apache.kafka.connect.data.";
const TARGETS: &[&str] = &["string", "unix", "Date", "Time", "Timestamp"];
const PRECISIONS: &[&str] = &["seconds", "milliseconds", "microseconds", "nanoseconds"];

pub fn classes() -> [Class<dyn Transform>; 2] {
    both_sides("TimestampConverter", keys, TimestampConverter::build)
}

fn keys() -> ConfigDef {
    let key = |name: &str, kind: Type, doc: &str| KeyDef::new(name, kind, Importance::High, doc);
    ConfigDef::new().group(
        "Transform",
        [
            key(
                "field",
                Type::String,
                "The field containing the timestamp, or empty if the entire value is a timestamp",
            )
            .with_default(""),
            key(
                "target.type",
                Type::String,
                "The desired timestamp representation: string, unix, Date, Time, or Timestamp",
            )
            .required()
            .with_validator(Validator::one_of(TARGETS)),
            key("format", Type::String, "A SimpleDateFormat-compatible format for the timestamp (UTC).")
                .with_default(""),
            key(
                "unix.precision",
                Type::String,
                "The desired Unix precision for the timestamp: seconds, milliseconds, microseconds, or nanoseconds.",
            )
            .with_default("milliseconds")
            .with_validator(Validator::one_of(PRECISIONS)),
        ],
    )
}

struct TimestampConverter {
    side: Side,
    field: Option<String>,
    target: &'static str,
    /// `format` in chrono's syntax, if given, and as given.
    format: Option<String>,
    pattern: String,
    /// The unit of a Unix time, read or written (`unix.precision`).
    precision: &'static str,
}

impl TimestampConverter {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let target = TARGETS.iter().copied().find(|t| *t == v.string("target.type")).unwrap_or("unix");
        let format = match v.string("format") {
            "" => None,
            java => Some(chrono_format(java).map_err(|_| {
                (Some("format"), format!("TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {java}"))
            })?),
        };
        if target == "string" && format.is_none() {
            return Err((
                Some("format"),
                "TimestampConverter requires format option to be specified when using string timestamps".into(),
            ));
        }
        let precision = PRECISIONS.iter().copied().find(|p| *p == v.string("unix.precision")).unwrap_or("milliseconds");
        let field = Some(v.string("field").to_string()).filter(|f| !f.is_empty());
        let pattern = v.string("format").to_string();
        Ok(Box::new(TimestampConverter { side, field, target, format, pattern, precision }))
    }

    /// The instant `value` stands for, read by its schema (or, schemaless,
    /// by its JSON type).
    fn read(&self, value: &Value, schema: Option<&Value>) -> Result<DateTime<Utc>, String> {
        let logical = schema.and_then(|s| s.get("name")).and_then(Value::as_str).and_then(|n| n.strip_prefix(LOGICAL));
        let millis =
            |ms: i64| DateTime::from_timestamp_millis(ms).ok_or_else(|| format!("Timestamp out of range: {value}"));
        match (logical, value) {
            (Some("Timestamp"), Value::Number(n)) => millis(n.as_i64().unwrap_or_default()),
            (Some("Date"), Value::Number(n)) => millis(n.as_i64().unwrap_or_default() * 86_400_000),
            (Some("Time"), Value::Number(n)) => millis(n.as_i64().unwrap_or_default()),
            (_, Value::Number(n)) => {
                let n = n.as_i64().ok_or_else(|| format!("Not a Unix time: {value}"))?;
                let ms = match self.precision {
                    "seconds" => n.saturating_mul(1000),
                    "microseconds" => n / 1000,
                    "nanoseconds" => n / 1_000_000,
                    _ => n,
                };
                millis(ms)
            }
            (_, Value::String(text)) => {
                let Some(format) = &self.format else {
                    return Err(
                        "TimestampConverter requires format option to be specified when using string timestamps".into(),
                    );
                };
                let parsed = NaiveDateTime::parse_from_str(text, format).or_else(|_| {
                    NaiveDate::parse_from_str(text, format).map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default())
                });
                let pattern = &self.pattern;
                parsed.map(|t| t.and_utc()).map_err(|_| {
                    format!("Could not parse timestamp: value ({text}) does not match pattern ({pattern})")
                })
            }
            (_, other) => Err(format!("Schema does not correspond to a known timestamp type format: {other}")),
        }
    }

    /// `at` as the target type, with the target's schema.
    fn write(&self, at: DateTime<Utc>, optional: bool) -> (Value, Value) {
        let logical = |name: &str, kind: &str| json!({"type": kind, "optional": optional, "name": format!("{LOGICAL}{name}"), "version": 1});
        let ms = at.timestamp_millis();
        match self.target {
            "string" => (
                json!(at.format(self.format.as_deref().unwrap_or_default()).to_string()),
                json!({"type": "string", "optional": optional}),
            ),
            "unix" => {
                let n = match self.precision {
                    "seconds" => at.timestamp(),
                    "microseconds" => at.timestamp_micros(),
                    "nanoseconds" => at.timestamp_nanos_opt().unwrap_or(i64::MAX),
                    _ => ms,
                };
                (json!(n), json!({"type": "int64", "optional": optional}))
            }
            "Date" => (json!(ms.div_euclid(86_400_000)), logical("Date", "int32")),
            "Time" => (
                json!(i64::from(at.num_seconds_from_midnight()) * 1000 + ms.rem_euclid(1000)),
                logical("Time", "int32"),
            ),
            _ => (json!(ms), logical("Timestamp", "int64")),
        }
    }
}

impl Transform for TimestampConverter {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let data = self.side.read(&record);
        let out = match (&self.field, data) {
            (_, Data::Null) => return Ok(Some(record)),
            (None, Data::Json { schema, payload }) => {
                if payload.is_null() {
                    return Ok(Some(record));
                }
                let optional = schema.as_ref().and_then(|s| s["optional"].as_bool()).unwrap_or(false);
                let (value, new_schema) = self.write(self.read(&payload, schema.as_ref())?, optional);
                Data::Json { schema: schema.map(|_| new_schema), payload: value }
            }
            (None, Data::Opaque(bytes)) => {
                let text = String::from_utf8(bytes.to_vec()).map_err(|_| "a timestamp that is not text".to_string())?;
                let (value, _) = self.write(self.read(&Value::String(text), None)?, false);
                Data::Json { schema: None, payload: value }
            }
            (Some(name), data) => {
                let mut fields = Fields::of(data, "converting timestamp formats")?;
                let schema = fields.field_schema(name)?;
                let value = fields.payload.get(name).cloned().unwrap_or(Value::Null);
                let optional = schema.as_ref().and_then(|s| s["optional"].as_bool()).unwrap_or(true);
                let (value, new_schema) = match value {
                    Value::Null => (Value::Null, self.write(DateTime::UNIX_EPOCH, optional).1),
                    value => self.write(self.read(&value, schema.as_ref())?, optional),
                };
                fields.put(name, new_schema, value);
                fields.into_data()
            }
        };
        self.side.write(&mut record, out);
        Ok(Some(record))
    }
}
