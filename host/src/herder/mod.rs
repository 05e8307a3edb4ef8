//! The lifecycle manager ("herder", as in Kafka Connect): owns every
//! connector and task of this worker and changes them only from its main
//! loop, one request at a time, so that no two changes race.
//!
//! [`Herder`] is the cheap, cloneable handle the REST API and the CLI use.

mod config_check;
mod distributed;
mod herder_loop;
mod lag;
mod offsets;
mod plugins;
mod store;
pub mod types;
mod validate;
mod worker;
mod worker_config;

pub use distributed::GroupConfig;
pub use lag::LagView;
pub use plugins::{PluginRegistry, ScanReport, builtin_infos as builtin_plugin_infos};
pub use store::{ConfigTopic, StatusTopic};
pub use types::*;
pub use worker_config::{WorkerConfig, worker_keys};

use crate::capabilities::op::{OpKey, OpStats};
use crate::kafka::clients::{ClusterAccess, Role};
use crate::kafka::group_member::{GroupMember, GroupSettings};
use crate::kafka::share::Cluster;
use crate::runtime::Runtime;
use crate::task::TaskMetrics;
use config_check::ConfigCheck;
use futures::future::BoxFuture;
use herder_loop::HerderLoop;
use offsets::OffsetsChange;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Why the herder refused a request; each maps to Connect's status code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HerderError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Internal(String),
}

impl HerderError {
    pub fn status_code(&self) -> u16 {
        match self {
            HerderError::NotFound(_) => 404,
            HerderError::Conflict(_) => 409,
            HerderError::BadRequest(_) => 400,
            HerderError::Internal(_) => 500,
        }
    }
}

pub type HerderResult<T> = Result<T, HerderError>;

type Job = Box<dyn for<'a> FnOnce(&'a mut HerderLoop) -> BoxFuture<'a, ()> + Send>;

/// A handle on the herder's main loop.
#[derive(Clone)]
pub struct Herder {
    jobs: mpsc::Sender<Job>,
    worker_id: Arc<str>,
    cluster_id: Option<Arc<str>>,
    /// For the work on plugins that must not hold up the main loop
    /// (compiling takes seconds).
    runtime: Runtime,
    plugin_dir: Arc<PathBuf>,
    /// Each connector's lag as last measured (by [`lag::monitor`]).
    lag: LagView,
}

/// A handle that does not keep the herder alive: the tasks that run beside
/// the main loop (the plugin directory's watcher, the lag monitor) hold
/// this, so that the last [`Herder`] dropped ends the herder.
#[derive(Clone)]
struct WeakHerder {
    jobs: mpsc::WeakSender<Job>,
    worker_id: Arc<str>,
    cluster_id: Option<Arc<str>>,
    runtime: Runtime,
    plugin_dir: Arc<PathBuf>,
    lag: LagView,
}

impl WeakHerder {
    /// Reloads the plugin directory whenever a file in it changes (name,
    /// size or modification time), until the herder stops.
    async fn watch_plugin_dir(self, mut last: plugins::DirListing) {
        loop {
            tokio::time::sleep(PLUGIN_DIR_POLL).await;
            let Some(herder) = self.upgrade() else { return };
            let now = plugins::dir_listing(&herder.plugin_dir);
            if now == last {
                continue;
            }
            // A file still being written changes again: wait for it to settle.
            tokio::time::sleep(PLUGIN_DIR_POLL / 4).await;
            if plugins::dir_listing(&herder.plugin_dir) != now {
                continue;
            }
            last = now;
            match herder.reload_plugins().await {
                Ok(report) => tracing::info!(?report, "plugin directory changed: reloaded"),
                Err(HerderError::Internal(_)) => return, // stopped
                Err(e) => tracing::warn!(error = %e, "reloading the plugin directory failed"),
            }
        }
    }

    fn upgrade(&self) -> Option<Herder> {
        Some(Herder {
            jobs: self.jobs.upgrade()?,
            worker_id: self.worker_id.clone(),
            cluster_id: self.cluster_id.clone(),
            runtime: self.runtime.clone(),
            plugin_dir: self.plugin_dir.clone(),
            lag: self.lag.clone(),
        })
    }
}

/// The largest component `PUT /connector-plugins/{name}` takes: a Python
/// component, which carries CPython, is about 20 MB.
pub const PLUGIN_UPLOAD_MAX_BYTES: usize = 64 << 20;

/// How often the plugin directory is looked at for changed files.
const PLUGIN_DIR_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// Task metrics with the task they belong to, for `GET /metrics`.
pub struct TaskMetricsEntry {
    pub connector: String,
    pub task: u32,
    pub metrics: Arc<TaskMetrics>,
}

