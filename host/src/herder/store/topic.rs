//! Connect's config topic (`config.storage.topic`): one record per change,
//! keyed as Kafka Connect's `KafkaConfigBackingStore` keys them, so that the
//! topic reads the same to either:
//!
//! ```text
//! connector-<name>           {"properties": {...}}                      null: deleted
//! target-state-<name>        {"state": "PAUSED", "state.v2": "STOPPED"} null: deleted
//! restart-connector-<name>   {"include-tasks": true, "only-failed": false}  null: done
//! ```
//!
//! The topic has one partition, so that every reader sees the changes in the
//! order they were made, and is compacted, so that the last record of a key is
//! all that matters. A cluster that cannot create topics (librdkafka's mock)
//! makes it on first use, with as many partitions as it likes: the store
//! then writes and reads partition 0 only.

use super::follow::{Follower, follow};
use super::{RestartRequest, StoredConnector, StoredState};
use crate::herder::types::{ConfigMap, TargetState};
use crate::kafka::clients::{ClusterAccess, Role};
use crate::kafka::target::serves_admin_requests;
use anyhow::{Context, Result, anyhow, bail};
use futures::future::join_all;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// The one partition the store writes and reads.
const PARTITION: i32 = 0;
/// How long one admin call, one write or reading the topic to its end may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// `config.storage.topic` and `config.storage.replication.factor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigTopic {
    pub name: String,
    /// -1: the broker's default.
    pub replication_factor: i32,
}

pub struct TopicStore {
    topic: String,
    producer: FutureProducer,
    /// What the topic holds, as far as it has been read; the follower
    /// thread writes it, in the topic's order.
    log: Arc<Mutex<Log>>,
    /// The offset after the last record read.
    read: watch::Receiver<i64>,
    _follower: Follower,
}

#[derive(Default)]
struct Log {
    replay: Replay,
    /// Restart requests read and not yet taken, with their offsets.
    restarts: Vec<(i64, String, RestartRequest)>,
    /// Offsets of the restart requests this worker wrote: they are carried
    /// out by the request, not again when read back.
    own: BTreeSet<i64>,
}

impl TopicStore {
    /// Creates the topic where missing (or checks the one there), reads it
    /// to its end, and goes on reading what any worker writes to it.
    pub async fn open(cluster: &ClusterAccess, topic: &ConfigTopic) -> Result<Self> {
        let wanted = Compacted { name: &topic.name, what: "config topic", partitions: 1, exactly: true };
        ensure_topic(cluster, wanted, topic.replication_factor).await?;
        let log = Arc::new(Mutex::new(Log::default()));
        let (read_to, read) = watch::channel(0);
        let (cluster_, name, log_) = (cluster.clone(), topic.name.clone(), log.clone());
        let (follower, ends) = tokio::task::spawn_blocking(move || {
            follow(&cluster_, &name, Some(&[PARTITION]), TIMEOUT, move |record| {
                let mut log = log_.lock().unwrap();
                if let Some((name, request)) = log.replay.apply(&record.key, record.value) {
                    log.restarts.push((record.offset, name, request));
                }
                drop(log);
                read_to.send_replace(record.offset + 1);
            })
        })
        .await??;
        let end = ends.first().map_or(0, |(_, end)| *end);
        let mut store =
            TopicStore { topic: topic.name.clone(), producer: producer(cluster)?, log, read, _follower: follower };
        store.wait_read(end).await.context("reading the config topic to its end")?;
        // Start-up starts everything, which fulfils any restart on record.
        store.log.lock().unwrap().restarts.clear();
        let state = store.load();
        tracing::info!(topic = topic.name, records = end, connectors = state.connectors.len(), "read the config topic");
        Ok(store)
    }

    pub fn load(&self) -> StoredState {
        self.log.lock().unwrap().replay.state()
    }

    /// Ticks whenever more of the topic was read: another worker's change,
    /// or this one's read back.
    pub fn watch(&self) -> watch::Receiver<i64> {
        self.read.clone()
    }

    /// The offset after the last record read.
    pub fn read_offset(&self) -> i64 {
        *self.read.borrow()
    }

    /// Restart requests other workers wrote, read since the last call.
    pub fn take_restarts(&self) -> Vec<(String, RestartRequest)> {
        let mut log = self.log.lock().unwrap();
        let taken = std::mem::take(&mut log.restarts);
        let mut theirs = Vec::new();
        for (offset, name, request) in taken {
            if !log.own.remove(&offset) {
                theirs.push((name, request));
            }
        }
        theirs
    }

