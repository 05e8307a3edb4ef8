//! A connector's configuration, resolved and checked: everything a task
//! needs, in types rather than strings. The herder checks and stores it,
//! the REST API validates and shows it, a task runs by it; as Connect's
//! `ConnectorConfig` and `SinkConnectorConfig`, it belongs to none of them.
//!
//! [`keys`] is the table of every key the host reads, [`parse`] turns a
//! config into a [`ConnectorConfig`], [`topics_regex`] checks `topics.regex`,
//! [`VersionRange`] reads `connector.plugin.version`, [`InstalledNames`]
//! brings a config written for Kafka Connect to Spillway's keys.

mod connect_names;
mod keys;
mod parse;
#[cfg(test)]
mod tests;
mod topics_regex;
mod version_range;

pub use connect_names::{
    DerivedKey, InstalledNames, answers_to, check as check_connect_names, connect_keys, derive as derive_grants,
    grant_key,
};
pub use keys::{SHARE_GROUP_CONFIGS, connector_keys, looks_secret};
pub use parse::check_key_count;
pub use spillway_config::Problem as ConfigProblem;
/// The transforms a connector's chain runs, for the host's plugin listings.
pub use spillway_transforms::{Builtin as BuiltinTransform, builtins as builtin_transforms};
pub use topics_regex::topics_pattern;
pub use version_range::VersionRange;

use spillway_capabilities::Grants;
use spillway_config::ConfigProviders;
pub use spillway_converters::RegistryConfig;
use spillway_kafka::clients::ClientSettings;
use spillway_policy::GrantPolicy;
use spillway_runtime::Limits;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a connector's tasks consume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    /// KIP-932 share group: per-record acknowledgement, elastic tasks.
    Share,
    /// A consumer group (`classic`, or KIP-848 `consumer`) with offset commits.
    Classic,
}

/// `errors.tolerance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// A rejected record fails the task (and is released, not lost).
    None,
    /// A rejected record goes to the dead-letter queue (or is logged) and the
    /// task goes on.
    All,
}

#[derive(Clone, Debug)]
pub struct ConnectorConfig {
    pub name: String,
    /// The plugin's name (Connect's `connector.class`).
    pub plugin: String,
    /// Which build of it runs.
    pub plugin_pick: PluginPick,
    pub tasks_max: u32,
    /// Empty when the connector consumes by `topics_regex`.
    pub topics: Vec<String>,
    /// `topics.regex` as given (not anchored): the connector consumes every
    /// topic whose whole name it matches.
    pub topics_regex: Option<String>,
    /// How often a `topics_regex` share group looks for new matching topics;
    /// `None`: only when it joins. (A classic group's librdkafka reads the
    /// same key from `clients`.)
    pub topics_refresh: Option<Duration>,
    pub group_protocol: GroupProtocol,
    pub group_id: String,
    /// The share group's configs the connector sets on it (its `share.*`
    /// keys given, named as Kafka's group configs).
    pub share_group_configs: BTreeMap<String, String>,
    /// The worker's client settings under the connector's
    /// `consumer.override.*`, `producer.override.*` and `admin.override.*`.
    pub clients: ClientSettings,
    pub batch_max_records: usize,
    pub errors: ErrorPolicy,
    /// Longest a held record waits before the host asks the plugin to flush.
    pub flush_interval: Duration,
    pub limits: Limits,
    pub grants: Grants,
    /// The worker's own topics, which its kafka grants may not write.
    pub worker_topics: Vec<String>,
    /// The configuration as the user gave it, placeholders resolved and
    /// Connect's keys for targets turned into grants: what the plugin is
    /// given (but for the host's secrets).
    pub raw: BTreeMap<String, String>,
    /// The grant settings derived from Connect's keys.
    pub derived: Vec<DerivedKey>,
    pub converters: Converters,
    /// The transforms (and their predicates) each record passes through
    /// between the converters and the plugin.
    pub transforms: std::sync::Arc<spillway_transforms::Chain>,
}

/// The converters the host runs for a connector's records: for the key
/// and the value, AvroConverter's registry, or `None` for the bytes as
/// they are on the topic (JsonConverter, StringConverter, ByteArrayConverter
/// or none).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Converters {
    pub key: Option<RegistryConfig>,
    pub value: Option<RegistryConfig>,
}

/// Which installed build of its plugin a connector runs: the newest that
/// `connector.plugin.version` admits and, with `connector.plugin.digest`,
/// whose file has that digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginPick {
    pub version: Option<VersionRange>,
    pub digest: Option<String>,
}

impl PluginPick {
    /// The keys that pick a build.
    pub const KEYS: [&str; 2] = ["connector.plugin.version", "connector.plugin.digest"];

    /// From a config as given. A range the table refuses reads as unset (the
    /// table reports it), so that resolving still says what is installed.
    pub fn of(raw: &BTreeMap<String, String>) -> Self {
        let given = |key: &str| raw.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        PluginPick {
            version: given(Self::KEYS[0]).and_then(|v| VersionRange::parse(v).ok()),
            digest: given(Self::KEYS[1]).map(str::to_ascii_lowercase),
        }
    }
}

#[derive(Clone, Debug)]
pub struct ErrorPolicy {
    pub tolerance: Tolerance,
    pub dlq_topic: Option<String>,
    pub dlq_context_headers: bool,
    /// How long a record may keep failing with `retry` before it is treated
    /// as rejected; `None` retries without a time bound.
    pub retry_timeout: Option<Duration>,
    pub retry_delay_max: Duration,
}

/// What the worker decides for its connectors: defaults a connector config
/// may override, and the ceilings it may not pass.
#[derive(Clone, Debug)]
pub struct WorkerDefaults {
    /// `consumer.group.protocol`: a classic consumer group unless the
    /// worker opts in to share groups (KIP-1302: share groups are opt-in).
    pub group_protocol: GroupProtocol,
    pub policy: GrantPolicy,
    /// What `${provider:…}` placeholders in a connector config read.
    pub providers: ConfigProviders,
    /// The worker's settings for its clients (security included).
    pub clients: ClientSettings,
    /// The worker's own cluster (`bootstrap.servers`), which a Connect key
    /// naming the consumed cluster must name.
    pub cluster: String,
    /// The Connect names the installed plugins answer to.
    pub connect_names: InstalledNames,
}

impl Default for WorkerDefaults {
    fn default() -> Self {
        WorkerDefaults {
            group_protocol: GroupProtocol::Classic,
            policy: GrantPolicy::default(),
            providers: ConfigProviders::default(),
            clients: ClientSettings::default(),
            cluster: String::new(),
            connect_names: InstalledNames::default(),
        }
    }
}