impl Herder {
    /// Loads plugins and stored state, starts every stored connector as its
    /// target state says, and runs the main loop on the current runtime.
    pub async fn start(config: WorkerConfig, runtime: Runtime) -> anyhow::Result<Self> {
        let (jobs, receiver) = mpsc::channel::<Job>(64);
        anyhow::ensure!(
            config.bootstrap_servers.is_some(),
            "bootstrap.servers is not set: start the embedded broker first"
        );
        let worker_id: Arc<str> = config.worker_id().into();
        let cluster = ClusterAccess::new(config.bootstrap(), &config.defaults.clients);
        let cluster_id = fetch_cluster_id(cluster).await.map(Arc::from);
        let plugin_dir = Arc::new(config.plugin_dir.clone());
        let group = config.group.clone();
        let (commands, command_receiver) = mpsc::unbounded_channel();
        let member = match &group {
            Some(group) => Some(group_member(&config, group).await?),
            None => None,
        };
        // Listed before the worker loads the plugins, not when the watcher
        // first runs: a file added in between would go unseen forever.
        let plugin_listing = plugins::dir_listing(&plugin_dir);
        let lag_interval = config.lag_interval;
        let herder_loop = HerderLoop::start(config, runtime.clone(), commands).await?;
        tokio::spawn(herder_loop.run(receiver));
        let lag = LagView::default();
        let herder = Herder { jobs, worker_id, cluster_id, runtime, plugin_dir, lag: lag.clone() };
        tokio::spawn(herder.downgrade().watch_plugin_dir(plugin_listing));
        tokio::spawn(lag::monitor(herder.downgrade(), lag, lag_interval));
        if let (Some(group), Some(member)) = (group, member) {
            tokio::spawn(distributed::drive(herder.clone(), member, command_receiver, group.heartbeat_interval));
        }
        Ok(herder)
    }

    fn downgrade(&self) -> WeakHerder {
        WeakHerder {
            jobs: self.jobs.downgrade(),
            worker_id: self.worker_id.clone(),
            cluster_id: self.cluster_id.clone(),
            runtime: self.runtime.clone(),
            plugin_dir: self.plugin_dir.clone(),
            lag: self.lag.clone(),
        }
    }

    /// `POST /connector-plugins/reload`: scans the plugin directory again.
    pub async fn reload_plugins(&self) -> HerderResult<ScanReport> {
        let loaded = plugins::load_dir(&self.runtime, &self.plugin_dir).await;
        self.ask(move |w| Box::pin(async move { Ok(w.plugins.apply(loaded)) })).await
    }

    /// `PUT /connector-plugins/{name}`: checks an uploaded component (it
    /// compiles, meets the contract, is the plugin `name` with a semver
    /// version) and installs it into the plugin directory as
    /// `<name>-<version>.wasm`.
    pub async fn install_plugin(&self, name: String, wasm: Vec<u8>) -> HerderResult<(bool, PluginInfo)> {
        if wasm.len() > PLUGIN_UPLOAD_MAX_BYTES {
            return Err(HerderError::BadRequest(format!(
                "the component is {} bytes; the largest upload is {PLUGIN_UPLOAD_MAX_BYTES}",
                wasm.len()
            )));
        }
        let bytes = wasm.clone();
        let plugin = self
            .runtime
            .load(wasm)
            .await
            .map_err(|e| HerderError::BadRequest(format!("the uploaded component was refused: {e:#}")))?;
        let dir = self.plugin_dir.clone();
        self.ask(move |w| Box::pin(async move { w.install_plugin(&name, plugin, &dir, &bytes) })).await
    }

    /// Who carries out writes to connectors: this worker, the group's
    /// leader elsewhere, or nobody known yet.
    pub async fn leadership(&self) -> HerderResult<Leadership> {
        self.ask(|w| Box::pin(async move { Ok(w.leadership()) })).await
    }

    pub fn worker_id(&self) -> &str {
        &self.worker_id
    }

    /// The Kafka cluster's id, as read at start-up (`None` if the broker did
    /// not answer then).
    pub fn kafka_cluster_id(&self) -> Option<&str> {
        self.cluster_id.as_deref()
    }

