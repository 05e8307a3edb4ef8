//! What a plugin instance's store holds: each capability's context, composed
//! here (the capabilities know nothing of the runtime), and the runtime's
//! own bookkeeping.

use super::limits::MemoryLimiter;
use anyhow::Result;
use spillway_capabilities::kafka::{KafkaCtx, KafkaView};
use spillway_capabilities::log::{LogCtx, LogView};
use spillway_capabilities::object_store::{ObjectStoreCtx, ObjectStoreView};
use spillway_capabilities::sql::{SqlCtx, SqlView};
use spillway_capabilities::wasi::{self, OutputTail};
use spillway_capabilities::{CallBudget, CapabilityMetrics, Grants};
use std::sync::Arc;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

pub struct PluginState {
    wasi: WasiCtx,
    /// WASI's resources (streams, sockets, files).
    wasi_table: ResourceTable,
    log: LogCtx,
    object_store: ObjectStoreCtx,
    sql: SqlCtx,
    pub(super) kafka: KafkaCtx,
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
        let stderr = OutputTail::new(name);
        let budget = CallBudget::default();
        Ok(PluginState {
            wasi: wasi::sandbox(&grants.wasi, &stderr)?,
            wasi_table: ResourceTable::new(),
            log: LogCtx::new(name),
            object_store: ObjectStoreCtx::new(&grants.object_stores, budget.clone(), metrics.clone()),
            sql: SqlCtx::new(&grants.sql, budget.clone(), metrics.clone()),
            kafka: KafkaCtx::new(&grants.kafka, grants.task.as_ref(), budget.clone(), metrics),
            limiter: MemoryLimiter::new(memory_bytes),
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

impl LogView for PluginState {
    fn log(&mut self) -> &mut LogCtx {
        &mut self.log
    }
}

impl ObjectStoreView for PluginState {
    fn object_store(&mut self) -> &mut ObjectStoreCtx {
        &mut self.object_store
    }
}

impl SqlView for PluginState {
    fn sql(&mut self) -> &mut SqlCtx {
        &mut self.sql
    }
}

impl KafkaView for PluginState {
    fn kafka(&mut self) -> &mut KafkaCtx {
        &mut self.kafka
    }
}
