//! Connector configs and target states: create, update, delete, pause,
//! resume, stop, each made durable in the store before it is applied.

use super::{HerderLoop, check_name};
use crate::connector::{ConnectorConfig, GroupProtocol, PluginPick, check_key_count};
use crate::herder::config_check::{Checked, ConfigCheck};
use crate::herder::store::StoredConnector;
use crate::herder::types::*;
use crate::herder::validate;
use crate::herder::worker::{ConnectorRuntime, TaskRuntime};
use crate::herder::{HerderError, HerderResult};
use std::collections::BTreeMap;

impl HerderLoop {
    /// `POST /connectors`, first half: 409 if it exists; the config to
    /// check off the loop.
    pub fn prepare_create(&self, name: String, mut config: ConfigMap) -> HerderResult<ConfigCheck> {
        check_name(&name)?;
        if self.worker.connectors.contains_key(&name) {
            return Err(HerderError::Conflict(format!("Connector {name} already exists")));
        }
        config.insert("name".into(), name);
        self.config_check(None, config, None)
    }

    /// Second half: stores the checked config and starts the connector,
    /// unless another request created it or the plugin changed meanwhile.
    pub async fn commit_create(
        &mut self,
        checked: Checked,
        initial_state: Option<TargetState>,
    ) -> HerderResult<ConnectorInfo> {
        let name = checked.config.get("name").cloned().unwrap_or_default();
        if self.worker.connectors.contains_key(&name) {
            return Err(HerderError::Conflict(format!("Connector {name} already exists")));
        }
        self.check_same_plugin(&checked)?;
        let config = checked.config;
        let target = initial_state.unwrap_or(TargetState::Started);
        let stored = StoredConnector { config, target_state: target };
        self.save_change(|s| {
            s.connectors.insert(name.clone(), stored);
        })
        .await?;
        self.add_connector(&name);
        self.info(&name)
    }

    /// 409 if the plugin the config picks is not the build it was checked
    /// with: a plugin installed or removed while it was checked.
    fn check_same_plugin(&self, checked: &Checked) -> HerderResult<()> {
        let now = self.plugin_of(&checked.config).map(|p| &p.digest);
        if now == checked.plugin_digest.as_ref() {
            return Ok(());
        }
        let class = checked.config.get("connector.class").map(String::as_str).unwrap_or_default();
        Err(HerderError::Conflict(format!("Plugin {class} changed while this config was checked; send it again")))
    }

    /// Starts a connector the stored state has and this worker does not run.
    pub(super) fn add_connector(&mut self, name: &str) {
        self.worker.connectors.insert(name.to_string(), ConnectorRuntime::new());
        self.start_connector(name);
    }

    /// `PUT /connectors/{name}/config`, first half: the whole new config (a
    /// secret sent back hidden keeps its value) to check off the loop.
    pub fn prepare_put(&self, name: String, mut config: ConfigMap) -> HerderResult<ConfigCheck> {
        let Some(previous) = self.stored.connectors.get(&name).map(|c| c.config.clone()) else {
            return self.prepare_create(name, config);
        };
        if let Some(given) = config.get("name")
            && given != &name
        {
            return Err(HerderError::BadRequest(format!(
                "Connector name configuration ({given}) doesn't match connector name in the URL ({name})"
            )));
        }
        config.insert("name".into(), name);
        validate::keep_hidden_secrets(&self.builds_of(&config), &mut config, &previous);
        self.config_check(None, config, Some(previous))
    }

    /// `PATCH /connectors/{name}/config`, first half: a `None` value
    /// removes the key.
    pub fn prepare_patch(&self, name: String, patch: BTreeMap<String, Option<String>>) -> HerderResult<ConfigCheck> {
        let mut config = self.stored_connector(&name)?.config.clone();
        for (key, value) in patch {
            match value {
                Some(v) => config.insert(key, v),
                None => config.remove(&key),
            };
        }
        self.prepare_put(name, config)
    }

