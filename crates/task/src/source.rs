//! Where a task's records come from: a share group or a classic group, behind
//! one face of poll, acknowledge and commit.

use anyhow::{Result, bail};
pub use spillway_kafka::classic::Committed;
use spillway_kafka::classic::{ClassicSource, Partition, Unfinished};
use spillway_kafka::share::{ShareConsumer, TopicPartition};
use spillway_kafka::{AckType, ConsumedRecord};
use std::time::{Duration, Instant};

pub enum Source {
    Share(Box<ShareConsumer>),
    Classic(ClassicSource),
}

impl Source {
    /// `unfinished`, the task's records, keep a classic group's commits
    /// back (a share group acknowledges record by record).
    pub async fn poll(&mut self, timeout: Duration, unfinished: &dyn Unfinished) -> Result<Vec<ConsumedRecord>> {
        match self {
            Source::Share(s) => Ok(s.poll(timeout).await?),
            Source::Classic(s) => s.poll(timeout, unfinished).await,
        }
    }

    /// Classic groups: partitions the group took away since the last call,
    /// whose records the task must forget (their new owner starts from the
    /// last commit). A share group's broker settles a moved partition's
    /// records itself ([`Source::revoked_with_records`]).
    pub fn take_revoked(&mut self) -> Vec<Partition> {
        match self {
            Source::Share(_) => Vec::new(),
            Source::Classic(s) => s.take_revoked(),
        }
    }

    /// Whether the plugin's output and the source positions commit as one
    /// transaction. Then nothing is fetched while `put` runs: a rebalance
    /// inside a fetch commits the transaction.
    pub fn is_exactly_once(&self) -> bool {
        matches!(self, Source::Classic(s) if s.is_exactly_once())
    }

    /// Whether the broker stops handing out records while too many are in
    /// flight (a share group's `group.share.partition.max.record.locks`),
    /// so that a sink holding records must flush when fetches come back
    /// empty. A classic group has no such cap.
    pub fn caps_records_in_flight(&self) -> bool {
        matches!(self, Source::Share(_))
    }

    /// Share groups: partitions moved to another member while the task holds
    /// records of them, which it should settle now. A classic group
    /// commits what it can of a revoked partition in its rebalance callback.
    pub fn revoked_with_records(&self) -> Vec<TopicPartition> {
        match self {
            Source::Share(s) => s.revoked_with_records(),
            Source::Classic(_) => Vec::new(),
        }
    }

    /// Share groups: records a broker sent again while we held them, which
    /// were not handed on (librdkafka's mock repeats held records).
    pub fn resent_while_held(&self) -> u64 {
        match self {
            Source::Share(s) => s.resent_while_held(),
            Source::Classic(_) => 0,
        }
    }

    /// Share groups on Kafka 4.2+: the broker renews acquisition locks (KIP-1222).
    pub fn renews_locks(&self) -> bool {
        matches!(self, Source::Share(s) if s.renews_locks())
    }

    /// Restarts the locks of records (offset, delivery count) the task still
    /// works on; returns how many were renewed.
    pub async fn renew(&mut self, records: &[(TopicPartition, i64, u16)]) -> usize {
        match self {
            Source::Share(s) => s.renew(records).await,
            Source::Classic(_) => 0,
        }
    }

    /// When the acquisition locks of `records` run out, in their order,
    /// renewals counted; `None` under a classic group, where nothing
    /// expires. The share consumer keeps them: the task keeps no copy to
    /// fall out of step. A record it no longer holds (acknowledged, its
    /// session lost, delivered again since) has run out by `now`.
    pub fn lock_expiries(&self, records: &[&ConsumedRecord], now: Instant) -> Vec<Option<Instant>> {
        match self {
            Source::Share(s) => {
                s.lock_expiries(records.iter().copied()).into_iter().map(|e| Some(e.unwrap_or(now))).collect()
            }
            Source::Classic(_) => vec![None; records.len()],
        }
    }

    /// Time left on the record's lock; `None` under a classic group.
    pub fn lock_left(&self, record: &ConsumedRecord, now: Instant) -> Option<Duration> {
        self.lock_expiries(&[record], now).pop().flatten().map(|at| at.saturating_duration_since(now))
    }

    /// Refused when the record is no longer ours (its lock expired, its
    /// partition moved): the broker will deliver it again.
    pub fn acknowledge(&mut self, record: &ConsumedRecord, ack: AckType) -> Result<()> {
        match self {
            Source::Share(s) => Ok(s.acknowledge(&record.topic, record.partition, record.offset, ack)?),
            Source::Classic(s) => s.acknowledge(record, ack),
        }
    }

    /// Share groups: `commitSync`, which fails if any partition's
    /// acknowledgements did not take effect. Classic: commits offsets, or,
    /// exactly-once, the transaction with them.
    pub async fn commit(&mut self, unfinished: &dyn Unfinished) -> Result<Committed> {
        match self {
            Source::Share(s) => {
                let result = s.commit_sync().await?;
                let failures = result.failures();
                if !failures.is_empty() {
                    let list: Vec<String> = failures.iter().map(|(tp, f)| format!("{tp}: {f:?}")).collect();
                    bail!("acknowledgements failed for {}", list.join(", "));
                }
                Ok(Committed::Done)
            }
            Source::Classic(s) if s.is_exactly_once() => {
                Ok(s.commit(unfinished).await.unwrap_or_else(|e| Committed::Ended(format!("{e:#}"))))
            }
            Source::Classic(s) => s.commit(unfinished).await,
        }
    }

    /// Leaves the group; a share consumer releases whatever it still holds.
    pub async fn close(self, unfinished: &dyn Unfinished) -> Result<()> {
        match self {
            Source::Share(s) => Ok(s.close().await?),
            Source::Classic(s) => s.close(unfinished).await,
        }
    }
}
