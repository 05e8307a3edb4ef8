//! How much a plugin may log: one budget per instance, shared by the log
//! capability and its stderr, so that a plugin logging in a loop cannot fill
//! the worker's disk or drown the other tasks' lines. Lines over the rate
//! are dropped and counted; the next line written says how many.

use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The longest line kept; the rest of a longer one is cut.
pub const LINE_MAX_BYTES: usize = 4 << 10;

/// A token bucket over lines and bytes. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct LogBudget {
    bucket: Arc<Mutex<Bucket>>,
}

struct Bucket {
    /// The rates (`policy.plugin.log.*`), and what the bucket holds at most.
    lines_per_second: f64,
    bytes_per_second: f64,
    lines: f64,
    bytes: f64,
    refilled: Instant,
    dropped: u64,
    /// When a line last said how many were dropped: once a second at most.
    reported: Option<Instant>,
}

/// What to do with one line.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Write it; `dropped` lines before it were not written.
    Write {
        dropped: u64,
    },
    Drop,
}

impl LogBudget {
    /// A full bucket of `lines_per_second` and `bytes_per_second`.
    pub fn new(lines_per_second: u32, bytes_per_second: usize) -> Self {
        let bucket = Bucket {
            lines_per_second: lines_per_second.into(),
            bytes_per_second: bytes_per_second as f64,
            lines: lines_per_second.into(),
            bytes: bytes_per_second as f64,
            refilled: Instant::now(),
            dropped: 0,
            reported: None,
        };
        LogBudget { bucket: Arc::new(Mutex::new(bucket)) }
    }

    /// Whether a line of `len` bytes (already cut to [`LINE_MAX_BYTES`]) may
    /// be written now.
    pub fn admit(&self, len: usize) -> Admission {
        self.admit_at(len, Instant::now())
    }

    /// Lines and bytes a second.
    fn rates(&self) -> (f64, f64) {
        let b = self.bucket.lock().unwrap();
        (b.lines_per_second, b.bytes_per_second)
    }

    fn admit_at(&self, len: usize, now: Instant) -> Admission {
        let mut b = self.bucket.lock().unwrap();
        let elapsed = now.saturating_duration_since(b.refilled).as_secs_f64();
        b.refilled = b.refilled.max(now);
        b.lines = (b.lines + elapsed * b.lines_per_second).min(b.lines_per_second);
        b.bytes = (b.bytes + elapsed * b.bytes_per_second).min(b.bytes_per_second);
        if b.lines < 1.0 || b.bytes < len as f64 {
            b.dropped += 1;
            return Admission::Drop;
        }
        b.lines -= 1.0;
        b.bytes -= len as f64;
        let report = b.dropped > 0 && b.reported.is_none_or(|at| now.saturating_duration_since(at).as_secs() >= 1);
        if !report {
            return Admission::Write { dropped: 0 };
        }
        b.reported = Some(now);
        Admission::Write { dropped: std::mem::take(&mut b.dropped) }
    }
}

/// `line` cut to [`LINE_MAX_BYTES`] on a character boundary.
pub fn cut(line: &str) -> &str {
    if line.len() <= LINE_MAX_BYTES {
        return line;
    }
    let mut end = LINE_MAX_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Writes one plugin line through `write` if the budget admits it, first
/// saying (once a second at most) how many lines the budget dropped.
pub fn emit(budget: &LogBudget, task: &str, line: &str, write: impl FnOnce(&str)) {
    let line = cut(line);
    match budget.admit(line.len()) {
        Admission::Drop => {}
        Admission::Write { dropped } => {
            if dropped > 0 {
                let (lines, bytes) = budget.rates();
                tracing::warn!(
                    target: "spillway::plugin",
                    task,
                    "{dropped} plugin log lines were dropped: over {lines} lines or {bytes} bytes a second \
                     (policy.plugin.log.lines.per.second, policy.plugin.log.bytes.per.second)"
                );
            }
            write(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LINES_PER_SECOND: u32 = 100;
    const BYTES_PER_SECOND: usize = 64 << 10;

    #[test]
    fn lines_over_the_rate_are_dropped_and_counted() {
        let budget = LogBudget::new(LINES_PER_SECOND, BYTES_PER_SECOND);
        let start = Instant::now();
        let admitted = (0..1000).filter(|_| budget.admit_at(10, start) != Admission::Drop).count();
        assert_eq!(admitted, LINES_PER_SECOND as usize);
        // Half a second later, half the lines again; the first says what was dropped.
        let later = start + Duration::from_millis(500);
        assert_eq!(budget.admit_at(10, later), Admission::Write { dropped: 900 });
        let more = (0..1000).filter(|_| budget.admit_at(10, later) != Admission::Drop).count();
        assert_eq!(more, LINES_PER_SECOND as usize / 2 - 1);
        // Drops are reported once a second at most.
        assert_eq!(budget.admit_at(10, later + Duration::from_millis(100)), Admission::Write { dropped: 0 });
        assert_eq!(budget.admit_at(10, later + Duration::from_secs(1)), Admission::Write { dropped: 951 });
    }

    #[test]
    fn bytes_over_the_rate_are_dropped() {
        let budget = LogBudget::new(LINES_PER_SECOND, BYTES_PER_SECOND);
        let now = Instant::now();
        let admitted = (0..100).filter(|_| budget.admit_at(LINE_MAX_BYTES, now) != Admission::Drop).count();
        assert_eq!(admitted, BYTES_PER_SECOND / LINE_MAX_BYTES);
    }

    #[test]
    fn long_lines_are_cut_on_a_character_boundary() {
        let line = "é".repeat(LINE_MAX_BYTES);
        let kept = cut(&line);
        assert_eq!(kept.len(), LINE_MAX_BYTES);
        assert_eq!(cut("short"), "short");
        let odd = format!("a{line}");
        assert_eq!(cut(&odd).len(), LINE_MAX_BYTES - 1);
    }
}
