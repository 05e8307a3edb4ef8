//! How every capability operation runs: bounded by its own timeout and by
//! what is left of the plugin call that made it, retried with backoff while
//! it fails retriably and time remains, and counted.
//!
//! Time nests: the runtime bounds each plugin call by
//! `plugin.call.timeout.ms` and, before the call, tells the capabilities
//! (through [`CallBudget`]) when their operations must be over: a little
//! before the call's deadline, so that a slow operation comes back to the
//! plugin as a retriable error it can return, and the host retries the
//! batch, instead of the call running out and the task failing as if the
//! plugin were a runaway.

use super::errors::Error;
use spillway_config::{Importance, KeyDef, Type, Validator, Values};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// When the capability operations of the running plugin call must end. The
/// runtime sets it before each call; every capability context holds a clone.
#[derive(Clone, Debug, Default)]
pub struct CallBudget(Arc<Mutex<Option<Instant>>>);

impl CallBudget {
    pub fn set(&self, until: Option<Instant>) {
        *self.0.lock().unwrap() = until;
    }

    pub fn until(&self) -> Option<Instant> {
        *self.0.lock().unwrap()
    }
}

/// A capability's own bounds for one operation, from its grant.
#[derive(Clone, Debug, PartialEq)]
pub struct OpPolicy {
    pub timeout: Duration,
    /// Further attempts after a retriable failure.
    pub retries: u32,
}

impl OpPolicy {
    /// The grant settings a policy is read from, `timeout.ms` documented as
    /// `timeout_doc` (each capability says what its operations are).
    pub fn setting_keys(timeout_doc: &str) -> [KeyDef; 2] {
        [
            KeyDef::new("timeout.ms", Type::Long, Importance::Medium, timeout_doc)
                .with_default("30000")
                .with_validator(Validator::at_least(1)),
            KeyDef::new("retries", Type::Int, Importance::Low, "Further attempts after a retriable failure.")
                .with_default("3")
                .with_validator(Validator::at_least(0)),
        ]
    }

    /// The policy from grant settings read with [`OpPolicy::setting_keys`].
    pub fn from_values(values: &Values) -> Self {
        OpPolicy {
            timeout: Duration::from_millis(values.long("timeout.ms") as u64),
            retries: values.int("retries") as u32,
        }
    }
}

const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// Runs `attempt` until it succeeds, fails fatally, runs out of retries, or
/// the time is up: the operation's own timeout or the call's budget,
/// whichever comes first. Running out of time is a retriable error.
pub async fn run<T, Fut>(
    metrics: &CapabilityMetrics,
    key: OpKey,
    policy: &OpPolicy,
    budget: &CallBudget,
    mut attempt: impl FnMut() -> Fut,
) -> Result<T, Error>
where
    Fut: Future<Output = Result<T, Error>>,
{
    let started = Instant::now();
    let own = started + policy.timeout;
    let deadline = budget.until().map_or(own, |until| until.min(own));
    let mut backoff = FIRST_BACKOFF;
    let mut tries = 0;
    let result = loop {
        tries += 1;
        match tokio::time::timeout_at(deadline, attempt()).await {
            Ok(Err(e)) if e.is_retriable() && tries <= policy.retries && Instant::now() + backoff < deadline => {
                tracing::debug!(capability = key.capability, op = key.op, error = e.message(), "retrying");
                tokio::time::sleep(backoff).await;
                backoff *= 2;
            }
            Ok(result) => break result,
            Err(_) => {
                let (ms, why) = if deadline == own {
                    (policy.timeout.as_millis(), "its timeout")
                } else {
                    (deadline.duration_since(started).as_millis(), "the time left in the plugin call")
                };
                break Err(Error::retriable(format!("{} {} timed out after {ms} ms ({why})", key.capability, key.op)));
            }
        }
    };
    metrics.record(key, tries - 1, started.elapsed(), &result);
    result
}

/// One operation of one capability, as metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpKey {
    pub capability: &'static str,
    pub op: &'static str,
}

/// Counts per capability operation, for `/metrics`. One per runtime.
#[derive(Debug, Default)]
pub struct CapabilityMetrics {
    ops: Mutex<BTreeMap<OpKey, OpStats>>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpStats {
    pub ok: u64,
    pub retriable_errors: u64,
    pub fatal_errors: u64,
    /// Attempts after the first.
    pub retries: u64,
    /// Payload bytes moved (written or read).
    pub bytes: u64,
    pub seconds: f64,
}

impl CapabilityMetrics {
    pub(super) fn record<T>(&self, key: OpKey, retries: u32, took: Duration, result: &Result<T, Error>) {
        let mut ops = self.ops.lock().unwrap();
        let stats = ops.entry(key).or_default();
        match result {
            Ok(_) => stats.ok += 1,
            Err(Error::Retriable(_)) => stats.retriable_errors += 1,
            Err(Error::Fatal(_)) => stats.fatal_errors += 1,
        }
        stats.retries += u64::from(retries);
        stats.seconds += took.as_secs_f64();
    }

    pub fn add_bytes(&self, key: OpKey, bytes: u64) {
        self.ops.lock().unwrap().entry(key).or_default().bytes += bytes;
    }

    pub fn snapshot(&self) -> Vec<(OpKey, OpStats)> {
        self.ops.lock().unwrap().iter().map(|(k, v)| (*k, v.clone())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

    const KEY: OpKey = OpKey { capability: "test", op: "op" };

    fn policy(timeout_ms: u64, retries: u32) -> OpPolicy {
        OpPolicy { timeout: Duration::from_millis(timeout_ms), retries }
    }

    #[tokio::test(start_paused = true)]
    async fn retriable_failures_are_retried_then_succeed() {
        let metrics = CapabilityMetrics::default();
        let tries = AtomicU32::new(0);
        let result = run(&metrics, KEY, &policy(10_000, 3), &CallBudget::default(), || async {
            if tries.fetch_add(1, Relaxed) < 2 { Err(Error::retriable("flaky")) } else { Ok(7) }
        })
        .await;
        assert_eq!(result.unwrap(), 7);
        let stats = &metrics.snapshot()[0].1;
        assert_eq!((stats.ok, stats.retries), (1, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn fatal_failures_are_not_retried() {
        let metrics = CapabilityMetrics::default();
        let tries = AtomicU32::new(0);
        let result: Result<(), _> = run(&metrics, KEY, &policy(10_000, 3), &CallBudget::default(), || async {
            tries.fetch_add(1, Relaxed);
            Err(Error::fatal("denied"))
        })
        .await;
        assert!(matches!(result, Err(Error::Fatal(_))));
        assert_eq!(tries.load(Relaxed), 1);
        assert_eq!(metrics.snapshot()[0].1.fatal_errors, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_call_budget_cuts_an_operation_short_as_a_retriable_error() {
        let metrics = CapabilityMetrics::default();
        let budget = CallBudget::default();
        budget.set(Some(Instant::now() + Duration::from_millis(500)));
        let started = Instant::now();
        let result: Result<(), _> = run(&metrics, KEY, &policy(60_000, 0), &budget, std::future::pending).await;
        let err = result.unwrap_err();
        assert!(err.is_retriable() && err.message().contains("time left in the plugin call"), "{err:?}");
        assert_eq!(started.elapsed(), Duration::from_millis(500));

        // Without a budget, the operation's own timeout bounds it.
        let err = run::<(), _>(&metrics, KEY, &policy(200, 0), &CallBudget::default(), std::future::pending)
            .await
            .unwrap_err();
        assert!(err.message().contains("after 200 ms (its timeout)"), "{err:?}");
    }
}
