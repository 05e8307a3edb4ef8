//! The written normalisation rules: what may differ between Connect's answer
//! and Spillway's without being a difference, because it is the run's own
//! (ids, times, addresses, versions) or the plugin's own (its class, its
//! config keys, its documentation). Everything else is compared as is.
//!
//! 1. Each target's own values become placeholders wherever they appear, in
//!    keys and in strings: its connector name `{name}`, topic `{topic}`,
//!    output file `{file}`, connector class `{class}`, plugin name
//!    `{plugin}` and logger `{logger}`.
//! 2. The rules of [`RULES`], first match wins, by step and JSON pointer.

use crate::compare::glob;
use crate::targets::Target;
use serde_json::{Map, Value, json};

enum Rule {
    /// The value stands for its JSON type only (`"<string>"`, `"<number>"`...).
    Kind,
    /// The key is left out: it is the plugin's own.
    Drop,
    /// An array or object whose members are the plugin's or the worker's
    /// own: only the union of its members' shapes is compared.
    Shape,
    /// An array of objects is compared as an object keyed by each member's
    /// value at this pointer (config definitions by their name), so that
    /// order does not matter and a missing key is named.
    KeyBy(&'static str),
}

/// (step, pointer, rule): `*` in either matches any run of characters.
const RULES: &[(&str, &str, Rule)] = &[
    // Error bodies: Connect's message is English prose; its code is compared.
    ("*", "/message", Rule::Kind),
    // A failure's stack trace (Java's or the host's).
    ("*", "*/trace", Rule::Kind),
    // Worker identities are host:port of each run.
    ("*", "*/worker_id", Rule::Kind),
    // The build and the cluster of each run.
    ("root", "/version", Rule::Kind),
    ("root", "/commit", Rule::Kind),
    ("root", "/kafka_cluster_id", Rule::Kind),
    // A plugin's version is its own (in listings and statuses).
    ("*", "*/version", Rule::Kind),
    // Which plugins a worker has is its own; what a listing says of each is not.
    ("plugins*", "/", Rule::Shape),
    // The file connectors' own key, defined by each its own way.
    ("plugin.config", "/file", Rule::Drop),
    ("validate.*", "/configs/file", Rule::Drop),
    // A plugin's config keys are its own: those both define are compared.
    ("plugin.config", "/", Rule::KeyBy("/name")),
    ("validate.*", "/configs", Rule::KeyBy("/definition/name")),
    ("validate.*", "/groups", Rule::Shape),
    ("*", "*/documentation", Rule::Kind),
    ("*", "*/display_name", Rule::Kind),
    ("*", "*/order_in_group", Rule::Kind),
    ("*", "*/width", Rule::Kind),
    ("*", "*/group", Rule::Kind),
    // The plugin's own config keys (Spillway's grants; Connect's file
    // connector has none beyond `file`, which both have).
    ("*", "*/plugin.grant.*", Rule::Drop),
    // Which loggers a worker has is its own.
    ("loggers", "/", Rule::Shape),
    // When a level was last set.
    ("*", "*/last_modified", Rule::Kind),
];

/// `body` of `step` as compared.
pub fn answer(step: &str, body: &Value, target: &Target) -> Value {
    let own = target.own_values();
    let placed = placeholders(body, &own);
    apply(step, "", placed).unwrap_or(Value::Null)
}

fn placeholders(value: &Value, own: &[(String, &'static str)]) -> Value {
    let replace = |s: &str| own.iter().fold(s.to_string(), |s, (value, placeholder)| s.replace(value, placeholder));
    match value {
        Value::String(s) => Value::String(replace(s)),
        Value::Array(items) => items.iter().map(|v| placeholders(v, own)).collect(),
        Value::Object(map) => map.iter().map(|(k, v)| (replace(k), placeholders(v, own))).collect(),
        other => other.clone(),
    }
}

/// The value at `at` after the first matching rule; `None` drops it.
fn apply(step: &str, at: &str, value: Value) -> Option<Value> {
    let pointer = if at.is_empty() { "/" } else { at };
    let rule = RULES.iter().find(|(s, p, _)| glob(s, step) && glob(p, pointer)).map(|(_, _, rule)| rule);
    match rule {
        Some(Rule::Drop) => None,
        Some(Rule::Kind) => Some(kind(&value)),
        Some(Rule::Shape) => Some(shape(step, at, value)),
        Some(Rule::KeyBy(field)) => Some(key_by(step, at, value, field)),
        None => Some(children(step, at, value)),
    }
}

fn children(step: &str, at: &str, value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter().filter_map(|(k, v)| Some((k.clone(), apply(step, &format!("{at}/{k}"), v)?))).collect(),
        ),
        Value::Array(items) => {
            items.into_iter().enumerate().filter_map(|(i, v)| apply(step, &format!("{at}/{i}"), v)).collect()
        }
        other => other,
    }
}

fn kind(value: &Value) -> Value {
    json!(match value {
        Value::Null => "<null>",
        Value::Bool(_) => "<boolean>",
        Value::Number(_) => "<number>",
        Value::String(_) => "<string>",
        Value::Array(_) => "<array>",
        Value::Object(_) => "<object>",
    })
}

/// The union of the members' shapes: each key with the kinds of value it
/// takes, so `[{"class": "a", "type": "sink"}, ...]` becomes
/// `{"[]": {"class": "<string>", "type": "<string>"}}`.
fn shape(step: &str, at: &str, value: Value) -> Value {
    let (marker, members): (&str, Vec<Value>) = match value {
        Value::Array(items) => ("[]", items),
        Value::Object(map) => ("{}", map.into_iter().map(|(_, v)| v).collect()),
        other => return kind(&other),
    };
    let mut union = Map::new();
    for member in members {
        let member = apply(step, &format!("{at}/*"), member).unwrap_or(Value::Null);
        match member {
            Value::Object(map) => {
                for (key, value) in map {
                    let kinds = union.entry(key).or_insert_with(|| json!([]));
                    let this = kind_deep(&value);
                    if !kinds.as_array().unwrap().contains(&this) {
                        kinds.as_array_mut().unwrap().push(this);
                    }
                }
            }
            other => {
                union.insert("<member>".into(), kind(&other));
            }
        }
    }
    json!({ marker: union })
}

/// A value with every leaf replaced by its kind, except strings that are
/// placeholders already or a plugin type.
fn kind_deep(value: &Value) -> Value {
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), kind_deep(v))).collect(),
        Value::Array(items) => items.iter().map(kind_deep).collect(),
        Value::String(s)
            if s.starts_with('<')
                || matches!(
                    s.as_str(),
                    "sink" | "source" | "converter" | "header_converter" | "transformation" | "predicate"
                ) =>
        {
            value.clone()
        }
        other => kind(other),
    }
}

fn key_by(step: &str, at: &str, value: Value, field: &str) -> Value {
    let Value::Array(items) = value else {
        return children(step, at, value);
    };
    let mut keyed = Map::new();
    for item in items {
        let key = item.pointer(field).and_then(Value::as_str).unwrap_or("(no name)").to_string();
        if let Some(item) = apply(step, &format!("{at}/{key}"), item) {
            keyed.insert(key, item);
        }
    }
    Value::Object(keyed)
}
