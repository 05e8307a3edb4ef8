//! A share group's start offsets, seen from outside the group: KIP-932's
//! DescribeShareGroupOffsets (API key 90), AlterShareGroupOffsets (91) and
//! DeleteShareGroupOffsets (92), sent to the group's coordinator. They back
//! Connect's `/connectors/{name}/offsets` for share-group connectors.
//!
//! A share-partition's start offset is the first offset the group has not
//! finished with; it plays the part a committed offset plays in a consumer
//! group. A partition the group never read has none.

use super::cluster::Cluster;
use super::connection::Connection;
use super::error::{ShareError, coordinator_moving};
use super::lag::{self, DescribeLag};
use crate::clients::{ClusterAccess, Role};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, GroupId,
    ShareGroupDescribeRequest, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);
const CLIENT_ID: &str = "spillway-share-offsets";

/// One partition's share-partition start offset.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StartOffset {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// One partition's lag in a share group, as its broker counts it (KIP-1226).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ShareLag {
    pub topic: String,
    pub partition: i32,
    /// The share-partition start offset; `None` before the group read there.
    pub start_offset: Option<i64>,
    /// Records not finished yet, those in flight included: from the start
    /// offset to the end, less what was acknowledged beyond the start.
    /// `None` where the broker cannot count them.
    pub records: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ShareOffsetsError {
    #[error("the broker does not serve {0} (API key {1}), which reading or changing a share group's offsets needs")]
    Unsupported(&'static str, i16),
    #[error("share group '{0}' still has members; its offsets change only once every consumer has left it")]
    GroupNotEmpty(String),
    /// The broker refused part of the request (an unknown topic or
    /// partition, an offset out of range, a group that does not exist).
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Broker(#[from] ShareError),
}

/// A connection to one share group's coordinator.
pub struct ShareGroupOffsets {
    cluster: Arc<Cluster>,
    group: String,
    coordinator: Connection,
}

impl ShareGroupOffsets {
    pub async fn connect(cluster: &ClusterAccess, group: &str) -> Result<Self, ShareOffsetsError> {
        let security = cluster.security(Role::Admin)?;
        let cluster = Cluster::bootstrap(&cluster.bootstrap, CLIENT_ID, TIMEOUT, &security).await?;
        let addr = cluster.find_coordinator(group).await?;
        let coordinator = cluster.connect(&addr).await?;
        Ok(ShareGroupOffsets { cluster, group: group.to_string(), coordinator })
    }

    /// The version of `R` to send, or why it cannot be.
    fn version<R: Request>(&self, name: &'static str) -> Result<i16, ShareOffsetsError> {
        self.cluster.versions.served::<R>().ok_or(ShareOffsetsError::Unsupported(name, R::KEY))
    }

    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.group.clone()))
    }

    /// Every partition the group has a start offset for, in order; none for a
    /// group that does not exist.
    pub async fn describe(&self) -> Result<Vec<StartOffset>, ShareOffsetsError> {
        let version = self.version::<DescribeShareGroupOffsetsRequest>("DescribeShareGroupOffsets (Kafka 4.1+)")?;
        // No topics: all of the group's.
        let group = DescribeShareGroupOffsetsRequestGroup::default().with_group_id(self.group_id()).with_topics(None);
        let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![group]);
        let reply = self.coordinator.send(&req, version, TIMEOUT).await?;
        let mut offsets = Vec::new();
        for group in reply.groups {
            match ResponseError::try_from_code(group.error_code) {
                None => {}
                Some(ResponseError::GroupIdNotFound) => return Ok(Vec::new()),
                Some(error) => return Err(self.group_error(error, group.error_message, "describing")),
            }
            for topic in group.topics {
                let name = topic.topic_name.0.to_string();
                for p in topic.partitions {
                    if let Some(error) = ResponseError::try_from_code(p.error_code) {
                        return Err(partition_error(&name, p.partition_index, error, p.error_message));
                    }
                    // -1: the group has no start offset there yet.
                    if p.start_offset >= 0 {
                        offsets.push(StartOffset {
                            topic: name.clone(),
                            partition: p.partition_index,
                            offset: p.start_offset,
                        });
                    }
                }
            }
        }
        offsets.sort();
        Ok(offsets)
    }

    /// The broker's lag of each partition the group has read (KIP-1226:
    /// DescribeShareGroupOffsets v1), in order; none for a group that does
    /// not exist.
    pub async fn lag(&self) -> Result<Vec<ShareLag>, ShareOffsetsError> {
        let served = self.cluster.versions.max_version(DescribeLag::KEY);
        if served.is_none_or(|v| v < lag::VERSION) {
            return Err(ShareOffsetsError::Unsupported(
                "DescribeShareGroupOffsets v1, with lag (KIP-1226)",
                DescribeLag::KEY,
            ));
        }
        let group = DescribeShareGroupOffsetsRequestGroup::default().with_group_id(self.group_id()).with_topics(None);
        let req = DescribeLag(DescribeShareGroupOffsetsRequest::default().with_groups(vec![group]));
        let reply = self.coordinator.send(&req, lag::VERSION, TIMEOUT).await?;
        let mut lags = Vec::new();
        for group in reply.groups {
            match ResponseError::try_from_code(group.error_code) {
                None => {}
                Some(ResponseError::GroupIdNotFound) => return Ok(Vec::new()),
                Some(error) => {
                    return Err(self.group_error(error, group.error_message.map(StrBytes::from_string), "describing"));
                }
            }
            for p in group.partitions {
                if let Some(error) = ResponseError::try_from_code(p.error_code) {
                    return Err(partition_error(
                        &p.topic,
                        p.partition,
                        error,
                        p.error_message.map(StrBytes::from_string),
                    ));
                }
                // -1: not known (no start offset there yet; a lag the broker
                // cannot count).
                let start_offset = (p.start_offset >= 0).then_some(p.start_offset);
                let records = (p.lag >= 0).then_some(p.lag);
                if start_offset.is_some() || records.is_some() {
                    lags.push(ShareLag { topic: p.topic, partition: p.partition, start_offset, records });
                }
            }
        }
        lags.sort();
        Ok(lags)
    }

    /// Moves the given partitions' start offsets. Kafka allows it only while
    /// the group has no members.
    pub async fn alter(&self, offsets: &[StartOffset]) -> Result<(), ShareOffsetsError> {
        if offsets.is_empty() {
            return Ok(());
        }
        let version = self.version::<AlterShareGroupOffsetsRequest>("AlterShareGroupOffsets (Kafka 4.1+)")?;
        let mut by_topic: BTreeMap<&str, Vec<AlterShareGroupOffsetsRequestPartition>> = BTreeMap::new();
        for o in offsets {
            by_topic.entry(&o.topic).or_default().push(
                AlterShareGroupOffsetsRequestPartition::default()
                    .with_partition_index(o.partition)
                    .with_start_offset(o.offset),
            );
        }
        let topics = by_topic
            .into_iter()
            .map(|(topic, partitions)| {
                AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(topic_name(topic))
                    .with_partitions(partitions)
            })
            .collect();
        let req = AlterShareGroupOffsetsRequest::default().with_group_id(self.group_id()).with_topics(topics);
        let reply = self.coordinator.send(&req, version, TIMEOUT).await?;
        if let Some(error) = ResponseError::try_from_code(reply.error_code) {
            return Err(self.group_error(error, reply.error_message, "altering"));
        }
        for topic in reply.responses {
            for p in topic.partitions {
                if let Some(error) = ResponseError::try_from_code(p.error_code) {
                    return Err(partition_error(
                        topic.topic_name.0.as_str(),
                        p.partition_index,
                        error,
                        p.error_message,
                    ));
                }
            }
        }
        Ok(())
    }

    /// Deletes the group's start offsets in `topics`: the group then starts
    /// those topics afresh, at its `share.auto.offset.reset` position.
    pub async fn delete(&self, topics: &[String]) -> Result<(), ShareOffsetsError> {
        if topics.is_empty() {
            return Ok(());
        }
        let version = self.version::<DeleteShareGroupOffsetsRequest>("DeleteShareGroupOffsets (Kafka 4.1+)")?;
        let topics = topics
            .iter()
            .map(|t| DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(topic_name(t)))
            .collect();
        let req = DeleteShareGroupOffsetsRequest::default().with_group_id(self.group_id()).with_topics(topics);
        let reply = self.coordinator.send(&req, version, TIMEOUT).await?;
        match ResponseError::try_from_code(reply.error_code) {
            None => {}
            // Nothing to delete.
            Some(ResponseError::GroupIdNotFound) => return Ok(()),
            Some(error) => return Err(self.group_error(error, reply.error_message, "deleting")),
        }
        for topic in reply.responses {
            if let Some(error) = ResponseError::try_from_code(topic.error_code) {
                let name = topic.topic_name.0.as_str();
                return Err(ShareOffsetsError::Refused(with_message(
                    format!("topic {name}: {error}"),
                    topic.error_message,
                )));
            }
        }
        Ok(())
    }

    fn group_error(&self, error: ResponseError, message: Option<StrBytes>, doing: &str) -> ShareOffsetsError {
        match error {
            ResponseError::NonEmptyGroup => ShareOffsetsError::GroupNotEmpty(self.group.clone()),
            ResponseError::GroupIdNotFound => {
                ShareOffsetsError::Refused(format!("share group '{}' does not exist yet", self.group))
            }
            _ => ShareOffsetsError::Broker(ShareError::Broker {
                error,
                context: with_message(format!("{doing} the offsets of share group '{}'", self.group), message),
            }),
        }
    }
}

