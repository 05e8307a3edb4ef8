//! The sink task loop of KIP-1302: poll, convert, `put()`, acknowledge,
//! commit. A record is acknowledged only after the plugin gave its outcome
//! (or, if held, after a flush settled it), so a crash at any point means
//! redelivery, never loss.
//!
//! The next batch is fetched while `put()` runs, when `put()` is slower than
//! a fetch. A batch that fails in a way that may pass is kept and put again
//! after a backoff, as Connect retries, and handed back to the broker
//! (RELEASE, which costs a delivery) only when its locks are about to run
//! out; on Kafka 4.2+ they are renewed instead (KIP-1222, [`renew`]).

mod admit;
mod renew;
mod swap;

pub use swap::{Swap, Swapped};

use super::convert::to_batch;
use super::converters::Converting;
use super::dead_letter::{DeadLetterQueue, Stage as ErrorStage};
use super::in_flight::{InFlight, Stage, Tracked};
use super::metrics::{FlushCause, TaskMetrics};
use super::source::{Committed, Source};
use super::transforms::Transforms;
use spillway_connector::{ConnectorConfig, Tolerance};
use spillway_kafka::{AckType, ConsumedRecord};
use spillway_runtime::batch::{FlushScope, Outcome, PutReport, RecordBatch, Settlement, TaskError};
use spillway_runtime::{PluginError, PluginInstance};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long one poll waits for records before the loop checks flushes and
/// stop requests again.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);
/// A held or retried record is flushed or handed back when its acquisition
/// lock has less than this left.
const LOCK_SAFETY_MARGIN: Duration = Duration::from_secs(5);
/// Acknowledgements ride on the next fetch; commits that report on them (and
/// classic offset commits) happen when the loop idles, and at least this often.
const COMMIT_INTERVAL: Duration = Duration::from_secs(1);
/// Once it has had records, while nothing arrives and nothing is held, the
/// plugin still gets an empty `put` this often (as Connect calls `put` on every empty poll), so
/// that it can do periodic work: a mirror's checkpoints, say.
const IDLE_TICK: Duration = Duration::from_secs(1);
/// The first pause before a failed batch is put again; it doubles per failed
/// round, up to `errors.retry.delay.max.ms`.
const FIRST_RETRY_BACKOFF: Duration = Duration::from_millis(300);

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskExit {
    Stopped,
    /// With the trace shown in the task's status.
    Failed(String),
}

/// A task failure on its way out of the loop.
pub(super) struct Failure(pub(super) String);

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        // The whole chain: "consuming: broker: Unknown topic", not "consuming".
        Failure(format!("{e:#}"))
    }
}

pub struct TaskLoop {
    pub(super) name: String,
    pub(super) config: Arc<ConnectorConfig>,
    pub(super) source: Source,
    pub(super) plugin: PluginSlot,
    pub(super) dlq: Option<DeadLetterQueue>,
    pub(super) metrics: Arc<TaskMetrics>,
    pub(super) records: InFlight,
    /// The key's and value's converters the host runs (AvroConverter).
    pub(super) converters: Converting,
    /// The connector's transforms, with an instance of each transform plugin.
    pub(super) transforms: Transforms,
    /// Consecutive rounds of `put()` that asked for a retry.
    pub(super) failed_rounds: u32,
    /// Share groups: the broker archives a record after this many deliveries.
    pub(super) delivery_limit: Option<u16>,
    pub(super) last_commit: Instant,
    /// When the plugin last got an empty `put`.
    pub(super) last_tick: Instant,
    /// How long the last `put()` and the last fetch that brought records
    /// took. The next batch is fetched during `put()` only when `put()` is
    /// the slower side: fetching ahead holds the batch's acknowledgements
    /// back by one fetch, which costs more than it saves for a fast plugin.
    pub(super) last_put: Duration,
    pub(super) last_poll: Duration,
    /// New instances to swap the plugin for, and where they are sent.
    pub(super) swaps: (mpsc::Sender<Swap>, mpsc::Receiver<Swap>),
}

impl TaskLoop {
    /// Where to send a started instance of another build of the plugin,
    /// which the task swaps to between two batches.
    pub fn swap_sender(&self) -> mpsc::Sender<Swap> {
        self.swaps.0.clone()
    }

