//! The mirror: records of the connector's topics copied to a granted Kafka
//! cluster, as MirrorMaker 2 replicates them, through the `kafka`
//! capability.
//!
//! A `put` routes each record by its topic ([`topics`]: excluded, a loop
//! back to the target, or copied to its remote topic, which is created with
//! the source's partition count and configs when missing), turns the copied
//! ones into output records (key, value and headers moved, not copied;
//! the source partition kept when the target has it) and sends them in one
//! call; each record's delivery becomes its outcome. Task 0 also
//! translates consumer group offsets into the target ([`checkpoint`]). See
//! the README for the whole behaviour.

pub mod checkpoint;
pub mod cluster;
pub mod config;
pub mod policy;
pub mod topics;

use checkpoint::Checkpoints;
use cluster::{GrantedSource, GrantedTarget, Source, Target};
use config::Settings;
use spillway_sdk::kafka::{Cluster, Delivery, Header, OutputRecord};
use spillway_sdk::{
    Config, ConfigError, ConnectNames, Outcome, PluginMetadata, PutReport, Sink, SinkRecord, TaskError,
};
use topics::Topics;

/// The task's monotonic clock, in milliseconds (injectable for tests).
pub type Clock = Box<dyn FnMut() -> u64>;

pub struct Mirror {
    settings: Settings,
    target: Box<dyn Target>,
    source: Box<dyn Source>,
    clock: Clock,
    topics: Topics,
    checkpoints: Checkpoints,
    /// The records of the batch being sent, and each one's index in the
    /// batch; kept between calls for their capacity.
    out: Vec<OutputRecord>,
    sent: Vec<usize>,
    /// Records copied, over the task's life.
    copied: u64,
}

impl Sink for Mirror {
    fn metadata() -> PluginMetadata {
        config::keys().into_iter().fold(
            PluginMetadata::new(
                "mirror",
                env!("CARGO_PKG_VERSION"),
                "Copies records of the connector's topics to a granted Kafka cluster, as MirrorMaker 2 does: \
                 remote topics named by the replication policy (source.orders) and created with the source's \
                 partitions and configs, keys, values, headers and timestamps kept byte for byte, partitions kept, \
                 loops prevented, and consumer group offsets translated into the target for failover. \
                 Exactly once in the target under a classic group with a transactional grant.",
            ),
            PluginMetadata::key,
        )
    }

