//! Everything that talks to Kafka: our own share-group consumer (KIP-932), the
//! classic consumer-group mode, producers, and the embedded broker.

pub mod classic;
pub mod clients;
pub mod embedded;
pub mod group_member;
pub mod groups;
pub mod positions;
pub mod producer;
pub mod read_to_end;
pub mod security;
pub mod share;
pub mod target;

use bytes::Bytes;

/// Kafka's timestamp type of a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    None,
    CreateTime,
    LogAppendTime,
}

/// A record as fetched from Kafka, before it becomes a plugin's sink record.
#[derive(Clone, Debug)]
pub struct ConsumedRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch, -1 when none.
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Share-group delivery count (1 on first delivery); 1 for classic
    /// groups. It names this delivery, as Kafka's `ConsumerRecord` does; its
    /// lock (which renewals move) is the share consumer's to keep.
    pub delivery_count: u16,
    /// Set when the record reached us but could not be decoded (a corrupt
    /// batch): why. The task rejects such a record instead of calling `put`.
    pub undecodable: Option<String>,
}

impl ConsumedRecord {
    /// A record with no timestamp, key, value or headers, delivered once.
    pub fn without_payload(topic: &str, partition: i32, offset: i64) -> Self {
        ConsumedRecord {
            topic: topic.to_string(),
            partition,
            offset,
            timestamp: -1,
            timestamp_type: TimestampType::None,
            key: None,
            value: None,
            headers: Vec::new(),
            delivery_count: 1,
            undecodable: None,
        }
    }
}

/// How a share consumer acknowledges a record (KIP-932's AcknowledgeType).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckType {
    /// Processed: never delivered again.
    Accept = 1,
    /// Not processed: make it available for redelivery.
    Release = 2,
    /// Unprocessable: archive it, never delivered again.
    Reject = 3,
}
