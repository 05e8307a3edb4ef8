//! Distributed mode: workers that share a `group.id` form one cluster,
//! coordinated through Kafka alone. The config topic is the one order of
//! changes every worker applies; the group coordinator elects a leader and
//! carries its assignment of connectors and tasks to the members; the
//! status topic tells each worker what runs elsewhere. `docs/distributed.md`
//! says why this is correct.

mod assignor;
mod driver;
pub mod protocol;

pub use assignor::Assignor;
pub use driver::{Command, drive};
pub use protocol::{Assignment, MemberMetadata, WorkSet};

use std::time::Duration;
use tokio::sync::mpsc;

/// `group.id` and the keys of membership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupConfig {
    pub group_id: String,
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    pub rebalance_timeout: Duration,
    /// `scheduled.rebalance.max.delay.ms`.
    pub rebalance_delay: Duration,
}

/// The worker's place in the group, as its main loop keeps it.
pub struct Membership {
    pub config: GroupConfig,
    /// What the last assignment gave this worker: the only work it runs.
    pub owned: WorkSet,
    pub generation: i32,
    /// The leader's REST URL, once an assignment named it.
    pub leader_url: Option<String>,
    pub is_leader: bool,
    /// The leader's: what it assigned last, and the work there was then, so
    /// that a change in the work (a connector created, `tasks.max`
    /// changed) starts a rebalance.
    pub assignor: Assignor,
    pub assigned_work: Option<WorkSet>,
    /// To the driver: join again, or leave.
    pub commands: mpsc::UnboundedSender<Command>,
}

impl Membership {
    pub fn new(config: GroupConfig, commands: mpsc::UnboundedSender<Command>) -> Self {
        let assignor = Assignor::new(config.rebalance_delay);
        Membership {
            config,
            owned: WorkSet::default(),
            generation: -1,
            leader_url: None,
            is_leader: false,
            assignor,
            assigned_work: None,
            commands,
        }
    }

    pub fn rejoin(&self, why: &str) {
        tracing::info!(group = self.config.group_id, why, "joining the group again");
        let _ = self.commands.send(Command::Rejoin);
    }
}
