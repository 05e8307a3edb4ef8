//! The smallest sink on a host capability: each batch becomes one JSON-lines
//! object, `<path.prefix><topic>/<partition>/<first offset>-<last offset>.jsonl`,
//! in the bucket granted as `plugin.grant.object-store.<bucket>.*`. A record
//! is accepted once the object holding it is written; a redelivered batch
//! writes the same name again, so redelivery never duplicates an object.
//!
//! It shows the shape every capability has for a plugin: open by the grant's
//! name, get the one retriable / fatal error back, pass it on with `?`.

use spillway_sdk::object_store::Bucket;
use spillway_sdk::{Config, ConfigKey, ConfigType, PluginMetadata, PutReport, Sink, SinkRecord, TaskError};
use std::collections::BTreeMap;

pub struct ObjectSink {
    bucket: Bucket,
    prefix: String,
}

impl Sink for ObjectSink {
    fn metadata() -> PluginMetadata {
        PluginMetadata::new("object-sink", env!("CARGO_PKG_VERSION"), "Writes each batch as a JSON-lines object.")
            .key(ConfigKey::optional(
                "bucket",
                ConfigType::String,
                "out",
                "Name of the object-store grant to write to (plugin.grant.object-store.<bucket>.url).",
            ))
            .key(ConfigKey::optional("path.prefix", ConfigType::String, "", "Prepended to every object name."))
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let bucket = Bucket::open(config.get("bucket").unwrap_or("out"))?;
        Ok(ObjectSink { bucket, prefix: config.get("path.prefix").unwrap_or_default().to_string() })
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        let mut objects: BTreeMap<(String, i32), Vec<&SinkRecord>> = BTreeMap::new();
        for record in &batch {
            objects.entry((record.topic.clone(), record.partition)).or_default().push(record);
        }
        for ((topic, partition), records) in objects {
            let (first, last) = (records[0].offset, records[records.len() - 1].offset);
            let mut body = Vec::new();
            for r in records {
                let line = serde_json::json!({
                    "offset": r.offset,
                    "key": r.key.as_deref().map(String::from_utf8_lossy),
                    "value": r.value.as_deref().map(String::from_utf8_lossy),
                });
                body.extend_from_slice(line.to_string().as_bytes());
                body.push(b'\n');
            }
            let path = format!("{}{topic}/{partition}/{first}-{last}.jsonl", self.prefix);
            self.bucket.put(&path, &body)?;
            let written = self.bucket.head(&path)?;
            if written.as_ref().map(|m| m.size) != Some(body.len() as u64) {
                return Err(TaskError::Retriable(format!("{path}: the store does not show what was written")));
            }
        }
        Ok(PutReport::accept_all(batch.len()))
    }
}

spillway_sdk::export_sink!(ObjectSink);
