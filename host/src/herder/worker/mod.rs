//! Connect's `Worker`: runs the connector instances and tasks this machine
//! was given, and hears from them. The herder decides what runs where and
//! when; the worker starts and stops it and keeps what each run reports
//! (its state, metrics, plugin build and swaps).

mod swap;

use super::TaskMetricsEntry;
use super::plugins::{PluginRegistry, Refusal};
use super::types::*;
use crate::capabilities::op::{OpKey, OpStats};
use crate::connector::{ConnectorConfig, WorkerDefaults};
use crate::runtime::{Plugin, Runtime};
use crate::task::{self, ActiveTopics, Swap, TaskExit, TaskMetrics, TaskSpec};
use futures::FutureExt;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a stopping task may take to hand back its records.
const TASK_STOP_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) struct Worker {
    pub(super) runtime: Runtime,
    bootstrap_servers: String,
    pub(super) connectors: BTreeMap<String, ConnectorRuntime>,
    /// Where tasks report that they started, exited or swapped.
    events: mpsc::UnboundedSender<TaskEvent>,
    next_generation: u64,
}

/// A connector as this worker runs it. Its config and target state are the
/// herder's (its stored state); the worker keeps what it made of them.
pub(super) struct ConnectorRuntime {
    /// `None` while the config is invalid or its plugin is missing: the
    /// connector is then FAILED and runs no tasks.
    pub(super) config: Option<Arc<ConnectorConfig>>,
    /// The build of the plugin its config picks, resolved with `config`;
    /// tasks started from now on run it.
    pub(super) plugin: Option<Plugin>,
    /// The builds of its transform plugins, in the chain's order, resolved
    /// with `config`.
    pub(super) transforms: Vec<Plugin>,
    pub(super) state: State,
    pub(super) trace: Option<String>,
    pub(super) tasks: BTreeMap<u32, TaskRuntime>,
    /// KIP-558's: the topics it has consumed, until reset. Its tasks add
    /// the topics of the records they poll (a `topics.regex` connector's
    /// are known no other way).
    pub(super) active_topics: ActiveTopics,
}

impl ConnectorRuntime {
    /// A connector not started yet.
    pub(super) fn new() -> Self {
        ConnectorRuntime {
            config: None,
            plugin: None,
            transforms: Vec::new(),
            state: State::Unassigned,
            trace: None,
            tasks: BTreeMap::new(),
            active_topics: ActiveTopics::default(),
        }
    }

    /// The version of the plugin build its config picks.
    pub(super) fn version(&self) -> Option<String> {
        self.plugin.as_ref().map(|p| p.metadata.version.clone())
    }
}

pub(super) struct TaskRuntime {
    pub(super) state: State,
    pub(super) trace: Option<String>,
    /// Tells this run of the task from earlier ones, whose late events are ignored.
    pub(super) generation: u64,
    pub(super) stop: CancellationToken,
    pub(super) handle: Option<JoinHandle<()>>,
    pub(super) metrics: Arc<TaskMetrics>,
    /// The build this run of the task runs, as its last swap left it.
    pub(super) plugin: Option<TaskPlugin>,
    pub(super) swap: Option<SwapReport>,
    /// Where new instances go for a hot swap, while the task runs.
    pub(super) swaps: Option<mpsc::Sender<Swap>>,
}

impl TaskRuntime {
    /// The version of the plugin build this run of the task runs.
    pub(super) fn version(&self) -> Option<String> {
        self.plugin.as_ref().map(|p| p.version.clone())
    }

    /// A task that is not running, in `state`.
    pub(super) fn idle(state: State) -> Self {
        TaskRuntime {
            state,
            trace: None,
            generation: 0,
            stop: CancellationToken::new(),
            handle: None,
            metrics: Arc::default(),
            plugin: None,
            swap: None,
            swaps: None,
        }
    }
}

pub(super) enum TaskEvent {
    /// With where to send the task a new instance for a hot swap.
    Started {
        connector: String,
        task: u32,
        generation: u64,
        swaps: mpsc::Sender<Swap>,
    },
    Exited {
        connector: String,
        task: u32,
        generation: u64,
        exit: TaskExit,
    },
    /// A hot swap moved on: the report, and the build the task now runs.
    Swap {
        connector: String,
        task: u32,
        generation: u64,
        report: SwapReport,
    },
}

