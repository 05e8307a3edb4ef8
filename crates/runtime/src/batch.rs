//! The records of a `put` as the contract carries them: a `record-batch` of
//! columns (numbers as little-endian bytes, byte strings end to end), so
//! that a batch crosses into any guest language in a dozen copies rather
//! than a value per field of every record. The host's own view stays one
//! record at a time ([`SinkRecord`]); this module packs records into
//! columns and reads the plugin's runs and ranges back as per-record
//! outcomes and settlements.

pub use super::bindings::TaskError;
use super::bindings::{self, ByteStrings, IdRange, OutcomeRun};
pub use spillway_record::{FlushScope, Header, Outcome, PutReport, Settlement, SinkRecord, TimestampType};
use std::collections::HashMap;

impl From<bindings::Outcome> for Outcome {
    fn from(outcome: bindings::Outcome) -> Self {
        match outcome {
            bindings::Outcome::Accept => Outcome::Accept,
            bindings::Outcome::Hold => Outcome::Hold,
            bindings::Outcome::Retry(why) => Outcome::Retry(why),
            bindings::Outcome::Reject(why) => Outcome::Reject(why),
        }
    }
}

/// A batch ready for `put`.
pub struct RecordBatch(pub(super) bindings::RecordBatch);

impl RecordBatch {
    pub fn len(&self) -> usize {
        self.0.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.0.count == 0
    }

    /// Each record's id, topic, partition and offset, in order.
    pub fn coordinates(&self) -> impl Iterator<Item = (u64, &str, i32, i64)> {
        let b = &self.0;
        let ids = b.ids.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap()));
        let topics =
            b.topic_indexes.chunks_exact(2).map(|c| b.topics[u16::from_le_bytes([c[0], c[1]]) as usize].as_str());
        let partitions = b.partitions.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap()));
        let offsets = b.offsets.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()));
        ids.zip(topics)
            .zip(partitions)
            .zip(offsets)
            .map(|(((id, topic), partition), offset)| (id, topic, partition, offset))
    }
}

impl From<&[SinkRecord]> for RecordBatch {
    fn from(records: &[SinkRecord]) -> Self {
        let mut builder = BatchBuilder::with_capacity(records.len());
        for r in records {
            builder.push(RecordRef {
                id: r.id,
                topic: &r.topic,
                partition: r.partition,
                offset: r.offset,
                timestamp: r.timestamp,
                timestamp_type: r.timestamp_type,
                key: r.key.as_deref(),
                value: r.value.as_deref(),
                headers: r.headers.iter().map(|h| (h.key.as_str(), h.value.as_deref())),
                delivery_count: r.delivery_count,
                lock_deadline: r.lock_deadline,
            });
        }
        builder.finish()
    }
}

/// One record's fields, borrowed from wherever the record lives.
pub struct RecordRef<'a, H> {
    pub id: u64,
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    /// Key and value of each header, in order.
    pub headers: H,
    pub delivery_count: u16,
    pub lock_deadline: Option<i64>,
}

/// Packs records into a [`RecordBatch`], one after another.
pub struct BatchBuilder {
    batch: bindings::RecordBatch,
    topic_index: HashMap<String, u16>,
    headers: u32,
}

impl BatchBuilder {
    pub fn with_capacity(records: usize) -> Self {
        let column = |width: usize| Vec::with_capacity(records * width);
        BatchBuilder {
            batch: bindings::RecordBatch {
                count: 0,
                ids: column(8),
                topics: Vec::new(),
                topic_indexes: column(2),
                partitions: column(4),
                offsets: column(8),
                timestamps: column(8),
                timestamp_types: column(1),
                keys: byte_strings(records),
                values: byte_strings(records),
                header_offsets: 0u32.to_le_bytes().to_vec(),
                header_keys: byte_strings(0),
                header_values: byte_strings(0),
                delivery_counts: column(2),
                lock_deadlines: column(8),
            },
            topic_index: HashMap::new(),
            headers: 0,
        }
    }

