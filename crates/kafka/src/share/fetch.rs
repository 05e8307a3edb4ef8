//! Turning one partition of a ShareFetch response into records: only offsets
//! inside the AcquiredRecords ranges are ours.

use crate::{ConsumedRecord, TimestampType};
use bytes::Bytes;
use kafka_protocol::messages::share_fetch_response::PartitionData;
use kafka_protocol::records::{self, Record, RecordBatchDecoder};
use std::collections::BTreeMap;

/// What one partition of a ShareFetch response gave us. Offsets come with
/// the broker's delivery count of this acquisition.
#[derive(Default)]
pub(crate) struct Acquired {
    pub records: Vec<ConsumedRecord>,
    /// Acquired offsets with no record for the application (control
    /// records, holes): acknowledged as GAP.
    pub gaps: Vec<(i64, u16)>,
    /// Acquired offsets past the end of what the response carried (a batch
    /// cut short by the response size): released, to come again whole.
    pub truncated: Vec<(i64, u16)>,
}

pub(crate) fn decode_partition(topic: &str, data: &PartitionData) -> Acquired {
    let decoded = decode_records(data.records.clone().unwrap_or_default());
    let mut by_offset = decoded.records;
    let last_decoded = by_offset.keys().next_back().copied().unwrap_or(i64::MIN);
    let mut out = Acquired::default();
    for range in &data.acquired_records {
        let delivery_count = range.delivery_count.max(1) as u16;
        for offset in range.first_offset..=range.last_offset {
            let corrupt = decoded.corrupt.iter().find(|c| c.first <= offset && offset <= c.last);
            match by_offset.remove(&offset) {
                Some(r) if !r.control => {
                    out.records.push(consumed(topic, data.partition_index, r, delivery_count));
                }
                // Ours, but unreadable: the task rejects it (to the DLQ) with
                // the reason, rather than releasing it until it is archived.
                None if corrupt.is_some() => {
                    let reason = corrupt.map(|c| c.reason.clone());
                    out.records.push(undecodable(topic, data.partition_index, offset, delivery_count, reason));
                }
                _ if offset < last_decoded => out.gaps.push((offset, delivery_count)),
                Some(_) => out.gaps.push((offset, delivery_count)),
                None => out.truncated.push((offset, delivery_count)),
            }
        }
    }
    out
}

/// A record batch that arrived whole but could not be decoded.
struct CorruptBatch {
    first: i64,
    last: i64,
    reason: String,
}

#[derive(Default)]
struct Decoded {
    records: BTreeMap<i64, Record>,
    corrupt: Vec<CorruptBatch>,
}

/// Byte offsets in a v2 record batch header.
const LENGTH_END: usize = 12;
const LAST_OFFSET_DELTA_AT: usize = 23;

/// Decode every batch; a batch that is whole but undecodable (a bad CRC, an
/// unknown codec) is reported with its offsets, and a batch cut short at the
/// end of the response stops decoding.
fn decode_records(mut buf: Bytes) -> Decoded {
    let mut out = Decoded::default();
    while buf.len() >= LENGTH_END {
        let base_offset = i64::from_be_bytes(buf[..8].try_into().expect("8 bytes"));
        let length = i32::from_be_bytes(buf[8..12].try_into().expect("4 bytes"));
        let whole = LENGTH_END + length.max(0) as usize;
        if length < 0 || buf.len() < whole {
            break;
        }
        let mut batch = buf.split_to(whole);
        let last_offset_delta = match batch.get(LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4) {
            Some(bytes) => i32::from_be_bytes(bytes.try_into().expect("4 bytes")),
            None => 0,
        };
        match RecordBatchDecoder::decode(&mut batch) {
            Ok(set) => out.records.extend(set.records.into_iter().map(|r| (r.offset, r))),
            Err(e) => {
                let last = base_offset + last_offset_delta.max(0) as i64;
                tracing::warn!(first = base_offset, last, error = %e, "undecodable record batch");
                let reason = format!("record batch at offsets {base_offset}..={last} could not be decoded: {e}");
                out.corrupt.push(CorruptBatch { first: base_offset, last, reason });
            }
        }
    }
    out
}

fn undecodable(
    topic: &str,
    partition: i32,
    offset: i64,
    delivery_count: u16,
    reason: Option<String>,
) -> ConsumedRecord {
    ConsumedRecord { delivery_count, undecodable: reason, ..ConsumedRecord::without_payload(topic, partition, offset) }
}

fn consumed(topic: &str, partition: i32, r: Record, delivery_count: u16) -> ConsumedRecord {
    ConsumedRecord {
        topic: topic.to_string(),
        partition,
        offset: r.offset,
        timestamp: r.timestamp,
        timestamp_type: match r.timestamp_type {
            records::TimestampType::Creation => TimestampType::CreateTime,
            records::TimestampType::LogAppend => TimestampType::LogAppendTime,
        },
        key: r.key,
        value: r.value,
        headers: r.headers.into_iter().map(|(k, v)| (k.as_str().to_string(), v)).collect(),
        delivery_count,
        undecodable: None,
    }
}
