//! Offset syncs: where each source offset landed in the target, written to
//! a topic of the target as records are delivered (MirrorMaker 2's
//! `mm2-offset-syncs`), and read back for translating consumer-group
//! offsets. Under exactly-once they join the transaction of the records
//! they describe, so they commit or abort with them.

use super::bindings::spillway::kafka::producer::{OffsetSync, OutputRecord};
use rdkafka::message::Message;
use serde::{Deserialize, Serialize};
use spillway_kafka::read_to_end::read_to_end;
use spillway_kafka::target::{SendError, TargetCluster};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Syncs kept per source partition when read back: enough to translate
/// offsets a little behind the newest.
const SYNCS_KEPT_PER_PARTITION: usize = 256;

/// A source record's coordinates.
#[derive(Clone, Debug)]
pub struct SourceOffset {
    topic: Arc<str>,
    partition: i32,
    offset: i64,
}

/// Where the records of the last two `put`s came from, by id: a send names
/// its source by id, and a plugin may send a batch in the next call.
#[derive(Default)]
pub struct SourceIndex {
    current: HashMap<u64, SourceOffset>,
    previous: HashMap<u64, SourceOffset>,
}

impl SourceIndex {
    pub fn note<'r>(&mut self, records: impl Iterator<Item = (u64, &'r str, i32, i64)>) {
        let mut topics: Vec<Arc<str>> = Vec::new();
        let mut batch = HashMap::new();
        for (id, topic, partition, offset) in records {
            let topic = match topics.iter().find(|t| &***t == topic) {
                Some(t) => t.clone(),
                None => {
                    topics.push(Arc::from(topic));
                    topics[topics.len() - 1].clone()
                }
            };
            batch.insert(id, SourceOffset { topic, partition, offset });
        }
        if batch.is_empty() {
            return;
        }
        self.previous = std::mem::replace(&mut self.current, batch);
    }

    pub fn lookup(&self, records: &[OutputRecord]) -> Vec<Option<SourceOffset>> {
        records
            .iter()
            .map(|r| {
                let id = r.source?;
                self.current.get(&id).or_else(|| self.previous.get(&id)).cloned()
            })
            .collect()
    }
}

/// One sync as stored: the key names the source partition.
#[derive(Serialize, Deserialize)]
struct Stored {
    connector: String,
    source_topic: String,
    source_partition: i32,
    source_offset: i64,
    target_topic: String,
    target_partition: i32,
    target_offset: i64,
}

pub struct SyncWriter {
    topic: String,
    connector: String,
}

impl SyncWriter {
    pub fn new(topic: String, connector: String) -> Self {
        SyncWriter { topic, connector }
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn connector(&self) -> &str {
        &self.connector
    }

    /// One sync per source partition of a send: its highest delivered
    /// source offset and where that landed. Not awaited: a lost sync only
    /// makes translation coarser (MirrorMaker 2 writes them sparsely too).
    pub fn record(
        &self,
        target: &TargetCluster,
        records: &[OutputRecord],
        sources: &[Option<SourceOffset>],
        outcomes: &[Result<(i32, i64), SendError>],
    ) {
        let mut newest: BTreeMap<(&str, i32), (i64, &OutputRecord, i32, i64)> = BTreeMap::new();
        for ((record, source), outcome) in records.iter().zip(sources).zip(outcomes) {
            let (Some(source), Ok((partition, offset))) = (source, outcome) else { continue };
            let entry = newest.entry((&source.topic, source.partition)).or_insert((-1, record, 0, 0));
            if source.offset > entry.0 {
                *entry = (source.offset, record, *partition, *offset);
            }
        }
        for ((source_topic, source_partition), (source_offset, record, target_partition, target_offset)) in newest {
            let stored = Stored {
                connector: self.connector.clone(),
                source_topic: source_topic.to_string(),
                source_partition,
                source_offset,
                target_topic: record.topic.clone(),
                target_partition,
                target_offset,
            };
            let key = format!("{}:{source_topic}:{source_partition}", self.connector);
            let value = serde_json::to_vec(&stored).expect("a sync serializes");
            target.send_detached(&self.topic, key.as_bytes(), &value);
        }
    }
}

/// Reads every committed sync of `connector` from `topic` (to its end as
/// the read starts), keeping the newest [`SYNCS_KEPT_PER_PARTITION`] per
/// source partition. Blocking.
pub fn read(
    settings: &[(String, String)],
    topic: &str,
    connector: &str,
    timeout: Duration,
) -> Result<Vec<OffsetSync>, SendError> {
    let mut by_partition: BTreeMap<(String, i32), BTreeMap<i64, OffsetSync>> = BTreeMap::new();
    let reader_group = format!("spillway-offset-syncs-reader-{connector}");
    read_to_end(settings, topic, &reader_group, timeout, |message| {
        let Some(stored) = message.payload().and_then(|v| serde_json::from_slice::<Stored>(v).ok()) else {
            return;
        };
        if stored.connector != connector {
            return;
        }
        let syncs = by_partition.entry((stored.source_topic.clone(), stored.source_partition)).or_default();
        syncs.insert(
            stored.source_offset,
            OffsetSync {
                source_topic: stored.source_topic,
                source_partition: stored.source_partition,
                source_offset: stored.source_offset,
                target_topic: stored.target_topic,
                target_partition: stored.target_partition,
                target_offset: stored.target_offset,
            },
        );
        while syncs.len() > SYNCS_KEPT_PER_PARTITION {
            syncs.pop_first();
        }
    })?;
    Ok(by_partition.into_values().flat_map(BTreeMap::into_values).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(source: Option<u64>) -> OutputRecord {
        OutputRecord {
            source,
            topic: "src.t".into(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    #[test]
    fn a_send_finds_its_sources_in_the_last_two_batches_only() {
        let mut index = SourceIndex::default();
        index.note([(1, "t", 0, 10), (2, "t", 1, 20)].into_iter());
        index.note([(3, "t", 0, 11)].into_iter());
        let found = index.lookup(&[output(Some(1)), output(Some(3)), output(None), output(Some(9))]);
        let coordinates: Vec<Option<(&str, i32, i64)>> =
            found.iter().map(|s| s.as_ref().map(|s| (&*s.topic, s.partition, s.offset))).collect();
        assert_eq!(coordinates, vec![Some(("t", 0, 10)), Some(("t", 0, 11)), None, None]);
        // An empty put forgets nothing; a third batch forgets the first.
        index.note(std::iter::empty());
        assert!(index.lookup(&[output(Some(1))])[0].is_some());
        index.note([(4, "t", 2, 5)].into_iter());
        assert!(index.lookup(&[output(Some(1))])[0].is_none());
        assert!(index.lookup(&[output(Some(3))])[0].is_some());
    }
}
