//! Kafka records into the batch the plugin is given.

use spillway_kafka::{ConsumedRecord, TimestampType};
use spillway_runtime::batch::{self, BatchBuilder, RecordBatch, RecordRef};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Each record comes with its id and when its lock runs out (share groups);
/// `now` is the wall clock at conversion, to turn that into the Unix time
/// the plugin sees.
pub fn to_batch(records: &[(u64, &ConsumedRecord, Option<Instant>)], now: SystemTime) -> RecordBatch {
    let mono = Instant::now();
    let mut builder = BatchBuilder::with_capacity(records.len());
    let bytes = |len: fn(&ConsumedRecord) -> Option<usize>| records.iter().filter_map(|(_, r, _)| len(r)).sum();
    builder.reserve_bytes(bytes(|r| r.key.as_ref().map(|k| k.len())), bytes(|r| r.value.as_ref().map(|v| v.len())));
    let now_ms = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    for &(id, r, lock_expires_at) in records {
        let lock_deadline = lock_expires_at.map(|at| now_ms + at.saturating_duration_since(mono).as_millis() as i64);
        builder.push(RecordRef {
            id,
            topic: &r.topic,
            partition: r.partition,
            offset: r.offset,
            timestamp: r.timestamp,
            timestamp_type: match r.timestamp_type {
                TimestampType::None => batch::TimestampType::NoTimestampType,
                TimestampType::CreateTime => batch::TimestampType::CreateTime,
                TimestampType::LogAppendTime => batch::TimestampType::LogAppendTime,
            },
            key: r.key.as_deref(),
            value: r.value.as_deref(),
            headers: r.headers.iter().map(|(key, value)| (key.as_str(), value.as_deref())),
            delivery_count: r.delivery_count,
            lock_deadline,
        });
    }
    builder.finish()
}