    /// Runs until `stop` is cancelled or the task fails, then hands back
    /// every record it did not finish (RELEASE) and commits.
    pub async fn run(mut self, stop: CancellationToken) -> TaskExit {
        self.plugin.instance.interrupt_on(Some(stop.clone()));
        self.transforms.interrupt_on(Some(&stop));
        let exit = match self.iterate_until(&stop).await {
            Ok(()) => TaskExit::Stopped,
            Err(Failure(trace)) => TaskExit::Failed(trace),
        };
        self.plugin.instance.interrupt_on(None);
        self.transforms.interrupt_on(None);
        self.shut_down(exit == TaskExit::Stopped).await;
        exit
    }

    async fn iterate_until(&mut self, stop: &CancellationToken) -> Result<(), Failure> {
        let mut prefetched: Option<Vec<ConsumedRecord>> = None;
        loop {
            self.metrics.in_flight.store(self.records.len() as u64, Relaxed);
            if stop.is_cancelled() {
                return Ok(());
            }
            if prefetched.is_none()
                && let Ok(swap) = self.swaps.1.try_recv()
            {
                self.swap_plugin(swap, stop).await?;
                continue;
            }
            if self.records.is_retrying() {
                self.retry(stop).await?;
                continue;
            }
            let polled = match prefetched.take() {
                Some(records) => records,
                None => {
                    let started = Instant::now();
                    let polled = tokio::select! {
                        _ = stop.cancelled() => return Ok(()),
                        polled = self.source.poll(POLL_TIMEOUT, &self.records) => polled?,
                    };
                    self.forget_revoked();
                    if !polled.is_empty() {
                        self.last_poll = started.elapsed();
                    }
                    polled
                }
            };
            self.count_polled(&polled);
            let idle = polled.is_empty();
            if !idle {
                let prefetch = self.last_put > self.last_poll && !self.source.is_exactly_once();
                prefetched = self.deliver(polled, prefetch).await?;
                if self.records.is_retrying()
                    && let Some(next) = prefetched.take()
                {
                    // Put with the failed batch once the target is back.
                    self.admit(next, Stage::Waiting).await?;
                }
            } else if self.records.is_holding()
                || (self.last_put > Duration::ZERO && self.last_tick.elapsed() >= IDLE_TICK)
            {
                self.tick().await?;
            }
            self.renew_locks().await;
            self.flush_if_due(idle).await?;
            if (idle || self.last_commit.elapsed() >= COMMIT_INTERVAL) && self.commit().await? {
                prefetched = None;
            }
        }
    }

    /// Classic groups: the records of partitions the group took away are no
    /// longer this task's (their new owner starts from the last commit), so
    /// they are forgotten, not acknowledged or put again. A sink still
    /// holding some may write them too: duplicates, counted.
    fn forget_revoked(&mut self) {
        let revoked = self.source.take_revoked();
        if revoked.is_empty() {
            return;
        }
        let forgotten = self.records.forget_partitions(&revoked);
        self.metrics.forgotten_at_rebalance.fetch_add(forgotten as u64, Relaxed);
        tracing::info!(task = self.name, partitions = ?revoked, records = forgotten, "partitions revoked; their records forgotten");
    }

    fn count_polled(&self, polled: &[ConsumedRecord]) {
        self.metrics.polls.fetch_add(1, Relaxed);
        if !polled.is_empty() {
            self.metrics.first_delivery.get_or_init(Instant::now);
        }
        self.metrics.polled.fetch_add(polled.len() as u64, Relaxed);
        self.metrics.resent_while_held.store(self.source.resent_while_held(), Relaxed);
        if !polled.is_empty() {
            let mut topics = self.metrics.active_topics.lock().unwrap();
            for record in polled {
                if !topics.contains(&record.topic) {
                    topics.insert(record.topic.clone());
                }
            }
        }
    }

    /// One batch through `put()` and its outcomes. With `prefetch`, the next
    /// batch is fetched while the plugin works, and returned.
    async fn deliver(
        &mut self,
        records: Vec<ConsumedRecord>,
        prefetch: bool,
    ) -> Result<Option<Vec<ConsumedRecord>>, Failure> {
        let ids = self.admit(records, Stage::Delivered).await?;
        self.put(ids, prefetch).await
    }

