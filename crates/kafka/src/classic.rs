//! The classic consumer-group mode (rdkafka), with at-least-once commits: an
//! offset is committed only once every record below it was acknowledged.
//!
//! A classic group has no per-record acknowledgement, so this source emulates
//! one: RELEASE puts a record back into a local queue for redelivery, and the
//! committed position of a partition never passes its oldest record that is
//! still being processed. The task owns the set of those records
//! ([`Unfinished`]); this source asks it for the oldest per partition when
//! it polls and when it commits, and keeps only positions.
//!
//! Exactly-once (a transactional [`TargetCluster`]): positions are committed
//! in the target's transaction instead of the source group, read back from
//! the target when partitions are assigned, and rewound to the last commit
//! when a transaction aborts.

use super::share::TOPICS_REGEX_REFRESH;
use super::target::{TargetCluster, TxnOutcome, offset_list};
use super::{AckType, ConsumedRecord, TimestampType};
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, RebalanceProtocol, StreamConsumer,
};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A topic and a partition of it.
pub type Partition = (String, i32);

/// The records a task still works on (given to its sink, held, waiting for
/// a retry): the task owns that set, and the source asks it for the oldest
/// offset of a partition there, below which a commit must stay.
pub trait Unfinished: Sync {
    fn oldest(&self, topic: &str, partition: i32) -> Option<i64>;
}

/// Per partition, how far records were handed out and what may be
/// committed: the one owner of the source's positions, shared with the
/// rebalance callback.
#[derive(Default)]
struct Positions {
    /// The offset after the highest one handed out.
    next_offset: HashMap<Partition, i64>,
    /// What a rebalance may commit: the durable position when the current
    /// poll began (a rebalance runs inside a poll, where the task's records
    /// cannot be asked), or since raised by a commit. Never ahead of the
    /// true durable position, which only grows until a rewind.
    floor: HashMap<Partition, i64>,
    /// Released records, handed out again before anything new.
    redeliver: VecDeque<ConsumedRecord>,
    /// The last position committed, to skip no-op commits.
    committed: HashMap<Partition, i64>,
    /// Partitions the group took away, until the task took the list (its
    /// records of them are no longer its own).
    revoked: Vec<Partition>,
    /// Exactly-once: the first offset handed out per partition since it was
    /// assigned, where a rewind goes when nothing was committed yet.
    first_offset: HashMap<Partition, i64>,
    /// A failure inside a rebalance callback, reported by the next poll.
    failure: Option<String>,
    /// Exactly-once: a transaction aborted inside a rebalance callback; the
    /// partitions kept must go back to their last commit.
    rewind: Option<Rewind>,
}

impl Positions {
    /// The offset below which everything of `partition` was acknowledged:
    /// records the task still works on or released ones keep it back.
    fn durable(&self, partition: &Partition, unfinished: &dyn Unfinished) -> Option<i64> {
        let next = *self.next_offset.get(partition)?;
        let released = self.redeliver.iter().filter(|r| (&r.topic, r.partition) == (&partition.0, partition.1));
        let oldest = unfinished.oldest(&partition.0, partition.1);
        Some(released.map(|r| r.offset).chain(oldest).min().unwrap_or(next))
    }

    /// The durable position of every partition held.
    fn durables(&self, unfinished: &dyn Unfinished) -> Vec<(Partition, i64)> {
        self.next_offset.keys().filter_map(|p| Some((p.clone(), self.durable(p, unfinished)?))).collect()
    }

    /// The durable positions of every partition held that differ from the
    /// last commit.
    fn to_commit(&self, unfinished: &dyn Unfinished) -> Vec<(Partition, i64)> {
        self.changed(self.durables(unfinished))
    }

    /// What a rebalance commits of `partitions`: their floors, where they
    /// differ from the last commit.
    fn floors<'a>(&self, partitions: impl Iterator<Item = &'a Partition>) -> Vec<(Partition, i64)> {
        self.changed(partitions.filter_map(|p| Some((p.clone(), *self.floor.get(p)?))).collect())
    }

    fn changed(&self, positions: Vec<(Partition, i64)>) -> Vec<(Partition, i64)> {
        positions.into_iter().filter(|(p, position)| self.committed.get(p) != Some(position)).collect()
    }

    /// A commit of `position` went through (unless the partition was
    /// revoked meanwhile).
    fn mark_committed(&mut self, partition: Partition, position: i64) {
        if self.next_offset.contains_key(&partition) {
            self.floor.insert(partition.clone(), position);
            self.committed.insert(partition, position);
        }
    }

    /// The partition is no longer ours: its new owner starts from what was
    /// committed, so nothing of it may linger here.
    fn forget(&mut self, partition: &Partition) {
        self.next_offset.remove(partition);
        self.floor.remove(partition);
        self.committed.remove(partition);
        self.first_offset.remove(partition);
        self.redeliver.retain(|r| (&r.topic, r.partition) != (&partition.0, partition.1));
        self.revoked.push(partition.clone());
    }
}

