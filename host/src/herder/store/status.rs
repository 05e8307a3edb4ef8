//! `status.storage.topic`: connector and task statuses, as Kafka Connect's
//! status topic keys and encodes them, so that whoever reads Connect's topic
//! (its tooling, another worker) can read ours:
//!
//! ```text
//! status-connector-<name>       {"state": "RUNNING", "trace": null, "worker_id": "h:8083", "generation": 0}
//! status-task-<name>-<task>     the same, for one task                 null: the task or connector is gone
//! ```
//!
//! Statuses are reports, not state: they are written as they change,
//! without holding up the worker, and a lost one is corrected by the next.
//! The topic is compacted and keyed, so each key keeps its order in its
//! partition.

use super::follow::{Follower, follow};
use super::topic::{Compacted, ensure_topic};
use crate::herder::types::State;
use crate::kafka::clients::{ClusterAccess, Role};
use anyhow::{Context, Result};
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// `status.storage.topic`, `status.storage.partitions`,
/// `status.storage.replication.factor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatusTopic {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication_factor: i32,
}

/// One status as the topic holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    pub state: State,
    pub trace: Option<String>,
    pub worker_id: String,
    /// A task's incarnation on this worker; 0 for a connector.
    #[serde(default)]
    pub generation: u64,
    /// The version of the plugin it runs, for the status of other workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

pub fn connector_key(name: &str) -> String {
    format!("status-connector-{name}")
}

pub fn task_key(name: &str, task: u32) -> String {
    format!("status-task-{name}-{task}")
}

pub struct StatusWriter {
    topic: String,
    producer: FutureProducer,
    /// What was last sent for each key.
    sent: BTreeMap<String, Status>,
}

impl StatusWriter {
    pub async fn open(cluster: &ClusterAccess, topic: &StatusTopic) -> Result<Self> {
        let wanted =
            Compacted { name: &topic.name, what: "status topic", partitions: topic.partitions, exactly: false };
        ensure_topic(cluster, wanted, topic.replication_factor).await?;
        let producer: FutureProducer = cluster
            .rdkafka(Role::Producer)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .create()
            .context("a producer for the status topic")?;
        Ok(StatusWriter { topic: topic.name.clone(), producer, sent: BTreeMap::new() })
    }

    /// Sends a record for each status in `now` that changed since the last
    /// call, and a tombstone for each key that is gone and `deleted` (not
    /// merely moved to another worker, which reports it from then on);
    /// returns without waiting for the broker.
    pub fn publish(&mut self, now: BTreeMap<String, Status>, deleted: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.sent.keys().filter(|k| !now.contains_key(*k)).cloned().collect();
        for key in gone {
            if deleted(&key) {
                self.send(&key, None);
            }
            self.sent.remove(&key);
        }
        for (key, status) in now {
            if self.sent.get(&key) != Some(&status) {
                self.send(&key, Some(serde_json::to_vec(&status).expect("plain data serializes")));
                self.sent.insert(key, status);
            }
        }
    }

    /// Waits (a while) for what was sent to reach the broker: on shutdown.
    pub async fn flush(&self) {
        let producer = self.producer.clone();
        let flushed = tokio::task::spawn_blocking(move || {
            rdkafka::producer::Producer::flush(&producer, std::time::Duration::from_secs(10))
        });
        if let Ok(Err(e)) = flushed.await {
            tracing::warn!(error = %e, "the last statuses may not have reached the status topic");
        }
    }

    fn send(&self, key: &str, value: Option<Vec<u8>>) {
        let record = FutureRecord::<str, Vec<u8>>::to(&self.topic).key(key);
        let record = match &value {
            Some(value) => record.payload(value),
            None => record,
        };
        match self.producer.send_result(record) {
            Ok(delivery) => {
                let key = key.to_string();
                tokio::spawn(async move {
                    if let Ok(Err((e, _))) = delivery.await {
                        tracing::warn!(key, error = %e, "writing a status to the status topic failed");
                    }
                });
            }
            Err((e, _)) => tracing::warn!(key, error = %e, "a status could not be queued for the status topic"),
        }
    }
}

/// Every worker's statuses as the status topic holds them, read as they
/// are written: in distributed mode a worker answers for the tasks that
/// run elsewhere from here, as Connect's `KafkaStatusBackingStore` does.
pub struct StatusView {
    statuses: Arc<Mutex<BTreeMap<String, Status>>>,
    _follower: Follower,
}

impl StatusView {
    pub async fn open(cluster: &ClusterAccess, topic: &StatusTopic) -> Result<Self> {
        let statuses: Arc<Mutex<BTreeMap<String, Status>>> = Arc::default();
        let (cluster, name, into) = (cluster.clone(), topic.name.clone(), statuses.clone());
        let (follower, _) = tokio::task::spawn_blocking(move || {
            follow(&cluster, &name, None, Duration::from_secs(30), move |record| {
                let mut statuses = into.lock().unwrap();
                match record.value.map(serde_json::from_slice::<Status>) {
                    None => {
                        statuses.remove(&record.key);
                    }
                    Some(Ok(status)) => {
                        statuses.insert(record.key, status);
                    }
                    Some(Err(e)) => tracing::warn!(key = record.key, error = %e, "status record skipped"),
                }
            })
        })
        .await??;
        Ok(StatusView { statuses, _follower: follower })
    }

    /// The last status written under `key`, by whichever worker.
    pub fn get(&self, key: &str) -> Option<Status> {
        self.statuses.lock().unwrap().get(key).cloned()
    }
}
