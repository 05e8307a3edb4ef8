//! The herder's main loop: it owns the connectors' configs and target
//! states (and their store), restarts, statuses and, in a group, this
//! worker's part of the assignment; the [`Worker`] it drives runs what it
//! decides. Only this loop changes anything; the [`super::Herder`] handle
//! sends it jobs. One file per concern: `configs`, `group`, `restarts`,
//! `queries`.

mod configs;
mod group;
mod queries;
mod restarts;

use super::distributed::{Command, Membership};
use super::plugins::PluginRegistry;
use super::store::{
    StateStore, Status, StatusView, StatusWriter, StoredConnector, StoredState, connector_key, task_key,
};
use super::types::*;
use super::worker::{ConnectorRuntime, TaskEvent, Worker};
use super::{HerderError, HerderResult, Job, WorkerConfig};
use crate::kafka::clients::ClusterAccess;
use crate::runtime::Runtime;
use restarts::RestartPlan;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};

pub struct HerderLoop {
    config: WorkerConfig,
    pub(super) plugins: PluginRegistry,
    store: StateStore,
    /// What the store holds, as of this worker's last change or the last
    /// change of another that it applied.
    stored: StoredState,
    /// Where statuses are reported as they change, if anywhere.
    statuses: Option<StatusWriter>,
    /// Distributed mode: every worker's statuses, and this one's place in
    /// the group. `None` standalone, where this worker runs everything.
    status_view: Option<StatusView>,
    membership: Option<Membership>,
    /// Restarts answered (and recorded) but not yet carried out.
    pending_restarts: Vec<(String, RestartPlan)>,
    event_receiver: Option<mpsc::UnboundedReceiver<TaskEvent>>,
    /// Turns to run a plugin's `validate`: `policy.plugin.validations.max`
    /// at once, as each is an instance any REST client can start.
    validations: Arc<Semaphore>,
    stopping: bool,
    /// What runs here: connector instances and tasks.
    pub(super) worker: Worker,
}

impl HerderLoop {
    pub async fn start(
        mut config: WorkerConfig,
        runtime: Runtime,
        commands: mpsc::UnboundedSender<Command>,
    ) -> anyhow::Result<Self> {
        let defaults = &mut config.defaults;
        for (path, what) in [
            (config.state_file.as_path(), "state file"),
            (runtime.cache_dir(), "compiled-plugin cache"),
            (config.plugin_dir.as_path(), "plugin directory"),
        ] {
            defaults.policy.protect(path, what);
            defaults.providers.protect(path);
        }
        let own_topics = [config.config_topic.as_ref().map(|t| &t.name), config.status_topic.as_ref().map(|t| &t.name)];
        for topic in own_topics.into_iter().flatten() {
            defaults.policy.protect_topic(topic);
        }
        let plugins = PluginRegistry::scan(&runtime, &config.plugin_dir, config.defaults.connect_names.clone()).await;
        let cluster = ClusterAccess::new(config.bootstrap(), &config.defaults.clients);
        let mut store = StateStore::open(&config.state_file, config.config_topic.as_ref(), &cluster).await?;
        let mut stored = store.load()?;
        let statuses = match &config.status_topic {
            Some(topic) => Some(StatusWriter::open(&cluster, topic).await?),
            None => None,
        };
        let (status_view, membership) = match (&config.group, &config.status_topic) {
            (Some(group), Some(topic)) => {
                (Some(StatusView::open(&cluster, topic).await?), Some(Membership::new(group.clone(), commands)))
            }
            _ => (None, None),
        };
        // KIP-745: start-up starts everything, which fulfils any restart
        // request still on record. Standalone only: in a group the request
        // may be another worker's, still under way.
        if !stored.restart_requests.is_empty() && membership.is_none() {
            tracing::info!(count = stored.restart_requests.len(), "restart requests read at start-up are ignored");
            let mut cleared = stored.clone();
            cleared.restart_requests.clear();
            store.save(&stored, &cleared).await?;
            stored = cleared;
        }
        // KIP-1302 made share groups opt-in: a connector stored when they
        // were the default keeps its share group (and its position).
        if let Some((upgraded, pinned)) = stored.upgraded(!config.embedded_broker()) {
            for name in &pinned {
                tracing::info!(
                    connector = name,
                    "stored before share groups became opt-in: pinned to its share group \
                     (consumer.override.group.protocol=share); remove the key to move it to a classic group"
                );
            }
            store.save(&stored, &upgraded).await?;
            stored = upgraded;
        }
        let (events, event_receiver) = mpsc::unbounded_channel();
        let worker = Worker::new(runtime, config.bootstrap().to_string(), events);
        let validations = Arc::new(Semaphore::new(config.defaults.policy.requests.validations));
        let mut herder = HerderLoop {
            config,
            plugins,
            store,
            stored: stored.clone(),
            statuses,
            status_view,
            membership,
            pending_restarts: Vec::new(),
            event_receiver: Some(event_receiver),
            validations,
            stopping: false,
            worker,
        };
        for name in stored.connectors.keys() {
            herder.worker.connectors.insert(name.clone(), ConnectorRuntime::new());
            herder.start_connector(name);
        }
        Ok(herder)
    }

    /// The main loop: jobs from the handle, task events, then any restarts
    /// the last job accepted.
    pub async fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut events = self.event_receiver.take().expect("run is called once");
        let mut config_read = self.store.watch();
        while !self.stopping {
            let others_changed = async {
                match &mut config_read {
                    Some(read) => read.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                job = jobs.recv() => match job {
                    Some(job) => job(&mut self).await,
                    None => break,
                },
                Some(event) = events.recv() => self.worker.on_event(event),
                true = others_changed => self.follow_config().await,
            }
            self.carry_out_restarts().await;
            self.publish_statuses();
            self.rebalance_if_work_changed();
        }
        if !self.stopping {
            let _ = self.shutdown().await;
        }
    }

