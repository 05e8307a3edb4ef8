//! Apache Kafka's predicates, by their class names: TopicNameMatches,
//! HasHeaderKey, RecordIsTombstone.

use super::builtin::Class;
use super::{Predicate, Record};
use regex::Regex;
use spillway_config::{ConfigDef, Importance, KeyDef, Type};
use std::sync::LazyLock;

const PACKAGE: &str = "org.apache.kafka.connect.transforms.predicates.";

static CLASSES: LazyLock<Vec<Class<dyn Predicate>>> = LazyLock::new(|| {
    let name = |base: &str| -> &'static str { Box::leak(format!("{PACKAGE}{base}").into_boxed_str()) };
    let required = |key: &str, doc: &str| {
        ConfigDef::new().group("Predicate", [KeyDef::new(key, Type::String, Importance::Medium, doc).required()])
    };
    vec![
        Class::<dyn Predicate>::new(
            name("TopicNameMatches"),
            required("pattern", "A Java regular expression for matching against the name of a record's topic."),
            |v| {
                let pattern = v.string("pattern");
                let whole = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    (Some("pattern"), format!("Invalid value {pattern} for configuration pattern: entry must be a Java-compatible regular expression: {e}"))
                })?;
                Ok(Box::new(TopicNameMatches(whole)))
            },
        ),
        Class::<dyn Predicate>::new(name("HasHeaderKey"), required("name", "The header name."), |v| {
            Ok(Box::new(HasHeaderKey(v.string("name").to_string())))
        }),
        Class::<dyn Predicate>::new(name("RecordIsTombstone"), ConfigDef::new(), |_| Ok(Box::new(RecordIsTombstone))),
    ]
});

/// Every built-in predicate class.
pub fn all() -> &'static [Class<dyn Predicate>] {
    &CLASSES
}

/// The predicate class named `name`, or why it cannot be used.
pub fn find(name: &str) -> Result<&'static Class<dyn Predicate>, String> {
    CLASSES.iter().find(|c| c.name == name).ok_or_else(|| {
        let known: Vec<&str> = CLASSES.iter().map(|c| c.name).collect();
        format!("Class {name} could not be found. The predicates Spillway runs: {}", known.join(", "))
    })
}

/// Whether the topic's whole name matches.
struct TopicNameMatches(Regex);

impl Predicate for TopicNameMatches {
    fn test(&self, record: &Record) -> bool {
        self.0.is_match(&record.topic)
    }
}

struct HasHeaderKey(String);

impl Predicate for HasHeaderKey {
    fn test(&self, record: &Record) -> bool {
        record.headers.iter().any(|(name, _)| *name == self.0)
    }
}

struct RecordIsTombstone;

impl Predicate for RecordIsTombstone {
    fn test(&self, record: &Record) -> bool {
        record.value.is_none()
    }
}
