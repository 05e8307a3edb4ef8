//! KIP-1222 on the task's side: on a broker that renews locks (Kafka 4.2+),
//! the locks of records the plugin holds or a retry keeps are renewed
//! before they run out, so that such records are flushed on their own
//! schedule and put again after their backoff, instead of being flushed
//! early or released (which costs a delivery).

use super::{LOCK_SAFETY_MARGIN, TaskLoop};
use crate::in_flight::Stage;
use spillway_kafka::share::TopicPartition;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// A lock with less than this left is renewed: early enough that the flush
/// or hand-back at `LOCK_SAFETY_MARGIN` never comes first. (A group whose
/// locks are shorter than this has them renewed on every turn of the loop.)
const RENEW_WHEN_LEFT: Duration = LOCK_SAFETY_MARGIN.saturating_mul(2);

impl TaskLoop {
    pub(super) async fn renew_locks(&mut self) {
        if !(self.records.is_holding() || self.records.is_retrying()) || !self.source.renews_locks() {
            return;
        }
        let now = Instant::now();
        let source = &self.source;
        let due: Vec<(TopicPartition, i64, u16)> = self
            .records
            .iter()
            .filter(|(_, t)| !matches!(t.stage, Stage::Delivered))
            .map(|(_, t)| &t.record)
            // A lock that ran out is not ours to renew: the broker may have
            // handed the record to us again, as another delivery.
            .filter(|r| source.lock_left(r, now).is_some_and(|left| !left.is_zero() && left < RENEW_WHEN_LEFT))
            .map(|r| (TopicPartition::new(&r.topic, r.partition), r.offset, r.delivery_count))
            .collect();
        if due.is_empty() {
            return;
        }
        let renewed = self.source.renew(&due).await;
        self.metrics.renewed.fetch_add(renewed as u64, Relaxed);
        if renewed < due.len() {
            // Those keep their locks: flushed or handed back before they run out.
            tracing::warn!(task = self.name, asked = due.len(), renewed, "some locks were not renewed");
        }
    }
}
