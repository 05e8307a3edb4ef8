use spillway_capabilities::InstanceBounds;
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
    /// Tables, and elements per table (`policy.plugin.tables.max`,
    /// `policy.plugin.table.elements.max`): tables hold function references.
    tables: usize,
    table_elements: usize,
    pub current_bytes: usize,
    pub exceeded: bool,
}

impl MemoryLimiter {
    pub fn new(max_bytes: usize, bounds: &InstanceBounds) -> Self {
        let (tables, table_elements) = (bounds.tables, bounds.table_elements);
        MemoryLimiter { max_bytes, tables, table_elements, current_bytes: 0, exceeded: false }
    }
}

/// What one table element costs the host: a function reference, a pointer.
/// Tables count against the memory budget at this price.
const TABLE_ELEMENT_BYTES: usize = 8;

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

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.table_elements {
            return Ok(false);
        }
        // Charged as memory: the budget is the instance's, whatever holds it.
        let (current, desired) = (current * TABLE_ELEMENT_BYTES, desired * TABLE_ELEMENT_BYTES);
        let total = self.current_bytes - current.min(self.current_bytes) + desired;
        if total > self.max_bytes {
            self.exceeded = true;
            return Ok(false);
        }
        self.current_bytes = total;
        Ok(true)
    }

    fn tables(&self) -> usize {
        self.tables
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_count_against_the_memory_budget() {
        let bounds = InstanceBounds { tables: 3, table_elements: 250_000, ..InstanceBounds::default() };
        let mut limiter = MemoryLimiter::new(4 << 20, &bounds);
        assert!(limiter.memory_growing(0, 3 << 20, None).unwrap());
        // 200,000 elements are 1.6 MB: over what the memory left.
        assert!(!limiter.table_growing(0, 200_000, None).unwrap());
        assert!(limiter.exceeded);
        assert!(limiter.table_growing(0, 100_000, None).unwrap());
        assert_eq!(limiter.current_bytes, (3 << 20) + 800_000);
        // Growing that table charges only the difference.
        assert!(limiter.table_growing(100_000, 120_000, None).unwrap());
        assert_eq!(limiter.current_bytes, (3 << 20) + 960_000);
        assert!(!limiter.table_growing(0, 250_001, None).unwrap());
        assert_eq!(limiter.tables(), 3);
    }
}
