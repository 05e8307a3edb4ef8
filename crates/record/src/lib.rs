//! A sink record and what a sink does with it, as plain Rust: the types
//! Spillway's host (which packs records into the contract's columns) and
//! its plugin SDK (which unpacks them) both speak, defined once. Each side
//! converts them to and from its own generated bindings of the WIT
//! contract (`spillway:connector/types`), which cannot be shared: the host's
//! come from wasmtime, the SDK's from wit-bindgen. So are the runs and
//! ranges the contract carries outcomes and ids in.

/// Where a record's timestamp came from (Kafka's timestamp type).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    /// The record carries no timestamp.
    NoTimestampType,
    /// Set by the producer.
    CreateTime,
    /// Set by the broker when it appended the record.
    LogAppendTime,
}

impl TimestampType {
    /// Its case in the batch's `timestamp-types` column.
    pub fn code(self) -> u8 {
        match self {
            TimestampType::NoTimestampType => 0,
            TimestampType::CreateTime => 1,
            TimestampType::LogAppendTime => 2,
        }
    }

    /// The case a `timestamp-types` entry names; an unknown one is none.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => TimestampType::CreateTime,
            2 => TimestampType::LogAppendTime,
            _ => TimestampType::NoTimestampType,
        }
    }
}

/// A record as a sink receives it.
#[derive(Clone, Debug, PartialEq)]
pub struct SinkRecord {
    /// The host's handle for this delivery, unique within a task for its
    /// lifetime. Outcomes and settlements name records by it.
    pub id: u64,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch; -1 when there is none.
    pub timestamp: i64,
    pub timestamp_type: TimestampType,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    /// In the record's order; Kafka allows several with the same key.
    pub headers: Vec<Header>,
    /// How many times a share group has delivered this record, 1 on the
    /// first delivery. Always 1 under a classic consumer group.
    pub delivery_count: u16,
    /// When the share group's acquisition lock on this delivery runs out, in
    /// milliseconds since the Unix epoch; none under a classic consumer
    /// group. Before then the host asks for it with a scoped flush.
    pub lock_deadline: Option<i64>,
}

/// One record header.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// What a sink did with one record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Durably written: the host acknowledges it (ACCEPT).
    Accept,
    /// Buffered, not yet durable; a later `put` or `flush` settles it.
    Hold,
    /// Failed now, may succeed later: released for redelivery (RELEASE).
    Retry(String),
    /// Can never be written: rejected (REJECT), to the dead-letter queue
    /// when one is configured. The string is the reason.
    Reject(String),
}

/// What a `put` did: one outcome per record of the batch, in its order.
#[derive(Clone, Debug, PartialEq)]
pub struct PutReport {
    pub outcomes: Vec<Outcome>,
    /// Records held by earlier calls that this call settled.
    pub settled: Vec<Settlement>,
}

impl PutReport {
    /// Every record of a batch of `len` written durably.
    pub fn accept_all(len: usize) -> Self {
        PutReport { outcomes: vec![Outcome::Accept; len], settled: Vec::new() }
    }
}

/// The final fate of a record that an earlier call held. [`Outcome::Hold`]
/// here means "still held".
#[derive(Clone, Debug, PartialEq)]
pub struct Settlement {
    pub id: u64,
    pub outcome: Outcome,
}

/// Which held records a `flush` must make durable.
#[derive(Clone, Debug, PartialEq)]
pub enum FlushScope {
    /// Every held record: the task is stopping, or the broker hands out no
    /// more records while these are held.
    All,
    /// At least these (their locks are about to run out, or they waited
    /// `flush.interval.ms`); settling others with them is fine.
    Records(Vec<u64>),
}

/// Equal neighbours as runs: `(count, item)`, in order.
pub fn runs<T: PartialEq>(items: impl IntoIterator<Item = T>) -> Vec<(u32, T)> {
    let mut runs: Vec<(u32, T)> = Vec::new();
    for item in items {
        match runs.last_mut() {
            Some((count, last)) if *last == item && *count < u32::MAX => *count += 1,
            _ => runs.push((1, item)),
        }
    }
    runs
}

/// Ids with a tag as ranges of consecutive ids with one tag:
/// `(first, count, tag)`, in the order given.
pub fn id_ranges<T: PartialEq>(ids: impl IntoIterator<Item = (u64, T)>) -> Vec<(u64, u32, T)> {
    let mut ranges: Vec<(u64, u32, T)> = Vec::new();
    for (id, tag) in ids {
        match ranges.last_mut() {
            Some((first, count, last))
                if *last == tag && first.checked_add(u64::from(*count)) == Some(id) && *count < u32::MAX =>
            {
                *count += 1
            }
            _ => ranges.push((id, 1, tag)),
        }
    }
    ranges
}

/// The ids of the range `first`, `count`.
pub fn range_ids(first: u64, count: u32) -> impl Iterator<Item = u64> {
    (0..u64::from(count)).map(move |i| first.saturating_add(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_group_equal_neighbours_only() {
        let outcomes = [Outcome::Hold, Outcome::Hold, Outcome::Reject("x".into()), Outcome::Hold];
        assert_eq!(runs(outcomes), [(2, Outcome::Hold), (1, Outcome::Reject("x".into())), (1, Outcome::Hold)]);
    }

    #[test]
    fn ranges_break_on_a_gap_or_another_tag() {
        let ids = [(1, 'a'), (2, 'a'), (3, 'b'), (7, 'b'), (8, 'b'), (2, 'b')];
        assert_eq!(id_ranges(ids), [(1, 2, 'a'), (3, 1, 'b'), (7, 2, 'b'), (2, 1, 'b')]);
        assert_eq!(range_ids(u64::MAX - 1, 2).collect::<Vec<_>>(), [u64::MAX - 1, u64::MAX]);
    }

    #[test]
    fn timestamp_types_keep_their_column_codes() {
        for t in [TimestampType::NoTimestampType, TimestampType::CreateTime, TimestampType::LogAppendTime] {
            assert_eq!(TimestampType::from_code(t.code()), t);
        }
        assert_eq!(TimestampType::from_code(9), TimestampType::NoTimestampType);
    }
}
