//! The classic consumer-group mode (rdkafka), with at-least-once commits: an
//! offset is committed only once every record below it was acknowledged.
//!
//! A classic group has no per-record acknowledgement, so this source emulates
//! one: RELEASE puts a record back into a local queue for redelivery, and the
//! committed position of a partition never passes its oldest record that is
//! still being processed.

use super::{AckType, ConsumedRecord, TimestampType};
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

type Partition = (String, i32);

/// Per partition, what was handed out and what is still unfinished: the one
/// owner of the source's state, shared with the rebalance callback.
#[derive(Default)]
struct Positions {
    /// Offsets handed out and not yet acknowledged.
    in_flight: HashMap<Partition, BTreeSet<i64>>,
    /// The offset after the highest one handed out.
    next_offset: HashMap<Partition, i64>,
    /// Released records, handed out again before anything new.
    redeliver: VecDeque<ConsumedRecord>,
    /// The last position committed, to skip no-op commits.
    committed: HashMap<Partition, i64>,
    /// Partitions forgotten so far: tells `poll` whether a rebalance ran.
    revoked: u64,
}

impl Positions {
    fn track(&mut self, record: &ConsumedRecord) {
        self.in_flight.entry((record.topic.clone(), record.partition)).or_default().insert(record.offset);
    }

    /// The offset below which everything of `partition` was acknowledged:
    /// records still in flight (held by the sink) or released keep it back.
    fn durable(&self, partition: &Partition) -> Option<i64> {
        let next = *self.next_offset.get(partition)?;
        let released = self.redeliver.iter().filter(|r| (&r.topic, r.partition) == (&partition.0, partition.1));
        let oldest_pending = self.in_flight.get(partition).and_then(|p| p.first().copied());
        Some(released.map(|r| r.offset).chain(oldest_pending).min().unwrap_or(next))
    }

    /// The durable positions of `partitions` that differ from the last commit.
    fn to_commit<'a>(&self, partitions: impl Iterator<Item = &'a Partition>) -> Vec<(Partition, i64)> {
        partitions
            .filter_map(|p| Some((p.clone(), self.durable(p)?)))
            .filter(|(p, position)| self.committed.get(p) != Some(position))
            .collect()
    }

    /// The partition is no longer ours: its new owner starts from what was
    /// committed, so nothing of it may linger here.
    fn forget(&mut self, partition: &Partition) {
        self.in_flight.remove(partition);
        self.next_offset.remove(partition);
        self.committed.remove(partition);
        self.redeliver.retain(|r| (&r.topic, r.partition) != (&partition.0, partition.1));
        self.revoked += 1;
    }
}

fn offset_list(positions: &[(Partition, i64)]) -> Result<TopicPartitionList> {
    let mut list = TopicPartitionList::new();
    for ((topic, partition), offset) in positions {
        list.add_partition_offset(topic, *partition, Offset::Offset(*offset))?;
    }
    Ok(list)
}

/// Commits what is durable of the partitions the group takes away, the
/// moment it takes them (while this member may still commit for them), and
/// forgets them, so that nothing is committed later over the new owner.
#[derive(Default)]
struct RebalanceTracker {
    positions: Arc<Mutex<Positions>>,
}

impl ClientContext for RebalanceTracker {}

impl ConsumerContext for RebalanceTracker {
    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(list) = rebalance else { return };
        let revoked: Vec<Partition> = list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect();
        let mut positions = self.positions.lock().unwrap();
        let durable = positions.to_commit(revoked.iter());
        if !durable.is_empty() {
            let committed = offset_list(&durable).and_then(|l| Ok(consumer.commit(&l, CommitMode::Sync)?));
            match committed {
                Ok(()) => tracing::debug!(partitions = durable.len(), "committed revoked partitions"),
                // The new owner starts from the previous commit: duplicates, no loss.
                Err(e) => tracing::warn!(error = format!("{e:#}"), "committing revoked partitions failed"),
            }
        }
        for partition in &revoked {
            positions.forget(partition);
        }
    }
}

pub struct ClassicSource {
    consumer: Arc<StreamConsumer<RebalanceTracker>>,
    positions: Arc<Mutex<Positions>>,
    max_records: usize,
    /// When we last warned that a subscribed topic does not exist.
    warned_missing_topic: Option<std::time::Instant>,
}

/// How often a missing topic is warned about while waiting for it.
const MISSING_TOPIC_WARNING_EVERY: Duration = Duration::from_secs(30);

