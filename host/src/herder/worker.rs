//! The herder's main loop and everything it owns. Only this loop changes
//! connectors and tasks; the [`super::Herder`] handle sends it jobs.

use super::distributed::{Assignment, Command, MemberMetadata, Membership, WorkSet, protocol};
use super::offsets::{OffsetsChange, OffsetsTarget};
use super::plugins::{PluginRegistry, Refusal, plugin_info};
use super::store::{
    RestartRequest, StateStore, Status, StatusView, StatusWriter, StoredConnector, StoredState, connector_key, task_key,
};
use super::types::*;
use super::validate;
use super::{HerderError, HerderResult, Job, TaskMetricsEntry, WorkerConfig};
use crate::capabilities::op::{OpKey, OpStats};
use crate::connector::{ConnectorConfig, GroupProtocol, PluginPick};
use crate::kafka::clients::ClusterAccess;
use crate::runtime::{Plugin, Runtime};
use crate::task::{self, ActiveTopics, Swap, TaskExit, TaskMetrics, TaskSpec};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long a stopping task may take to hand back its records.
const TASK_STOP_TIMEOUT: Duration = Duration::from_secs(60);

pub struct Worker {
    config: WorkerConfig,
    runtime: Runtime,
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
    connectors: BTreeMap<String, ConnectorRuntime>,
    /// Restarts answered (and recorded) but not yet carried out.
    pending_restarts: Vec<(String, RestartPlan)>,
    events: mpsc::UnboundedSender<TaskEvent>,
    event_receiver: Option<mpsc::UnboundedReceiver<TaskEvent>>,
    next_generation: u64,
    stopping: bool,
}

struct ConnectorRuntime {
    raw: ConfigMap,
    /// `None` while the config is invalid or its plugin is missing: the
    /// connector is then FAILED and runs no tasks.
    config: Option<Arc<ConnectorConfig>>,
    /// The build of the plugin its config picks, resolved with `config`;
    /// tasks started from now on run it.
    plugin: Option<Plugin>,
    target: TargetState,
    state: State,
    trace: Option<String>,
    tasks: BTreeMap<u32, TaskRuntime>,
    /// KIP-558's: the topics it has consumed, until reset. Its tasks add
    /// the topics of the records they poll (a `topics.regex` connector's
    /// are known no other way).
    active_topics: ActiveTopics,
}

impl ConnectorRuntime {
    /// The version of the plugin build its config picks.
    fn version(&self) -> Option<String> {
        self.plugin.as_ref().map(|p| p.metadata.version.clone())
    }
}

struct TaskRuntime {
    state: State,
    trace: Option<String>,
    /// Tells this run of the task from earlier ones, whose late events are ignored.
    generation: u64,
    stop: CancellationToken,
    handle: Option<JoinHandle<()>>,
    metrics: Arc<TaskMetrics>,
    /// The build this run of the task runs, as its last swap left it.
    plugin: Option<TaskPlugin>,
    swap: Option<SwapReport>,
    /// Where new instances go for a hot swap, while the task runs.
    swaps: Option<mpsc::Sender<Swap>>,
}

impl TaskRuntime {
    /// The version of the plugin build this run of the task runs.
    fn version(&self) -> Option<String> {
        self.plugin.as_ref().map(|p| p.version.clone())
    }

