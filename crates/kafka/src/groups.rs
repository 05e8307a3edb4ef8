//! Classic consumer groups seen from outside: whether one exists, and its
//! committed offsets, read and changed (Connect's `/connectors/{name}/offsets`).
//! Blocking, but for [`delete_group`]: call from a blocking thread.

use super::clients::{ClusterAccess, Role};
use anyhow::{Context, Result};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use regex::Regex;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

/// (topic, partition, offset) — `None` where nothing is committed.
pub type Position = (String, i32, Option<i64>);

fn consumer(cluster: &ClusterAccess, group: &str) -> Result<BaseConsumer> {
    cluster
        .rdkafka(Role::Admin)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        // The broker's minimum, for when an alter joins the group: ours is
        // then the group's last session timeout, and librdkafka's mock keeps
        // an emptied group rebalancing that long, holding up the next alter.
        .set("session.timeout.ms", "6000")
        .create()
        .context("creating an offsets client")
}

fn partitions(consumer: &BaseConsumer, topics: &[String]) -> Result<Vec<(String, i32)>> {
    let mut all = Vec::new();
    for topic in topics {
        let metadata = consumer.fetch_metadata(Some(topic), TIMEOUT).with_context(|| format!("metadata of {topic}"))?;
        for t in metadata.topics() {
            all.extend(t.partitions().iter().map(|p| (t.name().to_string(), p.id())));
        }
    }
    Ok(all)
}

/// Each partition of `topics` with its low and high watermarks: where its
/// records begin and end (read_uncommitted: records of open transactions
/// count, as a consumer will reach them).
pub fn watermarks(cluster: &ClusterAccess, topics: &[String]) -> Result<Vec<(String, i32, i64, i64)>> {
    let client: BaseConsumer = cluster.rdkafka(Role::Admin).create().context("creating a watermarks client")?;
    let mut ends = Vec::new();
    for (topic, partition) in partitions(&client, topics)? {
        let (low, high) = client
            .fetch_watermarks(&topic, partition, TIMEOUT)
            .with_context(|| format!("the end of {topic}-{partition}"))?;
        ends.push((topic, partition, low, high));
    }
    Ok(ends)
}

/// The topics a connector consumes now: `named`, or with a `topics.regex`
/// (`pattern`, anchored) every existing topic whose name it matches, from
/// metadata of all topics (which creates none).
pub fn connector_topics(cluster: &ClusterAccess, named: &[String], pattern: Option<&Regex>) -> Result<Vec<String>> {
    let Some(pattern) = pattern else { return Ok(named.to_vec()) };
    let client: BaseConsumer = cluster.rdkafka(Role::Admin).create().context("creating a metadata client")?;
    let metadata = client.fetch_metadata(None, TIMEOUT).context("metadata of all topics")?;
    let mut topics: Vec<String> =
        metadata.topics().iter().map(|t| t.name().to_string()).filter(|t| pattern.is_match(t)).collect();
    topics.sort();
    Ok(topics)
}

pub fn committed(cluster: &ClusterAccess, group: &str, topics: &[String]) -> Result<Vec<Position>> {
    let consumer = consumer(cluster, group)?;
    let mut list = TopicPartitionList::new();
    for (topic, partition) in partitions(&consumer, topics)? {
        list.add_partition(&topic, partition);
    }
    let committed = consumer.committed_offsets(list, TIMEOUT).context("reading committed offsets")?;
    Ok(committed
        .elements()
        .iter()
        .map(|e| {
            let offset = match e.offset() {
                Offset::Offset(o) => Some(o),
                _ => None,
            };
            (e.topic().to_string(), e.partition(), offset)
        })
        .collect())
}

/// Commits the given positions; a `None` offset resets that partition to its
/// beginning (the connector's `auto.offset.reset`). Every partition must exist.
pub fn alter(cluster: &ClusterAccess, group: &str, positions: &[Position]) -> Result<()> {
    let consumer = consumer(cluster, group)?;
    let existing = partitions(&consumer, &topics_of(positions))?;
    commit(consumer, cluster, group, &existing, positions)
}

/// What [`delete_group`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum GroupDeletion {
    /// The group and its offsets are gone (or there was none).
    Deleted,
    /// The broker does not serve DeleteGroups (librdkafka's mock).
    NotServed,
}