/// Commits what is durable of the partitions the group takes away, the
/// moment it takes them (while this member may still commit for them), and
/// forgets them, so that nothing is committed later over the new owner.
#[derive(Default)]
struct RebalanceTracker {
    positions: Arc<Mutex<Positions>>,
    /// Exactly-once: where positions live.
    target: Option<Arc<TargetCluster>>,
    /// Exactly-once: how long reading them may take.
    patience: Duration,
}

impl ClientContext for RebalanceTracker {}

impl ConsumerContext for RebalanceTracker {
    /// Exactly-once: assigned partitions start where the target's group
    /// offsets say; the rest is rdkafka's own rebalance.
    fn rebalance(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr, tpl: &mut TopicPartitionList) {
        let assigning = err == RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS;
        let rebalance = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => Rebalance::Assign(tpl),
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => Rebalance::Revoke(tpl),
            other => Rebalance::Error(KafkaError::Rebalance(other.into())),
        };
        self.pre_rebalance(consumer, &rebalance);
        if matches!(rebalance, Rebalance::Error(_)) {
            return;
        }
        if assigning && let Some(target) = &self.target {
            self.position_from_target(target, tpl);
        }
        let cooperative = matches!(consumer.rebalance_protocol(), RebalanceProtocol::Cooperative);
        let done = match (assigning, cooperative) {
            (true, true) => consumer.incremental_assign(tpl),
            (true, false) => consumer.assign(tpl),
            (false, true) => consumer.incremental_unassign(tpl),
            (false, false) => consumer.unassign(),
        };
        if let Err(e) = done {
            self.positions.lock().unwrap().failure = Some(format!("rebalancing: {e}"));
        }
    }

    fn pre_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let Rebalance::Revoke(list) = rebalance else { return };
        let revoked: Vec<Partition> = list.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect();
        let mut positions = if let Some(target) = &self.target {
            // The new owner starts from the target's offsets: settle the
            // open transaction now. It holds records of every partition,
            // kept ones too, so it commits all their positions.
            let durable = {
                let positions = self.positions.lock().unwrap();
                positions.floors(positions.next_offset.keys())
            };
            let settled = settle_before_handing_over(target, &durable, self.patience);
            let mut positions = self.positions.lock().unwrap();
            match settled {
                Ok(TxnOutcome::Committed(offsets)) => {
                    for (partition, position) in offsets {
                        positions.mark_committed(partition, position);
                    }
                }
                Ok(TxnOutcome::Aborted(why)) => {
                    tracing::warn!(why, "transaction aborted at a rebalance");
                    positions.rewind = Some(Rewind { why, from_target: false });
                }
                Ok(TxnOutcome::Restarted(why)) => {
                    tracing::warn!(why, "producer replaced at a rebalance");
                    positions.rewind = Some(Rewind { why, from_target: true });
                }
                // Still unknown after waiting: the task fails rather than
                // hand over while the transaction may yet commit.
                Ok(TxnOutcome::Unresolved(why)) => {
                    positions.failure = Some(format!("a rebalance came while a transaction was unresolved: {why}"))
                }
                Err(e) => positions.failure = Some(format!("{e:#}")),
            }
            positions
        } else {
            let positions = self.positions.lock().unwrap();
            let durable = positions.floors(revoked.iter());
            let committed = match durable.is_empty() {
                true => Ok(()),
                false => offset_list(&durable)
                    .and_then(|l| consumer.commit(&l, CommitMode::Sync))
                    .map_err(anyhow::Error::from),
            };
            match committed {
                Ok(()) => tracing::debug!(partitions = durable.len(), "committed revoked partitions"),
                // The new owner starts from the previous commit: duplicates, no loss.
                Err(e) => tracing::warn!(error = format!("{e:#}"), "committing revoked partitions failed"),
            }
            positions
        };
        for partition in &revoked {
            positions.forget(partition);
        }
    }
}