    /// Puts the records `ids` (in the task already) and applies the outcomes.
    async fn put(&mut self, ids: Vec<u64>, prefetch: bool) -> Result<Option<Vec<ConsumedRecord>>, Failure> {
        if ids.is_empty() {
            return Ok(None);
        }
        let records: Vec<(u64, &Tracked)> = ids.iter().filter_map(|id| Some((*id, self.records.get(*id)?))).collect();
        // Locks are the consumed record's; the plugin is given it as put.
        let consumed: Vec<&ConsumedRecord> = records.iter().map(|(_, t)| &t.record).collect();
        let locks = self.source.lock_expiries(&consumed, Instant::now());
        let tracked: Vec<_> = records.into_iter().zip(locks).map(|((id, t), lock)| (id, t.as_put(), lock)).collect();
        let batch = to_batch(&tracked, std::time::SystemTime::now());
        let renewing = self.first_renewal_during_put(tracked.iter().filter_map(|(_, _, lock)| *lock).min());
        let started = Instant::now();
        // Disjoint fields: the plugin works while the source fetches the
        // next batch (`prefetch`) and renews locks, if it must.
        let done = CancellationToken::new();
        let (plugin, source, records, metrics, name) =
            (&mut self.plugin, &mut self.source, &self.records, &self.metrics, &self.name);
        let put = async {
            let result = plugin.put(&batch).await;
            done.cancel();
            result
        };
        let beside = async {
            let next = if prefetch { Some(source.poll(POLL_TIMEOUT, records).await) } else { None };
            if let Some(wake) = renewing {
                let fetched = match &next {
                    Some(Ok(fetched)) => fetched.as_slice(),
                    _ => &[],
                };
                renew::during_put(source, records, fetched, wake, metrics, name, &done).await;
            }
            next
        };
        let (result, next) = tokio::join!(put, beside);
        if next.is_some() {
            self.metrics.fetched_during_put.fetch_add(1, Relaxed);
            // Before the outcomes: none of a revoked partition's may reach
            // the source.
            self.forget_revoked();
        }
        let elapsed = started.elapsed();
        self.last_put = elapsed;
        self.metrics.observe_put(elapsed, ids.len());
        self.warn_if_put_nears_lock(&ids, elapsed);
        self.apply(ids, result).await?;
        match next {
            Some(polled) => Ok(Some(polled?)),
            None => Ok(None),
        }
    }

