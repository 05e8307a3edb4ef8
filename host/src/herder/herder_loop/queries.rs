//! What is: connectors' configs, statuses and tasks as Connect's REST API
//! shows them, plugins and their validation, and where offsets live.

use super::{HerderLoop, not_found};
use crate::capabilities::op::{OpKey, OpStats};
use crate::connector::{ConnectorConfig, PluginPick, VersionRange, builtin_transforms};
use crate::herder::config_check::ConfigCheck;
use crate::herder::offsets::{OffsetsChange, OffsetsTarget};
use crate::herder::plugins::plugin_info;
use crate::herder::store::{connector_key, task_key};
use crate::herder::types::*;
use crate::herder::validate;
use crate::herder::{HerderError, HerderResult, TaskMetricsEntry};
use crate::kafka::clients::ClusterAccess;
use crate::runtime::{Plugin, PluginKind};

impl HerderLoop {
    /// The installed build a config picks, if any: whose PASSWORD keys are secret.
    pub(super) fn plugin_of(&self, config: &ConfigMap) -> Option<&Plugin> {
        let class = config.get("connector.class")?;
        self.plugins.resolve(class, &PluginPick::of(config)).ok()
    }

    /// The builds `config` picks, as far as they are installed: its
    /// plugin's, then each transform plugin's its chain names.
    pub(super) fn builds_of(&self, config: &ConfigMap) -> Vec<&Plugin> {
        let mut builds: Vec<&Plugin> = self.plugin_of(config).into_iter().collect();
        let stages =
            config.iter().filter_map(|(k, v)| Some((k.strip_prefix("transforms.")?.strip_suffix(".type")?, v)));
        for (alias, class) in stages.filter(|(alias, _)| !alias.contains('.')) {
            let version = config.get(&format!("transforms.{alias}.version")).and_then(|v| VersionRange::parse(v).ok());
            let pick = PluginPick { version, digest: None };
            builds
                .extend(self.plugins.resolve_any(class.trim(), &pick).ok().filter(|p| p.kind == PluginKind::Transform));
        }
        builds
    }

    /// The connector's task ids: those this worker runs standalone; in a
    /// group, every task the connector has, wherever it runs.
    pub(super) fn task_ids(&self, name: &str) -> Vec<u32> {
        if self.membership.is_none() {
            return self.worker.connectors.get(name).map(|c| c.tasks.keys().copied().collect()).unwrap_or_default();
        }
        (0..self.task_count(name)).collect()
    }