    /// Writes a record for each key that differs between `old` and `new`
    /// (what this worker changed, and nothing else: another worker's change
    /// not read yet is not undone), and returns once every one was
    /// acknowledged and read back, so that the change is in the state the
    /// worker applies before it answers.
    pub async fn save(&mut self, old: &StoredState, new: &StoredState) -> Result<()> {
        let records = changes(old, new);
        let sends = records.iter().map(|(key, value)| {
            let record = FutureRecord::<String, Vec<u8>>::to(&self.topic).partition(PARTITION).key(key);
            let record = match value {
                Some(value) => record.payload(value),
                None => record,
            };
            self.producer.send(record, Timeout::After(TIMEOUT))
        });
        let mut last = None;
        for (sent, (key, value)) in join_all(sends).await.into_iter().zip(&records) {
            let delivery = sent.map_err(|(e, _)| anyhow!("writing {key} to the config topic {}: {e}", self.topic))?;
            if key.starts_with(RESTART) && value.is_some() {
                self.log.lock().unwrap().own.insert(delivery.offset);
            }
            last = last.max(Some(delivery.offset));
        }
        match last {
            Some(offset) => self.wait_read(offset + 1).await,
            None => Ok(()),
        }
    }

    async fn wait_read(&mut self, offset: i64) -> Result<()> {
        let topic = self.topic.clone();
        tokio::time::timeout(TIMEOUT, self.read.wait_for(|read| *read >= offset))
            .await
            .map_err(|_| anyhow!("the config topic {topic} was not read up to offset {offset} within {TIMEOUT:?}"))?
            .map_err(|_| anyhow!("the follower of the config topic {topic} stopped"))?;
        Ok(())
    }
}

fn producer(cluster: &ClusterAccess) -> Result<FutureProducer> {
    cluster
        .rdkafka(Role::Producer)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .set("linger.ms", "0")
        .create()
        .context("a producer for the config topic")
}

/// One record of the topic: its key and value (`None`: a tombstone).
type Record = (String, Option<Vec<u8>>);

#[derive(Serialize, Deserialize)]
struct ConnectorValue {
    properties: ConfigMap,
}

/// Connect writes `state` for old readers (which know no STOPPED) and
/// `state.v2` (KIP-875) for new ones.
#[derive(Serialize, Deserialize)]
struct TargetValue {
    state: TargetState,
    #[serde(rename = "state.v2", default, skip_serializing_if = "Option::is_none")]
    state_v2: Option<TargetState>,
}

/// Spillway's own record (Connect's workers skip keys they do not know):
/// the state's [`StoredState::format`].
const FORMAT: &str = "spillway-format";

#[derive(Serialize, Deserialize)]
struct FormatValue {
    format: u32,
}

const CONNECTOR: &str = "connector-";
const TARGET: &str = "target-state-";
const RESTART: &str = "restart-connector-";

/// The records that turn `old` into `new`. A new connector's target state
/// goes first, as Connect writes it (KIP-980): a connector created paused is
/// never seen running.
fn changes(old: &StoredState, new: &StoredState) -> Vec<Record> {
    let mut records = Vec::new();
    if new.format != old.format {
        records.push((FORMAT.to_string(), json(&FormatValue { format: new.format })));
    }
    for (name, connector) in &new.connectors {
        let before = old.connectors.get(name);
        if before.is_none_or(|b| b.target_state != connector.target_state) {
            let target = connector.target_state;
            let old_readers = if target == TargetState::Stopped { TargetState::Paused } else { target };
            let value = TargetValue { state: old_readers, state_v2: Some(target) };
            records.push((format!("{TARGET}{name}"), json(&value)));
        }
        if before.is_none_or(|b| b.config != connector.config) {
            records
                .push((format!("{CONNECTOR}{name}"), json(&ConnectorValue { properties: connector.config.clone() })));
        }
    }
    for name in old.connectors.keys().filter(|name| !new.connectors.contains_key(*name)) {
        records.push((format!("{CONNECTOR}{name}"), None));
        records.push((format!("{TARGET}{name}"), None));
    }
    for (name, request) in &new.restart_requests {
        if old.restart_requests.get(name) != Some(request) {
            records.push((format!("{RESTART}{name}"), json(request)));
        }
    }
    for name in old.restart_requests.keys().filter(|name| !new.restart_requests.contains_key(*name)) {
        records.push((format!("{RESTART}{name}"), None));
    }
    records
}

/// The state records come to, read in order. A target state may come
/// before its connector's config; a config without one runs (STARTED), as
/// in Connect. Records of other kinds (Connect's task configs, say) and
/// values that do not parse are skipped with a warning.
#[derive(Default)]
struct Replay {
    configs: BTreeMap<String, ConfigMap>,
    targets: BTreeMap<String, TargetState>,
    restarts: BTreeMap<String, RestartRequest>,
    format: u32,
}

