use super::batch::{self, FlushScope, PutReport, RecordBatch, Settlement, SinkRecord};
use super::bindings::{self, ConfigError, PluginMetadata, TaskError};
use super::{Limits, PluginKind, PluginState};
use anyhow::Result;
use spillway_kafka::target::TargetCluster;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};

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

/// One plugin instance with its own store: serves exactly one task (a
/// sink), or one task's stage of its transforms (a transform).
pub struct PluginInstance {
    store: Store<PluginState>,
    bindings: Exports,
    /// Its `spillway:connect/names` export, if it has one.
    connect: Option<bindings::connect::Provider>,
    limits: Limits,
    /// While set, a call still running when it is cancelled is dropped: a
    /// task that stops does not wait out a stuck `put()`.
    interrupt_on: Option<CancellationToken>,
    poisoned: bool,
}

/// What the component exports beside `plugin`: the calls of its kind.
enum Exports {
    Sink(bindings::Sink),
    Transform(bindings::transform::Transform),
}

/// A call's future over either kind's `plugin` export (the two worlds'
/// bindings are separate types of one shape).
macro_rules! plugin_call {
    ($bindings:expr, $store:expr, |$plugin:ident| $call:expr) => {
        async {
            match $bindings {
                Exports::Sink(b) => {
                    let $plugin = b.spillway_connector_plugin();
                    $call.await
                }
                Exports::Transform(b) => {
                    let $plugin = b.spillway_connector_plugin();
                    $call.await
                }
            }
        }
    };
}

/// The error of a call that the plugin's kind does not have.
fn wrong_kind(call: &str, kind: PluginKind) -> PluginError {
    PluginError::Task(TaskError::Fatal(format!("{call} called on a {} plugin", kind.connect_type())))
}

/// How a call ended, before it is turned into a result.
enum Ended<R> {
    Returned(wasmtime::Result<R>),
    TimedOut,
    Interrupted,
}

impl PluginInstance {
    pub(super) async fn new(
        engine: &Engine,
        linker: &Linker<PluginState>,
        component: &Component,
        kind: PluginKind,
        state: PluginState,
        limits: &Limits,
    ) -> Result<Self> {
        let mut store = Store::new(engine, state);
        store.limiter(|state| &mut state.limiter);
        // Running wasm yields to the executor at every epoch tick, so that
        // the call's deadline and a stop are seen even in an endless loop.
        // Through tokio's yield_now, which lets the worker poll its I/O
        // driver before the task runs again: a task that wakes itself (the
        // plain yield) leaves sockets unread for 61 polls, and two spinning
        // plugins kept `/health` waiting over a second.
        store.epoch_deadline_callback(|_| Ok(UpdateDeadline::YieldCustom(1, Box::pin(tokio::task::yield_now()))));
        store.set_epoch_deadline(1);
        // Instantiation runs the plugin's start-up code: bound it as a call.
        let instance = tokio::time::timeout(limits.call_timeout, linker.instantiate_async(&mut store, component))
            .await
            .map_err(|_| PluginError::Timeout { limit_ms: limits.call_timeout.as_millis() as u64 })??;
        let bindings = match kind {
            PluginKind::Sink => Exports::Sink(bindings::Sink::new(&mut store, &instance)?),
            PluginKind::Transform => Exports::Transform(bindings::transform::Transform::new(&mut store, &instance)?),
        };
        let connect = match component.get_export_index(None, bindings::connect::EXPORT) {
            Some(_) => Some(bindings::connect::Provider::new(&mut store, &instance)?),
            None => None,
        };
        Ok(PluginInstance { store, bindings, connect, limits: limits.clone(), interrupt_on: None, poisoned: false })
    }

    /// Calls after `token` is cancelled end at once as `Interrupted` (or at
    /// the next epoch tick, if wasm is running); `None` lets calls run to
    /// their time limit, as the final flush and stop of a task must.
    pub fn interrupt_on(&mut self, token: Option<CancellationToken>) {
        self.interrupt_on = token;
    }

    pub fn kind(&self) -> PluginKind {
        match self.bindings {
            Exports::Sink(_) => PluginKind::Sink,
            Exports::Transform(_) => PluginKind::Transform,
        }
    }

