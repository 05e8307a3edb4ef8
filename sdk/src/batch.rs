//! The records of a `put`, one by one, from the contract's columns; and a
//! plugin's outcomes and settlements back into the contract's runs and
//! ranges. The contract carries a batch column by column so that it crosses
//! into interpreted guests (Python, JavaScript) in a dozen copies; a Rust
//! plugin sees the records as before.

use crate::__private::bindings::spillway::connector::types as wire;
use spillway_record::{FlushScope, Header, Outcome, Settlement, SinkRecord, TimestampType};

impl From<wire::Outcome> for Outcome {
    fn from(outcome: wire::Outcome) -> Self {
        match outcome {
            wire::Outcome::Accept => Outcome::Accept,
            wire::Outcome::Hold => Outcome::Hold,
            wire::Outcome::Retry(why) => Outcome::Retry(why),
            wire::Outcome::Reject(why) => Outcome::Reject(why),
        }
    }
}

impl From<Outcome> for wire::Outcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Accept => wire::Outcome::Accept,
            Outcome::Hold => wire::Outcome::Hold,
            Outcome::Retry(why) => wire::Outcome::Retry(why),
            Outcome::Reject(why) => wire::Outcome::Reject(why),
        }
    }
}

/// Little-endian numbers of one width, laid end to end.
fn numbers<const W: usize>(column: &[u8]) -> impl Iterator<Item = [u8; W]> + '_ {
    column.chunks_exact(W).map(|c| c.try_into().expect("chunks of W bytes"))
}

/// Entry `i` of a byte-strings column.
struct Strings<'a> {
    column: &'a wire::ByteStrings,
    offsets: Vec<usize>,
}

impl<'a> Strings<'a> {
    fn new(column: &'a wire::ByteStrings) -> Self {
        let offsets = numbers::<4>(&column.offsets).map(|b| u32::from_le_bytes(b) as usize).collect();
        Strings { column, offsets }
    }

    fn get(&self, i: usize) -> Option<&'a [u8]> {
        if self.column.present.get(i) != Some(&1) {
            return None;
        }
        self.column.data.get(*self.offsets.get(i)?..*self.offsets.get(i + 1)?)
    }
}

/// The batch's records, one by one.
pub(crate) fn records(batch: wire::RecordBatch) -> Vec<SinkRecord> {
    let n = batch.count as usize;
    let keys = Strings::new(&batch.keys);
    let values = Strings::new(&batch.values);
    let header_keys = Strings::new(&batch.header_keys);
    let header_values = Strings::new(&batch.header_values);
    let header_offsets: Vec<usize> =
        numbers::<4>(&batch.header_offsets).map(|b| u32::from_le_bytes(b) as usize).collect();
    let mut ids = numbers::<8>(&batch.ids).map(u64::from_le_bytes);
    let mut topics = numbers::<2>(&batch.topic_indexes).map(u16::from_le_bytes);
    let mut partitions = numbers::<4>(&batch.partitions).map(i32::from_le_bytes);
    let mut offsets = numbers::<8>(&batch.offsets).map(i64::from_le_bytes);
    let mut timestamps = numbers::<8>(&batch.timestamps).map(i64::from_le_bytes);
    let mut timestamp_types = batch.timestamp_types.iter();
    let mut delivery_counts = numbers::<2>(&batch.delivery_counts).map(u16::from_le_bytes);
    let mut deadlines = numbers::<8>(&batch.lock_deadlines).map(i64::from_le_bytes);
    let mut records = Vec::with_capacity(n);
    for i in 0..n {
        let headers = match (header_offsets.get(i), header_offsets.get(i + 1)) {
            (Some(&from), Some(&to)) => (from..to)
                .map(|h| Header {
                    key: String::from_utf8_lossy(header_keys.get(h).unwrap_or_default()).into_owned(),
                    value: header_values.get(h).map(<[u8]>::to_vec),
                })
                .collect(),
            _ => Vec::new(),
        };
        let topic = topics.next().and_then(|t| batch.topics.get(t as usize)).cloned().unwrap_or_default();
        records.push(SinkRecord {
            id: ids.next().unwrap_or_default(),
            topic,
            partition: partitions.next().unwrap_or_default(),
            offset: offsets.next().unwrap_or_default(),
            timestamp: timestamps.next().unwrap_or(-1),
            timestamp_type: TimestampType::from_code(timestamp_types.next().copied().unwrap_or_default()),
            key: keys.get(i).map(<[u8]>::to_vec),
            value: values.get(i).map(<[u8]>::to_vec),
            headers,
            delivery_count: delivery_counts.next().unwrap_or(1),
            lock_deadline: deadlines.next().filter(|d| *d >= 0),
        });
    }
    records
}

/// Outcomes as runs of equal ones.
pub(crate) fn outcome_runs(outcomes: Vec<Outcome>) -> Vec<wire::OutcomeRun> {
    let runs = spillway_record::runs(outcomes);
    runs.into_iter().map(|(count, outcome)| wire::OutcomeRun { count, outcome: outcome.into() }).collect()
}