    /// Second half of a put or patch: stores the checked config and applies
    /// it, if the config it replaces (none, for a new connector) and the
    /// plugin are still those it was checked against; true if it created the
    /// connector.
    pub async fn commit_put(&mut self, checked: Checked) -> HerderResult<(bool, ConnectorInfo)> {
        let name = checked.config.get("name").cloned().unwrap_or_default();
        if self.stored.connectors.get(&name).map(|c| &c.config) != checked.previous.as_ref() {
            return Err(HerderError::Conflict(format!(
                "Connector {name} changed while this config for it was checked; send it again"
            )));
        }
        if checked.previous.is_none() {
            return Ok((true, self.commit_create(checked, None).await?));
        }
        self.check_same_plugin(&checked)?;
        let (config, previous) = (checked.config, checked.previous.unwrap_or_default());
        self.save_change(|s| {
            if let Some(stored) = s.connectors.get_mut(&name) {
                stored.config = config;
            }
        })
        .await?;
        self.reconfigure(&name, &previous).await;
        Ok((false, self.info(&name)?))
    }

    /// What checking `config` takes, as the loop knows it now: the plugin
    /// it picks (of `plugin_name`, else its `connector.class`).
    pub(super) fn config_check(
        &self,
        plugin_name: Option<String>,
        config: ConfigMap,
        previous: Option<ConfigMap>,
    ) -> HerderResult<ConfigCheck> {
        check_key_count(&config, &self.config.defaults).map_err(HerderError::BadRequest)?;
        self.check_group_config_owner(&config)?;
        let plugin_name = plugin_name.unwrap_or_else(|| config.get("connector.class").cloned().unwrap_or_default());
        let plugin = self.plugins.resolve(&plugin_name, &PluginPick::of(&config)).cloned();
        let transforms = ConnectorConfig::parse(&config, &self.config.defaults)
            .ok()
            .map(|parsed| self.plugins.resolve_transforms(&parsed));
        Ok(ConfigCheck {
            transforms,
            runtime: self.worker.runtime.clone(),
            validations: self.validations.clone(),
            plugin_name,
            plugin,
            config,
            defaults: self.config.defaults.clone(),
            bootstrap: self.config.bootstrap().to_string(),
            previous,
        })
    }

    /// A connector that sets its share group's configs (`share.*`) must be
    /// alone in the group: another connector joined to it would have its
    /// record locks and delivery limit changed by a config not its own.
    fn check_group_config_owner(&self, config: &ConfigMap) -> HerderResult<()> {
        let Ok(parsed) = ConnectorConfig::parse(config, &self.config.defaults) else {
            return Ok(()); // The check proper reports what is wrong.
        };
        let shares_group = |other: &ConnectorConfig| {
            other.name != parsed.name
                && other.group_id == parsed.group_id
                && other.group_protocol == GroupProtocol::Share
                && parsed.group_protocol == GroupProtocol::Share
        };
        let others = self.worker.connectors.values().filter_map(|c| c.config.as_deref()).filter(|c| shares_group(c));
        for other in others {
            let setter = match (parsed.share_group_configs.is_empty(), other.share_group_configs.is_empty()) {
                (true, true) => continue,
                (false, _) => &parsed,
                (true, false) => other,
            };
            let keys: Vec<&str> = setter.share_group_configs.keys().map(String::as_str).collect();
            return Err(HerderError::BadRequest(format!(
                "share group {} is both {}'s and {}'s, and {} sets its configs ({}): a connector that sets its \
                 group's configs must be alone in the group",
                parsed.group_id,
                parsed.name,
                other.name,
                setter.name,
                keys.join(", ")
            )));
        }
        Ok(())
    }