/// Whether `group` is a share group now (KIP-932's ShareGroupDescribe, in
/// any state but Dead): `false` for no group, a consumer group's id, or a
/// broker that has no share groups at all. A coordinator that is loading
/// or has moved (a new cluster, a broker gone) is found and asked again.
pub async fn is_share_group(cluster: &ClusterAccess, group: &str) -> Result<bool, ShareOffsetsError> {
    let security = cluster.security(Role::Admin)?;
    let cluster = Cluster::bootstrap(&cluster.bootstrap, CLIENT_ID, TIMEOUT, &security).await?;
    let Some(version) = cluster.versions.served::<ShareGroupDescribeRequest>() else { return Ok(false) };
    let req = ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(StrBytes::from_string(group.into()))]);
    let deadline = tokio::time::Instant::now() + 2 * TIMEOUT;
    loop {
        let coordinator = cluster.connect(&cluster.find_coordinator(group).await?).await?;
        let reply = coordinator.send(&req, version, TIMEOUT).await?;
        let Some(described) = reply.groups.into_iter().next() else {
            return Err(ShareOffsetsError::Refused(format!("the broker described no group for '{group}'")));
        };
        let error = match ResponseError::try_from_code(described.error_code) {
            None => return Ok(described.group_state.as_str() != "Dead"),
            Some(ResponseError::GroupIdNotFound) => return Ok(false),
            Some(error) => error,
        };
        if !coordinator_moving(error) || tokio::time::Instant::now() >= deadline {
            return Err(ShareOffsetsError::Broker(ShareError::Broker {
                error,
                context: with_message(format!("describing share group '{group}'"), described.error_message),
            }));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn topic_name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_string()))
}

fn partition_error(topic: &str, partition: i32, error: ResponseError, message: Option<StrBytes>) -> ShareOffsetsError {
    ShareOffsetsError::Refused(with_message(format!("partition {topic}-{partition}: {error}"), message))
}

fn with_message(what: String, message: Option<StrBytes>) -> String {
    match message {
        Some(m) if !m.is_empty() => format!("{what} ({})", m.as_str()),
        _ => what,
    }
}