    /// Queues `job` on the main loop without waiting for it to run.
    async fn tell(
        &self,
        job: impl for<'a> FnOnce(&'a mut HerderLoop) -> BoxFuture<'a, ()> + Send + 'static,
    ) -> Result<(), ()> {
        self.jobs.send(Box::new(job)).await.map_err(|_| ())
    }

    /// Runs `job` on the main loop and waits for its answer.
    async fn ask<R: Send + 'static>(
        &self,
        job: impl for<'a> FnOnce(&'a mut HerderLoop) -> BoxFuture<'a, HerderResult<R>> + Send + 'static,
    ) -> HerderResult<R> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |worker| {
            Box::pin(async move {
                let _ = reply.send(job(worker).await);
            })
        });
        self.jobs.send(job).await.map_err(|_| HerderError::Internal("the herder has stopped".into()))?;
        answer.await.map_err(|_| HerderError::Internal("the herder dropped the request".into()))?
    }

    pub async fn connectors(&self) -> HerderResult<Vec<String>> {
        self.ask(|w| Box::pin(async move { Ok(w.connector_names()) })).await
    }

    /// `POST /connectors`. 409 if it exists, 400 if the config is invalid.
    pub async fn create(
        &self,
        name: String,
        config: ConfigMap,
        initial_state: Option<TargetState>,
    ) -> HerderResult<ConnectorInfo> {
        let check = self.ask(move |w| Box::pin(async move { w.prepare_create(name, config) })).await?;
        check.admit().await?;
        let checked = check.into_checked();
        self.ask(move |w| Box::pin(w.commit_create(checked, initial_state))).await
    }

    /// `PUT /connectors/{name}/config`: creates or replaces; true if created.
    pub async fn put_config(&self, name: String, config: ConfigMap) -> HerderResult<(bool, ConnectorInfo)> {
        let check = self.ask(move |w| Box::pin(async move { w.prepare_put(name, config) })).await?;
        self.commit_put(check).await
    }

    /// `PATCH /connectors/{name}/config`: a `None` value removes the key.
    pub async fn patch_config(
        &self,
        name: String,
        patch: std::collections::BTreeMap<String, Option<String>>,
    ) -> HerderResult<ConnectorInfo> {
        let check = self.ask(move |w| Box::pin(async move { w.prepare_patch(name, patch) })).await?;
        Ok(self.commit_put(check).await?.1)
    }

    /// Checks a put's config off the main loop, then applies it on it.
    async fn commit_put(&self, check: ConfigCheck) -> HerderResult<(bool, ConnectorInfo)> {
        check.admit().await?;
        let checked = check.into_checked();
        self.ask(move |w| Box::pin(w.commit_put(checked))).await
    }

    pub async fn info(&self, name: String) -> HerderResult<ConnectorInfo> {
        self.ask(move |w| Box::pin(async move { w.info(&name) })).await
    }

    pub async fn delete(&self, name: String) -> HerderResult<()> {
        self.ask(move |w| Box::pin(w.delete(name))).await
    }

    pub async fn status(&self, name: String) -> HerderResult<ConnectorStateInfo> {
        let mut status = self.ask(move |w| Box::pin(async move { w.status(&name) })).await?;
        status.lag = self.lag.of(&status.name);
        Ok(status)
    }

    /// Each connector's lag as last measured, for `/metrics`.
    pub fn lag(&self) -> std::collections::BTreeMap<String, ConnectorLag> {
        self.lag.all()
    }

    /// Where a connector's offsets live (off the loop: reading them waits
    /// on the broker).
    async fn offsets_target(&self, name: String) -> HerderResult<offsets::OffsetsTarget> {
        self.ask(move |w| Box::pin(async move { w.offsets_target(&name) })).await
    }

    pub async fn task_status(&self, name: String, task: u32) -> HerderResult<TaskState> {
        self.ask(move |w| Box::pin(async move { w.task_status(&name, task) })).await
    }

    pub async fn tasks(&self, name: String) -> HerderResult<Vec<TaskInfo>> {
        self.ask(move |w| Box::pin(async move { w.tasks(&name) })).await
    }

    /// KIP-745. `Ok(None)` means only the Connector instance was restarted
    /// (204); `Ok(Some(status))` is the 202 body with targets RESTARTING.
    pub async fn restart(
        &self,
        name: String,
        include_tasks: bool,
        only_failed: bool,
    ) -> HerderResult<Option<ConnectorStateInfo>> {
        self.ask(move |w| Box::pin(w.request_restart(name, include_tasks, only_failed))).await
    }

    pub async fn restart_task(&self, name: String, task: u32) -> HerderResult<()> {
        self.ask(move |w| Box::pin(w.restart_task(name, task))).await
    }

    pub async fn pause(&self, name: String) -> HerderResult<()> {
        self.ask(move |w| Box::pin(w.set_target(name, TargetState::Paused))).await
    }

    pub async fn resume(&self, name: String) -> HerderResult<()> {
        self.ask(move |w| Box::pin(w.set_target(name, TargetState::Started))).await
    }

    pub async fn stop(&self, name: String) -> HerderResult<()> {
        self.ask(move |w| Box::pin(w.set_target(name, TargetState::Stopped))).await
    }

    /// `GET /connectors/{name}/topics`: topics the connector has consumed.
    pub async fn topics(&self, name: String) -> HerderResult<Vec<String>> {
        self.ask(move |w| Box::pin(async move { w.active_topics(&name) })).await
    }

    pub async fn reset_topics(&self, name: String) -> HerderResult<()> {
        self.ask(move |w| Box::pin(async move { w.reset_active_topics(&name) })).await
    }

    /// Committed offsets of a classic-group connector.
    pub async fn offsets(&self, name: String) -> HerderResult<ConnectorOffsets> {
        self.offsets_target(name).await?.read().await
    }

    /// Alters (`Some`) or resets (`None`) a stopped classic-group connector's
    /// offsets.
    pub async fn alter_offsets(&self, name: String, offsets: Option<ConnectorOffsets>) -> HerderResult<()> {
        let change = offsets.map_or(OffsetsChange::Reset, OffsetsChange::alter);
        let (target, change) = self
            .ask(move |w| Box::pin(async move { w.offsets_target_to_change(&name, &change).map(|t| (t, change)) }))
            .await?;
        target.change(change).await
    }

    pub async fn plugins(&self) -> HerderResult<Vec<PluginInfo>> {
        self.ask(|w| Box::pin(async move { Ok(w.plugins.infos()) })).await
    }

    pub async fn plugin_config(&self, plugin: String, version: Option<String>) -> HerderResult<Vec<ConfigKeyInfo>> {
        self.ask(move |w| Box::pin(async move { w.plugin_config(&plugin, version.as_deref()) })).await
    }

    /// `PUT /connector-plugins/{plugin}/config/validate`.
    pub async fn validate(&self, plugin: String, config: ConfigMap) -> HerderResult<ConfigInfos> {
        let check = self.ask(move |w| Box::pin(async move { w.prepare_validate(plugin, config) })).await?;
        Ok(check.infos().await)
    }

    pub async fn task_metrics(&self) -> HerderResult<Vec<TaskMetricsEntry>> {
        self.ask(|w| Box::pin(async move { Ok(w.task_metrics()) })).await
    }

    /// Counts per capability operation, across the worker's plugins.
    pub async fn capability_metrics(&self) -> HerderResult<Vec<(OpKey, OpStats)>> {
        self.ask(|w| Box::pin(async move { Ok(w.capability_metrics()) })).await
    }

    /// Stops every task (releasing what they hold) and ends the main loop.
    pub async fn shutdown(&self) -> HerderResult<()> {
        self.ask(|w| Box::pin(async move { w.shutdown().await })).await
    }
}

