//! The records the benchmarks put: the same shape for every plugin measured.

use spillway::runtime::batch::{Header, SinkRecord, TimestampType};

/// Record `i` of a batch, with a value of `value_bytes` bytes.
pub fn record(i: usize, value_bytes: usize) -> SinkRecord {
    SinkRecord {
        id: i as u64,
        topic: "bench".into(),
        partition: (i % 4) as i32,
        offset: i as i64,
        timestamp: 1_700_000_000_000,
        timestamp_type: TimestampType::CreateTime,
        key: Some(format!("key-{i}").into_bytes()),
        value: Some(vec![b'x'; value_bytes]),
        headers: vec![Header { key: "h".into(), value: Some(b"v".to_vec()) }],
        delivery_count: 1,
        lock_deadline: None,
    }
}