    /// Room for this many key and value bytes, so that a large batch is
    /// copied in once rather than regrown.
    pub fn reserve_bytes(&mut self, keys: usize, values: usize) {
        self.batch.keys.data.reserve(keys);
        self.batch.values.data.reserve(values);
    }

    pub fn push<'a, H>(&mut self, r: RecordRef<'a, H>)
    where
        H: Iterator<Item = (&'a str, Option<&'a [u8]>)>,
    {
        let b = &mut self.batch;
        let topic = match self.topic_index.get(r.topic) {
            Some(index) => *index,
            None => {
                // A batch comes from one task's assignment: far fewer topics than this.
                let index = u16::try_from(b.topics.len()).expect("more than 65536 topics in one batch");
                b.topics.push(r.topic.to_string());
                self.topic_index.insert(r.topic.to_string(), index);
                index
            }
        };
        b.count += 1;
        b.ids.extend_from_slice(&r.id.to_le_bytes());
        b.topic_indexes.extend_from_slice(&topic.to_le_bytes());
        b.partitions.extend_from_slice(&r.partition.to_le_bytes());
        b.offsets.extend_from_slice(&r.offset.to_le_bytes());
        b.timestamps.extend_from_slice(&r.timestamp.to_le_bytes());
        b.timestamp_types.push(r.timestamp_type.code());
        push_entry(&mut b.keys, r.key);
        push_entry(&mut b.values, r.value);
        for (key, value) in r.headers {
            push_entry(&mut b.header_keys, Some(key.as_bytes()));
            push_entry(&mut b.header_values, value);
            self.headers += 1;
        }
        b.header_offsets.extend_from_slice(&self.headers.to_le_bytes());
        b.delivery_counts.extend_from_slice(&r.delivery_count.to_le_bytes());
        b.lock_deadlines.extend_from_slice(&r.lock_deadline.unwrap_or(-1).to_le_bytes());
    }

    pub fn finish(self) -> RecordBatch {
        RecordBatch(self.batch)
    }
}

fn byte_strings(entries: usize) -> ByteStrings {
    let mut offsets = Vec::with_capacity((entries + 1) * 4);
    offsets.extend_from_slice(&0u32.to_le_bytes());
    ByteStrings { data: Vec::new(), offsets, present: Vec::with_capacity(entries) }
}

fn push_entry(column: &mut ByteStrings, entry: Option<&[u8]>) {
    if let Some(bytes) = entry {
        column.data.extend_from_slice(bytes);
    }
    let end = u32::try_from(column.data.len()).expect("a batch's byte strings past 4 GiB");
    column.offsets.extend_from_slice(&end.to_le_bytes());
    column.present.push(u8::from(entry.is_some()));
}

/// The plugin's runs, one outcome per record; `None` when the counts do not
/// add up to the batch.
pub(super) fn expand_outcomes(runs: Vec<OutcomeRun>, records: usize) -> Option<Vec<Outcome>> {
    let total: u64 = runs.iter().map(|run| u64::from(run.count)).sum();
    if total != records as u64 {
        return None;
    }
    let mut outcomes = Vec::with_capacity(records);
    for run in runs {
        outcomes.extend(std::iter::repeat_n(Outcome::from(run.outcome), run.count as usize));
    }
    Some(outcomes)
}

/// The plugin's ranges, one settlement per record.
pub(super) fn expand_settlements(settled: Vec<bindings::Settlement>) -> Vec<Settlement> {
    let mut out = Vec::new();
    for s in settled {
        let outcome = Outcome::from(s.outcome);
        out.extend(
            spillway_record::range_ids(s.ids.first, s.ids.count).map(|id| Settlement { id, outcome: outcome.clone() }),
        );
    }
    out
}

impl From<&FlushScope> for bindings::FlushScope {
    fn from(scope: &FlushScope) -> Self {
        match scope {
            FlushScope::All => bindings::FlushScope::All,
            FlushScope::Records(ids) => bindings::FlushScope::Records(id_ranges(ids)),
        }
    }
}

