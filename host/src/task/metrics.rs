//! Per-task counters, read by the run summary and `GET /metrics`.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// Upper bounds, in seconds, of the put-latency histogram's buckets.
pub const PUT_LATENCY_BUCKETS: [f64; 10] = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0];

#[derive(Default, Debug)]
pub struct TaskMetrics {
    pub polled: AtomicU64,
    pub put: AtomicU64,
    pub accepted: AtomicU64,
    pub released: AtomicU64,
    pub rejected: AtomicU64,
    pub dead_lettered: AtomicU64,
    /// Acknowledgements the consumer refused (lock expired, partition
    /// revoked): those records are redelivered.
    pub ack_refused: AtomicU64,
    pub commit_failures: AtomicU64,
    pub plugin_memory_bytes: AtomicU64,
    /// Cumulative counts per bucket of `PUT_LATENCY_BUCKETS` (plus +Inf).
    pub put_latency_buckets: [AtomicU64; PUT_LATENCY_BUCKETS.len() + 1],
    pub put_latency_sum_micros: AtomicU64,
    pub put_calls: AtomicU64,
}

impl TaskMetrics {
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
