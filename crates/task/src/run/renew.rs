//! KIP-1222 on the task's side: on a broker that renews locks (Kafka 4.2+),
//! the locks of records the plugin holds or a retry keeps are renewed
//! before they run out, so that such records are flushed on their own
//! schedule and put again after their backoff, instead of being flushed
//! early or released (which costs a delivery). So are those of a batch
//! whose `put()` outlasts its locks.

use super::{LOCK_SAFETY_MARGIN, TaskLoop};
use crate::in_flight::{InFlight, Stage};
use crate::metrics::TaskMetrics;
use crate::source::Source;
use spillway_kafka::ConsumedRecord;
use spillway_kafka::share::TopicPartition;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A lock with less than this left is renewed: early enough that the flush
/// or hand-back at `LOCK_SAFETY_MARGIN` never comes first. (A group whose
/// locks are shorter than this has them renewed on every turn of the loop.)
const RENEW_WHEN_LEFT: Duration = LOCK_SAFETY_MARGIN.saturating_mul(2);

/// While a long `put()` runs, the shortest wait between two renewals (some
/// locks may refuse renewal, and stay due).
const RENEW_PAUSE: Duration = Duration::from_secs(1);

impl TaskLoop {
    /// Renews the records held or kept for a retry whose locks near their end.
    pub(super) async fn renew_locks(&mut self) {
        if !(self.records.is_holding() || self.records.is_retrying()) || !self.source.renews_locks() {
            return;
        }
        let waiting = self.records.iter().filter(|(_, t)| !matches!(t.stage, Stage::Delivered)).map(|(_, t)| &t.record);
        let due = due(&self.source, waiting, Instant::now());
        renew(&mut self.source, due, &self.metrics, &self.name).await;
    }

    /// When to first look for locks to renew during a `put()` whose batch's
    /// soonest lock runs out at `soonest`: `None` when the broker renews
    /// none. Records held from earlier batches may come due at any time, so
    /// with those the look comes after a pause (a shorter put costs nothing).
    pub(super) fn first_renewal_during_put(&self, soonest: Option<Instant>) -> Option<Instant> {
        let soonest = soonest.filter(|_| self.source.renews_locks())?;
        let batch = soonest.checked_sub(RENEW_WHEN_LEFT).unwrap_or(soonest);
        Some(match self.records.is_holding() || self.records.is_retrying() {
            true => batch.min(Instant::now() + RENEW_PAUSE),
            false => batch,
        })
    }
}

/// Beside a `put()`, until `done`: renews the locks of every record in the
/// task (the batch being put, those held from earlier ones, those kept for
/// a retry) and of the next batch fetched meanwhile (`fetched`) as they
/// near their end, looking first at `wake` (a put that outlasts a lock
/// would otherwise lose its records to another member, and their outcomes
/// would be refused). The broker must renew locks.
pub(super) async fn during_put(
    source: &mut Source,
    records: &InFlight,
    fetched: &[ConsumedRecord],
    mut wake: Instant,
    metrics: &TaskMetrics,
    task: &str,
    done: &CancellationToken,
) {
    loop {
        tokio::select! {
            // Once the put is over, no renewal starts.
            biased;
            _ = done.cancelled() => return,
            _ = tokio::time::sleep_until(wake.into()) => {}
        }
        // A renewal under way is waited for even when `put()` ends: cut off
        // halfway, it would leave the share session's epoch unknown.
        let all = || records.iter().map(|(_, t)| &t.record).chain(fetched);
        let due = due(source, all(), Instant::now());
        renew(source, due, metrics, task).await;
        let all: Vec<&ConsumedRecord> = all().collect();
        let now = Instant::now();
        let Some(next) = source.lock_expiries(&all, now).into_iter().flatten().filter(|at| *at > now).min() else {
            return;
        };
        wake = next.checked_sub(RENEW_WHEN_LEFT).unwrap_or(next).max(now + RENEW_PAUSE);
    }
}

/// Of `records`, those whose locks run out soon but have not yet: a lock
/// that ran out is not ours to renew, as the broker may have handed the
/// record to us again, as another delivery.
fn due<'a>(
    source: &Source,
    records: impl Iterator<Item = &'a ConsumedRecord>,
    now: Instant,
) -> Vec<(TopicPartition, i64, u16)> {
    let records: Vec<&ConsumedRecord> = records.collect();
    let locks = source.lock_expiries(&records, now);
    records
        .into_iter()
        .zip(locks)
        .filter(|(_, lock)| lock.is_some_and(|at| at > now && at - now < RENEW_WHEN_LEFT))
        .map(|(r, _)| (TopicPartition::new(&r.topic, r.partition), r.offset, r.delivery_count))
        .collect()
}

async fn renew(source: &mut Source, due: Vec<(TopicPartition, i64, u16)>, metrics: &TaskMetrics, task: &str) {
    if due.is_empty() {
        return;
    }
    let renewed = source.renew(&due).await;
    metrics.renewed.fetch_add(renewed as u64, Relaxed);
    if renewed < due.len() {
        // Those keep their locks: flushed or handed back before they run out.
        tracing::warn!(task, asked = due.len(), renewed, "some locks were not renewed");
    }
}
