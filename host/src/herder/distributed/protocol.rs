//! What workers tell each other through the group coordinator: each
//! member's metadata in JoinGroup, and the leader's assignment of each in
//! SyncGroup. JSON, versioned, so that a newer worker can tell an older one.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The group's protocol type: only Spillway workers join a group of this
/// type; a consumer or a Kafka Connect worker given the same `group.id` is
/// refused by the coordinator.
pub const PROTOCOL_TYPE: &str = "spillway";
/// The embedded protocol: incremental, cooperative assignment (see
/// `docs/distributed.md`).
pub const PROTOCOL_NAME: &str = "cooperative-1";

/// Work that runs on one worker: connector instances (which report the
/// connector's status) and tasks.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkSet {
    #[serde(default)]
    pub connectors: BTreeSet<String>,
    #[serde(default)]
    pub tasks: BTreeSet<(String, u32)>,
}

impl WorkSet {
    /// Whether everything in `self` is in `other`.
    pub fn is_subset(&self, other: &WorkSet) -> bool {
        self.connectors.is_subset(&other.connectors) && self.tasks.is_subset(&other.tasks)
    }
}

/// A member's JoinGroup metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberMetadata {
    pub version: u32,
    /// Where its REST API answers, e.g. `http://10.0.0.5:8083`.
    pub url: String,
    /// As statuses show it.
    pub worker_id: String,
    /// How far it has read the config topic.
    pub config_offset: i64,
    /// What it runs now: the cooperative protocol keeps it where it is.
    pub owned: WorkSet,
}

/// The leader's answer to one member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    pub version: u32,
    pub leader: String,
    pub leader_url: String,
    /// How far the leader had read the config topic when it assigned.
    pub config_offset: i64,
    /// Everything the member is to run from now on. What it runs and is
    /// not in here is revoked: it stops that work and joins again, so that
    /// the next generation can give it to another.
    pub owned: WorkSet,
    /// Set while work of a departed member is held back for it
    /// (`scheduled.rebalance.max.delay.ms`): join again after this long.
    #[serde(default)]
    pub rejoin_after_ms: Option<u64>,
}

pub const VERSION: u32 = 1;