impl Worker {
    /// A worker with nothing running; its tasks' events go to `events`.
    pub(super) fn new(runtime: Runtime, bootstrap_servers: String, events: mpsc::UnboundedSender<TaskEvent>) -> Self {
        Worker { runtime, bootstrap_servers, connectors: BTreeMap::new(), events, next_generation: 1 }
    }

    /// (Re)starts only the Connector instance: parses the config and finds
    /// the plugin. Its state follows the target state, or FAILED with why.
    pub(super) fn start_connector_instance(
        &mut self,
        name: &str,
        raw: &ConfigMap,
        target: TargetState,
        defaults: &WorkerDefaults,
        plugins: &PluginRegistry,
    ) {
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let parsed = ConnectorConfig::parse(raw, defaults).map_err(|problems| {
            let lines: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect();
            format!("invalid configuration: {}", lines.join("; "))
        });
        let checked = parsed.and_then(|config| {
            let refused = |Refusal { key, message }| format!("{key}: {message}");
            let plugin = plugins.resolve(&config.plugin, &config.plugin_pick).map_err(refused)?.clone();
            let transforms = plugins.resolve_transforms(&config).map_err(refused)?;
            Ok((config, plugin, transforms))
        });
        match checked {
            Ok((config, plugin, transforms)) => {
                connector.config = Some(Arc::new(config));
                connector.plugin = Some(plugin);
                connector.transforms = transforms;
                connector.trace = None;
                connector.state = match target {
                    TargetState::Started => State::Running,
                    TargetState::Paused => State::Paused,
                    TargetState::Stopped => State::Stopped,
                };
            }
            Err(trace) => {
                tracing::error!(connector = name, trace, "connector failed");
                connector.config = None;
                connector.plugin = None;
                connector.transforms = Vec::new();
                connector.state = State::Failed;
                connector.trace = Some(trace);
            }
        }
    }

