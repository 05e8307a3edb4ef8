//! Connector configs and target states: create, update, delete, pause,
//! resume, stop, each made durable in the store before it is applied.

use super::{HerderLoop, check_name};
use crate::connector::{ConnectorConfig, GroupProtocol};
use crate::herder::store::StoredConnector;
use crate::herder::types::*;
use crate::herder::validate;
use crate::herder::worker::{ConnectorRuntime, TaskRuntime};
use crate::herder::{HerderError, HerderResult};
use crate::kafka::clients::ClusterAccess;
use crate::task::ActiveTopics;
use std::collections::BTreeMap;

impl HerderLoop {
    pub async fn create(
        &mut self,
        name: String,
        mut config: ConfigMap,
        initial_state: Option<TargetState>,
    ) -> HerderResult<ConnectorInfo> {
        check_name(&name)?;
        if self.worker.connectors.contains_key(&name) {
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

    pub(super) fn add_connector(&mut self, name: &str, config: ConfigMap, target: TargetState) {
        self.worker.connectors.insert(
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
        if !self.worker.connectors.contains_key(&name) {
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
        let previous = self.worker.connectors.get(&name).map(|c| c.raw.clone());
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
    pub(super) async fn check_config(&self, config: &ConfigMap, previous: Option<&ConfigMap>) -> HerderResult<()> {
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
    pub(super) async fn check_share_group_id(&self, config: &ConfigMap) -> HerderResult<()> {
        let Ok(parsed) = ConnectorConfig::parse(config, &self.config.defaults) else { return Ok(()) };
        if parsed.group_protocol != GroupProtocol::Share {
            return Ok(());
        }
        let cluster = ClusterAccess::new(self.config.bootstrap(), &parsed.clients);
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
    pub(super) async fn reconfigure(&mut self, name: &str, config: ConfigMap) {
        if self.worker.hot_swap(name, &config, &self.config.defaults, &self.plugins) {
            return;
        }
        let connector = self.worker.connectors.get_mut(name).expect("checked by the caller");
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
            let Some(connector) = self.worker.connectors.get(name) else { return };
            let Some(config) = connector.config.clone() else { return };
            let started = connector.target == TargetState::Started;
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
        let Some(connector) = self.worker.connectors.get_mut(name) else { return };
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
    pub(super) async fn apply_target(&mut self, name: String, target: TargetState) {
        let Some(connector) = self.worker.connectors.get_mut(&name) else { return };
        if connector.target == target {
            return;
        }
        connector.target = target;
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
        self.worker.start_connector_instance(name, &self.config.defaults, &self.plugins);
    }

    /// Starts the task, if it is this worker's to run.
    pub(super) fn spawn_task(&mut self, name: &str, task_id: u32) {
        if self.owns_task(name, task_id) {
            self.worker.start_task(name, task_id);
        }
    }
}
