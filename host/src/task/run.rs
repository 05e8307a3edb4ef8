//! The sink task loop of KIP-1302: poll, convert, `put()`, acknowledge,
//! commit. A record is acknowledged only after the plugin gave its outcome
//! (or, if held, after a flush settled it), so a crash at any point means
//! redelivery, never loss.

use super::config::{ConnectorConfig, Tolerance};
use super::convert::to_sink_record;
use super::dead_letter::DeadLetterQueue;
use super::metrics::TaskMetrics;
use super::source::Source;
use crate::kafka::{AckType, ConsumedRecord};
use crate::runtime::bindings::{Outcome, TaskError};
use crate::runtime::{PluginError, PluginInstance};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How long one poll waits for records before the loop checks flushes and
/// stop requests again.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);
/// A held record is flushed when its acquisition lock has less than this left.
const LOCK_SAFETY_MARGIN: Duration = Duration::from_secs(5);

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskExit {
    Stopped,
    /// With the trace shown in the task's status.
    Failed(String),
}

/// A task failure on its way out of the loop.
struct Failure(String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

pub struct TaskLoop {
    pub(super) name: String,
    pub(super) config: Arc<ConnectorConfig>,
    pub(super) source: Source,
    /// `None` only while a call runs on the blocking pool.
    pub(super) plugin: Option<PluginInstance>,
    pub(super) dlq: Option<DeadLetterQueue>,
    pub(super) metrics: Arc<TaskMetrics>,
    /// Records given to the plugin and not yet acknowledged, by delivery id.
    pub(super) in_flight: HashMap<u64, ConsumedRecord>,
    /// Held records (a subset of `in_flight`), with when they were held.
    pub(super) held: BTreeMap<u64, Instant>,
    /// When a record first asked to be retried, for `errors.retry.timeout`.
    pub(super) first_retry: HashMap<(String, i32, i64), Instant>,
    pub(super) next_id: u64,
    pub(super) consecutive_retries: u32,
    /// While set, a plugin call still running when this is cancelled is
    /// interrupted: stopping does not wait out a stuck `put()`.
    pub(super) interrupt_on: Option<CancellationToken>,
}

impl TaskLoop {
    /// Runs until `stop` is cancelled or the task fails, then hands back
    /// every record it did not finish (RELEASE) and commits.
    pub async fn run(mut self, stop: CancellationToken) -> TaskExit {
        self.interrupt_on = Some(stop.clone());
        let exit = match self.iterate_until(&stop).await {
            Ok(()) => TaskExit::Stopped,
            Err(Failure(trace)) => TaskExit::Failed(trace),
        };
        self.interrupt_on = None;
        self.shut_down(exit == TaskExit::Stopped).await;
        exit
    }

    async fn iterate_until(&mut self, stop: &CancellationToken) -> Result<(), Failure> {
        loop {
            let polled = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                polled = self.source.poll(POLL_TIMEOUT) => polled?,
            };
            if !polled.is_empty() {
                self.metrics.polled.fetch_add(polled.len() as u64, Relaxed);
                self.deliver(polled).await?;
                if stop.is_cancelled() {
                    // Maybe interrupted mid-put; shutting down settles the rest.
                    return Ok(());
                }
            }
            self.flush_if_due(false).await?;
            self.commit().await;
            if self.consecutive_retries > 0 {
                // Pause consumption before the released records come back.
                let backoff = Duration::from_millis(100 << self.consecutive_retries.min(10))
                    .min(self.config.errors.retry_delay_max);
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = tokio::time::sleep(backoff) => {}
                }
            }
        }
    }

    /// One batch through `put()` and its outcomes.
    async fn deliver(&mut self, records: Vec<ConsumedRecord>) -> Result<(), Failure> {
        let mut ids = Vec::with_capacity(records.len());
        let mut batch = Vec::with_capacity(records.len());
        for record in records {
            let id = self.next_id;
            self.next_id += 1;
            batch.push(to_sink_record(id, &record));
            self.in_flight.insert(id, record);
            ids.push(id);
        }

        let started = Instant::now();
        let result = self.call(move |plugin| plugin.put(&batch)).await;
        let elapsed = started.elapsed();
        self.metrics.observe_put(elapsed, ids.len());
        self.warn_if_put_nears_lock(&ids, elapsed);

        match result {
            Ok(report) => {
                if report.outcomes.len() != ids.len() {
                    return Err(Failure(format!(
                        "plugin returned {} outcomes for a batch of {} records",
                        report.outcomes.len(),
                        ids.len()
                    )));
                }
                let mut any_retry = false;
                for (id, outcome) in ids.into_iter().zip(report.outcomes) {
                    any_retry |= matches!(outcome, Outcome::Retry(_));
                    self.settle(id, outcome).await?;
                }
                for settlement in report.settled {
                    self.settle_held(settlement.id, settlement.outcome).await?;
                }
                self.consecutive_retries = if any_retry { self.consecutive_retries + 1 } else { 0 };
                Ok(())
            }
            Err(PluginError::Task(TaskError::Retriable(reason))) => {
                tracing::warn!(task = self.name, %reason, "put failed, releasing the batch for retry");
                for id in ids {
                    self.settle(id, Outcome::Retry(reason.clone())).await?;
                }
                self.consecutive_retries += 1;
                Ok(())
            }
            // Stopping: the batch stays unacknowledged and is released on the way out.
            Err(PluginError::Interrupted) => Ok(()),
            Err(e) => Err(Failure(format!("put: {e}"))),
        }
    }

    /// Applies the plugin's word on one record.
    async fn settle(&mut self, id: u64, outcome: Outcome) -> Result<(), Failure> {
        match outcome {
            Outcome::Accept => {
                self.acknowledge(id, AckType::Accept);
                self.metrics.accepted.fetch_add(1, Relaxed);
            }
            Outcome::Hold => {
                self.held.entry(id).or_insert_with(Instant::now);
            }
            Outcome::Retry(reason) => {
                let Some(record) = self.in_flight.get(&id).cloned() else { return Ok(()) };
                if let Some(why) = self.retries_exhausted(&record) {
                    return self.reject(id, format!("{reason} ({why})")).await;
                }
                self.acknowledge(id, AckType::Release);
                self.metrics.released.fetch_add(1, Relaxed);
            }
            Outcome::Reject(reason) => self.reject(id, reason).await?,
        }
        Ok(())
    }

    /// A settlement of an earlier held record; unknown ids are the plugin's
    /// mistake and are ignored, "hold" keeps the record held.
    async fn settle_held(&mut self, id: u64, outcome: Outcome) -> Result<(), Failure> {
        if !self.held.contains_key(&id) {
            tracing::warn!(task = self.name, id, "plugin settled a record it did not hold");
            return Ok(());
        }
        if !matches!(outcome, Outcome::Hold) {
            self.held.remove(&id);
        }
        self.settle(id, outcome).await
    }

    fn retries_exhausted(&mut self, record: &ConsumedRecord) -> Option<String> {
        let policy = &self.config.errors;
        if record.lock_expires_at.is_some() && record.delivery_count >= policy.delivery_count_limit {
            return Some(format!("delivery {} of at most {}", record.delivery_count, policy.delivery_count_limit));
        }
        let key = (record.topic.clone(), record.partition, record.offset);
        let since = *self.first_retry.entry(key).or_insert_with(Instant::now);
        match policy.retry_timeout {
            Some(timeout) if since.elapsed() >= timeout => {
                Some(format!("retried for {} ms, errors.retry.timeout", since.elapsed().as_millis()))
            }
            _ => None,
        }
    }

    /// A record the plugin can never write: to the DLQ and REJECT under
    /// `errors.tolerance=all`, otherwise the task fails (and the record is
    /// released on the way out, not lost).
    async fn reject(&mut self, id: u64, reason: String) -> Result<(), Failure> {
        let Some(record) = self.in_flight.get(&id) else { return Ok(()) };
        let at = format!("{}-{}@{}", record.topic, record.partition, record.offset);
        if self.config.errors.tolerance == Tolerance::None {
            return Err(Failure(format!(
                "record {at} rejected by the plugin: {reason} (errors.tolerance=none; set errors.tolerance=all and \
                 errors.deadletterqueue.topic.name to route such records to a dead-letter queue)"
            )));
        }
        match &self.dlq {
            Some(dlq) => {
                dlq.send(record, &reason)
                    .await
                    .map_err(|e| Failure(format!("writing {at} to the dead-letter queue: {e}")))?;
                self.metrics.dead_lettered.fetch_add(1, Relaxed);
            }
            None => tracing::warn!(task = self.name, record = at, %reason, "record rejected (no dead-letter queue)"),
        }
        self.acknowledge(id, AckType::Reject);
        self.metrics.rejected.fetch_add(1, Relaxed);
        Ok(())
    }

    fn acknowledge(&mut self, id: u64, ack: AckType) {
        let Some(record) = self.in_flight.remove(&id) else { return };
        self.held.remove(&id);
        // Checked first: the key costs an allocation, and this runs per record.
        if ack != AckType::Release && !self.first_retry.is_empty() {
            self.first_retry.remove(&(record.topic.clone(), record.partition, record.offset));
        }
        if let Err(e) = self.source.acknowledge(&record, ack) {
            // No longer ours: the broker delivers it again, so nothing is lost.
            tracing::warn!(task = self.name, error = %e, "acknowledgement refused; the record will be redelivered");
            self.metrics.ack_refused.fetch_add(1, Relaxed);
        }
    }

    /// Asks the plugin to flush when a held record has waited a flush interval
    /// or its lock is about to run out (or the task is stopping).
    async fn flush_if_due(&mut self, stopping: bool) -> Result<(), Failure> {
        let Some(oldest) = self.held.values().min().copied() else { return Ok(()) };
        let lock_ending = self.held.keys().any(|id| {
            self.in_flight
                .get(id)
                .and_then(|r| r.lock_expires_at)
                .is_some_and(|expiry| expiry.saturating_duration_since(Instant::now()) < LOCK_SAFETY_MARGIN)
        });
        if !(stopping || lock_ending || oldest.elapsed() >= self.config.flush_interval) {
            return Ok(());
        }
        match self.call(|plugin| plugin.flush()).await {
            Ok(settlements) => {
                for s in settlements {
                    self.settle_held(s.id, s.outcome).await?;
                }
                Ok(())
            }
            Err(PluginError::Task(TaskError::Retriable(reason))) => {
                // Held records stay unacknowledged; if their locks run out they
                // are redelivered.
                tracing::warn!(task = self.name, %reason, "flush failed, will try again");
                Ok(())
            }
            Err(PluginError::Interrupted) => Ok(()),
            Err(e) => Err(Failure(format!("flush: {e}"))),
        }
    }

    async fn commit(&mut self) {
        if let Err(e) = self.source.commit().await {
            self.metrics.commit_failures.fetch_add(1, Relaxed);
            tracing::warn!(task = self.name, error = %e, "commit failed; uncommitted records will be redelivered");
        }
    }

    fn warn_if_put_nears_lock(&self, ids: &[u64], elapsed: Duration) {
        let remaining = ids
            .iter()
            .filter_map(|id| self.in_flight.get(id)?.lock_expires_at)
            .map(|expiry| expiry.saturating_duration_since(Instant::now()))
            .min();
        if let Some(remaining) = remaining
            && remaining < elapsed
        {
            tracing::warn!(
                task = self.name,
                put_ms = elapsed.as_millis() as u64,
                lock_left_ms = remaining.as_millis() as u64,
                "put() takes about as long as the acquisition lock; raise share.acquisition.lock.timeout.ms \
                 or lower batch.max.records"
            );
        }
    }

    /// Runs a plugin call on the blocking pool: wasm runs synchronously and
    /// may take up to its call timeout.
    async fn call<R: Send + 'static>(
        &mut self,
        f: impl FnOnce(&mut PluginInstance) -> Result<R, PluginError> + Send + 'static,
    ) -> Result<R, PluginError> {
        let mut plugin = self.plugin.take().ok_or(PluginError::Poisoned)?;
        let interrupter = plugin.interrupter();
        let mut call = tokio::task::spawn_blocking(move || {
            let result = f(&mut plugin);
            (plugin, result)
        });
        let joined = match self.interrupt_on.clone() {
            Some(stop) => tokio::select! {
                joined = &mut call => joined,
                _ = stop.cancelled() => {
                    interrupter.interrupt();
                    let joined = call.await;
                    // The call may have ended before the interrupt landed.
                    interrupter.clear();
                    joined
                }
            },
            None => call.await,
        };
        let (plugin, result) = joined.expect("a plugin call panicked in the host");
        self.metrics.plugin_memory_bytes.store(plugin.memory_bytes() as u64, Relaxed);
        self.plugin = Some(plugin);
        result
    }

    /// On a clean stop, flush first so held records can be accepted; then
    /// release everything unfinished, commit, stop the plugin, leave the group.
    async fn shut_down(mut self, clean: bool) {
        // An interrupted or failed instance cannot flush or stop any more.
        let clean = clean && self.plugin.as_ref().is_some_and(PluginInstance::is_usable);
        if clean && let Err(Failure(e)) = self.flush_if_due(true).await {
            tracing::warn!(task = self.name, error = e, "final flush failed");
        }
        let unfinished: Vec<u64> = self.in_flight.keys().copied().collect();
        for id in unfinished {
            self.acknowledge(id, AckType::Release);
        }
        self.commit().await;
        if let Err(e) = self.call(|plugin| plugin.stop()).await
            && clean
        {
            tracing::warn!(task = self.name, error = %e, "plugin stop failed");
        }
        if let Err(e) = self.source.close().await {
            tracing::warn!(task = self.name, error = %e, "closing the consumer failed");
        }
    }
}