impl ClassicSource {
    /// Joins `group_id` and subscribes. `overrides` are `consumer.override.*`
    /// keys with the prefix removed, passed to librdkafka as they are.
    pub fn new(
        bootstrap: &str,
        group_id: &str,
        topics: &[String],
        overrides: &[(String, String)],
        max_records: usize,
    ) -> Result<Self> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        for (k, v) in overrides {
            config.set(k, v);
        }
        let context = RebalanceTracker::default();
        let positions = context.positions.clone();
        let consumer: StreamConsumer<RebalanceTracker> =
            config.create_with_context(context).context("creating classic consumer")?;
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).context("subscribing")?;
        Ok(ClassicSource { consumer: Arc::new(consumer), positions, max_records, warned_missing_topic: None })
    }

    /// Released records first, then whatever arrives within `timeout`.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedRecord>> {
        {
            let mut positions = self.positions.lock().unwrap();
            let batch: Vec<ConsumedRecord> = positions.redeliver.drain(..).collect();
            if !batch.is_empty() {
                for record in &batch {
                    positions.track(record);
                }
                return Ok(batch);
            }
        }
        let mut batch = Vec::new();
        let revoked_before = self.positions.lock().unwrap().revoked;
        let deadline = tokio::time::Instant::now() + timeout;
        while batch.len() < self.max_records {
            // A rebalance runs inside recv(): what it revokes is forgotten
            // there, before any record of the new assignment is tracked.
            let next = if batch.is_empty() {
                tokio::time::timeout_at(deadline, self.consumer.recv()).await
            } else {
                // Take what is already buffered, without waiting for more.
                tokio::time::timeout(Duration::ZERO, self.consumer.recv()).await
            };
            let Ok(message) = next else { break };
            let message = match message {
                Err(KafkaError::MessageConsumption(
                    code @ (RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownTopic),
                )) => {
                    // As Connect does: wait for the topic to be created.
                    self.warn_missing_topic(code);
                    break;
                }
                other => other.context("consuming")?,
            };
            let record = convert(&message);
            let mut positions = self.positions.lock().unwrap();
            positions.track(&record);
            positions.next_offset.insert((record.topic.clone(), record.partition), record.offset + 1);
            batch.push(record);
        }
        // Records of partitions revoked after they were received are no
        // longer ours: the new owner gets them from the last commit.
        let positions = self.positions.lock().unwrap();
        if positions.revoked == revoked_before {
            return Ok(batch);
        }
        batch.retain(|r| {
            positions.in_flight.get(&(r.topic.clone(), r.partition)).is_some_and(|p| p.contains(&r.offset))
        });
        Ok(batch)
    }

    fn warn_missing_topic(&mut self, code: RDKafkaErrorCode) {
        let now = std::time::Instant::now();
        if self.warned_missing_topic.is_none_or(|at| now.duration_since(at) >= MISSING_TOPIC_WARNING_EVERY) {
            tracing::warn!(error = %code, "a subscribed topic does not exist yet; waiting for it");
            self.warned_missing_topic = Some(now);
        }
    }

    pub fn acknowledge(&mut self, record: &ConsumedRecord, ack: AckType) -> Result<()> {
        let mut positions = self.positions.lock().unwrap();
        let partition = (record.topic.clone(), record.partition);
        let tracked = positions.in_flight.get_mut(&partition).is_some_and(|pending| pending.remove(&record.offset));
        if !tracked {
            bail!(
                "{}-{}@{} is not in flight (its partition was revoked)",
                record.topic,
                record.partition,
                record.offset
            );
        }
        if ack == AckType::Release {
            let mut again = record.clone();
            again.delivery_count = again.delivery_count.saturating_add(1);
            positions.redeliver.push_back(again);
        }
        Ok(())
    }

    /// Commits, per partition, the offset below which everything was
    /// acknowledged. Records still in flight (held by the sink, or released)
    /// keep it back, so a crash means their redelivery.
    pub async fn commit(&mut self) -> Result<()> {
        let positions = {
            let positions = self.positions.lock().unwrap();
            positions.to_commit(positions.next_offset.keys())
        };
        if positions.is_empty() {
            return Ok(());
        }
        let offsets = offset_list(&positions)?;
        let consumer = self.consumer.clone();
        tokio::task::spawn_blocking(move || consumer.commit(&offsets, CommitMode::Sync))
            .await?
            .context("committing offsets")?;
        let mut current = self.positions.lock().unwrap();
        for (partition, position) in positions {
            // Unless revoked meanwhile.
            if current.next_offset.contains_key(&partition) {
                current.committed.insert(partition, position);
            }
        }
        Ok(())
    }

    /// Commits, then leaves the group at once, so that a stopped connector's
    /// group is empty now rather than after the session timeout.
    pub async fn close(mut self) -> Result<()> {
        let committed = self.commit().await;
        self.consumer.unsubscribe();
        committed
    }
}

fn convert<M: Message>(m: &M) -> ConsumedRecord {
    let (timestamp_type, timestamp) = match m.timestamp() {
        rdkafka::Timestamp::NotAvailable => (TimestampType::None, -1),
        rdkafka::Timestamp::CreateTime(t) => (TimestampType::CreateTime, t),
        rdkafka::Timestamp::LogAppendTime(t) => (TimestampType::LogAppendTime, t),
    };
    let headers = m
        .headers()
        .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(Bytes::copy_from_slice))).collect())
        .unwrap_or_default();
    ConsumedRecord {
        topic: m.topic().to_string(),
        partition: m.partition(),
        offset: m.offset(),
        timestamp,
        timestamp_type,
        key: m.key().map(Bytes::copy_from_slice),
        value: m.payload().map(Bytes::copy_from_slice),
        headers,
        delivery_count: 1,
        lock_expires_at: None,
        undecodable: None,
    }
}