    /// Starts a task of the connector (whose instance has started).
    pub(super) fn start_task(&mut self, name: &str, task_id: u32) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let Some(config) = connector.config.clone() else { return };
        let Some(plugin) = connector.plugin.clone() else { return };
        let metrics = Arc::new(TaskMetrics { active_topics: connector.active_topics.clone(), ..Default::default() });
        let stop = CancellationToken::new();
        let running = task_plugin(&plugin, &config, &connector.transforms);
        let spec = TaskSpec {
            task_id,
            config,
            plugin,
            transforms: connector.transforms.clone(),
            bootstrap_servers: self.bootstrap_servers.clone(),
            metrics: metrics.clone(),
        };
        let (runtime, events, connector_name) = (self.runtime.clone(), self.events.clone(), name.to_string());
        let task_stop = stop.clone();
        // Every line the task logs carries its connector and task.
        let span = tracing::info_span!("task", connector = %connector_name, task = task_id);
        let handle = tokio::spawn(tracing::Instrument::instrument(
            async move {
                let (started, started_name) = (events.clone(), connector_name.clone());
                let task = async move {
                    match task::start(&runtime, spec).await {
                        Ok(task_loop) => {
                            let _ = started.send(TaskEvent::Started {
                                connector: started_name,
                                task: task_id,
                                generation,
                                swaps: task_loop.swap_sender(),
                            });
                            task_loop.run(task_stop).await
                        }
                        Err(e) => TaskExit::Failed(format!("{e:#}")),
                    }
                };
                // A panic in the host's task code fails the task, as an error
                // would, rather than leave it listed as running: its records
                // were not acknowledged, so they come again.
                let exit = std::panic::AssertUnwindSafe(task).catch_unwind().await.unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("a panic without a message");
                    TaskExit::Failed(format!("the task panicked: {what}"))
                });
                let _ = events.send(TaskEvent::Exited { connector: connector_name, task: task_id, generation, exit });
            },
            span,
        ));
        // A restarting task stays RESTARTING until it has started.
        let state = match connector.tasks.get(&task_id) {
            Some(t) if t.state == State::Restarting => State::Restarting,
            _ => State::Unassigned,
        };
        connector.tasks.insert(
            task_id,
            TaskRuntime {
                state,
                trace: None,
                generation,
                stop,
                handle: Some(handle),
                metrics,
                plugin: Some(running),
                swap: None,
                swaps: None,
            },
        );
    }

    /// Stops tasks and waits for them to hand back their records. They stay
    /// listed in `leave_as` (PAUSED, RESTARTING), or are removed with `None`.
    pub(super) async fn stop_tasks(&mut self, name: &str, tasks: &[u32], leave_as: Option<State>) {
        let mut handles = Vec::new();
        let Some(connector) = self.connectors.get_mut(name) else { return };
        for id in tasks {
            let Some(task) = connector.tasks.get_mut(id) else { continue };
            task.stop.cancel();
            if let Some(handle) = task.handle.take() {
                handles.push((*id, handle));
            }
            match leave_as {
                Some(state) => {
                    task.state = state;
                    task.trace = None;
                    task.generation = 0;
                }
                None => {
                    connector.tasks.remove(id);
                }
            }
        }
        for (id, handle) in handles {
            if tokio::time::timeout(TASK_STOP_TIMEOUT, handle).await.is_err() {
                tracing::error!(connector = name, task = id, "task did not stop in time");
            }
        }
    }

    pub(super) fn on_event(&mut self, event: TaskEvent) {
        let (name, id, generation) = match &event {
            TaskEvent::Started { connector, task, generation, .. }
            | TaskEvent::Exited { connector, task, generation, .. }
            | TaskEvent::Swap { connector, task, generation, .. } => (connector.clone(), *task, *generation),
        };
        let Some(connector) = self.connectors.get_mut(&name) else { return };
        let topics: Vec<String> = connector.config.as_ref().map(|c| c.topics.clone()).unwrap_or_default();
        let Some(task) = connector.tasks.get_mut(&id).filter(|t| t.generation == generation) else { return };
        match event {
            TaskEvent::Started { swaps, .. } => {
                task.state = State::Running;
                task.swaps = Some(swaps);
                connector.active_topics.lock().unwrap().extend(topics);
            }
            TaskEvent::Exited { exit: TaskExit::Failed(trace), .. } => {
                tracing::error!(connector = name, task = id, trace, "task failed");
                task.state = State::Failed;
                task.trace = Some(trace);
                task.handle = None;
                task.swaps = None;
            }
            TaskEvent::Exited { exit: TaskExit::Stopped, .. } => {
                task.state = State::Unassigned;
                task.handle = None;
                task.swaps = None;
            }
            TaskEvent::Swap { report, .. } => {
                match report.outcome {
                    SwapOutcome::Swapped => task.plugin = Some(report.to.clone()),
                    SwapOutcome::RolledBack => tracing::error!(
                        connector = name,
                        task = id,
                        to = report.to.version,
                        error = report.error.as_deref().unwrap_or(""),
                        "plugin swap rolled back: the task runs its old build"
                    ),
                    SwapOutcome::Preparing => {}
                }
                task.swap = Some(report);
            }
        }
    }

    pub(super) fn task_metrics(&self) -> Vec<TaskMetricsEntry> {
        self.connectors
            .iter()
            .flat_map(|(name, c)| {
                c.tasks.iter().map(move |(id, t)| TaskMetricsEntry {
                    connector: name.clone(),
                    task: *id,
                    metrics: t.metrics.clone(),
                })
            })
            .collect()
    }

    pub(super) fn capability_metrics(&self) -> Vec<(OpKey, OpStats)> {
        self.runtime.capability_metrics().snapshot()
    }
}

/// What a task's status says of the builds it runs: its plugin's, and its
/// transform plugins' (`transforms`, those of `config`'s chain).
pub(super) fn task_plugin(plugin: &Plugin, config: &ConnectorConfig, transforms: &[Plugin]) -> TaskPlugin {
    let transforms = config
        .transforms
        .plugins()
        .zip(transforms)
        .map(|((alias, _), t)| TransformBuild {
            alias: alias.to_string(),
            plugin: t.metadata.name.clone(),
            version: t.metadata.version.clone(),
            digest: t.digest.clone(),
        })
        .collect();
    TaskPlugin { version: plugin.metadata.version.clone(), digest: plugin.digest.clone(), transforms }
}
