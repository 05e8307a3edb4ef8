#![allow(dead_code)] // each benchmark uses part of it
//! How big a benchmark runs: in full from `scripts/bench.sh`, or one short
//! round when `SPILLWAY_BENCH_SMOKE` is set (as `.ci/run` does): a check
//! that each benchmark still runs end to end, whose figures mean little.

/// A count with its full size and its smoke-test size.
pub struct Scaled {
    full: usize,
    smoke: usize,
}

impl Scaled {
    pub const fn new(full: usize, smoke: usize) -> Scaled {
        Scaled { full, smoke }
    }

    pub fn get(&self) -> usize {
        if smoke() { self.smoke } else { self.full }
    }
}

impl std::fmt::Display for Scaled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

pub fn smoke() -> bool {
    std::env::var_os("SPILLWAY_BENCH_SMOKE").is_some()
}