    /// Applies the connector's stored config, which replaced `previous`:
    /// when only `tasks.max` changed, tasks are added or removed and the
    /// others keep running; otherwise every task restarts.
    pub(super) async fn reconfigure(&mut self, name: &str, previous: &ConfigMap) {
        let Ok(stored) = self.stored_connector(name) else { return };
        let (config, target) = (stored.config.clone(), stored.target_state);
        if self.worker.hot_swap(name, previous, &config, target, &self.config.defaults, &self.plugins) {
            return;
        }
        let connector = self.worker.connectors.get_mut(name).expect("checked by the caller");
        let only_tasks_max = {
            let mut old = previous.clone();
            let mut new = config;
            old.remove("tasks.max");
            new.remove("tasks.max");
            old == new && connector.config.is_some()
        };
        if only_tasks_max {
            let running: Vec<u32> = connector.tasks.keys().copied().collect();
            self.start_connector_instance(name);
            let Some(connector) = self.worker.connectors.get(name) else { return };
            let Some(config) = connector.config.clone() else { return };
            let started = target == TargetState::Started;
            let removed: Vec<u32> = running.iter().copied().filter(|t| *t >= config.tasks_max).collect();
            self.worker.stop_tasks(name, &removed, None).await;
            if started {
                for task in (0..config.tasks_max).filter(|t| !running.contains(t)) {
                    self.spawn_task(name, task);
                }
            }
            return;
        }
        let all: Vec<u32> = connector.tasks.keys().copied().collect();
        self.worker.stop_tasks(name, &all, None).await;
        self.start_connector(name);
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

    pub(super) async fn remove_connector(&mut self, name: &str) {
        let tasks: Vec<u32> =
            self.worker.connectors.get(name).map(|c| c.tasks.keys().copied().collect()).unwrap_or_default();
        self.worker.stop_tasks(name, &tasks, None).await;
        self.worker.connectors.remove(name);
        self.pending_restarts.retain(|(n, _)| n != name);
    }

    /// Checks the config and plugin (the Connector instance) and then runs
    /// the tasks its target state asks for.
    pub(super) fn start_connector(&mut self, name: &str) {
        self.start_connector_instance(name);
        let target = self.target_of(name);
        let Some(connector) = self.worker.connectors.get_mut(name) else { return };
        let Some(config) = connector.config.clone() else { return };
        match target {
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

    pub async fn set_target(&mut self, name: String, target: TargetState) -> HerderResult<()> {
        let before = self.stored_connector(&name)?.target_state;
        self.save_change(|s| {
            if let Some(stored) = s.connectors.get_mut(&name) {
                stored.target_state = target;
            }
        })
        .await?;
        if before != target {
            self.apply_target(name, target).await;
        }
        Ok(())
    }

    /// Brings the connector's tasks to its new target state, `target`.
    pub(super) async fn apply_target(&mut self, name: String, target: TargetState) {
        let Some(connector) = self.worker.connectors.get(&name) else { return };
        let tasks: Vec<u32> = connector.tasks.keys().copied().collect();
        match target {
            TargetState::Started => {
                self.worker.stop_tasks(&name, &tasks, None).await;
                self.start_connector(&name);
            }
            TargetState::Paused => {
                self.worker.stop_tasks(&name, &tasks, Some(State::Paused)).await;
                self.start_connector_instance(&name);
            }
            TargetState::Stopped => {
                self.worker.stop_tasks(&name, &tasks, None).await;
                self.start_connector_instance(&name);
            }
        }
    }

    /// (Re)starts only the Connector instance: parses the config and finds
    /// the plugin. Its state follows the target state, or FAILED with why.
    pub(super) fn start_connector_instance(&mut self, name: &str) {
        let Some(stored) = self.stored.connectors.get(name) else { return };
        let (raw, target) = (&stored.config, stored.target_state);
        self.worker.start_connector_instance(name, raw, target, &self.config.defaults, &self.plugins);
    }

    /// Starts the task, if it is this worker's to run.
    pub(super) fn spawn_task(&mut self, name: &str, task_id: u32) {
        if self.owns_task(name, task_id) {
            self.worker.start_task(name, task_id);
        }
    }
}
