use super::bindings::{self, ConfigError, PluginMetadata, PutReport, Settlement, SinkRecord, TaskError};
use super::{EPOCH_TICK, Limits};
use crate::capabilities::{Grants, PluginState};
use anyhow::Result;
use std::fmt;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, Trap};

/// Why a call into a plugin did not give a result.
#[derive(Debug, Clone)]
pub enum PluginError {
    /// The plugin returned an error of its own.
    Task(TaskError),
    /// The call ran past the connector's `plugin.call.timeout.ms`.
    Timeout { limit_ms: u64 },
    /// The plugin tried to grow its memory past `plugin.memory.max.bytes`.
    OutOfMemory { limit_bytes: usize },
    /// The plugin trapped (a panic, `unreachable`, a bad access). Holds the
    /// trap and what the plugin last wrote to stderr.
    Trap(String),
    /// An earlier trap left the instance unusable.
    Poisoned,
}

impl PluginError {
    /// Whether the instance may still be called. After a trap, timeout or
    /// memory failure its state is undefined and it must be replaced.
    pub fn instance_usable(&self) -> bool {
        matches!(self, PluginError::Task(_))
    }
}

impl fmt::Display for PluginError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PluginError::Task(TaskError::Retriable(m)) => write!(f, "retriable error: {m}"),
            PluginError::Task(TaskError::Fatal(m)) => write!(f, "fatal error: {m}"),
            PluginError::Timeout { limit_ms } => write!(f, "plugin call exceeded its time limit of {limit_ms} ms"),
            PluginError::OutOfMemory { limit_bytes } => {
                write!(f, "plugin exceeded its memory limit of {limit_bytes} bytes")
            }
            PluginError::Trap(m) => write!(f, "plugin trapped: {m}"),
            PluginError::Poisoned => write!(f, "plugin instance is unusable after an earlier failure"),
        }
    }
}

impl std::error::Error for PluginError {}

/// One plugin instance with its own store: serves exactly one task.
pub struct PluginInstance {
    store: Store<PluginState>,
    bindings: bindings::Sink,
    limits: Limits,
    poisoned: bool,
}

impl PluginInstance {
    pub(super) fn new(
        engine: &Engine,
        linker: &Linker<PluginState>,
        component: &Component,
        name: &str,
        grants: &Grants,
        limits: &Limits,
    ) -> Result<Self> {
        let state = PluginState::new(name, grants, limits.memory_bytes)?;
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(ticks(limits));
        let bindings = bindings::Sink::instantiate(&mut store, component, linker)?;
        Ok(PluginInstance { store, bindings, limits: limits.clone(), poisoned: false })
    }

    /// Bytes of linear memory the instance holds now.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.current_bytes
    }

    pub fn metadata(&mut self) -> Result<PluginMetadata, PluginError> {
        self.call(|b, s| b.spillway_connector_plugin().call_metadata(s))
    }

    pub fn validate(&mut self, config: &[(String, String)]) -> Result<Vec<ConfigError>, PluginError> {
        self.call(|b, s| b.spillway_connector_plugin().call_validate(s, &config.to_vec()))
    }

    pub fn start(&mut self, config: &[(String, String)]) -> Result<(), PluginError> {
        self.call(|b, s| b.spillway_connector_sink_task().call_start(s, &config.to_vec()))?.map_err(PluginError::Task)
    }

    pub fn put(&mut self, batch: &[SinkRecord]) -> Result<PutReport, PluginError> {
        self.call(|b, s| b.spillway_connector_sink_task().call_put(s, batch))?.map_err(PluginError::Task)
    }

    pub fn flush(&mut self) -> Result<Vec<Settlement>, PluginError> {
        self.call(|b, s| b.spillway_connector_sink_task().call_flush(s))?.map_err(PluginError::Task)
    }

    pub fn stop(&mut self) -> Result<(), PluginError> {
        self.call(|b, s| b.spillway_connector_sink_task().call_stop(s))
    }

    /// Runs one call with a fresh CPU deadline, turning traps into errors that
    /// say what happened.
    fn call<R>(
        &mut self,
        f: impl FnOnce(&bindings::Sink, &mut Store<PluginState>) -> wasmtime::Result<R>,
    ) -> Result<R, PluginError> {
        if self.poisoned {
            return Err(PluginError::Poisoned);
        }
        self.store.set_epoch_deadline(ticks(&self.limits));
        f(&self.bindings, &mut self.store).map_err(|err| {
            self.poisoned = true;
            self.classify(err)
        })
    }

    fn classify(&mut self, err: wasmtime::Error) -> PluginError {
        let state = self.store.data_mut();
        if state.limiter.exceeded {
            return PluginError::OutOfMemory { limit_bytes: self.limits.memory_bytes };
        }
        if matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
            return PluginError::Timeout { limit_ms: self.limits.call_timeout.as_millis() as u64 };
        }
        let stderr = state.stderr.text();
        let trap = format!("{err:?}");
        PluginError::Trap(if stderr.is_empty() { trap } else { format!("{stderr}\n{trap}") })
    }
}

/// The per-call deadline in epoch ticks (at least one).
fn ticks(limits: &Limits) -> u64 {
    (limits.call_timeout.as_millis() / EPOCH_TICK.as_millis()).max(1) as u64
}