/// A member of the workers' group, not joined yet.
async fn group_member(config: &WorkerConfig, group: &GroupConfig) -> anyhow::Result<GroupMember> {
    let cluster = ClusterAccess::new(config.bootstrap(), &config.defaults.clients);
    let security = cluster.security(Role::Consumer)?;
    let client_id = format!("spillway-worker-{}", config.worker_id());
    let cluster = Cluster::bootstrap(config.bootstrap(), &client_id, GROUP_REQUEST_TIMEOUT, &security).await?;
    let settings = GroupSettings {
        group_id: group.group_id.clone(),
        protocol_type: distributed::protocol::PROTOCOL_TYPE,
        protocol_name: distributed::protocol::PROTOCOL_NAME,
        session_timeout: group.session_timeout,
        rebalance_timeout: group.rebalance_timeout,
    };
    Ok(GroupMember::new(cluster, settings))
}

/// How long one request to the group coordinator may take (JoinGroup and
/// SyncGroup wait the rebalance timeout on top).
const GROUP_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Asked once, before any task runs: on librdkafka's mock, closing a
/// connection later would cost running share consumers their sessions.
async fn fetch_cluster_id(cluster: ClusterAccess) -> Option<String> {
    let fetched = tokio::task::spawn_blocking(move || {
        let client: rdkafka::consumer::BaseConsumer = cluster.rdkafka(Role::Admin).create().ok()?;
        rdkafka::consumer::Consumer::client(&client).fetch_cluster_id(std::time::Duration::from_secs(10))
    })
    .await
    .ok()
    .flatten();
    if fetched.is_none() {
        tracing::warn!("the Kafka cluster did not tell its id within 10 s; GET / shows none");
    }
    fetched
}