/// Commits the open transaction with `durable` before the group hands its
/// partitions over. A commit or abort that timed out (the target is away,
/// restarting) is resumed until it resolves, for up to `patience` (most of
/// `max.poll.interval.ms`, which the group lets a member take to finish its
/// revocation): the new owner must not start from offsets that this
/// transaction may still move. Blocking.
fn settle_before_handing_over(
    target: &TargetCluster,
    durable: &[(Partition, i64)],
    patience: Duration,
) -> Result<TxnOutcome> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        match target.commit_transaction(durable)? {
            TxnOutcome::Unresolved(why) if std::time::Instant::now() < deadline => {
                tracing::warn!(why, "a rebalance waits for the unresolved transaction before it hands partitions over");
                std::thread::sleep(Duration::from_millis(500));
            }
            outcome => return Ok(outcome),
        }
    }
}

impl RebalanceTracker {
    fn position_from_target(&self, target: &TargetCluster, tpl: &mut TopicPartitionList) {
        let partitions: Vec<Partition> =
            tpl.elements().iter().map(|e| (e.topic().to_string(), e.partition())).collect();
        match target.committed(&partitions, self.patience) {
            Ok(committed) => {
                for ((topic, partition), offset) in committed {
                    if let Some(offset) = offset
                        && let Err(e) = tpl.set_partition_offset(&topic, partition, Offset::Offset(offset))
                    {
                        tracing::warn!(topic, partition, error = %e, "could not position a partition");
                    }
                }
            }
            Err(e) => {
                self.positions.lock().unwrap().failure =
                    Some(format!("reading the committed offsets from the exactly-once target: {e:#}"))
            }
        }
    }
}

/// How long a task waits for the exactly-once target's positions (the
/// target away, restarting) before it fails: most of the member's
/// `max.poll.interval.ms`, which the group waits for it anyway.
fn positions_patience(config: &ClientConfig) -> Duration {
    let interval_ms = config.get("max.poll.interval.ms").and_then(|v| v.parse().ok()).unwrap_or(300_000);
    Duration::from_millis(interval_ms) * 3 / 4
}

/// Where an exactly-once rewind goes back to.
#[derive(Debug)]
struct Rewind {
    why: String,
    /// The last commit as the target has it (the producer was replaced, so
    /// what it last committed is not known here), or as this task knows it.
    from_target: bool,
}

/// What a commit came to.
#[derive(Debug, PartialEq)]
pub enum Committed {
    Done,
    /// Exactly-once: the transaction aborted, and the source went back to
    /// the last commit; every record handed out since comes again.
    Rewound(String),
    /// Exactly-once: the producer can go no further (fenced by a newer
    /// instance of the task): the task must end.
    Ended(String),
}

pub struct ClassicSource {
    consumer: Arc<StreamConsumer<RebalanceTracker>>,
    positions: Arc<Mutex<Positions>>,
    max_records: usize,
    /// When we last warned that a subscribed topic does not exist.
    warned_missing_topic: Option<std::time::Instant>,
    /// Exactly-once: the transactional target that keeps the positions.
    target: Option<Arc<TargetCluster>>,
}

/// How often a missing topic is warned about while waiting for it.
const MISSING_TOPIC_WARNING_EVERY: Duration = Duration::from_secs(30);

