//! What a plugin instance's store holds: each capability's context, composed
//! here (the capabilities know nothing of the runtime), and the runtime's
//! own bookkeeping.

use super::limits::MemoryLimiter;
use anyhow::Result;
use spillway_capabilities::wasi::{self, OutputTail};
use spillway_capabilities::{CallBudget, CapabilityMetrics, Contexts, ContextsView, Grants};
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub struct PluginState {
    wasi: WasiCtx,
    /// WASI's resources (streams, sockets, files).
    wasi_table: ResourceTable,
    /// Every `spillway:*` capability's context.
    pub(super) capabilities: Contexts,
    pub(super) limiter: MemoryLimiter,
    /// When capability operations of the running call must end.
    pub(super) budget: CallBudget,
    /// The end of what the plugin wrote to stderr: a panic message lands here.
    pub(super) stderr: OutputTail,
}

impl PluginState {
    pub(super) fn new(
        name: &str,
        grants: &Grants,
        memory_bytes: usize,
        metrics: Arc<CapabilityMetrics>,
    ) -> Result<Self> {
        let budget = CallBudget::default();
        let capabilities = Contexts::new(name, grants, &budget, &metrics);
        // One log budget for the instance: its log lines and stderr alike.
        let stderr = OutputTail::new(name, capabilities.log.budget().clone());
        Ok(PluginState {
            wasi: wasi::sandbox(&grants.wasi, &stderr)?,
            wasi_table: ResourceTable::new(),
            capabilities,
            limiter: MemoryLimiter::new(memory_bytes, &grants.bounds),
            budget,
            stderr,
        })
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.wasi_table }
    }
}

impl ContextsView for PluginState {
    fn contexts(&mut self) -> &mut Contexts {
        &mut self.capabilities
    }
}