    /// Reports every status that changed to the status topic.
    fn publish_statuses(&mut self) {
        if self.statuses.is_none() {
            return;
        }
        let worker_id = &self.config.worker_id();
        let status = |state: State, trace: &Option<String>, generation: u64, version: Option<String>| Status {
            state,
            trace: trace.clone(),
            worker_id: worker_id.clone(),
            generation,
            version,
        };
        let mut now = BTreeMap::new();
        for (name, c) in &self.worker.connectors {
            if self.membership.as_ref().is_none_or(|m| m.owned.connectors.contains(name)) {
                now.insert(connector_key(name), status(c.state, &c.trace, 0, c.version()));
            }
            for (id, t) in &c.tasks {
                now.insert(task_key(name, *id), status(t.state, &t.trace, t.generation, t.version()));
            }
        }
        // In a group, work that left this worker is reported by its new
        // owner; only work that is gone from the cluster is tombstoned.
        let existing: std::collections::BTreeSet<String> = match &self.membership {
            None => Default::default(),
            Some(_) => {
                let work = self.work_set();
                let connectors = work.connectors.iter().map(|c| connector_key(c));
                connectors.chain(work.tasks.iter().map(|(c, t)| task_key(c, *t))).collect()
            }
        };
        if let Some(writer) = &mut self.statuses {
            writer.publish(now, |key| !existing.contains(key));
        }
    }

    /// Makes `change` to the stored state durable, or refuses it and
    /// leaves the state as it was.
    async fn save_change(&mut self, change: impl FnOnce(&mut StoredState)) -> HerderResult<()> {
        let mut next = self.stored.clone();
        change(&mut next);
        self.store
            .save(&self.stored, &next)
            .await
            .map_err(|e| HerderError::Internal(format!("saving connector state: {e:#}")))?;
        self.stored = next;
        Ok(())
    }

    /// Applies what other workers changed, as read from the config topic:
    /// connectors created, changed, paused, deleted, and restart requests.
    async fn follow_config(&mut self) {
        let durable = match self.store.load() {
            Ok(durable) => durable,
            Err(e) => return tracing::error!(error = %e, "reading the state store failed"),
        };
        // What this worker applied last; the durable state is the one to apply.
        let applied = std::mem::replace(&mut self.stored, durable.clone());
        for name in applied.connectors.keys().filter(|n| !durable.connectors.contains_key(*n)) {
            tracing::info!(connector = name, "deleted on another worker");
            self.remove_connector(name).await;
        }
        for (name, stored) in &durable.connectors {
            let Some(before) = applied.connectors.get(name) else {
                tracing::info!(connector = name, "created on another worker");
                self.add_connector(name);
                continue;
            };
            if before.config != stored.config {
                tracing::info!(connector = name, "reconfigured on another worker");
                self.reconfigure(name, &before.config).await;
            }
            if before.target_state != stored.target_state {
                self.apply_target(name.clone(), stored.target_state).await;
            }
        }
        for (name, request) in self.store.take_restarts() {
            if self.worker.connectors.contains_key(&name) {
                tracing::info!(connector = name, ?request, "restart requested on another worker");
                self.plan_restart(&name, request, false);
            }
        }
    }

    pub fn connector_names(&self) -> Vec<String> {
        self.worker.connectors.keys().cloned().collect()
    }

    fn connector(&self, name: &str) -> HerderResult<&ConnectorRuntime> {
        self.worker.connectors.get(name).ok_or_else(|| not_found(name))
    }

    /// The connector's config and target state, as the herder holds them.
    fn stored_connector(&self, name: &str) -> HerderResult<&StoredConnector> {
        self.stored.connectors.get(name).ok_or_else(|| not_found(name))
    }

    /// The connector's target state (STOPPED for one that is gone).
    fn target_of(&self, name: &str) -> TargetState {
        self.stored.connectors.get(name).map_or(TargetState::Stopped, |c| c.target_state)
    }

    pub async fn shutdown(&mut self) -> HerderResult<()> {
        self.stopping = true;
        let names: Vec<String> = self.worker.connectors.keys().cloned().collect();
        for name in names {
            let tasks: Vec<u32> = self.worker.connectors[&name].tasks.keys().copied().collect();
            self.worker.stop_tasks(&name, &tasks, Some(State::Unassigned)).await;
        }
        self.publish_statuses();
        if let Some(writer) = &self.statuses {
            writer.flush().await;
        }
        // Last: the others take the work over at once, not after our session.
        if let Some(membership) = &self.membership {
            let (done, left) = tokio::sync::oneshot::channel();
            if membership.commands.send(Command::Leave(done)).is_ok() {
                let _ = tokio::time::timeout(Duration::from_secs(10), left).await;
            }
        }
        Ok(())
    }
}

fn not_found(name: &str) -> HerderError {
    HerderError::NotFound(format!("Connector {name} not found"))
}

fn check_name(name: &str) -> HerderResult<()> {
    if name.trim().is_empty() {
        return Err(HerderError::BadRequest("Connector name cannot be empty".into()));
    }
    if name.contains('/') || name.chars().any(char::is_control) {
        return Err(HerderError::BadRequest(format!(
            "Connector name '{name}' may not contain '/' or control characters"
        )));
    }
    Ok(())
}