impl Replay {
    /// Applies one record; returns the restart request it makes, if any.
    fn apply(&mut self, key: &str, value: Option<&[u8]>) -> Option<(String, RestartRequest)> {
        let parsed = if let Some(name) = key.strip_prefix(CONNECTOR) {
            apply(&mut self.configs, name, value, |v: ConnectorValue| v.properties)
        } else if let Some(name) = key.strip_prefix(TARGET) {
            apply(&mut self.targets, name, value, |v: TargetValue| v.state_v2.unwrap_or(v.state))
        } else if key == FORMAT {
            value
                .map(serde_json::from_slice::<FormatValue>)
                .transpose()
                .map(|v| self.format = v.map_or(0, |v| v.format))
        } else if let Some(name) = key.strip_prefix(RESTART) {
            let applied = apply(&mut self.restarts, name, value, |v: RestartRequest| v);
            if applied.is_ok() && value.is_some() {
                return Some((name.to_string(), self.restarts[name]));
            }
            applied
        } else {
            tracing::debug!(key, "config topic record of a kind this worker does not keep");
            Ok(())
        };
        if let Err(e) = parsed {
            tracing::warn!(key, error = %e, "config topic record skipped");
        }
        None
    }

    fn state(&self) -> StoredState {
        let connectors: BTreeMap<String, StoredConnector> = self
            .configs
            .iter()
            .map(|(name, config)| {
                let target_state = self.targets.get(name).copied().unwrap_or(TargetState::Started);
                (name.clone(), StoredConnector { config: config.clone(), target_state })
            })
            .collect();
        let mut restart_requests = self.restarts.clone();
        restart_requests.retain(|name, _| connectors.contains_key(name));
        StoredState { connectors, restart_requests, format: self.format }
    }
}

#[cfg(test)]
fn replay(records: &[Record]) -> StoredState {
    let mut replay = Replay::default();
    for (key, value) in records {
        replay.apply(key, value.as_deref());
    }
    replay.state()
}

fn apply<V: serde::de::DeserializeOwned, T>(
    map: &mut BTreeMap<String, T>,
    name: &str,
    value: Option<&[u8]>,
    take: impl FnOnce(V) -> T,
) -> Result<(), serde_json::Error> {
    match value {
        None => {
            map.remove(name);
        }
        Some(bytes) => {
            map.insert(name.to_string(), take(serde_json::from_slice(bytes)?));
        }
    }
    Ok(())
}

/// A compacted topic the worker keeps its state in.
pub(super) struct Compacted<'a> {
    pub name: &'a str,
    /// "config topic", "status topic": for messages.
    pub what: &'a str,
    pub partitions: i32,
    /// Whether one that exists must have `partitions` exactly (the config
    /// topic's one, for order) or may have any number.
    pub exactly: bool,
}

/// Creates the topic, compacted, unless it exists; one that exists must be
/// compacted (and have the partitions asked for, where `exactly`), as
/// Connect requires of its topics.
pub(super) async fn ensure_topic(cluster: &ClusterAccess, topic: Compacted<'_>, replication_factor: i32) -> Result<()> {
    let what = topic.what;
    let admin: AdminClient<DefaultClientContext> =
        cluster.rdkafka(Role::Admin).create().with_context(|| format!("an admin client for the {what}"))?;
    let (admin, serves) = tokio::task::spawn_blocking(move || {
        let serves = serves_admin_requests(admin.inner(), TIMEOUT);
        (admin, serves)
    })
    .await?;
    if !serves {
        tracing::warn!(
            topic = topic.name,
            "the cluster takes no admin requests (librdkafka's mock): the {what} is made on first use, unchecked{}",
            if topic.exactly { ", and only its partition 0 is used" } else { "" }
        );
        return Ok(());
    }
    let options = AdminOptions::new().operation_timeout(Some(Timeout::After(TIMEOUT)));
    let new = NewTopic::new(topic.name, topic.partitions, TopicReplication::Fixed(replication_factor))
        .set("cleanup.policy", "compact");
    let created = admin.create_topics([&new], &options).await.with_context(|| format!("creating the {what}"))?;
    match created.into_iter().next() {
        Some(Ok(_)) => {
            tracing::info!(topic = topic.name, "created the {what}");
            return Ok(());
        }
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => {}
        Some(Err((_, code))) => bail!("creating the {what} {}: {code}", topic.name),
        None => bail!("creating the {what} {}: no answer", topic.name),
    }
    let name = topic.name.to_string();
    let (admin, partitions) = tokio::task::spawn_blocking(move || {
        let partitions = admin
            .inner()
            .fetch_metadata(Some(&name), TIMEOUT)
            .map(|m| m.topics().first().map_or(0, |t| t.partitions().len()));
        (admin, partitions)
    })
    .await?;
    let partitions = partitions.with_context(|| format!("reading the metadata of the {what} {}", topic.name))?;
    if topic.exactly && partitions != topic.partitions as usize {
        bail!(
            "the {what} {} has {partitions} partitions; it must have exactly {}, so that every worker reads the \
             changes in order (create it so, or name another topic)",
            topic.name,
            topic.partitions
        );
    }
    let described = admin
        .describe_configs([&ResourceSpecifier::Topic(topic.name)], &options)
        .await
        .with_context(|| format!("describing the {what}"))?;
    let policy = described
        .into_iter()
        .next()
        .and_then(Result::ok)
        .and_then(|resource| resource.get("cleanup.policy").and_then(|e| e.value.clone()));
    match policy {
        Some(policy) if policy.split(',').any(|p| p.trim() == "compact") => Ok(()),
        Some(policy) => bail!(
            "the {what} {} has cleanup.policy={policy}; it must be compacted (cleanup.policy=compact), or what it \
             keeps is deleted with age",
            topic.name
        ),
        None => {
            tracing::warn!(topic = topic.name, "could not read the {what}'s cleanup.policy; not checked");
            Ok(())
        }
    }
}