    /// MirrorMaker 2's source connector: its class, and the target cluster's
    /// keys, which become the Kafka grant `target` (the default
    /// `target.grant`). The mirror consumes through its worker, so a source
    /// cluster named must be the worker's own.
    fn connect_names() -> ConnectNames {
        let grant = |names: ConnectNames, key: &str, setting: &str| names.grant(key, "kafka", "target", setting, "{}");
        let names = ConnectNames::default()
            .class("org.apache.kafka.connect.mirror.MirrorSourceConnector")
            .worker_cluster_key("source.cluster.bootstrap.servers");
        let names = grant(names, "target.cluster.bootstrap.servers", "bootstrap.servers");
        let names = grant(names, "target.cluster.security.protocol", "security.protocol");
        grant(names, "target.cluster.sasl.mechanism", "sasl.mechanism")
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        Settings::parse(config).err().unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let settings = Settings::parse(&config)?;
        let cluster = Cluster::open(&settings.grant)?;
        let origin = std::time::Instant::now();
        let clock: Clock = Box::new(move || origin.elapsed().as_millis() as u64);
        Ok(Mirror::with_clusters(settings, Box::new(GrantedTarget(cluster)), Box::new(GrantedSource), clock))
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        if self.settings.checkpoints() && self.checkpoints.due((self.clock)()) {
            self.checkpoints.run(&self.settings, self.target.as_mut(), self.source.as_mut())?;
        }
        if batch.is_empty() {
            return Ok(PutReport { outcomes: Vec::new(), settled: Vec::new() });
        }
        let mut outcomes = vec![Outcome::Accept; batch.len()];
        self.out.clear();
        self.sent.clear();
        self.topics.next_batch();
        // The last record's topic: a batch is mostly runs of one topic.
        let mut last: Option<usize> = None;
        for (i, record) in batch.into_iter().enumerate() {
            let t = match last {
                Some(t) if self.topics.state(t).source == record.topic => t,
                _ => {
                    let t = self.topics.resolve(
                        &record.topic,
                        &self.settings,
                        self.target.as_mut(),
                        self.source.as_mut(),
                    )?;
                    last = Some(t);
                    t
                }
            };
            let state = self.topics.state_mut(t);
            if state.skip.is_some() {
                state.skipped += 1;
                continue;
            }
            let SinkRecord { id, topic, partition, timestamp, key, value, headers, .. } = record;
            // The record's own buffers, moved: the topic's reused for the
            // target's name, the headers converted in place (same layout).
            let mut name = topic;
            name.clear();
            name.push_str(&state.target);
            self.out.push(OutputRecord {
                source: Some(id),
                topic: name,
                partition: state.partition_for(partition),
                key,
                value,
                headers: headers.into_iter().map(|h| Header { key: h.key, value: h.value }).collect(),
                timestamp: (timestamp >= 0).then_some(timestamp),
            });
            self.sent.push(i);
        }
        if self.out.is_empty() {
            return Ok(PutReport { outcomes, settled: Vec::new() });
        }
        let deliveries = self.target.send(&self.out)?;
        self.out.clear();
        if deliveries.len() != self.sent.len() {
            return Err(TaskError::Fatal(format!(
                "the host returned {} deliveries for {} records sent",
                deliveries.len(),
                self.sent.len()
            )));
        }
        for (delivery, &i) in deliveries.into_iter().zip(&self.sent) {
            outcomes[i] = match delivery {
                Delivery::Delivered(_) => {
                    self.copied += 1;
                    Outcome::Accept
                }
                Delivery::Failed(TaskError::Retriable(why)) => Outcome::Retry(why),
                Delivery::Failed(TaskError::Fatal(why)) => Outcome::Reject(why),
            };
        }
        Ok(PutReport { outcomes, settled: Vec::new() })
    }

    fn stop(&mut self) {
        let skipped: Vec<String> = self
            .topics
            .iter()
            .filter(|t| t.skipped > 0)
            .map(|t| format!("{} ({}, {:?})", t.source, t.skipped, t.skip.expect("skipped topics have a reason")))
            .collect();
        spillway_sdk::log::info(&format!(
            "mirror task stops: {} records copied; not copied: {}",
            self.copied,
            if skipped.is_empty() { "none".to_string() } else { skipped.join(", ") }
        ));
    }
}

impl Mirror {
    /// A mirror on any clusters and clock (tests use fakes).
    pub fn with_clusters(settings: Settings, target: Box<dyn Target>, source: Box<dyn Source>, clock: Clock) -> Mirror {
        let checkpoints = Checkpoints::new(settings.checkpoint_interval_ms);
        Mirror {
            settings,
            target,
            source,
            clock,
            topics: Topics::default(),
            checkpoints,
            out: Vec::new(),
            sent: Vec::new(),
            copied: 0,
        }
    }

    /// Records accepted without being copied, by source topic.
    pub fn skipped(&self) -> Vec<(&str, u64)> {
        self.topics.iter().filter(|t| t.skipped > 0).map(|t| (t.source.as_str(), t.skipped)).collect()
    }

    /// The group offsets this task committed in the target, by (target topic, partition).
    pub fn committed(&self, group: &str) -> Vec<(String, i32, i64)> {
        let mut all: Vec<(String, i32, i64)> = self
            .checkpoints
            .committed(group)
            .into_iter()
            .flatten()
            .map(|((topic, partition), offset)| (topic.clone(), *partition, *offset))
            .collect();
        all.sort();
        all
    }
}

spillway_sdk::export_sink!(Mirror);

#[cfg(test)]
mod tests;
