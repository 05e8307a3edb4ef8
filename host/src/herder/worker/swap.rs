//! Hot swap: a running connector moves to another build of its plugin, or
//! of its transform plugins, without a restart. Each task gets started
//! instances of the new builds, prepared off the herder's loop, and swaps
//! to them between two batches.

use super::{TaskEvent, Worker, task_plugin};
use crate::connector::{ConnectorConfig, PluginPick, WorkerDefaults};
use crate::herder::plugins::PluginRegistry;
use crate::herder::types::*;
use crate::runtime::{Plugin, Runtime};
use crate::task::{self, Swap};
use std::sync::Arc;
use tokio::sync::mpsc;

impl Worker {
    /// When the new config differs from the running one only in the builds
    /// it picks (`connector.plugin.*`, `transforms.<alias>.version`), and
    /// every task runs: each task gets started instances of the new builds
    /// and swaps to them between two batches, its consumer untouched. False
    /// when the change needs a restart instead.
    pub(in crate::herder) fn hot_swap(
        &mut self,
        name: &str,
        previous: &ConfigMap,
        config: &ConfigMap,
        target: TargetState,
        defaults: &WorkerDefaults,
        plugins: &PluginRegistry,
    ) -> bool {
        let connector = self.connectors.get_mut(name).expect("checked by the caller");
        let picks_build = |k: &str| {
            PluginPick::KEYS.contains(&k)
                || k.strip_prefix("transforms.")
                    .and_then(|k| k.strip_suffix(".version"))
                    .is_some_and(|a| !a.contains('.'))
        };
        let without_selection = |c: &ConfigMap| {
            let mut c = c.clone();
            c.retain(|k, _| !picks_build(k));
            c
        };
        if without_selection(previous) != without_selection(config) || target != TargetState::Started {
            return false;
        }
        let Some(running) = connector.config.as_ref() else { return false };
        if running.grants.kafka.values().any(|g| g.exactly_once) {
            // Its transactional producer belongs to the instance: a second
            // instance would fence the first in the middle of a transaction.
            tracing::info!(connector = name, "exactly-once: the tasks restart on the new plugin build");
            return false;
        }
        if connector.tasks.values().any(|t| t.state != State::Running || t.swaps.is_none()) {
            return false;
        }
        let Ok(parsed) = ConnectorConfig::parse(config, defaults) else { return false };
        let Ok(plugin) = plugins.resolve(&parsed.plugin, &parsed.plugin_pick).cloned() else { return false };
        let Ok(transforms) = plugins.resolve_transforms(&parsed) else { return false };
        let parsed = Arc::new(parsed);
        connector.config = Some(parsed.clone());
        connector.plugin = Some(plugin.clone());
        connector.transforms = transforms.clone();
        let to = task_plugin(&plugin, &parsed, &transforms);
        for (id, task) in connector.tasks.iter_mut() {
            let (Some(from), Some(swaps)) = (task.plugin.clone(), task.swaps.clone()) else { continue };
            if from == to {
                continue;
            }
            // Only what changed is instantiated anew.
            let sink = (from.digest != to.digest).then(|| plugin.clone());
            let transforms = (from.transforms != to.transforms).then(|| transforms.clone());
            let report = SwapReport {
                from,
                to: to.clone(),
                outcome: SwapOutcome::Preparing,
                pause_micros: None,
                records_put_again: None,
                error: None,
            };
            task.swap = Some(report.clone());
            let prepare = PrepareSwap {
                runtime: self.runtime.clone(),
                plugin: sink,
                transforms,
                config: parsed.clone(),
                task: *id,
                generation: task.generation,
                bootstrap_servers: self.bootstrap_servers.clone(),
                events: self.events.clone(),
                report,
            };
            let span = tracing::info_span!("task", connector = %name, task = *id);
            tokio::spawn(tracing::Instrument::instrument(prepare.run(swaps), span));
        }
        true
    }
}

/// A hot swap of one task, prepared off the herder's loop: started
/// instances of the new builds, handed to the task, whose answer goes back
/// to the herder as an event.
struct PrepareSwap {
    runtime: Runtime,
    /// The sink's new build, if it changed.
    plugin: Option<Plugin>,
    /// The transform plugins' builds, all of them, if any changed.
    transforms: Option<Vec<Plugin>>,
    config: Arc<ConnectorConfig>,
    task: u32,
    generation: u64,
    bootstrap_servers: String,
    events: mpsc::UnboundedSender<TaskEvent>,
    report: SwapReport,
}

impl PrepareSwap {
    async fn run(self, swaps: mpsc::Sender<Swap>) {
        let mut report = self.report;
        // The transforms first: they connect nothing, so a sink that fails
        // to start leaves only them to stop.
        let started = async {
            let mut transforms = match &self.transforms {
                Some(plugins) => {
                    let name = format!("{}-{}", self.config.name, self.task);
                    Some(task::start_transforms(&self.runtime, &self.config, plugins, &name).await?)
                }
                None => None,
            };
            let sink = match &self.plugin {
                Some(plugin) => {
                    let started =
                        task::start_instance(&self.runtime, plugin, &self.config, self.task, &self.bootstrap_servers)
                            .await;
                    match started {
                        Ok(started) => Some(started),
                        Err(e) => {
                            if let Some(transforms) = &mut transforms {
                                task::stop_transforms(transforms).await;
                            }
                            return Err(e);
                        }
                    }
                }
                None => None,
            };
            anyhow::Ok((sink, transforms))
        };
        match started.await {
            Ok((Some((mut instance, Some(_))), mut transforms)) => {
                report.outcome = SwapOutcome::RolledBack;
                report.error = Some("the new build opened an exactly-once grant, which cannot swap".into());
                let _ = instance.stop().await;
                if let Some(transforms) = &mut transforms {
                    task::stop_transforms(transforms).await;
                }
            }
            Ok((sink, transforms)) => {
                let instance = sink.map(|(instance, _)| instance);
                let (done, swapped) = tokio::sync::oneshot::channel();
                if swaps.send(Swap { instance, transforms, done }).await.is_err() {
                    return; // The task ended first: its next run starts on the new build.
                }
                let Ok(swapped) = swapped.await else { return };
                report.outcome = SwapOutcome::Swapped;
                report.pause_micros = Some(swapped.pause.as_micros() as u64);
                report.records_put_again = Some(swapped.put_again as u64);
            }
            Err(e) => {
                report.outcome = SwapOutcome::RolledBack;
                report.error = Some(format!("{e:#}"));
            }
        }
        let connector = self.config.name.clone();
        let _ = self.events.send(TaskEvent::Swap { connector, task: self.task, generation: self.generation, report });
    }
}
