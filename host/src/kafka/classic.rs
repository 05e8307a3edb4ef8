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

/// Notes partitions the group takes away, so their state is dropped and never
/// committed over the new owner's progress.
#[derive(Default)]
struct RebalanceTracker {
    revoked: Mutex<Vec<Partition>>,
}

impl ClientContext for RebalanceTracker {}

impl ConsumerContext for RebalanceTracker {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(list) = rebalance {
            let mut revoked = self.revoked.lock().unwrap();
            revoked.extend(list.elements().iter().map(|e| (e.topic().to_string(), e.partition())));
        }
    }
}

pub struct ClassicSource {
    consumer: Arc<StreamConsumer<RebalanceTracker>>,
    /// Per partition: offsets handed out and not yet acknowledged.
    in_flight: HashMap<Partition, BTreeSet<i64>>,
    /// Per partition: the offset after the highest one handed out.
    next_offset: HashMap<Partition, i64>,
    redeliver: VecDeque<ConsumedRecord>,
    /// Per partition: the last position committed, to skip no-op commits.
    committed: HashMap<Partition, i64>,
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
        let consumer: StreamConsumer<RebalanceTracker> =
            config.create_with_context(RebalanceTracker::default()).context("creating classic consumer")?;
        let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer.subscribe(&topics).context("subscribing")?;
        Ok(ClassicSource {
            consumer: Arc::new(consumer),
            in_flight: HashMap::new(),
            next_offset: HashMap::new(),
            redeliver: VecDeque::new(),
            committed: HashMap::new(),
            max_records,
            warned_missing_topic: None,
        })
    }

    /// Released records first, then whatever arrives within `timeout`.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedRecord>> {
        self.forget_revoked();
        let mut batch: Vec<ConsumedRecord> = self.redeliver.drain(..).collect();
        for record in &batch {
            self.track(record);
        }
        if !batch.is_empty() {
            return Ok(batch);
        }
        let deadline = tokio::time::Instant::now() + timeout;
        while batch.len() < self.max_records {
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
            self.track(&record);
            self.next_offset.insert((record.topic.clone(), record.partition), record.offset + 1);
            batch.push(record);
        }
        Ok(batch)
    }

    fn warn_missing_topic(&mut self, code: RDKafkaErrorCode) {
        let now = std::time::Instant::now();
        if self.warned_missing_topic.is_none_or(|at| now.duration_since(at) >= MISSING_TOPIC_WARNING_EVERY) {
            tracing::warn!(error = %code, "a subscribed topic does not exist yet; waiting for it");
            self.warned_missing_topic = Some(now);
        }
    }

    fn forget_revoked(&mut self) {
        let revoked = std::mem::take(&mut *self.consumer.context().revoked.lock().unwrap());
        for partition in revoked {
            tracing::debug!(topic = partition.0, partition = partition.1, "partition revoked");
            self.in_flight.remove(&partition);
            self.next_offset.remove(&partition);
            self.committed.remove(&partition);
            self.redeliver.retain(|r| (&r.topic, r.partition) != (&partition.0, partition.1));
        }
    }

    fn track(&mut self, record: &ConsumedRecord) {
        self.in_flight.entry((record.topic.clone(), record.partition)).or_default().insert(record.offset);
    }

    pub fn acknowledge(&mut self, record: &ConsumedRecord, ack: AckType) -> Result<()> {
        let partition = (record.topic.clone(), record.partition);
        let Some(pending) = self.in_flight.get_mut(&partition) else {
            bail!("{}-{}@{} is not in flight", record.topic, record.partition, record.offset);
        };
        if !pending.remove(&record.offset) {
            bail!("{}-{}@{} is not in flight", record.topic, record.partition, record.offset);
        }
        if ack == AckType::Release {
            let mut again = record.clone();
            again.delivery_count = again.delivery_count.saturating_add(1);
            self.redeliver.push_back(again);
        }
        Ok(())
    }

    /// Commits, per partition, the offset below which everything was
    /// acknowledged. Records still in flight (held by the sink, or released)
    /// keep it back, so a crash means their redelivery.
    pub async fn commit(&mut self) -> Result<()> {
        self.forget_revoked();
        let mut offsets = TopicPartitionList::new();
        let mut positions = Vec::new();
        for (partition, next) in &self.next_offset {
            let released = self.redeliver.iter().filter(|r| (&r.topic, r.partition) == (&partition.0, partition.1));
            let oldest_pending = self.in_flight.get(partition).and_then(|p| p.first().copied());
            let position = released.map(|r| r.offset).chain(oldest_pending).min().unwrap_or(*next);
            if self.committed.get(partition) != Some(&position) {
                offsets.add_partition_offset(&partition.0, partition.1, Offset::Offset(position))?;
                positions.push((partition.clone(), position));
            }
        }
        if positions.is_empty() {
            return Ok(());
        }
        let consumer = self.consumer.clone();
        tokio::task::spawn_blocking(move || consumer.commit(&offsets, CommitMode::Sync))
            .await?
            .context("committing offsets")?;
        self.committed.extend(positions);
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
