//! Kafka records into the plugin's sink records.

use crate::kafka::{ConsumedRecord, TimestampType};
use crate::runtime::bindings::{self, Header, SinkRecord};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// `now` is the wall clock at conversion, to turn the lock's deadline into
/// the Unix time the plugin sees.
pub fn to_sink_record(id: u64, r: &ConsumedRecord, now: SystemTime) -> SinkRecord {
    let lock_deadline = r.lock_expires_at.map(|at| {
        let at = now + at.saturating_duration_since(Instant::now());
        at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    });
    SinkRecord {
        id,
        topic: r.topic.clone(),
        partition: r.partition,
        offset: r.offset,
        timestamp: r.timestamp,
        timestamp_type: match r.timestamp_type {
            TimestampType::None => bindings::TimestampType::NoTimestampType,
            TimestampType::CreateTime => bindings::TimestampType::CreateTime,
            TimestampType::LogAppendTime => bindings::TimestampType::LogAppendTime,
        },
        key: r.key.as_ref().map(|b| b.to_vec()),
        value: r.value.as_ref().map(|b| b.to_vec()),
        headers: r
            .headers
            .iter()
            .map(|(key, value)| Header { key: key.clone(), value: value.as_ref().map(|b| b.to_vec()) })
            .collect(),
        delivery_count: r.delivery_count,
        lock_deadline,
    }
}
