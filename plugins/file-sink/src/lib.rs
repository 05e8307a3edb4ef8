//! Appends records as JSON lines to a file in a directory the connector
//! grants (`plugin.grant.fs.<name>.path`).
//!
//! Writes are buffered: `put` holds every record, and `flush` writes the buffer
//! out, syncs the file and only then settles the records as accepted. A crash
//! before the sync means the host redelivers them.

use serde_json::{Map, Value, json};
use spillway_sdk::{
    Config, ConfigError, ConfigKey, ConfigType, FlushScope, Outcome, PluginMetadata, PutReport, Settlement, Sink,
    SinkRecord, TaskError,
};
use std::fs::{File, OpenOptions};
use std::io::Write;

pub struct FileSink {
    file: File,
    buffer: Vec<u8>,
    held: Vec<u64>,
}

impl Sink for FileSink {
    fn metadata() -> PluginMetadata {
        PluginMetadata::new(
            "file-sink",
            env!("CARGO_PKG_VERSION"),
            "Appends records as JSON lines to a file in a granted directory.",
        )
        .key(ConfigKey::required(
            "file",
            ConfigType::String,
            "Path of the output file; its directory must be granted with plugin.grant.fs.<name>.path. \
             `{task}` in it becomes the task's number, so that tasks write files of their own.",
        ))
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        match config.get("file") {
            Some(path) if path.ends_with('/') => {
                vec![ConfigError { key: "file".into(), message: "must name a file, not a directory".into() }]
            }
            _ => Vec::new(),
        }
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let path = config.require("file")?.replace("{task}", config.get("task.id").unwrap_or("0"));
        let path = path.as_str();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| TaskError::Fatal(format!("cannot open '{path}': {e}")))?;
        spillway_sdk::log::info(&format!("appending to {path}"));
        Ok(FileSink { file, buffer: Vec::new(), held: Vec::new() })
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        let mut outcomes = Vec::with_capacity(batch.len());
        for record in &batch {
            serde_json::to_writer(&mut self.buffer, &to_json(record)).map_err(|e| TaskError::Fatal(e.to_string()))?;
            self.buffer.push(b'\n');
            self.held.push(record.id);
            outcomes.push(Outcome::Hold);
        }
        Ok(PutReport { outcomes, settled: Vec::new() })
    }

    /// One file holds every record, so any flush writes out the whole buffer
    /// and settles every held record, whatever `scope` named.
    fn flush(&mut self, _scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        if self.held.is_empty() {
            return Ok(Vec::new());
        }
        // A failed write leaves the records held; the host releases them when
        // their locks run out, so nothing is acknowledged that is not on disk.
        self.file
            .write_all(&self.buffer)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| TaskError::Retriable(format!("write failed: {e}")))?;
        self.buffer.clear();
        Ok(self.held.drain(..).map(|id| Settlement { id, outcome: Outcome::Accept }).collect())
    }

    fn stop(&mut self) {
        if let Err(TaskError::Retriable(e) | TaskError::Fatal(e)) = self.flush(FlushScope::All) {
            spillway_sdk::log::error(&format!("final flush failed: {e}"));
        }
    }
}

/// Keys and values are shown as UTF-8 text when they are, else as byte arrays.
fn to_json(record: &SinkRecord) -> Value {
    let bytes = |b: &Option<Vec<u8>>| match b {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.into()),
            Err(_) => json!(b),
        },
    };
    let headers: Map<String, Value> = record.headers.iter().map(|h| (h.key.clone(), bytes(&h.value))).collect();
    json!({
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": bytes(&record.key),
        "value": bytes(&record.value),
        "headers": headers,
    })
}

spillway_sdk::export_sink!(FileSink);