impl ClassicSource {
    /// Joins `group_id` and subscribes to `topics`, or with `topics_regex`
    /// to every topic whose whole name matches it. `overrides` are
    /// `consumer.override.*` keys with the prefix removed, passed to
    /// librdkafka as they are.
    pub fn new(
        bootstrap: &str,
        group_id: &str,
        topics: &[String],
        topics_regex: Option<&str>,
        overrides: &[(String, String)],
        max_records: usize,
        target: Option<Arc<TargetCluster>>,
    ) -> Result<Self> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("group.id", group_id)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest");
        if topics_regex.is_some() {
            // How soon a new matching topic is found: as in a share group,
            // unless the connector overrides it.
            config.set("topic.metadata.refresh.interval.ms", TOPICS_REGEX_REFRESH.as_millis().to_string());
        }
        for (k, v) in overrides {
            config.set(k, v);
        }
        let patience = positions_patience(&config);
        let context = RebalanceTracker { target: target.clone(), patience, ..Default::default() };
        let positions = context.positions.clone();
        let consumer: StreamConsumer<RebalanceTracker> =
            config.create_with_context(context).context("creating classic consumer")?;
        // librdkafka subscribes by pattern to a name starting with ^. It
        // matches with POSIX extended regex, which has no (?:...): the group
        // that anchors the pattern is a capturing one.
        let pattern = topics_regex.map(|regex| format!("^({regex})$"));
        let topics: Vec<&str> = match &pattern {
            Some(pattern) => vec![pattern.as_str()],
            None => topics.iter().map(String::as_str).collect(),
        };
        consumer.subscribe(&topics).context("subscribing")?;
        Ok(ClassicSource { consumer: Arc::new(consumer), positions, max_records, warned_missing_topic: None, target })
    }

    /// Whether records go through a transaction with their offsets.
    pub fn is_exactly_once(&self) -> bool {
        self.target.is_some()
    }

    /// Released records first, then whatever arrives within `timeout`.
    /// `unfinished` are the task's records, which keep back what a
    /// rebalance during this poll may commit.
    pub async fn poll(&mut self, timeout: Duration, unfinished: &dyn Unfinished) -> Result<Vec<ConsumedRecord>> {
        let mut revoked_seen = {
            let mut positions = self.positions.lock().unwrap();
            if let Some(failure) = positions.failure.take() {
                bail!("{failure}");
            }
            let batch: Vec<ConsumedRecord> = positions.redeliver.drain(..).collect();
            if !batch.is_empty() {
                return Ok(batch);
            }
            let floors = positions.durables(unfinished);
            positions.floor.extend(floors);
            positions.revoked.len()
        };
        let mut batch = Vec::new();
        let deadline = tokio::time::Instant::now() + timeout;
        while batch.len() < self.max_records {
            // A rebalance runs inside recv(): what it revokes is forgotten
            // there, and the records of it received before are dropped
            // below; the new owner gets them from the last commit.
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
                Err(KafkaError::MessageConsumption(RDKafkaErrorCode::PollExceeded)) => {
                    // A put outlasted max.poll.interval.ms: the group took
                    // the partitions away (forgotten in the rebalance) and
                    // this consumer joins again on its next poll, as a Java
                    // consumer does.
                    tracing::warn!(
                        "longer than consumer.override.max.poll.interval.ms between polls (a slow put): the group \
                         rebalanced; joining again"
                    );
                    break;
                }
                other => other.context("consuming")?,
            };
            let record = convert(&message);
            let mut positions = self.positions.lock().unwrap();
            if positions.revoked.len() > revoked_seen {
                let revoked = &positions.revoked[revoked_seen..];
                batch.retain(|r: &ConsumedRecord| !revoked.iter().any(|(t, p)| (t, *p) == (&r.topic, r.partition)));
                revoked_seen = positions.revoked.len();
            }
            let partition = (record.topic.clone(), record.partition);
            positions.first_offset.entry(partition.clone()).or_insert(record.offset);
            positions.next_offset.insert(partition, record.offset + 1);
            batch.push(record);
        }
        let positions = self.positions.lock().unwrap();
        if positions.revoked.len() > revoked_seen {
            let revoked = &positions.revoked[revoked_seen..];
            batch.retain(|r| !revoked.iter().any(|(t, p)| (t, *p) == (&r.topic, r.partition)));
        }
        Ok(batch)
    }

    /// Partitions the group took away since the last call: the task's
    /// records of them are no longer its own.
    pub fn take_revoked(&mut self) -> Vec<Partition> {
        std::mem::take(&mut self.positions.lock().unwrap().revoked)
    }

    fn warn_missing_topic(&mut self, code: RDKafkaErrorCode) {
        let now = std::time::Instant::now();
        if self.warned_missing_topic.is_none_or(|at| now.duration_since(at) >= MISSING_TOPIC_WARNING_EVERY) {
            tracing::warn!(error = %code, "a subscribed topic does not exist yet; waiting for it");
            self.warned_missing_topic = Some(now);
        }
    }

    /// The task settled a record: a released one is handed out again; the
    /// others leave the task's set, which moves the durable position.
    pub fn acknowledge(&mut self, record: &ConsumedRecord, ack: AckType) -> Result<()> {
        let mut positions = self.positions.lock().unwrap();
        if !positions.next_offset.contains_key(&(record.topic.clone(), record.partition)) {
            // The task forgets such records when it takes the revoked
            // partitions; this guards the redelivery queue all the same.
            bail!(
                "{}-{}@{} is no longer this task's (its partition was revoked)",
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
    /// acknowledged. The task's `unfinished` records (held by the sink,
    /// retried) and released ones keep it back, so a crash means their
    /// redelivery.
    pub async fn commit(&mut self, unfinished: &dyn Unfinished) -> Result<Committed> {
        let (positions, rewind) = {
            let mut positions = self.positions.lock().unwrap();
            (positions.to_commit(unfinished), positions.rewind.take())
        };
        if let Some(rewind) = rewind {
            return self.rewind(rewind).await;
        }
        if let Some(target) = self.target.clone() {
            return self.commit_transaction(target, positions).await;
        }
        if positions.is_empty() {
            return Ok(Committed::Done);
        }
        let offsets = offset_list(&positions)?;
        let consumer = self.consumer.clone();
        tokio::task::spawn_blocking(move || consumer.commit(&offsets, CommitMode::Sync))
            .await?
            .context("committing offsets")?;
        let mut current = self.positions.lock().unwrap();
        for (partition, position) in positions {
            current.mark_committed(partition, position);
        }
        Ok(Committed::Done)
    }

    /// Exactly-once: commits the open transaction with `positions`, or, if
    /// it aborts, rewinds every partition to its last commit. An error means
    /// the producer can go no further (fenced): the task must end.
    async fn commit_transaction(
        &mut self,
        target: Arc<TargetCluster>,
        positions: Vec<(Partition, i64)>,
    ) -> Result<Committed> {
        let outcome = tokio::task::spawn_blocking(move || target.commit_transaction(&positions)).await??;
        match outcome {
            TxnOutcome::Committed(offsets) => {
                let mut current = self.positions.lock().unwrap();
                for (partition, position) in offsets {
                    current.mark_committed(partition, position);
                }
                Ok(Committed::Done)
            }
            TxnOutcome::Aborted(why) => self.rewind(Rewind { why, from_target: false }).await,
            TxnOutcome::Restarted(why) => self.rewind(Rewind { why, from_target: true }).await,
            // Nothing moves until it resolves: sends are refused meanwhile,
            // so the records come back released and wait.
            TxnOutcome::Unresolved(why) => {
                tracing::warn!(why, "the transaction is unresolved (is the target reachable?)");
                Ok(Committed::Done)
            }
        }
    }

    /// Exactly-once, after an abort: every partition goes back to its last
    /// commit, and everything handed out since is forgotten.
    async fn rewind(&mut self, Rewind { why, from_target }: Rewind) -> Result<Committed> {
        if from_target && let Some(target) = self.target.clone() {
            let held: Vec<Partition> = self.positions.lock().unwrap().next_offset.keys().cloned().collect();
            let patience = self.consumer.context().patience;
            let committed = tokio::task::spawn_blocking(move || target.committed(&held, patience)).await??;
            let mut current = self.positions.lock().unwrap();
            for (partition, offset) in committed {
                let known = current.committed.get(&partition).copied();
                if offset != known {
                    // Ahead: a commit this task could not confirm went through.
                    tracing::warn!(
                        topic = partition.0,
                        partition = partition.1,
                        target = ?offset,
                        last_confirmed = ?known,
                        "the target's committed offset differs from the last commit this task confirmed; rewinding to the target's"
                    );
                }
                match offset {
                    Some(offset) => current.committed.insert(partition, offset),
                    None => current.committed.remove(&partition),
                };
            }
        }
        let mut current = self.positions.lock().unwrap();
        let rewind: Vec<(Partition, i64)> = current
            .next_offset
            .keys()
            .filter_map(|p| Some((p.clone(), *current.committed.get(p).or(current.first_offset.get(p))?)))
            .collect();
        for ((topic, partition), offset) in &rewind {
            self.consumer
                .seek(topic, *partition, Offset::Offset(*offset), Duration::from_secs(10))
                .with_context(|| format!("rewinding {topic}-{partition} to {offset}"))?;
        }
        current.floor.clear();
        current.redeliver.clear();
        current.next_offset.clear();
        current.first_offset.clear();
        Ok(Committed::Rewound(why))
    }

    /// Commits, then leaves the group at once, so that a stopped connector's
    /// group is empty now rather than after the session timeout.
    pub async fn close(mut self, unfinished: &dyn Unfinished) -> Result<()> {
        let committed = self.commit(unfinished).await;
        self.consumer.unsubscribe();
        committed.map(|_| ())
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
        undecodable: None,
    }
}
