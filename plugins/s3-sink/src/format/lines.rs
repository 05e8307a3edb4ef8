//! Items for the keys and headers companions, and JSON lines.
//!
//! One entry per record, in the values' order:
//!
//! | format | `.keys.<ext>` | `.headers.<ext>` |
//! |---|---|---|
//! | json | the key as a JSON line: its JSON (an envelope's payload) when it is JSON, else a string (UTF-8 text, or base64 when not UTF-8), `null` for none | a JSON line `[{"key": "k", "value": "v"}, ...]`, values as text (base64 when not UTF-8) or `null` |
//! | bytes | the key's bytes, then the separator (nothing for none) | the JSON line of json, then the separator |
//! | csv | a `key` column: the key as text (base64 when not UTF-8), empty for none | a `headers` column: the JSON of json |
//! | parquet | an optional binary `key` column | a `headers` list of `{key: string, value: optional binary}` |

use super::{FormatKind, Item};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value as Json, json};
use spillway_sdk::Header;
use spillway_sdk::data::{Data, Field, Schema, Type, envelope};

/// A JSON value and a newline.
pub fn json_line(value: &Json) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).expect("a JSON value serializes");
    line.push(b'\n');
    line
}

/// Bytes as text: UTF-8 as it is, anything else base64.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_string(),
        Err(_) => BASE64.encode(bytes),
    }
}

fn key_json(key: Option<&[u8]>) -> Json {
    let Some(key) = key else { return Json::Null };
    match serde_json::from_slice::<Json>(key) {
        Ok(json) => match envelope(&json) {
            Some((_, payload)) => payload.clone(),
            None => json,
        },
        Err(_) => Json::String(text(key)),
    }
}

fn headers_json(headers: &[Header]) -> Json {
    Json::Array(headers.iter().map(|h| json!({"key": h.key, "value": h.value.as_deref().map(text)})).collect())
}

fn row(name: &str, schema: Schema, data: Data, size: usize) -> Item {
    Item::Row {
        schema: Schema::structure(vec![Field::new(name, schema)]),
        declared: true,
        data: Data::Struct(vec![(name.to_string(), data)]),
        size,
    }
}

pub fn key_item(format: FormatKind, separator: &[u8], key: Option<&[u8]>) -> Item {
    let size = key.map_or(0, <[u8]>::len) + 16;
    match format {
        FormatKind::Json => Item::Line(json_line(&key_json(key))),
        FormatKind::Bytes => Item::Line([key.unwrap_or_default(), separator].concat()),
        FormatKind::Csv => row(
            "key",
            Schema::new(Type::String).into_optional(),
            key.map_or(Data::Null, |k| Data::String(text(k))),
            size,
        ),
        FormatKind::Parquet => row(
            "key",
            Schema::new(Type::Bytes).into_optional(),
            key.map_or(Data::Null, |k| Data::Bytes(k.to_vec())),
            size,
        ),
    }
}

pub fn headers_item(format: FormatKind, separator: &[u8], headers: &[Header]) -> Item {
    let size = headers.iter().map(|h| h.key.len() + h.value.as_ref().map_or(0, Vec::len) + 16).sum::<usize>() + 16;
    match format {
        FormatKind::Json => Item::Line(json_line(&headers_json(headers))),
        FormatKind::Bytes => {
            let mut line = serde_json::to_vec(&headers_json(headers)).expect("JSON serializes");
            line.extend_from_slice(separator);
            Item::Line(line)
        }
        FormatKind::Csv => row(
            "headers",
            Schema::new(Type::String).into_optional(),
            Data::String(headers_json(headers).to_string()),
            size,
        ),
        FormatKind::Parquet => {
            let entry = Schema::structure(vec![
                Field::new("key", Schema::new(Type::String)),
                Field::new("value", Schema::new(Type::Bytes).into_optional()),
            ]);
            let entries = headers
                .iter()
                .map(|h| {
                    Data::Struct(vec![
                        ("key".into(), Data::String(h.key.clone())),
                        ("value".into(), h.value.clone().map_or(Data::Null, Data::Bytes)),
                    ])
                })
                .collect();
            row("headers", Schema::new(Type::Array(Box::new(entry))), Data::Array(entries), size)
        }
    }
}
