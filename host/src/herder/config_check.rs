//! Checking a connector config off the herder's loop. A plugin's own
//! `validate` runs wasm for as long as its timeout allows, and the share
//! group check asks the broker: on the loop, one slow plugin or broker would
//! hold up every request, `/health` included. So the loop hands out a
//! [`ConfigCheck`] (what it knows now: the plugin the config picks, the
//! worker's defaults) and the handle runs it, as Connect's herder validates
//! on its own executor before it writes a config.

use super::plugins::Refusal;
use super::types::{ConfigInfos, ConfigMap};
use super::validate;
use super::{HerderError, HerderResult};
use crate::connector::{ConnectorConfig, GroupProtocol, WorkerDefaults};
use crate::kafka::clients::ClusterAccess;
use crate::runtime::{Plugin, Runtime};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long the share group check may ask the broker before the config is
/// let through with a warning, as when the broker cannot say.
const GROUP_CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// One config to check, with what the loop knew when it was asked.
pub struct ConfigCheck {
    pub(super) runtime: Runtime,
    /// Turns to run a plugin's `validate`, shared by the worker's checks.
    pub(super) validations: Arc<Semaphore>,
    pub(super) plugin_name: String,
    pub(super) plugin: Result<Plugin, Refusal>,
    pub(super) config: ConfigMap,
    pub(super) defaults: WorkerDefaults,
    pub(super) bootstrap: String,
    /// The config this one replaces, if any.
    pub(super) previous: Option<ConfigMap>,
}

/// A checked config, with what it was checked against: the config it
/// replaces (none for a new connector) and the plugin build it picked.
pub struct Checked {
    pub config: ConfigMap,
    pub previous: Option<ConfigMap>,
    pub plugin_digest: Option<String>,
}

impl ConfigCheck {
    /// Connect's validation answer: every key's value and errors.
    pub async fn infos(&self) -> ConfigInfos {
        let plugin = self.plugin.as_ref().map_err(Refusal::clone);
        validate::validate(&self.runtime, &self.validations, &self.plugin_name, plugin, &self.config, &self.defaults)
            .await
    }

    /// Refuses a config with any validation error, listing them all, and a
    /// share group that would take an existing consumer group's id.
    pub async fn admit(&self) -> HerderResult<()> {
        let infos = self.infos().await;
        if infos.error_count > 0 {
            let lines: Vec<String> = infos
                .configs
                .iter()
                .flat_map(|c| c.value.errors.iter().map(move |e| format!("{}: {e}", c.value.name)))
                .collect();
            return Err(HerderError::BadRequest(format!(
                "Connector configuration is invalid and contains the following {} error(s):\n{}\n\
                 You can also find the above list of errors at the endpoint `/connector-plugins/{{connectorType}}/config/validate`",
                infos.error_count,
                lines.join("\n")
            )));
        }
        for warning in &infos.warnings {
            tracing::warn!(connector = self.config.get("name").map(String::as_str).unwrap_or(""), "{warning}");
        }
        if same_group(&self.config, self.previous.as_ref(), &self.defaults) {
            return Ok(());
        }
        self.check_share_group_id().await
    }

    /// What was checked, for the loop to store if nothing it was checked
    /// against has changed since.
    pub fn into_checked(self) -> Checked {
        Checked { config: self.config, previous: self.previous, plugin_digest: self.plugin.ok().map(|p| p.digest) }
    }

    /// KIP-1302: a share group id must not match an existing consumer
    /// group's, or the two would fight over membership.
    async fn check_share_group_id(&self) -> HerderResult<()> {
        let Ok(parsed) = ConnectorConfig::parse(&self.config, &self.defaults) else { return Ok(()) };
        if parsed.group_protocol != GroupProtocol::Share {
            return Ok(());
        }
        let cluster = ClusterAccess::new(&self.bootstrap, &parsed.clients);
        let (group, topics, pattern) = (parsed.group_id.clone(), parsed.topics.clone(), parsed.topics_pattern());
        let lookup = tokio::task::spawn_blocking(move || {
            let topics = crate::kafka::groups::connector_topics(&cluster, &topics, pattern.as_ref())?;
            crate::kafka::groups::classic_group_exists(&cluster, &group, &topics)
        });
        let exists = match tokio::time::timeout(GROUP_CHECK_TIMEOUT, lookup).await {
            Ok(joined) => joined.map_err(|e| HerderError::Internal(e.to_string()))?,
            Err(_) => Err(anyhow::anyhow!("the broker did not answer within {GROUP_CHECK_TIMEOUT:?}")),
        };
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
}

/// Whether `config` has the same group as `previous`: then it was checked
/// when it was set; asking again costs a connection, and librdkafka's mock
/// ends every share session on a broker when any connection to it closes.
fn same_group(config: &ConfigMap, previous: Option<&ConfigMap>, defaults: &WorkerDefaults) -> bool {
    let group = |c: &ConfigMap| ConnectorConfig::parse(c, defaults).ok().map(|c| (c.group_protocol, c.group_id));
    previous.is_some_and(|previous| group(previous).is_some_and(|g| Some(g) == group(config)))
}