    /// False once a trap, timeout, memory failure or interrupt ended a call.
    pub fn is_usable(&self) -> bool {
        !self.poisoned
    }

    /// Bytes the instance holds now against its memory budget: linear
    /// memories and tables.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().limiter.current_bytes
    }

    pub async fn metadata(&mut self) -> Result<PluginMetadata, PluginError> {
        let (bindings, store, guard) = self.begin()?;
        let ended = guard.run(plugin_call!(bindings, store, |plugin| plugin.call_metadata(store))).await;
        self.finish(ended)
    }

    /// The Kafka Connect names the plugin answers to: none if it does not
    /// export `spillway:connect/names`.
    pub async fn connect_names(&mut self) -> Result<bindings::connect::ConnectNames, PluginError> {
        let Some(connect) = self.connect.take() else { return Ok(Default::default()) };
        let (_, store, guard) = self.begin()?;
        let ended = guard.run(connect.spillway_connect_names().call_names(&mut *store)).await;
        self.connect = Some(connect);
        self.finish(ended)
    }

    pub async fn validate(&mut self, config: &[(String, String)]) -> Result<Vec<ConfigError>, PluginError> {
        let config = config.to_vec();
        let (bindings, store, guard) = self.begin()?;
        let ended = guard.run(plugin_call!(bindings, store, |plugin| plugin.call_validate(store, &config))).await;
        self.finish(ended)
    }

    pub async fn start(&mut self, config: &[(String, String)]) -> Result<(), PluginError> {
        let config = config.to_vec();
        let (bindings, store, guard) = self.begin()?;
        let call = async {
            match bindings {
                Exports::Sink(b) => b.spillway_connector_sink_task().call_start(store, &config).await,
                Exports::Transform(b) => b.spillway_connector_transformation().call_start(store, &config).await,
            }
        };
        let ended = guard.run(call).await;
        self.finish(ended)?.map_err(PluginError::Task)
    }

    /// Packs `records` and puts them: for callers that hold records one by
    /// one (tests, benchmarks); the task packs its own ([`Self::put_batch`]).
    pub async fn put(&mut self, records: &[SinkRecord]) -> Result<PutReport, PluginError> {
        self.put_batch(&RecordBatch::from(records)).await
    }

    pub async fn put_batch(&mut self, batch: &RecordBatch) -> Result<PutReport, PluginError> {
        let kafka = &mut self.store.data_mut().capabilities.kafka;
        if kafka.is_granted() && !batch.is_empty() {
            // A send names its source records by id: offset syncs need
            // their coordinates.
            kafka.note_batch(batch.coordinates());
        }
        let (Exports::Sink(bindings), store, guard) = self.begin()? else { return Err(wrong_kind("put", self.kind())) };
        let ended = guard.run(bindings.spillway_connector_sink_task().call_put(store, &batch.0)).await;
        let report = self.finish(ended)?.map_err(PluginError::Task)?;
        let outcomes = batch::expand_outcomes(report.outcomes, batch.len()).ok_or_else(|| {
            PluginError::Task(TaskError::Fatal(format!(
                "the plugin's outcome runs do not add up to the batch of {} records",
                batch.len()
            )))
        })?;
        Ok(PutReport { outcomes, settled: batch::expand_settlements(report.settled) })
    }

    pub async fn flush(&mut self, scope: &FlushScope) -> Result<Vec<Settlement>, PluginError> {
        let scope = bindings::FlushScope::from(scope);
        let (Exports::Sink(bindings), store, guard) = self.begin()? else {
            return Err(wrong_kind("flush", self.kind()));
        };
        let ended = guard.run(bindings.spillway_connector_sink_task().call_flush(store, &scope)).await;
        Ok(batch::expand_settlements(self.finish(ended)?.map_err(PluginError::Task)?))
    }

    /// Connects the kafka grants now, before the task joins its group, and
    /// returns the exactly-once grant's cluster, if any: the task commits
    /// its transactions and reads its offsets there.
    pub async fn connect_kafka(&mut self) -> anyhow::Result<Option<Arc<TargetCluster>>> {
        self.store.data_mut().capabilities.kafka.connect().await
    }

    pub async fn stop(&mut self) -> Result<(), PluginError> {
        let (bindings, store, guard) = self.begin()?;
        let call = async {
            match bindings {
                Exports::Sink(b) => b.spillway_connector_sink_task().call_stop(store).await,
                Exports::Transform(b) => b.spillway_connector_transformation().call_stop(store).await,
            }
        };
        let ended = guard.run(call).await;
        self.finish(ended)
    }

    /// Transforms a batch: one `transformed` per record, in order. A
    /// transform that answers for more or fewer records fails the call.
    pub async fn apply(&mut self, batch: &RecordBatch) -> Result<Vec<bindings::Transformed>, PluginError> {
        let (Exports::Transform(bindings), store, guard) = self.begin()? else {
            return Err(wrong_kind("apply", self.kind()));
        };
        let ended = guard.run(bindings.spillway_connector_transformation().call_apply(store, &batch.0)).await;
        let transformed = self.finish(ended)?.map_err(PluginError::Task)?;
        if transformed.len() != batch.len() {
            return Err(PluginError::Task(TaskError::Fatal(format!(
                "the transform answered for {} records of a batch of {}",
                transformed.len(),
                batch.len()
            ))));
        }
        Ok(transformed)
    }

    /// Starts a call: its deadline, and the capabilities' share of it.
    fn begin(&mut self) -> Result<(&Exports, &mut Store<PluginState>, CallGuard), PluginError> {
        if self.poisoned {
            return Err(PluginError::Poisoned);
        }
        let deadline = Instant::now() + self.limits.call_timeout;
        // A denied growth that the plugin got over (a collector freed
        // memory) does not make a later call's trap an out-of-memory one.
        self.store.data_mut().limiter.exceeded = false;
        self.store.data().budget.set(Some(deadline - capability_reserve(self.limits.call_timeout)));
        self.store.set_epoch_deadline(1);
        let guard = CallGuard { deadline, interrupt_on: self.interrupt_on.clone() };
        Ok((&self.bindings, &mut self.store, guard))
    }

    /// Turns how a call ended into its result; any failure but the plugin's
    /// own error leaves the instance unusable.
    fn finish<R>(&mut self, ended: Ended<R>) -> Result<R, PluginError> {
        self.store.data().budget.set(None);
        let error = match ended {
            Ended::Returned(Ok(value)) => return Ok(value),
            Ended::Returned(Err(err)) => self.classify(err),
            Ended::TimedOut => PluginError::Timeout { limit_ms: self.limits.call_timeout.as_millis() as u64 },
            Ended::Interrupted => PluginError::Interrupted,
        };
        self.poisoned = true;
        Err(error)
    }

    fn classify(&mut self, err: wasmtime::Error) -> PluginError {
        let state = self.store.data_mut();
        if state.limiter.exceeded {
            return PluginError::OutOfMemory { limit_bytes: self.limits.memory_bytes };
        }
        let stderr = state.stderr.text();
        let trap = format!("{err:?}");
        PluginError::Trap(if stderr.is_empty() { trap } else { format!("{stderr}\n{trap}") })
    }
}

/// What ends a call from outside: its deadline, or its task stopping.
struct CallGuard {
    deadline: Instant,
    interrupt_on: Option<CancellationToken>,
}

impl CallGuard {
    /// Runs a call's future until it returns, its deadline passes, or its
    /// task stops. Dropping the future ends the call wherever it is: in wasm
    /// (which yields at every epoch tick) or in a host call.
    async fn run<R>(self, call: impl Future<Output = wasmtime::Result<R>>) -> Ended<R> {
        let stopped = async {
            match &self.interrupt_on {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            () = stopped => Ended::Interrupted,
            returned = tokio::time::timeout_at(self.deadline, call) => match returned {
                Ok(returned) => Ended::Returned(returned),
                Err(_) => Ended::TimedOut,
            },
        }
    }
}

/// How long before a call's deadline its capability operations must end,
/// so that a slow one reaches the plugin as a retriable error it can return
/// rather than the call timing out: a tenth of the call's time, between
/// 10 ms and 1 s.
fn capability_reserve(call_timeout: Duration) -> Duration {
    (call_timeout / 10).clamp(Duration::from_millis(10), Duration::from_secs(1))
}