    async fn apply(&mut self, ids: Vec<u64>, result: Result<PutReport, PluginError>) -> Result<(), Failure> {
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
                self.settle_held(report.settled).await?;
                self.failed_rounds = if any_retry { self.failed_rounds + 1 } else { 0 };
                Ok(())
            }
            Err(PluginError::Task(TaskError::Retriable(reason))) => {
                tracing::warn!(task = self.name, %reason, records = ids.len(), "put failed; will retry the batch");
                for id in ids {
                    self.keep_for_retry(id, &reason);
                }
                self.failed_rounds += 1;
                Ok(())
            }
            // Stopping: the batch stays unacknowledged and is released on the way out.
            Err(PluginError::Interrupted) => Ok(()),
            Err(e) => Err(Failure(format!("put: {e}"))),
        }
    }

    /// A poll brought nothing while records are held (or for a while): an
    /// empty `put`, as Connect calls `put` with an empty collection, so that
    /// the plugin can act on time (a rotation on the wall clock, a
    /// checkpoint) and settle what it wrote.
    async fn tick(&mut self) -> Result<(), Failure> {
        self.last_tick = Instant::now();
        match self.plugin.put(&to_batch(&[], std::time::SystemTime::now())).await {
            Ok(report) if report.outcomes.is_empty() => self.settle_held(report.settled).await,
            Ok(report) => {
                Err(Failure(format!("plugin returned {} outcomes for an empty batch", report.outcomes.len())))
            }
            Err(PluginError::Task(TaskError::Retriable(reason))) => {
                // Held records stay held; their flush or their lock decides.
                tracing::warn!(task = self.name, %reason, "put of an empty batch failed");
                Ok(())
            }
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
                if !matches!(self.records.get(id).map(|t| &t.stage), Some(Stage::Held { .. })) {
                    self.records.set_stage(id, Stage::Held { since: Instant::now() });
                }
            }
            Outcome::Retry(reason) => self.keep_for_retry(id, &reason),
            Outcome::Reject(reason) => self.reject(id, reason, ErrorStage::Put).await?,
        }
        Ok(())
    }

    /// Settlements of earlier held records; unknown ids are the plugin's
    /// mistake and are ignored.
    async fn settle_held(&mut self, settlements: Vec<Settlement>) -> Result<(), Failure> {
        for Settlement { id, outcome } in settlements {
            if !matches!(self.records.get(id).map(|t| &t.stage), Some(Stage::Held { .. })) {
                tracing::warn!(task = self.name, id, "plugin settled a record it did not hold");
                continue;
            }
            self.settle(id, outcome).await?;
        }
        Ok(())
    }

    /// The record stays with the task, to be put again; its first failure
    /// starts `errors.retry.timeout`.
    fn keep_for_retry(&mut self, id: u64, reason: &str) {
        let since = match self.records.get(id).map(|t| &t.stage) {
            Some(Stage::Retrying { since, .. }) => *since,
            _ => Instant::now(),
        };
        self.records.set_stage(id, Stage::Retrying { since, reason: reason.to_string() });
    }

    /// One round of local retries: give up on what cannot wait any longer,
    /// back off, put the rest again. No new records are fetched meanwhile.
    async fn retry(&mut self, stop: &CancellationToken) -> Result<(), Failure> {
        self.renew_locks().await;
        let now = Instant::now();
        let mut again = Vec::new();
        let mut soonest_lock: Option<Duration> = None;
        let mut failed_before = 0;
        let waiting: Vec<Attempt> = self
            .records
            .retrying()
            .map(|(id, t)| {
                let (failed_since, reason) = match &t.stage {
                    Stage::Retrying { since, reason } => (Some(*since), reason.clone()),
                    _ => (None, "not yet put: fetched while the target failed".to_string()),
                };
                let lock_left = self.source.lock_left(&t.record, now);
                Attempt { id, lock_left, failed_since, reason, delivery: t.record.delivery_count }
            })
            .collect();
        for Attempt { id, lock_left, failed_since, reason, delivery } in waiting {
            let lock_margin = lock_left.map(|left| left.saturating_sub(LOCK_SAFETY_MARGIN));
            let failed_for = failed_since.map(|s| s.elapsed());
            match (lock_margin, self.config.errors.retry_timeout) {
                (Some(Duration::ZERO), _) => self.hand_back(id, &reason, delivery).await?,
                (_, Some(timeout)) if failed_for.is_some_and(|f| f >= timeout) => {
                    let failed_for = failed_for.unwrap_or_default().as_millis();
                    let why = format!("{reason} (retried for {failed_for} ms, errors.retry.timeout)");
                    self.reject(id, why, ErrorStage::Put).await?;
                }
                _ => {
                    soonest_lock = match (soonest_lock, lock_margin) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    failed_before += usize::from(failed_since.is_some());
                    again.push(id);
                }
            }
        }
        // What was settled so far goes out before the pause.
        if self.commit().await? {
            // Rewound: the records come again from the source.
            return Ok(());
        }
        if again.is_empty() {
            self.failed_rounds = 0;
            return Ok(());
        }
        let mut backoff = self.backoff();
        if let Some(lock) = soonest_lock {
            backoff = backoff.min(lock);
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(backoff) => {}
        }
        self.metrics.retried.fetch_add(failed_before as u64, Relaxed);
        self.put(again, false).await?;
        self.flush_if_due(false).await
    }

    /// A record still failing whose lock is about to run out: released for
    /// redelivery, or, on the broker's last delivery, rejected (to the DLQ)
    /// rather than released into archival.
    async fn hand_back(&mut self, id: u64, reason: &str, delivery: u16) -> Result<(), Failure> {
        match self.delivery_limit {
            Some(limit) if delivery >= limit => {
                let why = format!("{reason} (still failing on delivery {delivery} of at most {limit})");
                self.reject(id, why, ErrorStage::Put).await
            }
            _ => {
                self.acknowledge(id, AckType::Release);
                self.metrics.released.fetch_add(1, Relaxed);
                Ok(())
            }
        }
    }

    /// A record that can never be written: to the DLQ and REJECT under
    /// `errors.tolerance=all`, otherwise the task fails (and the record is
    /// released on the way out, not lost).
    async fn reject(&mut self, id: u64, reason: String, stage: ErrorStage) -> Result<(), Failure> {
        let Some(tracked) = self.records.get(id) else { return Ok(()) };
        let record = &tracked.record;
        let at = format!("{}-{}@{}", record.topic, record.partition, record.offset);
        if self.config.errors.tolerance == Tolerance::None {
            return Err(Failure(format!(
                "record {at} rejected: {reason} (errors.tolerance=none; set errors.tolerance=all and \
                 errors.deadletterqueue.topic.name to route such records to a dead-letter queue)"
            )));
        }
        match &self.dlq {
            Some(dlq) => {
                dlq.send(record, &reason, &stage)
                    .await
                    .map_err(|e| Failure(format!("writing {at} to the dead-letter queue: {e:#}")))?;
                self.metrics.dead_lettered.fetch_add(1, Relaxed);
            }
            None => {
                tracing::warn!(task = self.name, record = at, %reason, "record rejected (no dead-letter queue): dropped");
                if self.source.caps_records_in_flight() {
                    self.metrics.archived.fetch_add(1, Relaxed);
                }
            }
        }
        self.acknowledge(id, AckType::Reject);
        self.metrics.rejected.fetch_add(1, Relaxed);
        Ok(())
    }

    fn acknowledge(&mut self, id: u64, ack: AckType) {
        let Some(record) = self.records.remove(id) else { return };
        if ack == AckType::Release
            && let Some(limit) = self.delivery_limit
            && record.delivery_count >= limit
        {
            // The broker archives it: no DLQ will see it.
            tracing::warn!(
                task = self.name,
                record = format!("{}-{}@{}", record.topic, record.partition, record.offset),
                "released on its last delivery ({} of {limit}): the broker archives it unwritten",
                record.delivery_count
            );
            self.metrics.archived.fetch_add(1, Relaxed);
        }
        if let Err(e) = self.source.acknowledge(&record, ack) {
            // No longer ours: the broker delivers it again, so nothing is lost.
            tracing::warn!(task = self.name, error = %e, "acknowledgement refused; the record will be redelivered");
            self.metrics.ack_refused.fetch_add(1, Relaxed);
        }
    }

    /// Asks the plugin to flush when it holds records of a partition that a
    /// share group moved to another member (settled now, they are not
    /// written again by the new owner), when a share group's broker gave
    /// nothing new (`idle`: its in-flight cap, or the end of the log), when
    /// a held record's lock is about to run out, or when one has waited a
    /// flush interval.
    async fn flush_if_due(&mut self, idle: bool) -> Result<(), Failure> {
        if !self.records.is_holding() {
            return Ok(());
        }
        let revoked = self.source.revoked_with_records();
        if !revoked.is_empty() {
            let due: Vec<u64> = self
                .records
                .held()
                .filter(|(_, t)| {
                    revoked.iter().any(|tp| tp.topic == t.record.topic && tp.partition == t.record.partition)
                })
                .map(|(id, _)| id)
                .collect();
            if !due.is_empty() {
                return self.flush(FlushCause::Rebalance, FlushScope::Records(due)).await;
            }
        }
        if idle && self.source.caps_records_in_flight() {
            return self.flush(FlushCause::Cap, FlushScope::All).await;
        }
        let now = Instant::now();
        let mut lock_ending = false;
        let mut due = Vec::new();
        for (id, tracked) in self.records.held() {
            let Stage::Held { since } = tracked.stage else { continue };
            let ending = self.source.lock_left(&tracked.record, now).is_some_and(|left| left < LOCK_SAFETY_MARGIN);
            if ending || now.duration_since(since) >= self.config.flush_interval {
                lock_ending |= ending;
                due.push(id);
            }
        }
        match (due.is_empty(), lock_ending) {
            (true, _) => Ok(()),
            (false, true) => self.flush(FlushCause::Lock, FlushScope::Records(due)).await,
            (false, false) => self.flush(FlushCause::Timer, FlushScope::Records(due)).await,
        }
    }

    pub(super) async fn flush(&mut self, cause: FlushCause, scope: FlushScope) -> Result<(), Failure> {
        self.metrics.count_flush(cause);
        match self.plugin.flush(&scope).await {
            Ok(settlements) => self.settle_held(settlements).await,
            Err(PluginError::Task(TaskError::Retriable(reason))) => {
                // Held records stay unacknowledged; if their locks run out they
                // are redelivered.
                tracing::warn!(task = self.name, %reason, ?cause, "flush failed, will try again");
                Ok(())
            }
            Err(PluginError::Interrupted) => Ok(()),
            Err(e) => Err(Failure(format!("flush: {e}"))),
        }
    }

    /// Commits what was settled. `Ok(true)` when an exactly-once
    /// transaction aborted instead: the source went back to its last
    /// commit, so every record in flight here is forgotten (it comes again),
    /// after a pause as for a failed put.
    pub(super) async fn commit(&mut self) -> Result<bool, Failure> {
        self.last_commit = Instant::now();
        match self.source.commit(&self.records).await {
            Ok(Committed::Done) => Ok(false),
            Ok(Committed::Rewound(why)) => {
                let forgotten = self.records.ids();
                for id in &forgotten {
                    self.records.remove(*id);
                }
                self.metrics.transactions_aborted.fetch_add(1, Relaxed);
                self.failed_rounds += 1;
                let pause = self.backoff();
                tracing::warn!(
                    task = self.name,
                    why,
                    records = forgotten.len(),
                    pause_ms = pause.as_millis() as u64,
                    "transaction aborted; consuming again from the last commit"
                );
                tokio::time::sleep(pause).await;
                Ok(true)
            }
            Ok(Committed::Ended(why)) => Err(Failure(why)),
            Err(e) => {
                self.metrics.commit_failures.fetch_add(1, Relaxed);
                tracing::warn!(
                    task = self.name,
                    error = format!("{e:#}"),
                    "commit failed; uncommitted records will be redelivered"
                );
                Ok(false)
            }
        }
    }

    /// The pause before a failed batch is tried again: doubling per failed
    /// round, up to `errors.retry.delay.max.ms`.
    fn backoff(&self) -> Duration {
        FIRST_RETRY_BACKOFF
            .saturating_mul(1 << self.failed_rounds.saturating_sub(1).min(16))
            .min(self.config.errors.retry_delay_max)
    }

    fn warn_if_put_nears_lock(&self, ids: &[u64], elapsed: Duration) {
        // Locks last tens of seconds: a put this short is no concern, and
        // this skips a lookup per record on the fast path.
        if elapsed < Duration::from_secs(1) {
            return;
        }
        let now = Instant::now();
        let remaining = ids.iter().filter_map(|id| self.source.lock_left(&self.records.get(*id)?.record, now)).min();
        // Renewed during the put, locks run out only if the broker refused.
        let renewed = self.source.renews_locks();
        if let Some(remaining) = remaining
            && ((remaining < elapsed && !renewed) || remaining.is_zero())
        {
            tracing::warn!(
                task = self.name,
                put_ms = elapsed.as_millis() as u64,
                lock_left_ms = remaining.as_millis() as u64,
                "put() takes about as long as the acquisition lock; raise the connector's \
                 share.record.lock.duration.ms (set on its share group) or lower batch.max.records"
            );
        }
    }

    /// On a clean stop, flush first so held records can be accepted; then
    /// release everything unfinished, commit, stop the plugin, leave the group.
    async fn shut_down(mut self, clean: bool) {
        // An interrupted or failed instance cannot flush or stop any more.
        let clean = clean && self.plugin.is_usable();
        if clean
            && self.records.is_holding()
            && let Err(Failure(e)) = self.flush(FlushCause::Stop, FlushScope::All).await
        {
            tracing::warn!(task = self.name, error = e, "final flush failed");
        }
        for id in self.records.ids() {
            self.acknowledge(id, AckType::Release);
        }
        if let Err(Failure(e)) = self.commit().await {
            tracing::warn!(task = self.name, error = e, "final commit failed");
        }
        if let Err(e) = self.plugin.stop().await
            && clean
        {
            tracing::warn!(task = self.name, error = %e, "plugin stop failed");
        }
        self.transforms.stop().await;
        if let Err(e) = self.source.close(&self.records).await {
            tracing::warn!(task = self.name, error = format!("{e:#}"), "closing the consumer failed");
        }
    }
}

/// A record waiting to be put again, as a retry round sees it.
struct Attempt {
    id: u64,
    lock_left: Option<Duration>,
    /// When it first failed; `None` if it was never put (fetched behind a
    /// failed batch).
    failed_since: Option<Instant>,
    reason: String,
    delivery: u16,
}

/// The task's plugin instance, with the gauge of its memory.
pub(super) struct PluginSlot {
    pub instance: PluginInstance,
    pub metrics: Arc<TaskMetrics>,
}

impl PluginSlot {
    fn is_usable(&self) -> bool {
        self.instance.is_usable()
    }

    async fn put(&mut self, batch: &RecordBatch) -> Result<PutReport, PluginError> {
        let result = self.instance.put_batch(batch).await;
        self.observe_memory();
        result
    }

    async fn flush(&mut self, scope: &FlushScope) -> Result<Vec<Settlement>, PluginError> {
        let result = self.instance.flush(scope).await;
        self.observe_memory();
        result
    }

    async fn stop(&mut self) -> Result<(), PluginError> {
        self.instance.stop().await
    }

    fn observe_memory(&self) {
        self.metrics.plugin_memory_bytes.store(self.instance.memory_bytes() as u64, Relaxed);
    }
}
