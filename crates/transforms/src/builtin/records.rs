//! Apache Kafka's transforms of a record's topic and headers, and Filter:
//! RegexRouter, TimestampRouter, Filter, InsertHeader, DropHeaders,
//! HeaderFrom.

use super::{BuildError, Class, KAFKA, Side, both_sides};
use crate::data::{Data, Fields};
use crate::{Record, Transform};
use bytes::Bytes;
use regex::Regex;
use serde_json::Value;
use spillway_config::{ConfigDef, Importance, KeyDef, Type, Validator, Values};

pub fn classes() -> Vec<Class<dyn Transform>> {
    let name = |base: &str| -> &'static str { Box::leak(format!("{KAFKA}{base}").into_boxed_str()) };
    let mut classes = vec![
        Class::<dyn Transform>::new(name("RegexRouter"), regex_router_keys(), RegexRouter::build),
        Class::<dyn Transform>::new(name("TimestampRouter"), timestamp_router_keys(), TimestampRouter::build),
        Class::<dyn Transform>::new(name("Filter"), ConfigDef::new(), |_| Ok(Box::new(Filter))),
        Class::<dyn Transform>::new(name("InsertHeader"), insert_header_keys(), |v| {
            let value = Bytes::from(v.string("value.literal").to_string());
            Ok(Box::new(InsertHeader { header: v.string("header").into(), value }))
        }),
        Class::<dyn Transform>::new(name("DropHeaders"), drop_headers_keys(), |v| {
            Ok(Box::new(DropHeaders { headers: v.list("headers").to_vec() }))
        }),
    ];
    classes.extend(both_sides("HeaderFrom", header_from_keys, HeaderFrom::build));
    classes
}

fn key(name: &str, kind: Type, doc: &str) -> KeyDef {
    KeyDef::new(name, kind, Importance::High, doc)
}

fn non_empty_list() -> Validator {
    Validator::new("a non-empty list", |v| match v {
        spillway_config::Value::List(items) if items.is_empty() => Err("Empty list".into()),
        _ => Ok(()),
    })
}

// --- RegexRouter --------------------------------------------------------

fn regex_router_keys() -> ConfigDef {
    ConfigDef::new().group(
        "Transform",
        [
            key("regex", Type::String, "Regular expression to use for matching the whole topic name.").required(),
            key("replacement", Type::String, "Replacement string, with $1, $2… for the regex's groups.").required(),
        ],
    )
}

/// Java's `Matcher.replaceFirst` replacement (`$1`, `\$`) in Rust's regex
/// syntax (`${1}`, `$$`).
fn rust_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => {}
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    out.push(d);
                }
                out.push('}');
            }
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out
}

struct RegexRouter {
    whole: Regex,
    replacement: String,
}

impl RegexRouter {
    fn build(v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let regex = v.string("regex");
        let whole =
            Regex::new(&format!("^(?:{regex})$")).map_err(|e| (Some("regex"), format!("Invalid regex: {e}")))?;
        Ok(Box::new(RegexRouter { whole, replacement: rust_replacement(v.string("replacement")) }))
    }
}

impl Transform for RegexRouter {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        if self.whole.is_match(&record.topic) {
            record.topic = self.whole.replace(&record.topic, self.replacement.as_str()).into_owned();
        }
        Ok(Some(record))
    }
}

// --- TimestampRouter ----------------------------------------------------

fn timestamp_router_keys() -> ConfigDef {
    ConfigDef::new().group(
        "Transform",
        [
            key(
                "topic.format",
                Type::String,
                "Format string which can contain ${topic} and ${timestamp} as placeholders.",
            )
            .with_default("${topic}-${timestamp}"),
            key("timestamp.format", Type::String, "Format string for the timestamp, as Java's SimpleDateFormat (UTC).")
                .with_default("yyyyMMdd"),
        ],
    )
}

struct TimestampRouter {
    topic_format: String,
    /// `timestamp.format` in chrono's syntax.
    timestamp_format: String,
}

impl TimestampRouter {
    fn build(v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let timestamp_format =
            chrono_format(v.string("timestamp.format")).map_err(|e| (Some("timestamp.format"), e))?;
        Ok(Box::new(TimestampRouter { topic_format: v.string("topic.format").into(), timestamp_format }))
    }
}

/// A SimpleDateFormat pattern in chrono's strftime syntax: the letters
/// Connect users write in topic and timestamp formats (y, M, d, H, h, m,
/// s, S, a, E) and 'quoted' text; any other letter is refused.
pub fn chrono_format(java: &str) -> Result<String, String> {
    let mut out = String::new();
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        match c {
            '\'' => {
                let end = chars[i + 1..].iter().position(|&x| x == '\'').map(|p| i + 1 + p);
                let Some(end) = end else { return Err(format!("Unterminated quote in timestamp format: {java}")) };
                if end == i + 1 {
                    out.push('\'');
                } else {
                    chars[i + 1..end].iter().for_each(|&ch| push_literal(&mut out, ch));
                }
                i = end + 1;
                continue;
            }
            'y' => out.push_str(if run == 2 { "%y" } else { "%Y" }),
            'M' => out.push_str(match run {
                1 => "%-m",
                2 => "%m",
                3 => "%b",
                _ => "%B",
            }),
            'd' => out.push_str(if run == 1 { "%-d" } else { "%d" }),
            'H' => out.push_str(if run == 1 { "%-H" } else { "%H" }),
            'h' => out.push_str(if run == 1 { "%-I" } else { "%I" }),
            'm' => out.push_str(if run == 1 { "%-M" } else { "%M" }),
            's' => out.push_str(if run == 1 { "%-S" } else { "%S" }),
            // Milliseconds, the precision of a record's timestamp.
            'S' => out.push_str("%3f"),
            'a' => out.push_str("%p"),
            'E' => out.push_str(if run >= 4 { "%A" } else { "%a" }),
            c if c.is_ascii_alphabetic() => {
                return Err(format!("The pattern letter {c} is not one Spillway formats: {java}"));
            }
            c => (0..run).for_each(|_| push_literal(&mut out, c)),
        }
        i += run;
    }
    Ok(out)
}

