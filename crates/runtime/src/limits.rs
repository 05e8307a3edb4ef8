use std::time::Duration;
use wasmtime::ResourceLimiter;

/// Per-instance resource bounds, from the connector config.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Linear memory a plugin instance may grow to, in bytes.
    pub memory_bytes: usize,
    /// How long one call into the plugin may run before it is interrupted.
    pub call_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { memory_bytes: 256 << 20, call_timeout: Duration::from_secs(30) }
    }
}

/// Denies memory growth past the limit, remembering that it did so, so that
/// a trap that follows can be reported as what it is. Denied, not trapped:
/// `memory.grow` returns -1, as on a machine out of memory, so that a
/// language runtime with a garbage collector (SpiderMonkey, CPython) can
/// collect and carry on, or fail the call with its own error; a plugin that
/// cannot (a Rust allocation failure aborts) traps as before.
pub(crate) struct MemoryLimiter {
    max_bytes: usize,
    pub current_bytes: usize,
    pub exceeded: bool,
}

impl MemoryLimiter {
    pub fn new(max_bytes: usize) -> Self {
        MemoryLimiter { max_bytes, current_bytes: 0, exceeded: false }
    }
}

/// Tables hold function references; a million is far beyond any real plugin.
const MAX_TABLE_ELEMENTS: usize = 1_000_000;

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        // Several memories (the plugin's and the WASI adapter's) share one budget.
        let total = self.current_bytes - current.min(self.current_bytes) + desired;
        if total > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        self.current_bytes = total;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
