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

/// How long the group id check may wait for the broker; past it the config
/// is refused, as when the broker cannot say.
const GROUP_CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// The key the group id check reports on.
const GROUP_ID_KEY: &str = "consumer.override.group.id";

/// One config to check, with what the loop knew when it was asked.
pub struct ConfigCheck {
    pub(super) runtime: Runtime,
    /// Turns to run a plugin's `validate`, shared by the worker's checks.
    pub(super) validations: Arc<Semaphore>,
    pub(super) plugin_name: String,
    pub(super) plugin: Result<Plugin, Refusal>,
    /// The builds of its transform plugins; `None` if the config does not
    /// parse (validation says why).
    pub(super) transforms: Option<Result<Vec<Plugin>, Refusal>>,
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
    /// Connect's validation answer: every key's value and errors, with the
    /// group id check of a config whose group is new to it.
    pub async fn infos(&self) -> ConfigInfos {
        let plugin = self.plugin.as_ref().map_err(Refusal::clone);
        let mut infos = validate::validate(
            &self.runtime,
            &self.validations,
            &self.plugin_name,
            plugin,
            self.transforms.as_ref().map(|t| t.as_deref().map_err(Refusal::clone)),
            &self.config,
            &self.defaults,
        )
        .await;
        if let Ok(parsed) = ConnectorConfig::parse(&self.config, &self.defaults)
            && !same_group(&parsed, self.previous.as_ref(), &self.defaults)
        {
            // The broker check opens connections on any REST client's
            // request: it takes a turn among the worker's validations too.
            let _turn = self.validations.acquire().await.expect("the validations semaphore is never closed");
            if let Err(message) = self.check_group_id(&parsed).await {
                infos.add_error(GROUP_ID_KEY, message);
            }
        }
        infos
    }

    /// Refuses a config with any validation error, listing them all.
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
        Ok(())
    }

    /// What was checked, for the loop to store if nothing it was checked
    /// against has changed since.
    pub fn into_checked(self) -> Checked {
        Checked { config: self.config, previous: self.previous, plugin_digest: self.plugin.ok().map(|p| p.digest) }
    }

    /// KIP-1302: a share group and a consumer group must not have one id,
    /// or the broker refuses whichever comes second: a share group may not
    /// take the id of a consumer group with offsets, nor a classic
    /// connector the id of a share group. A broker that cannot say refuses
    /// the config too, saying why.
    async fn check_group_id(&self, parsed: &ConnectorConfig) -> Result<(), String> {
        let cluster = ClusterAccess::new(&self.bootstrap, &parsed.clients);
        let (group, protocol) = (parsed.group_id.clone(), parsed.group_protocol);
        let (topics, pattern) = (parsed.topics.clone(), parsed.topics_pattern());
        let taken = tokio::time::timeout(GROUP_CHECK_TIMEOUT, async move {
            // A share group's id is no consumer group's: asked first, it
            // also spares asking a share group for committed offsets.
            let share = crate::kafka::share::is_share_group(&cluster, &group).await?;
            if protocol == GroupProtocol::Classic || share {
                return Ok::<bool, anyhow::Error>(protocol == GroupProtocol::Classic && share);
            }
            tokio::task::spawn_blocking(move || {
                let topics = crate::kafka::groups::connector_topics(&cluster, &topics, pattern.as_ref())?;
                crate::kafka::groups::classic_group_exists(&cluster, &group, &topics)
            })
            .await?
        })
        .await;
        let id = &parsed.group_id;
        match taken {
            Ok(Ok(false)) => Ok(()),
            Ok(Ok(true)) if parsed.group_protocol == GroupProtocol::Share => Err(format!(
                "Share group id '{id}' is already used by a consumer group; share and consumer groups must not share \
                 an id. Set consumer.override.group.id to another id, or consumer.override.group.protocol=classic \
                 to consume with that consumer group."
            )),
            Ok(Ok(true)) => Err(format!(
                "Consumer group id '{id}' is a share group's; share and consumer groups must not share an id. Set \
                 consumer.override.group.id to another id (the consumer group's, to go back to its committed \
                 offsets), or delete share group '{id}' once no connector uses it."
            )),
            Ok(Err(e)) => {
                Err(format!("could not check that group id '{id}' is not taken by another kind of group: {e:#}"))
            }
            Err(_) => Err(format!(
                "could not check that group id '{id}' is not taken by another kind of group: the broker did not \
                 answer within {GROUP_CHECK_TIMEOUT:?}"
            )),
        }
    }
}

/// Whether `config` has the same group as `previous`: then it was checked
/// when it was set; asking again costs a connection, and librdkafka's mock
/// ends every share session on a broker when any connection to it closes.
fn same_group(config: &ConnectorConfig, previous: Option<&ConfigMap>, defaults: &WorkerDefaults) -> bool {
    previous
        .and_then(|previous| ConnectorConfig::parse(previous, defaults).ok())
        .is_some_and(|p| (p.group_protocol, &p.group_id) == (config.group_protocol, &config.group_id))
}
