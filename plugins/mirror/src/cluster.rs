//! The few Kafka operations the mirror uses, behind traits: the granted
//! [`Cluster`] and the source-cluster reads of `spillway_sdk::kafka` in a
//! plugin, a fake in native tests (where the host's imports cannot be
//! called).

use spillway_sdk::TaskError;
use spillway_sdk::kafka::{Cluster, Delivery, GroupOffset, OffsetSync, OutputRecord, TopicDescription, TopicEnsured};

/// The cluster records are copied to (the `target.grant`).
pub trait Target {
    /// Produces the records; one delivery per record, in order.
    fn send(&mut self, records: &[OutputRecord]) -> Result<Vec<Delivery>, TaskError>;
    /// A topic's partition count, none when it does not exist.
    fn partitions(&mut self, topic: &str) -> Result<Option<u32>, TaskError>;
    /// Creates a topic unless it exists.
    fn ensure_topic(
        &mut self,
        topic: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<TopicEnsured, TaskError>;
    /// Where the host recorded that source offsets landed.
    fn offset_syncs(&mut self) -> Result<Vec<OffsetSync>, TaskError>;
    /// Commits a group's offsets in the target; retriable while the group
    /// has members there.
    fn commit_group_offsets(&mut self, group: &str, offsets: &[GroupOffset]) -> Result<(), TaskError>;
}

/// The cluster the connector consumes from, read only.
pub trait Source {
    fn describe_topic(&mut self, topic: &str) -> Result<Option<TopicDescription>, TaskError>;
    fn list_groups(&mut self) -> Result<Vec<String>, TaskError>;
    fn group_offsets(&mut self, group: &str) -> Result<Vec<GroupOffset>, TaskError>;
}

/// The Kafka cluster granted to the connector.
pub struct GrantedTarget(pub Cluster);

impl Target for GrantedTarget {
    fn send(&mut self, records: &[OutputRecord]) -> Result<Vec<Delivery>, TaskError> {
        self.0.send(records)
    }
    fn partitions(&mut self, topic: &str) -> Result<Option<u32>, TaskError> {
        self.0.partitions(topic)
    }
    fn ensure_topic(
        &mut self,
        topic: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<TopicEnsured, TaskError> {
        self.0.ensure_topic(topic, partitions, configs)
    }
    fn offset_syncs(&mut self) -> Result<Vec<OffsetSync>, TaskError> {
        self.0.offset_syncs()
    }
    fn commit_group_offsets(&mut self, group: &str, offsets: &[GroupOffset]) -> Result<(), TaskError> {
        self.0.commit_group_offsets(group, offsets)
    }
}

/// The worker's cluster, through the `source` interface.
pub struct GrantedSource;

impl Source for GrantedSource {
    fn describe_topic(&mut self, topic: &str) -> Result<Option<TopicDescription>, TaskError> {
        spillway_sdk::kafka::source::describe_topic(topic)
    }
    fn list_groups(&mut self) -> Result<Vec<String>, TaskError> {
        spillway_sdk::kafka::source::list_groups()
    }
    fn group_offsets(&mut self, group: &str) -> Result<Vec<GroupOffset>, TaskError> {
        spillway_sdk::kafka::source::group_offsets(group)
    }
}
