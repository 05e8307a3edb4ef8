use super::bindings::{self, ConfigError, FlushScope, PluginMetadata, PutReport, Settlement, SinkRecord, TaskError};
use super::{EPOCH_TICK, Limits};
use crate::capabilities::{Grants, PluginState};
use anyhow::Result;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

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
    /// The call was interrupted from outside: its task is stopping.
    Interrupted,
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
            PluginError::Interrupted => write!(f, "plugin call interrupted: the task is stopping"),
            PluginError::Poisoned => write!(f, "plugin instance is unusable after an earlier failure"),
        }
    }
}

impl std::error::Error for PluginError {}

/// Interrupts the call an instance is running, from another thread: a task
/// stopping does not wait for a stuck `put()` to reach its time limit.
#[derive(Clone, Default)]
pub struct Interrupter(Arc<AtomicBool>);

impl Interrupter {
    /// The running call (or the next one, if none runs) traps at the next
    /// epoch tick and leaves the instance unusable.
    pub fn interrupt(&self) {
        self.0.store(true, Relaxed);
    }

    /// Withdraws an interrupt that came after the call it was meant for ended.
    pub fn clear(&self) {
        self.0.store(false, Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Relaxed)
    }
}

/// One plugin instance with its own store: serves exactly one task.
pub struct PluginInstance {
    store: Store<PluginState>,
    bindings: bindings::Sink,
    limits: Limits,
    deadline: Arc<CallDeadline>,
    interrupter: Interrupter,
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
        // Called at every epoch tick while wasm runs: ends the call once its
        // time is up or the task asked to interrupt it.
        let (deadline, interrupter) = (Arc::new(CallDeadline::starting_now(limits)), Interrupter::default());
        let (call_deadline, interrupt) = (deadline.clone(), interrupter.clone());
        store.epoch_deadline_callback(move |_| {
            if interrupt.is_set() || call_deadline.passed() {
                Ok(UpdateDeadline::Interrupt)
            } else {
                Ok(UpdateDeadline::Continue(1))
            }
        });
        store.set_epoch_deadline(1);
        let bindings = bindings::Sink::instantiate(&mut store, component, linker)?;
        Ok(PluginInstance { store, bindings, limits: limits.clone(), deadline, interrupter, poisoned: false })
    }

    /// A handle that interrupts this instance's calls from another thread.
    pub fn interrupter(&self) -> Interrupter {
        self.interrupter.clone()
    }

    /// False once a trap, timeout, memory failure or interrupt ended a call.
    pub fn is_usable(&self) -> bool {
        !self.poisoned
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

    pub fn flush(&mut self, scope: &FlushScope) -> Result<Vec<Settlement>, PluginError> {
        self.call(|b, s| b.spillway_connector_sink_task().call_flush(s, scope))?.map_err(PluginError::Task)
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
        self.deadline.restart(&self.limits);
        self.store.set_epoch_deadline(1);
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
            if self.interrupter.is_set() {
                return PluginError::Interrupted;
            }
            return PluginError::Timeout { limit_ms: self.limits.call_timeout.as_millis() as u64 };
        }
        let stderr = state.stderr.text();
        let trap = format!("{err:?}");
        PluginError::Trap(if stderr.is_empty() { trap } else { format!("{stderr}\n{trap}") })
    }
}

/// When the running call must end. Wall time, checked at each epoch tick
/// (`EPOCH_TICK`), so time spent in host calls counts as well.
struct CallDeadline {
    base: Instant,
    /// Nanoseconds after `base`.
    at: AtomicU64,
}

impl CallDeadline {
    fn starting_now(limits: &Limits) -> Self {
        let deadline = CallDeadline { base: Instant::now(), at: AtomicU64::new(0) };
        deadline.restart(limits);
        deadline
    }

    fn restart(&self, limits: &Limits) {
        let at = self.base.elapsed() + limits.call_timeout.max(EPOCH_TICK);
        self.at.store(at.as_nanos() as u64, Relaxed);
    }

    fn passed(&self) -> bool {
        self.base.elapsed().as_nanos() as u64 >= self.at.load(Relaxed)
    }
}
