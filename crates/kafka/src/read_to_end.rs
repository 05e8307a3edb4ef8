//! Reading a topic of the host's own bookkeeping (exactly-once positions,
//! offset syncs) whole: every committed record from the beginning to the
//! end the topic had when the read started. Blocking.
//!
//! The end is each partition's high watermark at the start, not the first
//! open transaction (where read_committed stops): a transaction still open
//! then (a task's that lost its partitions with its commit unresolved, or
//! one the cluster is still completing after a restart) may yet commit
//! records, so the read waits until it is decided. A transaction begun after
//! the read started is not waited for.

use super::target::SendError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::BorrowedMessage;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Hands `each` every committed record of `topic`, in order per partition,
/// reading as `reader_group` (which commits nothing). A topic that does not
/// exist yet has none. Errors along the way (the cluster restarting) are
/// retried by librdkafka until `timeout`, then reported with the last one.
pub fn read_to_end(
    settings: &[(String, String)],
    topic: &str,
    reader_group: &str,
    timeout: Duration,
    mut each: impl FnMut(&BorrowedMessage<'_>),
) -> Result<(), SendError> {
    let consumer: BaseConsumer = client(settings, "read_committed")
        .set("group.id", reader_group)
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(|e| SendError::Fatal(format!("a reader of {topic}: {e}")))?;
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| SendError::Retriable(format!("reading metadata of {topic}: {e}")))?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Ok(());
    }
    let mut list = TopicPartitionList::new();
    for p in &partitions {
        list.add_partition_offset(topic, *p, Offset::Beginning).map_err(|e| SendError::Fatal(e.to_string()))?;
    }
    let ends = watermarks(settings, topic, &partitions, timeout)?;
    consumer.assign(&list).map_err(|e| SendError::Retriable(format!("reading {topic}: {e}")))?;
    // A partition reports its end again after each record written since:
    // only a partition whose last event was its end counts as read. An
    // empty partition has no end to report a position at.
    let mut at_end: BTreeSet<i32> = ends.iter().filter(|(_, (low, high))| high <= low).map(|(p, _)| *p).collect();
    let mut last_error = None;
    let deadline = Instant::now() + timeout;
    while at_end.len() < partitions.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            let why = last_error.map(|e| format!(" (last error: {e})")).unwrap_or_default();
            return Err(SendError::Retriable(format!("reading {topic} did not reach its end in time{why}")));
        }
        match consumer.poll(left.min(Duration::from_millis(500))) {
            None => {}
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                // The end under read_committed: a transaction open below the
                // watermark holds it back, and the read waits for it.
                match next_offset(&consumer, topic, p) {
                    Some(next) if next >= ends[&p].1 => {
                        at_end.insert(p);
                    }
                    _ => last_error = Some(format!("a transaction open in {topic}-{p} is not decided yet")),
                }
            }
            Some(Err(e)) => last_error = Some(e.to_string()),
            Some(Ok(message)) => {
                at_end.remove(&rdkafka::Message::partition(&message));
                each(&message);
            }
        }
    }
    Ok(())
}

/// A client of the worker's settings for the target, reading as `isolation`.
fn client(settings: &[(String, String)], isolation: &str) -> ClientConfig {
    let mut config = ClientConfig::new();
    for (k, v) in settings {
        config.set(k, v);
    }
    config.set("isolation.level", isolation).set("allow.auto.create.topics", "false");
    config
}

/// Each partition's low and high watermarks: where its records begin, and
/// end, decided or not (asked under read_uncommitted; read_committed would
/// answer the first open transaction).
fn watermarks(
    settings: &[(String, String)],
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<BTreeMap<i32, (i64, i64)>, SendError> {
    let client: BaseConsumer = client(settings, "read_uncommitted")
        .create()
        .map_err(|e| SendError::Fatal(format!("a client of {topic}: {e}")))?;
    let mut ends = BTreeMap::new();
    for &p in partitions {
        let watermarks = client
            .fetch_watermarks(topic, p, timeout)
            .map_err(|e| SendError::Retriable(format!("reading the end of {topic}-{p}: {e}")))?;
        ends.insert(p, watermarks);
    }
    Ok(ends)
}

/// The offset the consumer reads `topic`-`partition` from next.
fn next_offset(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let position = consumer.position().ok()?;
    match position.find_partition(topic, partition)?.offset() {
        Offset::Offset(offset) => Some(offset),
        _ => None,
    }
}