/// Ids as ranges of consecutive ids, in the order given.
pub fn id_ranges(ids: &[u64]) -> Vec<IdRange> {
    let ranges = spillway_record::id_ranges(ids.iter().map(|id| (*id, ())));
    ranges.into_iter().map(|(first, count, ())| IdRange { first, count }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u64, topic: &str, key: Option<&[u8]>, headers: &[(&str, Option<&[u8]>)]) -> SinkRecord {
        SinkRecord {
            id,
            topic: topic.into(),
            partition: id as i32 % 3,
            offset: 100 + id as i64,
            timestamp: if id == 1 { -1 } else { 1_700_000_000_000 + id as i64 },
            timestamp_type: if id == 1 { TimestampType::NoTimestampType } else { TimestampType::CreateTime },
            key: key.map(<[u8]>::to_vec),
            value: (id != 2).then(|| format!("value {id}").into_bytes()),
            headers: headers.iter().map(|(k, v)| Header { key: k.to_string(), value: v.map(<[u8]>::to_vec) }).collect(),
            delivery_count: id as u16 + 1,
            lock_deadline: id.is_multiple_of(2).then_some(5_000 + id as i64),
        }
    }

    fn u32s(bytes: &[u8]) -> Vec<u32> {
        bytes.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn records_are_packed_column_by_column() {
        let records = [
            record(7, "a", Some(b"k7"), &[("h", Some(b"1")), ("h", None)]),
            record(8, "b", None, &[]),
            record(9, "a", Some(b""), &[("x", Some(b""))]),
        ];
        let batch = RecordBatch::from(&records[..]);
        let b = &batch.0;
        assert_eq!(b.count, 3);
        assert_eq!(b.topics, ["a", "b"]);
        assert_eq!(b.topic_indexes, [0, 0, 1, 0, 0, 0]);
        assert_eq!(b.keys.data, b"k7");
        assert_eq!(u32s(&b.keys.offsets), [0, 2, 2, 2]);
        assert_eq!(b.keys.present, [1, 0, 1], "a null key and an empty one differ");
        assert_eq!(u32s(&b.header_offsets), [0, 2, 2, 3]);
        assert_eq!(b.header_keys.data, b"hhx");
        assert_eq!(b.header_values.present, [1, 0, 1]);
        assert_eq!(b.timestamp_types, [1, 1, 1]);
        let deadlines: Vec<i64> =
            b.lock_deadlines.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(deadlines, [-1, 5_008, -1]);
        let coordinates: Vec<_> = batch.coordinates().collect();
        assert_eq!(coordinates, [(7, "a", 1, 107), (8, "b", 2, 108), (9, "a", 0, 109)]);
    }

    #[test]
    fn runs_and_ranges_become_one_outcome_per_record() {
        let runs = vec![
            OutcomeRun { count: 2, outcome: bindings::Outcome::Accept },
            OutcomeRun { count: 1, outcome: bindings::Outcome::Reject("bad".into()) },
        ];
        assert_eq!(
            expand_outcomes(runs.clone(), 3),
            Some(vec![Outcome::Accept, Outcome::Accept, Outcome::Reject("bad".into())])
        );
        assert_eq!(expand_outcomes(runs, 4), None, "runs that do not cover the batch");
        let settled =
            vec![bindings::Settlement { ids: IdRange { first: 4, count: 2 }, outcome: bindings::Outcome::Accept }];
        assert_eq!(
            expand_settlements(settled),
            [Settlement { id: 4, outcome: Outcome::Accept }, Settlement { id: 5, outcome: Outcome::Accept }]
        );
        let ranges = id_ranges(&[3, 4, 5, 9, 10, 2]);
        let ranges: Vec<(u64, u32)> = ranges.iter().map(|r| (r.first, r.count)).collect();
        assert_eq!(ranges, [(3, 3), (9, 2), (2, 1)]);
    }
}
