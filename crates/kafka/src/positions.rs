//! Exactly-once source positions kept in the target cluster, as records of a
//! compacted topic written inside each transaction, the way Kafka Connect's
//! exactly-once source tasks keep their offsets (KIP-618): the key names the
//! connector's group and a source partition, the value the next offset to
//! read. The position commits or aborts with the records it covers.
//!
//! Not the target's group offsets (`send_offsets_to_transaction`): Apache
//! Kafka refuses a TxnOffsetCommit for a partition it does not have
//! (UNKNOWN_TOPIC_OR_PARTITION), and the source's topics are not in the
//! target; noida-db took them, which hid this until Kafka itself ran.

use super::target::SendError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// A position's key: whose it is and which source partition.
#[derive(Serialize, Deserialize)]
struct Key {
    group: String,
    topic: String,
    partition: i32,
}

#[derive(Serialize, Deserialize)]
struct Value {
    offset: i64,
}

/// The record that says `group` reads `(topic, partition)` next at `offset`.
pub fn record(group: &str, topic: &str, partition: i32, offset: i64) -> (Vec<u8>, Vec<u8>) {
    let key = Key { group: group.to_string(), topic: topic.to_string(), partition };
    let value = Value { offset };
    (serde_json::to_vec(&key).expect("plain struct"), serde_json::to_vec(&value).expect("plain struct"))
}

/// The topic's settings when the host creates it: compacted (the last
/// position per key is all that matters), with segments rolled hourly so
/// that compaction can reach them.
pub fn topic_configs() -> Vec<(String, String)> {
    vec![("cleanup.policy".into(), "compact".into()), ("segment.ms".into(), "3600000".into())]
}

/// Every committed position of `group` in `topic`, read to its end under
/// read_committed (positions of aborted transactions never count). Nothing
/// when the topic does not exist yet. Blocking.
///
/// The end is the topic's high watermark when the read starts, not the
/// first open transaction (where read_committed stops): a transaction still
/// open then (another task's that lost these partitions with its commit
/// unresolved, or one the target is still completing after a restart) may
/// yet commit positions for them, so the read waits until it is decided. A
/// transaction begun after the read started cannot hold them: this task
/// owns them now.
pub fn read(
    settings: &[(String, String)],
    topic: &str,
    group: &str,
    timeout: Duration,
) -> Result<BTreeMap<(String, i32), i64>, SendError> {
    let mut config = ClientConfig::new();
    for (k, v) in settings {
        config.set(k, v);
    }
    let consumer: BaseConsumer = config
        .set("group.id", format!("{group}-positions-reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
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
    let mut positions = BTreeMap::new();
    if partitions.is_empty() {
        return Ok(positions);
    }
    let mut list = TopicPartitionList::new();
    for p in &partitions {
        list.add_partition_offset(topic, *p, Offset::Beginning).map_err(|e| SendError::Fatal(e.to_string()))?;
    }
    let ends = high_watermarks(settings, topic, &partitions, timeout)?;
    consumer.assign(&list).map_err(|e| SendError::Retriable(format!("reading {topic}: {e}")))?;
    // A partition reports its end again after each record written since:
    // only a partition whose last event was its end counts as read.
    // An empty partition has no end to report a position at.
    let mut at_end: std::collections::BTreeSet<i32> =
        ends.iter().filter(|(_, (low, high))| high <= low).map(|(p, _)| *p).collect();
    // librdkafka reports a lost connection (the target restarting) as an
    // error and reconnects by itself: only the deadline ends the read.
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
                match read_up_to(&consumer, topic, p) {
                    Some(position) if position >= ends[&p].1 => {
                        at_end.insert(p);
                    }
                    _ => last_error = Some(format!("a transaction open in {topic}-{p} is not decided yet")),
                }
            }
            Some(Err(e)) => last_error = Some(e.to_string()),
            Some(Ok(message)) => {
                at_end.remove(&message.partition());
                let Some(key) = message.key().and_then(|k| serde_json::from_slice::<Key>(k).ok()) else { continue };
                if key.group != group {
                    continue;
                }
                match message.payload().and_then(|v| serde_json::from_slice::<Value>(v).ok()) {
                    Some(value) => positions.insert((key.topic, key.partition), value.offset),
                    // A tombstone: the position was reset.
                    None => positions.remove(&(key.topic, key.partition)),
                };
            }
        }
    }
    Ok(positions)
}

/// Each partition's low and high watermarks: where its records begin, and
/// end, decided or not (asked under read_uncommitted; read_committed would
/// answer the first open transaction).
fn high_watermarks(
    settings: &[(String, String)],
    topic: &str,
    partitions: &[i32],
    timeout: Duration,
) -> Result<BTreeMap<i32, (i64, i64)>, SendError> {
    let mut config = ClientConfig::new();
    for (k, v) in settings {
        config.set(k, v);
    }
    let client: BaseConsumer = config
        .set("isolation.level", "read_uncommitted")
        .set("allow.auto.create.topics", "false")
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
fn read_up_to(consumer: &BaseConsumer, topic: &str, partition: i32) -> Option<i64> {
    let position = consumer.position().ok()?;
    match position.find_partition(topic, partition)?.offset() {
        Offset::Offset(offset) => Some(offset),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_group_and_partition_and_reads_back() {
        let (key, value) = record("connect-m", "orders", 3, 42);
        let key: Key = serde_json::from_slice(&key).unwrap();
        assert_eq!((key.group.as_str(), key.topic.as_str(), key.partition), ("connect-m", "orders", 3));
        assert_eq!(serde_json::from_slice::<Value>(&value).unwrap().offset, 42);
    }
}