    pub fn info(&self, name: &str) -> HerderResult<ConnectorInfo> {
        let raw = &self.stored_connector(name)?.config;
        Ok(ConnectorInfo {
            name: name.to_string(),
            config: validate::shown(&self.builds_of(raw), raw),
            tasks: self
                .task_ids(name)
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
        let worker_id = self.config.worker_id();
        let elsewhere = |key: String| match self.status_view.as_ref().and_then(|view| view.get(&key)) {
            Some(status) => (status.state, status.worker_id, status.trace, status.version),
            None => (State::Unassigned, String::new(), None, None),
        };
        let connector = match &self.membership {
            Some(m) if !m.owned.connectors.contains(name) => {
                let (state, worker_id, trace, version) = elsewhere(connector_key(name));
                InstanceState { state, worker_id, trace, version, derived_grants: Vec::new() }
            }
            _ => InstanceState {
                state: c.state,
                worker_id: worker_id.clone(),
                trace: c.trace.clone(),
                version: c.version(),
                derived_grants: c.config.as_ref().map(|config| config.derived.clone()).unwrap_or_default(),
            },
        };
        let tasks = self
            .task_ids(name)
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
                        records_renewed: t.metrics.renewed.load(std::sync::atomic::Ordering::Relaxed),
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
        // The lag is the handle's to add, as last measured off this loop.
        Ok(ConnectorStateInfo { name: name.to_string(), connector, tasks, kind: "sink".into(), lag: None })
    }

    pub fn task_status(&self, name: &str, task: u32) -> HerderResult<TaskState> {
        self.status(name)?
            .tasks
            .into_iter()
            .find(|t| t.id == task)
            .ok_or_else(|| HerderError::NotFound(format!("Task {name}-{task} not found")))
    }

    pub fn tasks(&self, name: &str) -> HerderResult<Vec<TaskInfo>> {
        let raw = &self.stored_connector(name)?.config;
        Ok(self
            .task_ids(name)
            .into_iter()
            .map(|task| {
                let mut config = validate::shown(&self.builds_of(raw), raw);
                config.insert("task.id".into(), task.to_string());
                TaskInfo { id: ConnectorTaskId { connector: name.to_string(), task }, config }
            })
            .collect())
    }

    pub fn active_topics(&self, name: &str) -> HerderResult<Vec<String>> {
        Ok(self.connector(name)?.active_topics.lock().unwrap().iter().cloned().collect())
    }

    pub fn reset_active_topics(&mut self, name: &str) -> HerderResult<()> {
        self.worker.connectors.get_mut(name).ok_or_else(|| not_found(name))?.active_topics.lock().unwrap().clear();
        Ok(())
    }

    pub fn capability_metrics(&self) -> Vec<(OpKey, OpStats)> {
        self.worker.capability_metrics()
    }

    pub fn task_metrics(&self) -> Vec<TaskMetricsEntry> {
        self.worker.task_metrics()
    }

    /// `GET /connector-plugins/{plugin}/config`, of the newest version that
    /// the range `version` admits (KIP-891's `?version=`).
    pub fn plugin_config(&self, plugin: &str, version: Option<&str>) -> HerderResult<Vec<ConfigKeyInfo>> {
        let range = match version.map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => Some(
                VersionRange::parse(v).map_err(|e| HerderError::BadRequest(format!("Invalid version '{v}': {e}")))?,
            ),
            None => None,
        };
        // A built-in transform's or predicate's keys are its ConfigDef's.
        if let Some(builtin) = builtin_transforms().find(|b| b.class == plugin) {
            return Ok(validate::def_key_infos(builtin.def));
        }
        let pick = PluginPick { version: range, digest: None };
        let plugin = self.plugins.resolve_any(plugin, &pick).map_err(|refusal| match refusal.key.as_str() {
            "connector.class" => HerderError::NotFound(format!("Unknown plugin {plugin}")),
            _ => HerderError::NotFound(refusal.message),
        })?;
        // A transform's keys are its own, as Connect lists a
        // transformation's ConfigDef; a connector's come with the host's.
        let mut keys = match plugin.kind {
            PluginKind::Sink => validate::host_key_infos(),
            PluginKind::Transform => Vec::new(),
        };
        keys.extend(validate::plugin_key_infos(plugin));
        Ok(keys)
    }

    /// Installs an uploaded, checked plugin as `<name>-<version>.wasm` in
    /// `dir`. A version is never rebuilt under the same number: an upload of
    /// an installed version with other bytes is a conflict.
    /// Installs an uploaded plugin, compiled and checked, as `name`. A
    /// refused one leaves nothing behind, its compiled code included.
    pub fn install_plugin(
        &mut self,
        name: &str,
        plugin: Plugin,
        dir: &std::path::Path,
        wasm: &[u8],
    ) -> HerderResult<(bool, PluginInfo)> {
        let digest = plugin.digest.clone();
        let installed = self.try_install_plugin(name, plugin, dir, wasm);
        if installed.is_err() && !self.plugins.has_digest(&digest) {
            self.worker.runtime.forget(&digest);
        }
        installed
    }

    fn try_install_plugin(
        &mut self,
        expected_name: &str,
        plugin: Plugin,
        dir: &std::path::Path,
        wasm: &[u8],
    ) -> HerderResult<(bool, PluginInfo)> {
        let (name, version) = (plugin.metadata.name.clone(), plugin.metadata.version.clone());
        if name != expected_name {
            return Err(HerderError::BadRequest(format!(
                "the uploaded component is the plugin '{name}', not '{expected_name}'"
            )));
        }
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

    /// `PUT /connector-plugins/{plugin}/config/validate`, to check off the
    /// loop: a plugin that is not installed at all is a bad request, as in
    /// Connect, not a config with one wrong value.
    pub fn prepare_validate(&self, plugin: String, config: ConfigMap) -> HerderResult<ConfigCheck> {
        if let Err(refusal) = self.plugins.resolve(&plugin, &PluginPick::of(&config))
            && refusal.key == "connector.class"
        {
            return Err(HerderError::BadRequest(refusal.message));
        }
        self.config_check(Some(plugin), config, None)
    }

    /// Where a connector's offsets live: its classic group's committed
    /// offsets, or its share group's start offsets. Reading or changing them
    /// happens off the main loop (see [`super::offsets`]).
    pub fn offsets_target(&self, name: &str) -> HerderResult<OffsetsTarget> {
        let raw = &self.stored_connector(name)?.config;
        let config = ConnectorConfig::parse(raw, &self.config.defaults)
            .map_err(|_| HerderError::BadRequest(format!("Connector {name} has an invalid configuration")))?;
        Ok(OffsetsTarget {
            cluster: ClusterAccess::new(self.config.bootstrap(), &config.clients),
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
        if self.target_of(name) != TargetState::Stopped {
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
}