/// Deletes a classic group, its committed offsets with it, as Connect resets
/// a sink connector's offsets. Kafka refuses while the group has members.
///
/// Sent by our own kafka-protocol client (the share consumer's): librdkafka's
/// DeleteGroups aborts the whole process against a broker that lacks the API
/// (an assertion in rd_kafka_q_destroy0, seen with its own mock).
pub async fn delete_group(cluster: &ClusterAccess, group: &str) -> Result<GroupDeletion> {
    use kafka_protocol::ResponseError;
    use kafka_protocol::messages::{DeleteGroupsRequest, GroupId};
    use kafka_protocol::protocol::StrBytes;
    let security = cluster.security(Role::Admin)?;
    let cluster = crate::share::Cluster::bootstrap(&cluster.bootstrap, "spillway-groups", TIMEOUT, &security).await?;
    let Some(version) = cluster.versions.served::<DeleteGroupsRequest>() else {
        return Ok(GroupDeletion::NotServed);
    };
    let coordinator = cluster.connect(&cluster.find_coordinator(group).await?).await?;
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(StrBytes::from_string(group.into()))]);
    let reply = coordinator.send(&req, version, TIMEOUT).await?;
    for result in reply.results {
        match ResponseError::try_from_code(result.error_code) {
            None | Some(ResponseError::GroupIdNotFound) => {}
            Some(ResponseError::NonEmptyGroup) => return Err(GroupBusy.into()),
            Some(error) => return Err(anyhow::anyhow!("deleting group {group}: {error}")),
        }
    }
    Ok(GroupDeletion::Deleted)
}

/// Moves every partition of `topics` back to its beginning: the reset for
/// brokers without DeleteGroups.
pub fn reset(cluster: &ClusterAccess, group: &str, topics: &[String]) -> Result<()> {
    let consumer = consumer(cluster, group)?;
    let existing = partitions(&consumer, topics)?;
    let positions: Vec<Position> =
        existing.iter().map(|(topic, partition)| (topic.clone(), *partition, None)).collect();
    commit(consumer, cluster, group, &existing, &positions)
}

fn topics_of(positions: &[Position]) -> Vec<String> {
    let mut topics: Vec<String> = positions.iter().map(|(t, _, _)| t.clone()).collect();
    topics.sort();
    topics.dedup();
    topics
}

/// Commits `positions`, each of which must be among the `existing` partitions.
fn commit(
    consumer: BaseConsumer,
    cluster: &ClusterAccess,
    group: &str,
    existing: &[(String, i32)],
    positions: &[Position],
) -> Result<()> {
    if positions.is_empty() {
        // Nothing to commit (for example a reset of topics with no partitions yet).
        return Ok(());
    }
    let mut list = TopicPartitionList::new();
    for (topic, partition, offset) in positions {
        if !existing.iter().any(|(t, p)| t == topic && p == partition) {
            return Err(NoSuchPartition(format!("{topic}-{partition}")).into());
        }
        let offset = match offset {
            Some(o) => *o,
            None => consumer.fetch_watermarks(topic, *partition, TIMEOUT)?.0,
        };
        list.add_partition_offset(topic, *partition, Offset::Offset(offset))?;
    }
    // Kafka takes a commit from outside an empty group (generation -1), as
    // Connect's admin client sends it. librdkafka's mock refuses one: there,
    // join the group and commit as its only member, which takes seconds.
    match consumer.commit(&list, CommitMode::Sync) {
        Ok(()) => return Ok(()),
        Err(e) => tracing::debug!(group, "commit from outside the group refused ({e}); committing as a member"),
    }
    drop(consumer);
    commit_as_member(&self::consumer(cluster, group)?, &topics_of(positions), &list)
}

fn commit_as_member(consumer: &BaseConsumer, topics: &[String], list: &TopicPartitionList) -> Result<()> {
    let topics: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).context("joining the group")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(50);
    while consumer.assignment().map(|a| a.count()).unwrap_or(0) == 0 {
        if std::time::Instant::now() >= deadline {
            return Err(GroupBusy.into());
        }
        // Polling drives the join; fetched messages are not committed.
        let _ = consumer.poll(Duration::from_millis(100));
    }
    let result = consumer.commit(list, CommitMode::Sync).context("committing offsets");
    consumer.unsubscribe();
    result
}

/// The group did not let us in: earlier members (the connector's stopped
/// tasks) have not left it yet.
#[derive(Debug, thiserror::Error)]
#[error("the group is still rebalancing away the connector's stopped tasks; try again shortly")]
pub struct GroupBusy;

/// An offset given for a partition that does not exist.
#[derive(Debug, thiserror::Error)]
#[error("partition {0} does not exist")]
pub struct NoSuchPartition(pub String);

/// Whether a classic consumer group with this id exists — a share group must
/// not take its id. A group with committed offsets on `topics` counts, and so
/// does one the broker describes as a consumer group (where it can: some test
/// brokers lack DescribeGroups).
pub fn classic_group_exists(cluster: &ClusterAccess, group: &str, topics: &[String]) -> Result<bool> {
    if committed(cluster, group, topics)?.iter().any(|(_, _, offset)| offset.is_some()) {
        return Ok(true);
    }
    let client = consumer(cluster, group)?;
    match client.fetch_group_list(Some(group), TIMEOUT) {
        Ok(groups) => Ok(groups
            .groups()
            .iter()
            .any(|g| g.name() == group && g.protocol_type() == "consumer" && g.state() != "Dead")),
        Err(rdkafka::error::KafkaError::GroupListFetch(rdkafka::types::RDKafkaErrorCode::UnsupportedFeature)) => {
            Ok(false)
        }
        Err(e) => Err(e).context("describing the group"),
    }
}
