//! The herder's answers, shaped like Kafka Connect's REST entities so they
//! serialize to the same JSON.

use crate::task::DeliveryGuarantee;
use crate::task::ShareDelivery;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub type ConfigMap = BTreeMap<String, String>;

/// What the user asked a connector to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TargetState {
    Started,
    Paused,
    Stopped,
}

/// Who carries out writes to connectors, as a worker sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// This worker: standalone, or the group's leader.
    Here,
    /// Another worker of the group, at this REST URL.
    Elsewhere(String),
    /// Not known (before the first assignment, or after this worker's
    /// membership ran out): Connect answers 409 until it is.
    Unknown,
}

/// What a connector or task is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    Unassigned,
    Running,
    Paused,
    Stopped,
    Failed,
    Restarting,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorTaskId {
    pub connector: String,
    pub task: u32,
}

/// `GET /connectors/{name}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConnectorInfo {
    pub name: String,
    pub config: ConfigMap,
    pub tasks: Vec<ConnectorTaskId>,
    #[serde(rename = "type")]
    pub kind: String,
}

/// One instance's status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceState {
    pub state: State,
    pub worker_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The plugin's version, as Connect 4 reports it (KIP-891).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Spillway's own: the grant settings its config's Connect keys gave
    /// (`s3.bucket.name` gives `plugin.grant.object-store.s3.url`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_grants: Vec<crate::connector::DerivedKey>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskState {
    pub id: u32,
    pub state: State,
    pub worker_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The plugin's version, as Connect 4 reports it (KIP-891).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Spillway's own, for share-group tasks: how the task treats a record's
    /// deliveries. Connect clients ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<TaskDelivery>,
    /// Spillway's own: what a running task promises about its records,
    /// `exactly_once` (a classic group writing through an exactly-once
    /// kafka grant) or `at_least_once`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guarantee: Option<DeliveryGuarantee>,
    /// Spillway's own: the plugin build the task runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<TaskPlugin>,
    /// Spillway's own: the task's last hot swap of its plugin.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swap: Option<SwapReport>,
}

/// Which build of its plugin a task runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskPlugin {
    pub version: String,
    pub digest: String,
    /// The build of each transform plugin in its chain, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transforms: Vec<TransformBuild>,
}

/// Which build of a transform plugin a stage of a task's chain runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransformBuild {
    /// The stage's alias in `transforms`.
    pub alias: String,
    pub plugin: String,
    pub version: String,
    pub digest: String,
}

/// A task's move to another build of its plugin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwapReport {
    pub from: TaskPlugin,
    pub to: TaskPlugin,
    pub outcome: SwapOutcome,
    /// Swapped: how long no record was put (the drain of the old instance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_micros: Option<u64>,
    /// Swapped: held records the old build could not flush, put again to
    /// the new one (written twice, perhaps; never lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records_put_again: Option<u64>,
    /// Rolled back: why the new build could not start; the task runs `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SwapOutcome {
    /// The new build is being instantiated and started; the task runs on.
    Preparing,
    Swapped,
    /// The new build failed to start: the task kept running the old one.
    RolledBack,
}

/// A share-group task's delivery rules and what they cost so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDelivery {
    #[serde(flatten)]
    pub rules: ShareDelivery,
    /// Records the broker archived unwritten: rejected without a dead-letter
    /// queue, or released on their last delivery.
    pub records_archived: u64,
    /// Lock renewals so far (KIP-1222), one per record renewed.
    #[serde(default)]
    pub records_renewed: u64,
}

/// `GET /connectors/{name}/status`, and the body of a 202 restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorStateInfo {
    pub name: String,
    pub connector: InstanceState,
    pub tasks: Vec<TaskState>,
    #[serde(rename = "type")]
    pub kind: String,
    /// Spillway's own: a classic-group connector's lag as last measured
    /// (none before the first measure, nor for share groups). Connect
    /// clients ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<ConnectorLag>,
}

/// How far a connector's group is behind the end of its topics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorLag {
    /// Records between the group's positions and the ends, all partitions.
    pub records: i64,
    pub partitions: Vec<PartitionLag>,
    /// When it was measured, in ms since the Unix epoch.
    pub measured_at_ms: i64,
}

/// One partition's lag: from the group's position to the log end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The group's committed offset. None: the group has none yet, and the
    /// lag counts from the partition's first record.
    pub offset: Option<i64>,
    /// The high watermark.
    pub log_end: i64,
    pub records: i64,
}

/// `GET /connectors/{name}/tasks`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskInfo {
    pub id: ConnectorTaskId,
    pub config: ConfigMap,
}

/// `GET /connector-plugins`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PluginInfo {
    /// The plugin's name, which connectors give as `connector.class`.
    pub class: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub version: String,
    /// `sha256:<hex>` of the plugin's component; none for a class built in
    /// to the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// One key of `GET /connector-plugins/{plugin}/config` and of validation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigKeyInfo {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub required: bool,
    pub default_value: Option<String>,
    pub importance: String,
    pub documentation: String,
    pub group: Option<String>,
    pub width: String,
    pub display_name: String,
    pub dependents: Vec<String>,
    /// Connect's JSON name: the key's place in its group.
    #[serde(rename = "order_in_group")]
    pub order: i32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigValueInfo {
    pub name: String,
    pub value: Option<String>,
    pub recommended_values: Vec<String>,
    pub errors: Vec<String>,
    pub visible: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigInfo {
    pub definition: ConfigKeyInfo,
    pub value: ConfigValueInfo,
}

/// `PUT /connector-plugins/{plugin}/config/validate`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigInfos {
    pub name: String,
    pub error_count: usize,
    pub groups: Vec<String>,
    pub configs: Vec<ConfigInfo>,
    /// Spillway's own: what the config allows but will likely regret. Not
    /// errors; a connector with warnings is created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Spillway's own: the grant settings the config's Connect keys give.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub derived_grants: Vec<crate::connector::DerivedKey>,
}

impl ConfigInfos {
    /// Counts one more error, on the entry of `key`, one of the host's own
    /// keys (validation lists each of them).
    pub fn add_error(&mut self, key: &str, message: String) {
        let config = self.configs.iter_mut().find(|c| c.value.name == key).expect("a key of the host's table");
        config.value.errors.push(message);
        self.error_count += 1;
    }
}

/// A classic-group connector's committed position in one partition, as in
/// `GET /connectors/{name}/offsets`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionOffset {
    pub partition: OffsetPartition,
    pub offset: Option<OffsetValue>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetPartition {
    pub kafka_topic: String,
    pub kafka_partition: i32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetValue {
    pub kafka_offset: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorOffsets {
    pub offsets: Vec<PartitionOffset>,
}
