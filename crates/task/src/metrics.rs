//! Per-task counters, read by the run summary and `GET /metrics`.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// The topics a connector's tasks consumed records of, shared by them
/// (KIP-558's active topics, `GET /connectors/{name}/topics`).
pub type ActiveTopics = Arc<Mutex<BTreeSet<String>>>;

/// Upper bounds, in seconds, of the put-latency histogram's buckets.
pub const PUT_LATENCY_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

#[derive(Default, Debug)]
pub struct TaskMetrics {
    /// Polls that returned, with records or without.
    pub polls: AtomicU64,
    /// When the first record arrived.
    pub first_delivery: OnceLock<std::time::Instant>,
    pub polled: AtomicU64,
    pub put: AtomicU64,
    pub accepted: AtomicU64,
    pub released: AtomicU64,
    /// Share groups: lock renewals (KIP-1222), one per record renewed.
    pub renewed: AtomicU64,
    pub rejected: AtomicU64,
    pub dead_lettered: AtomicU64,
    /// Acknowledgements the consumer refused (lock expired, partition
    /// revoked): those records are redelivered.
    pub ack_refused: AtomicU64,
    pub commit_failures: AtomicU64,
    /// Exactly-once transactions aborted (and consumed again).
    pub transactions_aborted: AtomicU64,
    /// Records put again after `put()` asked for a retry (kept by the task,
    /// not released).
    pub retried: AtomicU64,
    /// Share groups: records the broker archives unwritten (rejected without
    /// a dead-letter queue, or released on their last delivery).
    pub archived: AtomicU64,
    /// Share groups: records a broker sent again while the task held them,
    /// not handed to the plugin twice.
    pub resent_while_held: AtomicU64,
    /// Batches fetched while `put()` ran (the plugin was the slower side).
    pub fetched_during_put: AtomicU64,
    /// Classic groups: records of partitions revoked while the task had
    /// them, forgotten (their new owner delivers them again).
    pub forgotten_at_rebalance: AtomicU64,
    /// Records a transform dropped (Filter, or a tombstone Debezium's
    /// ExtractNewRecordState drops): done without reaching the plugin.
    pub dropped_by_transforms: AtomicU64,
    /// Flushes the host asked for, by [`FlushCause`].
    pub flushes: [AtomicU64; FlushCause::ALL.len()],
    /// Share groups: the broker's delivery rules as the task found them.
    pub share_delivery: OnceLock<ShareDelivery>,
    /// Set once the task started.
    pub delivery_guarantee: OnceLock<DeliveryGuarantee>,
    pub plugin_memory_bytes: AtomicU64,
    /// Records taken and not acknowledged yet, as of the loop's last turn.
    pub in_flight: AtomicU64,
    /// Cumulative counts per bucket of `PUT_LATENCY_BUCKETS` (plus +Inf).
    pub put_latency_buckets: [AtomicU64; PUT_LATENCY_BUCKETS.len() + 1],
    pub put_latency_sum_micros: AtomicU64,
    pub put_calls: AtomicU64,
    /// The connector's, where this task adds the topics of what it polls.
    pub active_topics: ActiveTopics,
}

/// What a task promises about each record reaching its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryGuarantee {
    /// A classic group through an exactly-once kafka grant: output and
    /// source offsets commit in one transaction.
    ExactlyOnce,
    /// Every other task: a record may be written again after a crash.
    /// Share groups are always here: their acknowledgements cannot join a
    /// Kafka transaction (KIP-1289 is a proposal, not adopted).
    AtLeastOnce,
}

/// How a share-group task treats a record's deliveries, for its status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShareDelivery {
    /// The broker archives a record after this many deliveries; the task
    /// rejects a still-failing record on its last one instead (to the DLQ).
    pub delivery_count_limit: u16,
    /// Where the limit came from (the group's config, the broker's, or
    /// Kafka's default when the broker does not say).
    pub limit_source: String,
    /// The group's configs as the broker has them after the task joined:
    /// those the connector set (`share.*`), read back, and the broker's
    /// defaults for the rest.
    #[serde(default)]
    pub group_configs: BTreeMap<String, String>,
    /// What happens to the locks of records held or retried for long.
    pub locks: String,
    /// Whether the broker renews them (KIP-1222, Kafka 4.2+).
    #[serde(default)]
    pub renews_locks: bool,
}

/// Why the host asked the plugin to flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushCause {
    /// A held record waited `flush.interval.ms`.
    Timer,
    /// The broker handed out nothing new while records were held: its
    /// in-flight cap (`group.share.partition.max.record.locks`), or the end
    /// of the log.
    Cap,
    /// A held record's acquisition lock was about to run out.
    Lock,
    /// The task is stopping.
    Stop,
    /// The task's plugin is being swapped for another version.
    Swap,
    /// A share group moved a partition of held records to another member.
    Rebalance,
}

impl FlushCause {
    pub const ALL: [FlushCause; 6] = [
        FlushCause::Timer,
        FlushCause::Cap,
        FlushCause::Lock,
        FlushCause::Stop,
        FlushCause::Swap,
        FlushCause::Rebalance,
    ];

    pub fn label(self) -> &'static str {
        match self {
            FlushCause::Timer => "timer",
            FlushCause::Cap => "cap",
            FlushCause::Lock => "lock",
            FlushCause::Stop => "stop",
            FlushCause::Swap => "swap",
            FlushCause::Rebalance => "rebalance",
        }
    }
}

impl TaskMetrics {
    pub fn count_flush(&self, cause: FlushCause) {
        self.flushes[cause as usize].fetch_add(1, Relaxed);
    }

    pub fn flushes(&self, cause: FlushCause) -> u64 {
        self.flushes[cause as usize].load(Relaxed)
    }

    pub fn observe_put(&self, elapsed: Duration, records: usize) {
        self.put.fetch_add(records as u64, Relaxed);
        self.put_calls.fetch_add(1, Relaxed);
        self.put_latency_sum_micros.fetch_add(elapsed.as_micros() as u64, Relaxed);
        let secs = elapsed.as_secs_f64();
        let bucket = PUT_LATENCY_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(PUT_LATENCY_BUCKETS.len());
        self.put_latency_buckets[bucket].fetch_add(1, Relaxed);
    }

    /// Records acknowledged in any way (accepted, or rejected after the DLQ).
    pub fn acknowledged(&self) -> u64 {
        self.accepted.load(Relaxed) + self.rejected.load(Relaxed)
    }
}
