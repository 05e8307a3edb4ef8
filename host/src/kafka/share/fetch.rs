//! Turning one partition of a ShareFetch response into records: only offsets
//! inside the AcquiredRecords ranges are ours.

use crate::kafka::{ConsumedRecord, TimestampType};
use bytes::Bytes;
use kafka_protocol::messages::share_fetch_response::PartitionData;
use kafka_protocol::records::{self, Record, RecordBatchDecoder};
use std::collections::BTreeMap;
use std::time::Instant;

/// What one partition of a ShareFetch response gave us.
#[derive(Default)]
pub(crate) struct Acquired {
    pub records: Vec<ConsumedRecord>,
    /// Acquired offsets with no record for the application (control
    /// records, holes): acknowledged as GAP.
    pub gaps: Vec<i64>,
    /// Acquired offsets we could not decode: released for redelivery.
    pub undecoded: Vec<i64>,
}

pub(crate) fn decode_partition(topic: &str, data: &PartitionData, lock_expires_at: Instant) -> Acquired {
    let mut decoded = decode_records(data.records.clone().unwrap_or_default());
    let last_decoded = decoded.keys().next_back().copied().unwrap_or(i64::MIN);
    let mut out = Acquired::default();
    for range in &data.acquired_records {
        let delivery_count = range.delivery_count.max(1) as u16;
        for offset in range.first_offset..=range.last_offset {
            match decoded.remove(&offset) {
                Some(r) if !r.control => {
                    out.records.push(consumed(topic, data.partition_index, r, delivery_count, lock_expires_at));
                }
                _ if offset < last_decoded => out.gaps.push(offset),
                Some(_) => out.gaps.push(offset),
                None => out.undecoded.push(offset),
            }
        }
    }
    out
}

/// Decode every batch we can; a truncated batch at the end stops decoding.
fn decode_records(mut buf: Bytes) -> BTreeMap<i64, Record> {
    let mut by_offset = BTreeMap::new();
    while !buf.is_empty() {
        match RecordBatchDecoder::decode(&mut buf) {
            Ok(set) => by_offset.extend(set.records.into_iter().map(|r| (r.offset, r))),
            Err(e) => {
                tracing::debug!(error = %e, "stopped decoding share fetch records");
                break;
            }
        }
    }
    by_offset
}

fn consumed(topic: &str, partition: i32, r: Record, delivery_count: u16, lock_expires_at: Instant) -> ConsumedRecord {
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
        lock_expires_at: Some(lock_expires_at),
    }
}
