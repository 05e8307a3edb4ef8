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

use super::read_to_end::read_to_end;
use super::target::SendError;
use rdkafka::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

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

/// Every committed position of `group` in `topic`, read to its end as the
/// read starts (see [`read_to_end`]: a transaction still open then, another
/// task's that lost these partitions with its commit unresolved, may yet
/// commit positions for them; one begun after cannot, as this task owns
/// them now). Positions of aborted transactions never count. Nothing when
/// the topic does not exist yet. Blocking.
pub fn read(
    settings: &[(String, String)],
    topic: &str,
    group: &str,
    timeout: Duration,
) -> Result<BTreeMap<(String, i32), i64>, SendError> {
    let mut positions = BTreeMap::new();
    read_to_end(settings, topic, &format!("{group}-positions-reader"), timeout, |message| {
        let Some(key) = message.key().and_then(|k| serde_json::from_slice::<Key>(k).ok()) else { return };
        if key.group != group {
            return;
        }
        match message.payload().and_then(|v| serde_json::from_slice::<Value>(v).ok()) {
            Some(value) => positions.insert((key.topic, key.partition), value.offset),
            // A tombstone: the position was reset.
            None => positions.remove(&(key.topic, key.partition)),
        };
    })?;
    Ok(positions)
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