fn json<T: Serialize>(value: &T) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(value).expect("plain data serializes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector(target: TargetState, key: &str) -> StoredConnector {
        StoredConnector { config: [("k".to_string(), key.to_string())].into(), target_state: target }
    }

    fn state(connectors: &[(&str, StoredConnector)]) -> StoredState {
        StoredState {
            connectors: connectors.iter().map(|(n, c)| (n.to_string(), c.clone())).collect(),
            restart_requests: BTreeMap::new(),
            format: StoredState::FORMAT,
        }
    }

    #[test]
    fn each_change_is_written_as_connect_keys_it_and_replays_to_the_same_state() {
        let mut log: Vec<Record> = Vec::new();
        let mut written = StoredState::default();
        let mut step = |next: StoredState, log: &mut Vec<Record>| -> Vec<String> {
            let records = changes(&written, &next);
            let keys = records.iter().map(|(k, _)| k.clone()).collect();
            log.extend(records);
            assert_eq!(replay(log), next, "the topic replays to the state written");
            written = next;
            keys
        };
        let a = connector(TargetState::Paused, "1");
        let keys = step(state(&[("a", a.clone())]), &mut log);
        assert_eq!(keys, ["spillway-format", "target-state-a", "connector-a"], "target state first");
        let keys = step(state(&[("a", connector(TargetState::Paused, "2"))]), &mut log);
        assert_eq!(keys, ["connector-a"], "only what changed");
        let keys = step(state(&[("a", connector(TargetState::Stopped, "2"))]), &mut log);
        assert_eq!(keys, ["target-state-a"]);
        let (_, value) = log.last().unwrap();
        let value: serde_json::Value = serde_json::from_slice(value.as_ref().unwrap()).unwrap();
        assert_eq!(value, serde_json::json!({"state": "PAUSED", "state.v2": "STOPPED"}));
        let mut restarting = state(&[("a", connector(TargetState::Stopped, "2"))]);
        restarting.restart_requests.insert("a".into(), RestartRequest { include_tasks: true, only_failed: false });
        assert_eq!(step(restarting, &mut log), ["restart-connector-a"]);
        let keys = step(StoredState { format: StoredState::FORMAT, ..Default::default() }, &mut log);
        assert_eq!(keys, ["connector-a", "target-state-a", "restart-connector-a"]);
        assert!(log[log.len() - 3..].iter().all(|(_, v)| v.is_none()), "tombstones");
    }

    #[test]
    fn records_written_by_kafka_connect_are_read() {
        let records: Vec<Record> = vec![
            ("connector-c".into(), Some(br#"{"properties":{"connector.class":"x","tasks.max":"1"}}"#.to_vec())),
            ("task-c-0".into(), Some(br#"{"properties":{}}"#.to_vec())),
            ("commit-c".into(), Some(br#"{"tasks":1}"#.to_vec())),
            ("target-state-c".into(), Some(br#"{"state":"PAUSED"}"#.to_vec())),
            ("connector-gone".into(), Some(br#"{"properties":{}}"#.to_vec())),
            ("connector-gone".into(), None),
            ("connector-bad".into(), Some(b"not json".to_vec())),
        ];
        let state = replay(&records);
        assert_eq!(state.connectors.keys().collect::<Vec<_>>(), ["c"]);
        assert_eq!(state.connectors["c"].target_state, TargetState::Paused);
        assert_eq!(state.connectors["c"].config["tasks.max"], "1");
    }
}
