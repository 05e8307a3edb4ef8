//! rust-redact: an example transform. It replaces the named fields of each
//! record's value (a JSON object) with a fixed string, and can stamp each
//! record with the build that transformed it. The Python and JavaScript
//! examples (`examples/python/transform`, `examples/javascript/transform`)
//! do the same, key for key.
//!
//! A null value (a tombstone) passes on as it is; a value that is not a
//! JSON object cannot be redacted and fails, to the dead-letter queue.

use serde_json::{Map, Value};
use spillway_sdk::{
    Config, ConfigError, ConfigKey, ConfigReader, ConfigType, PluginMetadata, SinkRecord, TaskError, Transform,
    Transformed,
};

const NAME: &str = "rust-redact";

fn keys() -> Vec<ConfigKey> {
    vec![
        ConfigKey::required("fields", ConfigType::List, "The top-level fields of the value to redact."),
        ConfigKey::optional("replacement", ConfigType::String, "****", "What a redacted field's value becomes."),
        ConfigKey::optional(
            "lineage.field",
            ConfigType::String,
            "",
            "When set, a field of this name is added to each value, naming the transform's build (name/version).",
        ),
    ]
}

pub struct Redact {
    fields: Vec<String>,
    replacement: Value,
    lineage: Option<(String, Value)>,
}

impl Redact {
    fn read(config: &Config) -> Result<Self, Vec<ConfigError>> {
        let mut reader = ConfigReader::new(config, keys());
        let fields = reader.list("fields");
        if fields.is_empty() {
            reader.error("fields", "name at least one field to redact");
        }
        let lineage = reader.optional("lineage.field");
        let redact = Redact {
            fields,
            replacement: Value::String(reader.string("replacement")),
            lineage: lineage.map(|f| (f, Value::String(format!("{NAME}/{}", env!("CARGO_PKG_VERSION"))))),
        };
        reader.finish(redact)
    }

    fn redact(&self, object: &mut Map<String, Value>) {
        for field in &self.fields {
            if let Some(value) = object.get_mut(field) {
                *value = self.replacement.clone();
            }
        }
        if let Some((field, build)) = &self.lineage {
            object.insert(field.clone(), build.clone());
        }
    }
}

impl Transform for Redact {
    fn metadata() -> PluginMetadata {
        let mut metadata =
            PluginMetadata::new(NAME, env!("CARGO_PKG_VERSION"), "Redacts fields of JSON values (an example).");
        metadata.config = keys();
        metadata
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        Redact::read(config).err().unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        Ok(Redact::read(&config)?)
    }

    fn apply(&mut self, mut record: SinkRecord) -> Transformed {
        let Some(bytes) = &record.value else { return Transformed::Keep(record) };
        let Ok(Value::Object(mut object)) = serde_json::from_slice::<Value>(bytes) else {
            return Transformed::Fail("the value is not a JSON object".into());
        };
        self.redact(&mut object);
        record.value = Some(Value::Object(object).to_string().into_bytes());
        Transformed::Keep(record)
    }
}

spillway_sdk::export_transform!(Redact);

#[cfg(test)]
mod tests {
    use super::*;

    fn start(pairs: &[(&str, &str)]) -> Redact {
        let config = Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
        Redact::start(config).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn record(value: Option<&str>) -> SinkRecord {
        SinkRecord {
            id: 1,
            topic: "people".into(),
            partition: 0,
            offset: 7,
            timestamp: -1,
            timestamp_type: spillway_sdk::TimestampType::NoTimestampType,
            key: None,
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: Vec::new(),
            delivery_count: 1,
            lock_deadline: None,
        }
    }

    #[test]
    fn redacts_the_fields_named_and_fails_what_is_no_object() {
        let mut redact = start(&[("fields", "email, ssn"), ("lineage.field", "_by")]);
        let Transformed::Keep(out) = redact.apply(record(Some(r#"{"id":1,"email":"a@b.c","name":"A"}"#))) else {
            panic!("kept")
        };
        let value: Value = serde_json::from_slice(out.value.as_deref().unwrap()).unwrap();
        assert_eq!(value, serde_json::json!({"id": 1, "email": "****", "name": "A", "_by": "rust-redact/0.1.0"}));
        assert_eq!(redact.apply(record(None)), Transformed::Keep(record(None)), "a tombstone passes");
        assert_eq!(redact.apply(record(Some("[1]"))), Transformed::Fail("the value is not a JSON object".into()));
        assert!(Redact::validate(&Config::from(Vec::new())).iter().any(|e| e.key == "fields"));
    }
}