/// Settlements as ranges of consecutive ids with one outcome, in order.
pub(crate) fn settlement_ranges(settled: Vec<Settlement>) -> Vec<wire::Settlement> {
    let ranges = spillway_record::id_ranges(settled.into_iter().map(|s| (s.id, s.outcome)));
    let settlement = |(first, count, outcome): (u64, u32, Outcome)| wire::Settlement {
        ids: wire::IdRange { first, count },
        outcome: outcome.into(),
    };
    ranges.into_iter().map(settlement).collect()
}

pub(crate) fn scope(scope: wire::FlushScope) -> FlushScope {
    match scope {
        wire::FlushScope::All => FlushScope::All,
        wire::FlushScope::Records(ranges) => {
            FlushScope::Records(ranges.iter().flat_map(|r| spillway_record::range_ids(r.first, r.count)).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(entries: &[Option<&[u8]>]) -> wire::ByteStrings {
        let mut column =
            wire::ByteStrings { data: Vec::new(), offsets: 0u32.to_le_bytes().to_vec(), present: Vec::new() };
        for entry in entries {
            column.data.extend_from_slice(entry.unwrap_or_default());
            column.offsets.extend_from_slice(&(column.data.len() as u32).to_le_bytes());
            column.present.push(u8::from(entry.is_some()));
        }
        column
    }

    fn le<T: Copy, const W: usize>(values: &[T], bytes: fn(T) -> [u8; W]) -> Vec<u8> {
        values.iter().flat_map(|v| bytes(*v)).collect()
    }

    #[test]
    fn columns_become_records() {
        let batch = wire::RecordBatch {
            count: 2,
            ids: le(&[5u64, 6], u64::to_le_bytes),
            topics: vec!["a".into(), "b".into()],
            topic_indexes: le(&[1u16, 0], u16::to_le_bytes),
            partitions: le(&[3i32, 4], i32::to_le_bytes),
            offsets: le(&[10i64, 11], i64::to_le_bytes),
            timestamps: le(&[-1i64, 1_700_000_000_000], i64::to_le_bytes),
            timestamp_types: vec![0, 2],
            keys: strings(&[None, Some(b"")]),
            values: strings(&[Some(b"v5"), None]),
            header_offsets: le(&[0u32, 0, 2], u32::to_le_bytes),
            header_keys: strings(&[Some(b"h"), Some(b"h")]),
            header_values: strings(&[Some(b"1"), None]),
            delivery_counts: le(&[1u16, 3], u16::to_le_bytes),
            lock_deadlines: le(&[-1i64, 99], i64::to_le_bytes),
        };
        let records = records(batch);
        assert_eq!(
            records,
            [
                SinkRecord {
                    id: 5,
                    topic: "b".into(),
                    partition: 3,
                    offset: 10,
                    timestamp: -1,
                    timestamp_type: TimestampType::NoTimestampType,
                    key: None,
                    value: Some(b"v5".to_vec()),
                    headers: vec![],
                    delivery_count: 1,
                    lock_deadline: None,
                },
                SinkRecord {
                    id: 6,
                    topic: "a".into(),
                    partition: 4,
                    offset: 11,
                    timestamp: 1_700_000_000_000,
                    timestamp_type: TimestampType::LogAppendTime,
                    key: Some(vec![]),
                    value: None,
                    headers: vec![
                        Header { key: "h".into(), value: Some(b"1".to_vec()) },
                        Header { key: "h".into(), value: None }
                    ],
                    delivery_count: 3,
                    lock_deadline: Some(99),
                },
            ]
        );
    }

    #[test]
    fn outcomes_and_settlements_travel_as_runs_and_ranges() {
        let runs = outcome_runs(vec![Outcome::Hold, Outcome::Hold, Outcome::Reject("x".into()), Outcome::Hold]);
        let runs: Vec<(u32, Outcome)> = runs.into_iter().map(|r| (r.count, r.outcome.into())).collect();
        assert_eq!(runs, [(2, Outcome::Hold), (1, Outcome::Reject("x".into())), (1, Outcome::Hold)]);
        let settled = |id, outcome| Settlement { id, outcome };
        let ranges = settlement_ranges(vec![
            settled(1, Outcome::Accept),
            settled(2, Outcome::Accept),
            settled(3, Outcome::Retry("r".into())),
            settled(7, Outcome::Retry("r".into())),
        ]);
        let ranges: Vec<(u64, u32, Outcome)> =
            ranges.into_iter().map(|r| (r.ids.first, r.ids.count, r.outcome.into())).collect();
        assert_eq!(
            ranges,
            [(1, 2, Outcome::Accept), (3, 1, Outcome::Retry("r".into())), (7, 1, Outcome::Retry("r".into()))]
        );
        let wire::FlushScope::Records(ranges) = wire::FlushScope::Records(vec![wire::IdRange { first: 4, count: 3 }])
        else {
            unreachable!()
        };
        assert_eq!(scope(wire::FlushScope::Records(ranges)), FlushScope::Records(vec![4, 5, 6]));
    }
}