    /// A task that is not running, in `state`.
    fn idle(state: State) -> Self {
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

enum TaskEvent {
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

/// Which of this worker's instances a restart request targets, decided
/// when it was accepted or read.
#[derive(Clone, Debug)]
struct RestartPlan {
    connector: bool,
    tasks: Vec<u32>,
    /// Accepted by this worker, which clears the request once it is done;
    /// a request read from another is that one's to clear.
    requested_here: bool,
}

fn not_found(name: &str) -> HerderError {
    HerderError::NotFound(format!("Connector {name} not found"))
}

impl Worker {
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
        let plugins = PluginRegistry::scan(&runtime, &config.plugin_dir).await;
        let cluster = ClusterAccess::new(&config.bootstrap_servers, &config.defaults.clients);
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
        let (events, event_receiver) = mpsc::unbounded_channel();
        let mut worker = Worker {
            config,
            runtime,
            plugins,
            store,
            stored: stored.clone(),
            statuses,
            status_view,
            membership,
            connectors: BTreeMap::new(),
            pending_restarts: Vec::new(),
            events,
            event_receiver: Some(event_receiver),
            next_generation: 1,
            stopping: false,
        };
        for (name, connector) in stored.connectors {
            worker.connectors.insert(
                name.clone(),
                ConnectorRuntime {
                    raw: connector.config,
                    config: None,
                    plugin: None,
                    target: connector.target_state,
                    state: State::Unassigned,
                    trace: None,
                    tasks: BTreeMap::new(),
                    active_topics: ActiveTopics::default(),
                },
            );
            worker.start_connector(&name);
        }
        Ok(worker)
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
                Some(event) = events.recv() => self.on_event(event),
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
        let Some(writer) = &mut self.statuses else { return };
        let worker_id = &self.config.worker_id;
        let status = |state: State, trace: &Option<String>, generation: u64, version: Option<String>| Status {
            state,
            trace: trace.clone(),
            worker_id: worker_id.clone(),
            generation,
            version,
        };
        let mut now = BTreeMap::new();
        for (name, c) in &self.connectors {
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
                let work = work_set(&self.connectors);
                let connectors = work.connectors.iter().map(|c| connector_key(c));
                connectors.chain(work.tasks.iter().map(|(c, t)| task_key(c, *t))).collect()
            }
        };
        writer.publish(now, |key| !existing.contains(key));
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
        let gone: Vec<String> =
            self.connectors.keys().filter(|n| !durable.connectors.contains_key(*n)).cloned().collect();
        for name in gone {
            tracing::info!(connector = name, "deleted on another worker");
            self.remove_connector(&name).await;
        }
        for (name, stored) in &durable.connectors {
            let Some(running) = self.connectors.get(name) else {
                tracing::info!(connector = name, "created on another worker");
                self.add_connector(name, stored.config.clone(), stored.target_state);
                continue;
            };
            let (raw, target) = (running.raw.clone(), running.target);
            if raw != stored.config {
                tracing::info!(connector = name, "reconfigured on another worker");
                self.reconfigure(name, stored.config.clone()).await;
            }
            if target != stored.target_state {
                self.apply_target(name.clone(), stored.target_state).await;
            }
        }
        self.stored = durable;
        for (name, request) in self.store.take_restarts() {
            if self.connectors.contains_key(&name) {
                tracing::info!(connector = name, ?request, "restart requested on another worker");
                self.plan_restart(&name, request, false);
            }
        }
    }

    // ---- the group (distributed mode) ----

    pub fn leader_url(&self) -> Option<String> {
        self.membership.as_ref().filter(|m| !m.is_leader).and_then(|m| m.leader_url.clone())
    }

    /// What this worker tells the group when it joins.
    pub fn member_metadata(&self) -> bytes::Bytes {
        let membership = self.membership.as_ref().expect("only members join");
        let metadata = MemberMetadata {
            version: protocol::VERSION,
            url: membership.config.advertised_url.clone(),
            worker_id: self.config.worker_id.clone(),
            config_offset: self.store.read_offset(),
            owned: membership.owned.clone(),
        };
        serde_json::to_vec(&metadata).expect("plain data serializes").into()
    }

    /// The leader's part of a rebalance: every member's assignment.
    pub fn assign_group(&mut self, joined: &crate::kafka::group_member::Joined) -> Vec<(String, bytes::Bytes)> {
        let work = work_set(&self.connectors);
        let config_offset = self.store.read_offset();
        let membership = self.membership.as_mut().expect("only members assign");
        let mut owned = BTreeMap::new();
        for (member, metadata) in &joined.members {
            let metadata = serde_json::from_slice::<MemberMetadata>(metadata).map(|m| m.owned).unwrap_or_else(|e| {
                tracing::warn!(member, error = %e, "a member's metadata does not parse: taken to run nothing");
                WorkSet::default()
            });
            owned.insert(member.clone(), metadata);
        }
        let plan = membership.assignor.assign(std::time::Instant::now(), &work, &owned);
        membership.assigned_work = Some(work);
        let rejoin_after_ms = plan.rejoin_after.map(|d| d.as_millis() as u64);
        plan.owned
            .into_iter()
            .map(|(member, owned)| {
                let assignment = Assignment {
                    version: protocol::VERSION,
                    leader: joined.member_id.clone(),
                    leader_url: membership.config.advertised_url.clone(),
                    config_offset,
                    owned,
                    rejoin_after_ms,
                };
                (member, serde_json::to_vec(&assignment).expect("plain data serializes").into())
            })
            .collect()
    }

    /// Runs what the assignment gives this worker and stops what it takes
    /// away; having given work back, joins again so it can move.
    pub async fn on_assignment(&mut self, generation: i32, is_leader: bool, assignment: Assignment) {
        let Some(membership) = self.membership.as_mut() else { return };
        let before = std::mem::replace(&mut membership.owned, assignment.owned);
        membership.generation = generation;
        membership.is_leader = is_leader;
        membership.leader_url = Some(assignment.leader_url);
        let revoked = !before.is_subset(&membership.owned);
        tracing::info!(
            generation,
            connectors = membership.owned.connectors.len(),
            tasks = membership.owned.tasks.len(),
            revoked,
            "assignment received"
        );
        self.apply_placement().await;
        if revoked && let Some(membership) = &self.membership {
            membership.rejoin("work was revoked");
        }
    }

    /// The coordinator forgot this worker (its session ran out): another
    /// may run its work by now, so it stops all of it.
    pub async fn on_membership_lost(&mut self) {
        if let Some(membership) = self.membership.as_mut() {
            membership.owned = WorkSet::default();
            membership.is_leader = false;
        }
        self.apply_placement().await;
    }

    /// Stops the tasks this worker no longer owns and starts those it owns
    /// and does not run.
    async fn apply_placement(&mut self) {
        let names: Vec<String> = self.connectors.keys().cloned().collect();
        for name in names {
            let local: Vec<u32> = self.connectors[&name].tasks.keys().copied().collect();
            let moved: Vec<u32> = local.iter().copied().filter(|t| !self.owns_task(&name, *t)).collect();
            self.stop_tasks(&name, &moved, None).await;
            let connector = &self.connectors[&name];
            let Some(config) = connector.config.clone() else { continue };
            let target = connector.target;
            let missing: Vec<u32> = (0..config.tasks_max)
                .filter(|t| self.owns_task(&name, *t) && !self.connectors[&name].tasks.contains_key(t))
                .collect();
            for task in missing {
                match target {
                    TargetState::Started => self.spawn_task(&name, task),
                    TargetState::Paused => {
                        let connector = self.connectors.get_mut(&name).expect("listed");
                        connector.tasks.insert(task, TaskRuntime::idle(State::Paused));
                    }
                    TargetState::Stopped => {}
                }
            }
        }
    }

    /// The leader rebalances when the work to assign changed (a connector
    /// created or deleted here or elsewhere, `tasks.max` changed).
    fn rebalance_if_work_changed(&mut self) {
        let Some(membership) = self.membership.as_ref().filter(|m| m.is_leader) else { return };
        let work = work_set(&self.connectors);
        if membership.assigned_work.as_ref() != Some(&work) {
            let membership = self.membership.as_mut().expect("checked");
            membership.assigned_work = Some(work);
            membership.rejoin("the work to assign changed");
        }
    }

    pub fn connector_names(&self) -> Vec<String> {
        self.connectors.keys().cloned().collect()
    }

    fn connector(&self, name: &str) -> HerderResult<&ConnectorRuntime> {
        self.connectors.get(name).ok_or_else(|| not_found(name))
    }

    // ---- configuration ----

    pub async fn create(
        &mut self,
        name: String,
        mut config: ConfigMap,
        initial_state: Option<TargetState>,
    ) -> HerderResult<ConnectorInfo> {
        check_name(&name)?;
        if self.connectors.contains_key(&name) {
            return Err(HerderError::Conflict(format!("Connector {name} already exists")));
        }
        config.insert("name".into(), name.clone());
        self.check_config(&config, None).await?;
        let target = initial_state.unwrap_or(TargetState::Started);
        let stored = StoredConnector { config: config.clone(), target_state: target };
        self.save_change(|s| {
            s.connectors.insert(name.clone(), stored);
        })
        .await?;
        self.add_connector(&name, config, target);
        self.info(&name)
    }

    fn add_connector(&mut self, name: &str, config: ConfigMap, target: TargetState) {
        self.connectors.insert(
            name.to_string(),
            ConnectorRuntime {
                raw: config,
                config: None,
                plugin: None,
                target,
                state: State::Unassigned,
                trace: None,
                tasks: BTreeMap::new(),
                active_topics: ActiveTopics::default(),
            },
        );
        self.start_connector(name);
    }

    pub async fn put_config(&mut self, name: String, mut config: ConfigMap) -> HerderResult<(bool, ConnectorInfo)> {
        if !self.connectors.contains_key(&name) {
            return Ok((true, self.create(name, config, None).await?));
        }
        if let Some(given) = config.get("name")
            && given != &name
        {
            return Err(HerderError::BadRequest(format!(
                "Connector name configuration ({given}) doesn't match connector name in the URL ({name})"
            )));
        }
        config.insert("name".into(), name.clone());
        let previous = self.connectors.get(&name).map(|c| c.raw.clone());
        if let Some(previous) = &previous {
            validate::keep_hidden_secrets(self.plugin_of(&config), &mut config, previous);
        }
        self.check_config(&config, previous.as_ref()).await?;
        self.save_change(|s| {
            if let Some(stored) = s.connectors.get_mut(&name) {
                stored.config = config.clone();
            }
        })
        .await?;
        self.reconfigure(&name, config).await;
        Ok((false, self.info(&name)?))
    }

    pub async fn patch_config(
        &mut self,
        name: String,
        patch: BTreeMap<String, Option<String>>,
    ) -> HerderResult<ConnectorInfo> {
        let mut config = self.connector(&name)?.raw.clone();
        for (key, value) in patch {
            match value {
                Some(v) => config.insert(key, v),
                None => config.remove(&key),
            };
        }
        Ok(self.put_config(name, config).await?.1)
    }

    /// Refuses a config with any validation error, listing them all, and a
    /// share group that would take an existing consumer group's id (checked
    /// unless `previous`, the config it replaces, had the same group).
    async fn check_config(&self, config: &ConfigMap, previous: Option<&ConfigMap>) -> HerderResult<()> {
        let plugin_name = config.get("connector.class").cloned().unwrap_or_default();
        let infos = self.validate_config(plugin_name, config.clone()).await;
        if infos.error_count == 0 {
            for warning in &infos.warnings {
                tracing::warn!(connector = config.get("name").map(String::as_str).unwrap_or(""), "{warning}");
            }
            let group = |c: &ConfigMap| {
                ConnectorConfig::parse(c, &self.config.defaults).ok().map(|c| (c.group_protocol, c.group_id))
            };
            if previous.is_some_and(|previous| group(previous).is_some_and(|g| Some(g) == group(config))) {
                // Checked when it was set; asking again costs a connection,
                // and librdkafka's mock ends every share session on a broker
                // when any connection to it closes.
                return Ok(());
            }
            return self.check_share_group_id(config).await;
        }
        let lines: Vec<String> = infos
            .configs
            .iter()
            .flat_map(|c| c.value.errors.iter().map(move |e| format!("{}: {e}", c.value.name)))
            .collect();
        Err(HerderError::BadRequest(format!(
            "Connector configuration is invalid and contains the following {} error(s):\n{}\n\
             You can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
            infos.error_count,
            lines.join("\n")
        )))
    }

    /// KIP-1302: a share group id must not match an existing consumer
    /// group's, or the two would fight over membership.
    async fn check_share_group_id(&self, config: &ConfigMap) -> HerderResult<()> {
        let Ok(parsed) = ConnectorConfig::parse(config, &self.config.defaults) else { return Ok(()) };
        if parsed.group_protocol != GroupProtocol::Share {
            return Ok(());
        }
        let cluster = ClusterAccess::new(&self.config.bootstrap_servers, &parsed.clients);
        let (group, topics, pattern) = (parsed.group_id.clone(), parsed.topics.clone(), parsed.topics_pattern());
        let exists = tokio::task::spawn_blocking(move || {
            let topics = crate::kafka::groups::connector_topics(&cluster, &topics, pattern.as_ref())?;
            crate::kafka::groups::classic_group_exists(&cluster, &group, &topics)
        })
        .await
        .map_err(|e| HerderError::Internal(e.to_string()))?;
        match exists {
            Ok(false) => Ok(()),
            Ok(true) => Err(HerderError::BadRequest(format!(
                "Share group id '{}' is already used by a consumer group; share and consumer groups must not share \
                 an id. Set consumer.override.group.id to another id, or consumer.override.group.protocol=classic \
                 to consume with that consumer group.",
                parsed.group_id
            ))),
            Err(e) => {
                // The broker could not say (some test brokers lack the API): go on, but say so.
                tracing::warn!(group = parsed.group_id, error = format!("{e:#}"), "could not check the share group id");
                Ok(())
            }
        }
    }

    /// A changed config: when only `tasks.max` changed, tasks are added or
    /// removed and the others keep running; otherwise every task restarts.
    async fn reconfigure(&mut self, name: &str, config: ConfigMap) {
        if self.hot_swap(name, &config) {
            return;
        }
        let connector = self.connectors.get_mut(name).expect("checked by the caller");
        let only_tasks_max = {
            let mut old = connector.raw.clone();
            let mut new = config.clone();
            old.remove("tasks.max");
            new.remove("tasks.max");
            old == new && connector.config.is_some()
        };
        connector.raw = config;
        if only_tasks_max {
            let running: Vec<u32> = connector.tasks.keys().copied().collect();
            self.start_connector_instance(name);
            let Some(connector) = self.connectors.get(name) else { return };
            let Some(config) = connector.config.clone() else { return };
            let started = connector.target == TargetState::Started;
            let removed: Vec<u32> = running.iter().copied().filter(|t| *t >= config.tasks_max).collect();
            self.stop_tasks(name, &removed, None).await;
            if started {
                for task in (0..config.tasks_max).filter(|t| !running.contains(t)) {
                    self.spawn_task(name, task);
                }
            }
            return;
        }
        let all: Vec<u32> = connector.tasks.keys().copied().collect();
        self.stop_tasks(name, &all, None).await;
        self.start_connector(name);
    }

    /// When the new config differs from the running one only in the build
    /// of the plugin it picks, and every task runs: each task gets a started
    /// instance of the new build and swaps to it between two batches, its
    /// consumer untouched. False when the change needs a restart instead.
    fn hot_swap(&mut self, name: &str, config: &ConfigMap) -> bool {
        let connector = self.connectors.get_mut(name).expect("checked by the caller");
        let without_selection = |c: &ConfigMap| {
            let mut c = c.clone();
            c.retain(|k, _| !PluginPick::KEYS.contains(&k.as_str()));
            c
        };
        if without_selection(&connector.raw) != without_selection(config) || connector.target != TargetState::Started {
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
        let Ok(parsed) = ConnectorConfig::parse(config, &self.config.defaults) else { return false };
        let Ok(plugin) = self.plugins.resolve(&parsed.plugin, &parsed.plugin_pick).cloned() else { return false };
        let parsed = Arc::new(parsed);
        connector.raw = config.clone();
        connector.config = Some(parsed.clone());
        connector.plugin = Some(plugin.clone());
        let to = task_plugin(&plugin);
        for (id, task) in connector.tasks.iter_mut() {
            let (Some(from), Some(swaps)) = (task.plugin.clone(), task.swaps.clone()) else { continue };
            if from.digest == to.digest {
                continue;
            }
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
                plugin: plugin.clone(),
                config: parsed.clone(),
                task: *id,
                generation: task.generation,
                bootstrap_servers: self.config.bootstrap_servers.clone(),
                events: self.events.clone(),
                report,
            };
            let span = tracing::info_span!("task", connector = %name, task = *id);
            tokio::spawn(tracing::Instrument::instrument(prepare.run(swaps), span));
        }
        true
    }

    pub async fn delete(&mut self, name: String) -> HerderResult<()> {
        self.connector(&name)?;
        self.save_change(|s| {
            s.connectors.remove(&name);
            s.restart_requests.remove(&name);
        })
        .await?;
        self.remove_connector(&name).await;
        Ok(())
    }

    async fn remove_connector(&mut self, name: &str) {
        let tasks: Vec<u32> = self.connectors.get(name).map(|c| c.tasks.keys().copied().collect()).unwrap_or_default();
        self.stop_tasks(name, &tasks, None).await;
        self.connectors.remove(name);
        self.pending_restarts.retain(|(n, _)| n != name);
    }

    // ---- lifecycle ----

    /// Checks the config and plugin (the Connector instance) and then runs
    /// the tasks its target state asks for.
    fn start_connector(&mut self, name: &str) {
        self.start_connector_instance(name);
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let Some(config) = connector.config.clone() else { return };
        match connector.target {
            TargetState::Started => {
                for task in 0..config.tasks_max {
                    self.spawn_task(name, task);
                }
            }
            TargetState::Paused => {
                let owned =
                    |t: &u32| self.membership.as_ref().is_none_or(|m| m.owned.tasks.contains(&(name.into(), *t)));
                connector.tasks =
                    (0..config.tasks_max).filter(owned).map(|t| (t, TaskRuntime::idle(State::Paused))).collect();
            }
            TargetState::Stopped => connector.tasks.clear(),
        }
    }

    /// (Re)starts only the Connector instance: parses the config and finds
    /// the plugin. Its state follows the target state, or FAILED with why.
    fn start_connector_instance(&mut self, name: &str) {
        let defaults = self.config.defaults.clone();
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let parsed = ConnectorConfig::parse(&connector.raw, &defaults).map_err(|problems| {
            let lines: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect();
            format!("invalid configuration: {}", lines.join("; "))
        });
        let checked = parsed.and_then(|config| match self.plugins.resolve(&config.plugin, &config.plugin_pick) {
            Ok(plugin) => Ok((config, plugin.clone())),
            Err(Refusal { key, message }) => Err(format!("{key}: {message}")),
        });
        match checked {
            Ok((config, plugin)) => {
                connector.config = Some(Arc::new(config));
                connector.plugin = Some(plugin);
                connector.trace = None;
                connector.state = match connector.target {
                    TargetState::Started => State::Running,
                    TargetState::Paused => State::Paused,
                    TargetState::Stopped => State::Stopped,
                };
            }
            Err(trace) => {
                tracing::error!(connector = name, trace, "connector failed");
                connector.config = None;
                connector.plugin = None;
                connector.state = State::Failed;
                connector.trace = Some(trace);
            }
        }
    }

    /// Whether this worker is to run the task: always standalone; in a
    /// group, when the last assignment gave it to this worker.
    fn owns_task(&self, name: &str, task: u32) -> bool {
        self.membership.as_ref().is_none_or(|m| m.owned.tasks.contains(&(name.to_string(), task)))
    }

    /// Starts the task, if it is this worker's to run.
    fn spawn_task(&mut self, name: &str, task_id: u32) {
        if !self.owns_task(name, task_id) {
            return;
        }
        let generation = self.next_generation;
        self.next_generation += 1;
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let Some(config) = connector.config.clone() else { return };
        let Some(plugin) = connector.plugin.clone() else { return };
        let metrics = Arc::new(TaskMetrics { active_topics: connector.active_topics.clone(), ..Default::default() });
        let stop = CancellationToken::new();
        let running = task_plugin(&plugin);
        let spec = TaskSpec {
            task_id,
            config,
            plugin,
            bootstrap_servers: self.config.bootstrap_servers.clone(),
            metrics: metrics.clone(),
        };
        let (runtime, events, connector_name) = (self.runtime.clone(), self.events.clone(), name.to_string());
        let task_stop = stop.clone();
        // Every line the task logs carries its connector and task.
        let span = tracing::info_span!("task", connector = %connector_name, task = task_id);
        let handle = tokio::spawn(tracing::Instrument::instrument(
            async move {
                let exit = match task::start(&runtime, spec).await {
                    Ok(task_loop) => {
                        let _ = events.send(TaskEvent::Started {
                            connector: connector_name.clone(),
                            task: task_id,
                            generation,
                            swaps: task_loop.swap_sender(),
                        });
                        task_loop.run(task_stop).await
                    }
                    Err(e) => TaskExit::Failed(format!("{e:#}")),
                };
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
    async fn stop_tasks(&mut self, name: &str, tasks: &[u32], leave_as: Option<State>) {
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

    fn on_event(&mut self, event: TaskEvent) {
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

    pub async fn set_target(&mut self, name: String, target: TargetState) -> HerderResult<()> {
        self.connector(&name)?;
        self.save_change(|s| {
            if let Some(stored) = s.connectors.get_mut(&name) {
                stored.target_state = target;
            }
        })
        .await?;
        self.apply_target(name, target).await;
        Ok(())
    }

    /// Brings the connector's tasks to `target`.
    async fn apply_target(&mut self, name: String, target: TargetState) {
        let Some(connector) = self.connectors.get_mut(&name) else { return };
        if connector.target == target {
            return;
        }
        connector.target = target;
        let tasks: Vec<u32> = connector.tasks.keys().copied().collect();
        match target {
            TargetState::Started => {
                self.stop_tasks(&name, &tasks, None).await;
                self.start_connector(&name);
            }
            TargetState::Paused => {
                self.stop_tasks(&name, &tasks, Some(State::Paused)).await;
                self.start_connector_instance(&name);
            }
            TargetState::Stopped => {
                self.stop_tasks(&name, &tasks, None).await;
                self.start_connector_instance(&name);
            }
        }
    }

    // ---- restarts (KIP-745) ----

    /// Decides the targets, records the request durably, marks the targets
    /// RESTARTING and answers; the main loop restarts them right after.
    pub async fn request_restart(
        &mut self,
        name: String,
        include_tasks: bool,
        only_failed: bool,
    ) -> HerderResult<Option<ConnectorStateInfo>> {
        self.connector(&name)?;
        if !include_tasks && !only_failed && self.membership.is_none() {
            self.start_connector_instance(&name);
            return Ok(None);
        }
        let request = RestartRequest { include_tasks, only_failed };
        // What will restart across the cluster, for the answer: other
        // workers restart theirs as they read the request.
        let mut status = self.status(&name)?;
        if !only_failed || status.connector.state == State::Failed {
            status.connector.state = State::Restarting;
            status.connector.trace = None;
        }
        for task in status.tasks.iter_mut().filter(|t| include_tasks && (!only_failed || t.state == State::Failed)) {
            task.state = State::Restarting;
            task.trace = None;
        }
        self.save_change(|s| {
            s.restart_requests.insert(name.clone(), request);
        })
        .await?;
        self.plan_restart(&name, request, true);
        if !include_tasks && !only_failed {
            return Ok(None);
        }
        Ok(Some(status))
    }

    /// Marks this worker's instances that `request` targets RESTARTING; the
    /// main loop restarts them right after.
    fn plan_restart(&mut self, name: &str, request: RestartRequest, requested_here: bool) {
        let owns_connector = self.membership.as_ref().is_none_or(|m| m.owned.connectors.contains(name));
        let Some(connector) = self.connectors.get_mut(name) else { return };
        let RestartRequest { include_tasks, only_failed } = request;
        let plan = RestartPlan {
            connector: owns_connector && (!only_failed || connector.state == State::Failed),
            tasks: if include_tasks {
                connector
                    .tasks
                    .iter()
                    .filter(|(_, t)| !only_failed || t.state == State::Failed)
                    .map(|(id, _)| *id)
                    .collect()
            } else {
                Vec::new()
            },
            requested_here,
        };
        if plan.connector {
            connector.state = State::Restarting;
            connector.trace = None;
        }
        for id in &plan.tasks {
            if let Some(task) = connector.tasks.get_mut(id) {
                task.state = State::Restarting;
                task.trace = None;
            }
        }
        self.pending_restarts.push((name.to_string(), plan));
    }

    async fn carry_out_restarts(&mut self) {
        for (name, plan) in std::mem::take(&mut self.pending_restarts) {
            if !self.connectors.contains_key(&name) {
                continue;
            }
            self.stop_tasks(&name, &plan.tasks, Some(State::Restarting)).await;
            if plan.connector {
                self.start_connector_instance(&name);
            }
            let connector = &self.connectors[&name];
            let (ready, target) = (connector.config.is_some(), connector.target);
            for id in &plan.tasks {
                let idle = match (ready, target) {
                    (true, TargetState::Started) => {
                        self.spawn_task(&name, *id);
                        continue;
                    }
                    (_, TargetState::Paused) => State::Paused,
                    _ => State::Unassigned,
                };
                if let Some(t) = self.connectors.get_mut(&name).and_then(|c| c.tasks.get_mut(id)) {
                    t.state = idle;
                }
            }
            if !plan.requested_here {
                continue;
            }
            if let Err(e) = self
                .save_change(|s| {
                    s.restart_requests.remove(&name);
                })
                .await
            {
                tracing::error!(connector = name, error = %e, "could not clear a finished restart request");
            }
        }
    }

    pub async fn restart_task(&mut self, name: String, task: u32) -> HerderResult<()> {
        let connector = self.connector(&name)?;
        if !connector.tasks.contains_key(&task) {
            if self.membership.is_some() && self.task_ids(connector).contains(&task) {
                let runs_on = self.status(&name)?.tasks.into_iter().find(|t| t.id == task).map(|t| t.worker_id);
                return Err(HerderError::Conflict(format!(
                    "Task {name}-{task} runs on another worker ({}); restart it there, or restart the connector \
                     with includeTasks=true from any worker",
                    runs_on.filter(|w| !w.is_empty()).as_deref().unwrap_or("none reported yet")
                )));
            }
            return Err(HerderError::NotFound(format!("Task {name}-{task} not found")));
        }
        self.stop_tasks(&name, &[task], Some(State::Restarting)).await;
        if self.connectors[&name].target == TargetState::Started && self.connectors[&name].config.is_some() {
            self.spawn_task(&name, task);
        }
        Ok(())
    }

    // ---- what is ----

    /// The installed build a config picks, if any: whose PASSWORD keys are secret.
    fn plugin_of(&self, config: &ConfigMap) -> Option<&Plugin> {
        let class = config.get("connector.class")?;
        self.plugins.resolve(class, &PluginPick::of(config)).ok()
    }

    /// The connector's task ids: those this worker runs standalone; in a
    /// group, every task the connector has, wherever it runs.
    fn task_ids(&self, c: &ConnectorRuntime) -> Vec<u32> {
        if self.membership.is_none() {
            return c.tasks.keys().copied().collect();
        }
        (0..task_count(c)).collect()
    }

    pub fn info(&self, name: &str) -> HerderResult<ConnectorInfo> {
        let c = self.connector(name)?;
        Ok(ConnectorInfo {
            name: name.to_string(),
            config: validate::shown(self.plugin_of(&c.raw), &c.raw),
            tasks: self
                .task_ids(c)
                .into_iter()
                .map(|task| ConnectorTaskId { connector: name.to_string(), task })
                .collect(),
            kind: "sink".into(),
        })
    }

    /// Statuses of what runs here, and in a group of what runs elsewhere as
    /// the status topic reports it.
    pub fn status(&self, name: &str) -> HerderResult<ConnectorStateInfo> {
        let c = self.connector(name)?;
        let worker_id = self.config.worker_id.clone();
        let elsewhere = |key: String| match self.status_view.as_ref().and_then(|view| view.get(&key)) {
            Some(status) => (status.state, status.worker_id, status.trace, status.version),
            None => (State::Unassigned, String::new(), None, None),
        };
        let connector = match &self.membership {
            Some(m) if !m.owned.connectors.contains(name) => {
                let (state, worker_id, trace, version) = elsewhere(connector_key(name));
                InstanceState { state, worker_id, trace, version }
            }
            _ => InstanceState {
                state: c.state,
                worker_id: worker_id.clone(),
                trace: c.trace.clone(),
                version: c.version(),
            },
        };
        let tasks = self
            .task_ids(c)
            .into_iter()
            .map(|id| match c.tasks.get(&id) {
                Some(t) => TaskState {
                    id,
                    state: t.state,
                    worker_id: worker_id.clone(),
                    trace: t.trace.clone(),
                    version: t.version(),
                    delivery: t.metrics.share_delivery.get().map(|rules| TaskDelivery {
                        rules: rules.clone(),
                        records_archived: t.metrics.archived.load(std::sync::atomic::Ordering::Relaxed),
                    }),
                    guarantee: t.metrics.delivery_guarantee.get().copied(),
                    plugin: t.plugin.clone(),
                    swap: t.swap.clone(),
                },
                None => {
                    let (state, worker_id, trace, version) = elsewhere(task_key(name, id));
                    let (delivery, guarantee, plugin, swap) = (None, None, None, None);
                    TaskState { id, state, worker_id, trace, version, delivery, guarantee, plugin, swap }
                }
            })
            .collect();
        Ok(ConnectorStateInfo { name: name.to_string(), connector, tasks, kind: "sink".into() })
    }

    pub fn task_status(&self, name: &str, task: u32) -> HerderResult<TaskState> {
        self.status(name)?
            .tasks
            .into_iter()
            .find(|t| t.id == task)
            .ok_or_else(|| HerderError::NotFound(format!("Task {name}-{task} not found")))
    }

    pub fn tasks(&self, name: &str) -> HerderResult<Vec<TaskInfo>> {
        let c = self.connector(name)?;
        Ok(self
            .task_ids(c)
            .into_iter()
            .map(|task| {
                let mut config = validate::shown(self.plugin_of(&c.raw), &c.raw);
                config.insert("task.id".into(), task.to_string());
                TaskInfo { id: ConnectorTaskId { connector: name.to_string(), task }, config }
            })
            .collect())
    }

    pub fn active_topics(&self, name: &str) -> HerderResult<Vec<String>> {
        Ok(self.connector(name)?.active_topics.lock().unwrap().iter().cloned().collect())
    }

    pub fn reset_active_topics(&mut self, name: &str) -> HerderResult<()> {
        self.connectors.get_mut(name).ok_or_else(|| not_found(name))?.active_topics.lock().unwrap().clear();
        Ok(())
    }

    pub fn capability_metrics(&self) -> Vec<(OpKey, OpStats)> {
        self.runtime.capability_metrics().snapshot()
    }

    pub fn task_metrics(&self) -> Vec<TaskMetricsEntry> {
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

    /// `GET /connector-plugins/{plugin}/config`, of the newest version that
    /// the range `version` admits (KIP-891's `?version=`).
    pub fn plugin_config(&self, plugin: &str, version: Option<&str>) -> HerderResult<Vec<ConfigKeyInfo>> {
        let range = match version.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => Some(
                semver::VersionReq::parse(v)
                    .map_err(|e| HerderError::BadRequest(format!("Invalid version '{v}': not a semver range: {e}")))?,
            ),
            None => None,
        };
        let pick = PluginPick { version: range, digest: None };
        let plugin = self.plugins.resolve(plugin, &pick).map_err(|refusal| match refusal.key {
            "connector.class" => HerderError::NotFound(format!("Unknown plugin {plugin}")),
            _ => HerderError::NotFound(refusal.message),
        })?;
        let mut keys = validate::host_key_infos();
        keys.extend(validate::plugin_key_infos(plugin));
        Ok(keys)
    }

    /// Installs an uploaded, checked plugin as `<name>-<version>.wasm` in
    /// `dir`. A version is never rebuilt under the same number: an upload of
    /// an installed version with other bytes is a conflict.
    pub fn install_plugin(
        &mut self,
        plugin: Plugin,
        dir: &std::path::Path,
        wasm: &[u8],
    ) -> HerderResult<(bool, PluginInfo)> {
        let (name, version) = (plugin.metadata.name.clone(), plugin.metadata.version.clone());
        if let Some(membership) = &self.membership {
            return Err(HerderError::BadRequest(format!(
                "this worker is one of the group {}: an upload would reach this worker only. Install {name} \
                 {version} into the plugin.path of every worker of the group instead; each loads it within seconds",
                membership.config.group_id
            )));
        }
        if let Some(installed) = self.plugins.exact(&name, &version) {
            if installed.digest == plugin.digest {
                return Ok((false, plugin_info(installed)));
            }
            return Err(HerderError::Conflict(format!(
                "{name} {version} is installed already with digest {}, and the upload's digest is {}: give the new \
                 build another version",
                installed.digest, plugin.digest
            )));
        }
        let path = dir.join(format!("{name}-{version}.wasm"));
        let tmp = dir.join(format!(".{name}-{version}.wasm.uploading"));
        std::fs::write(&tmp, wasm)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|e| HerderError::Internal(format!("writing {}: {e}", path.display())))?;
        let info = plugin_info(&plugin);
        self.plugins.insert(plugin, &path).map_err(HerderError::BadRequest)?;
        Ok((true, info))
    }

    /// `PUT /connector-plugins/{plugin}/config/validate`: a plugin that is
    /// not installed at all is a bad request, as in Connect, not a config
    /// with one wrong value.
    pub async fn validate(&self, plugin: String, config: ConfigMap) -> HerderResult<ConfigInfos> {
        if let Err(refusal) = self.plugins.resolve(&plugin, &PluginPick::of(&config))
            && refusal.key == "connector.class"
        {
            return Err(HerderError::BadRequest(refusal.message));
        }
        Ok(self.validate_config(plugin, config).await)
    }

    /// Every problem of `config` for `plugin`, a missing plugin included.
    async fn validate_config(&self, plugin: String, config: ConfigMap) -> ConfigInfos {
        let resolved = self.plugins.resolve(&plugin, &PluginPick::of(&config));
        validate::validate(&self.runtime, &plugin, resolved, &config, &self.config.defaults).await
    }

    // ---- offsets of connectors (classic and share groups) ----

    /// Where a connector's offsets live: its classic group's committed
    /// offsets, or its share group's start offsets. Reading or changing them
    /// happens off the main loop (see [`super::offsets`]).
    pub fn offsets_target(&self, name: &str) -> HerderResult<OffsetsTarget> {
        let c = self.connector(name)?;
        let config = ConnectorConfig::parse(&c.raw, &self.config.defaults)
            .map_err(|_| HerderError::BadRequest(format!("Connector {name} has an invalid configuration")))?;
        Ok(OffsetsTarget {
            cluster: ClusterAccess::new(&self.config.bootstrap_servers, &config.clients),
            group: config.group_id.clone(),
            protocol: config.group_protocol,
            topics: config.topics.clone(),
            topics_pattern: config.topics_pattern(),
        })
    }

    /// Checks that the connector's offsets may change now: it must be stopped,
    /// and every topic given must be one of its own.
    pub fn offsets_target_to_change(&self, name: &str, change: &OffsetsChange) -> HerderResult<OffsetsTarget> {
        let target = self.offsets_target(name)?;
        if self.connectors[name].target != TargetState::Stopped {
            return Err(HerderError::BadRequest(
                "Connectors must be in the STOPPED state before their offsets can be modified. \
                 This can be done for the specified connector by issuing a 'PUT' request to the \
                 '/connectors/{name}/stop' endpoint"
                    .replace("{name}", name),
            ));
        }
        if let OffsetsChange::Alter(positions) = change
            && let Some((topic, _, _)) = positions.iter().find(|(t, _, _)| !target.consumes(t))
        {
            return Err(HerderError::BadRequest(format!("Topic {topic} is not one of the connector's topics")));
        }
        Ok(target)
    }

    pub async fn shutdown(&mut self) -> HerderResult<()> {
        self.stopping = true;
        let names: Vec<String> = self.connectors.keys().cloned().collect();
        for name in names {
            let tasks: Vec<u32> = self.connectors[&name].tasks.keys().copied().collect();
            self.stop_tasks(&name, &tasks, Some(State::Unassigned)).await;
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

/// Every connector and task there is to run, for the leader to assign: a
/// stopped connector has no tasks, and one whose config is invalid or whose
/// plugin is missing has none either (it is FAILED).
fn work_set(connectors: &BTreeMap<String, ConnectorRuntime>) -> WorkSet {
    let mut work = WorkSet::default();
    for (name, connector) in connectors {
        work.connectors.insert(name.clone());
        work.tasks.extend((0..task_count(connector)).map(|t| (name.clone(), t)));
    }
    work
}

fn task_count(connector: &ConnectorRuntime) -> u32 {
    match (&connector.config, connector.target) {
        (_, TargetState::Stopped) | (None, _) => 0,
        (Some(config), _) => config.tasks_max,
    }
}

/// What a task's status says of the build it runs.
fn task_plugin(plugin: &Plugin) -> TaskPlugin {
    TaskPlugin { version: plugin.metadata.version.clone(), digest: plugin.digest.clone() }
}

/// A hot swap of one task, prepared off the herder's loop: a started
/// instance of the new build, handed to the task, whose answer goes back to
/// the herder as an event.
struct PrepareSwap {
    runtime: Runtime,
    plugin: Plugin,
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
        let started =
            task::start_instance(&self.runtime, &self.plugin, &self.config, self.task, &self.bootstrap_servers).await;
        match started {
            Ok((instance, None)) => {
                let (done, swapped) = tokio::sync::oneshot::channel();
                if swaps.send(Swap { instance, done }).await.is_err() {
                    return; // The task ended first: its next run starts on the new build.
                }
                let Ok(swapped) = swapped.await else { return };
                report.outcome = SwapOutcome::Swapped;
                report.pause_micros = Some(swapped.pause.as_micros() as u64);
                report.records_put_again = Some(swapped.put_again as u64);
            }
            Ok((_, Some(_))) => {
                report.outcome = SwapOutcome::RolledBack;
                report.error = Some("the new build opened an exactly-once grant, which cannot swap".into());
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