fn push_literal(out: &mut String, c: char) {
    if c == '%' {
        out.push_str("%%");
    } else {
        out.push(c);
    }
}

impl Transform for TimestampRouter {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let at = (record.timestamp >= 0).then(|| chrono::DateTime::from_timestamp_millis(record.timestamp)).flatten();
        let Some(at) = at else {
            return Err(format!(
                "Timestamp missing on record: {}-{}@{}",
                record.topic, record.partition, record.offset
            ));
        };
        let timestamp = at.format(&self.timestamp_format).to_string();
        record.topic = self.topic_format.replace("${topic}", &record.topic).replace("${timestamp}", &timestamp);
        Ok(Some(record))
    }
}

// --- Filter, InsertHeader, DropHeaders ----------------------------------

/// Drops every record it is applied to: meant for use with a predicate.
struct Filter;

impl Transform for Filter {
    fn apply(&self, _: Record) -> Result<Option<Record>, String> {
        Ok(None)
    }
}

fn insert_header_keys() -> ConfigDef {
    ConfigDef::new().group(
        "Transform",
        [
            key("header", Type::String, "The name of the header.").required(),
            key(
                "value.literal",
                Type::String,
                "The literal value that is to be set as the header value on all records.",
            )
            .required(),
        ],
    )
}

struct InsertHeader {
    header: String,
    value: Bytes,
}

impl Transform for InsertHeader {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        record.headers.push((self.header.clone(), Some(self.value.clone())));
        Ok(Some(record))
    }
}

fn drop_headers_keys() -> ConfigDef {
    ConfigDef::new().group(
        "Transform",
        [key("headers", Type::List, "The name of the headers to be removed.")
            .required()
            .with_validator(non_empty_list())],
    )
}

struct DropHeaders {
    headers: Vec<String>,
}

impl Transform for DropHeaders {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        record.headers.retain(|(name, _)| !self.headers.contains(name));
        Ok(Some(record))
    }
}

// --- HeaderFrom ---------------------------------------------------------

fn header_from_keys() -> ConfigDef {
    ConfigDef::new().group(
        "Transform",
        [
            key("fields", Type::List, "Field names in the record whose values are to be copied or moved to headers.")
                .required()
                .with_validator(non_empty_list()),
            key("headers", Type::List, "Header names, in the same order as the field names listed in the fields configuration property.")
                .required()
                .with_validator(non_empty_list()),
            key("operation", Type::String, "Either move if the fields are to be moved to the headers (removed from the key/value), or copy if the fields are to be copied to the headers (retained in the key/value).")
                .required()
                .with_validator(Validator::one_of(&["move", "copy"])),
        ],
    )
}

struct HeaderFrom {
    side: Side,
    fields: Vec<(String, String)>,
    move_fields: bool,
}

impl HeaderFrom {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let (fields, headers) = (v.list("fields"), v.list("headers"));
        if fields.len() != headers.len() {
            return Err((
                Some("fields"),
                "'fields' config must have the same number of elements as 'headers' config.".into(),
            ));
        }
        let fields = fields.iter().cloned().zip(headers.iter().cloned()).collect();
        Ok(Box::new(HeaderFrom { side, fields, move_fields: v.string("operation") == "move" }))
    }
}

/// A field's value as a header's bytes: a string as its text, anything
/// else as JSON (what Connect's SimpleHeaderConverter writes).
pub fn header_bytes(value: &Value) -> Option<Bytes> {
    match value {
        Value::Null => None,
        Value::String(text) => Some(Bytes::from(text.clone())),
        other => Some(Bytes::from(other.to_string())),
    }
}

impl Transform for HeaderFrom {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let purpose = if self.move_fields { "header move" } else { "header copy" };
        let mut fields = match self.side.read(&record) {
            Data::Null => return Ok(Some(record)),
            data => Fields::of(data, purpose)?,
        };
        for (field, header) in &self.fields {
            fields.field_schema(field)?;
            let value = fields.payload.get(field).cloned().unwrap_or(Value::Null);
            record.headers.push((header.clone(), header_bytes(&value)));
        }
        if self.move_fields {
            fields.retain(|name| (!self.fields.iter().any(|(f, _)| f == name)).then(|| name.to_string()));
            self.side.write(&mut record, fields.into_data());
        }
        Ok(Some(record))
    }
}
