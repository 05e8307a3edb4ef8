//! Accepts every record and writes nothing: the baseline plugin for
//! benchmarks and for measuring the host's own cost.

use spillway_sdk::{Config, PluginMetadata, PutReport, Sink, SinkRecord, TaskError};

pub struct NoopSink;

impl Sink for NoopSink {
    fn metadata() -> PluginMetadata {
        PluginMetadata::new("noop-sink", env!("CARGO_PKG_VERSION"), "Accepts every record, writes nothing.")
    }

    fn start(_config: Config) -> Result<Self, TaskError> {
        Ok(NoopSink)
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        Ok(PutReport::accept_all(batch.len()))
    }
}

spillway_sdk::export_sink!(NoopSink);
