//! The connector's transforms, run on each record after its converters and
//! before `put()`, as Connect orders them.

use super::in_flight::InFlight;
use spillway_kafka::ConsumedRecord;
use spillway_transforms::{Chain, Failure, Record};

/// What the chain made of record `id`.
pub(super) enum Transformed {
    /// Given to the plugin as the transforms left it.
    Put,
    /// A transform dropped it (Filter, a tombstone ExtractNewRecordState
    /// drops): it is done, as Connect commits a filtered record's offset.
    Dropped,
    /// A transform could not read it: rejected at TRANSFORMATION.
    Failed(Failure),
}

pub(super) fn transform(chain: &Chain, records: &mut InFlight, id: u64) -> Transformed {
    let Some(tracked) = records.get(id) else { return Transformed::Put };
    if chain.is_empty() {
        return Transformed::Put;
    }
    let record = tracked.as_put();
    let input = Record {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key.clone(),
        value: record.value.clone(),
        headers: record.headers.clone(),
    };
    match chain.apply(input) {
        Ok(Some(out)) => {
            let put = ConsumedRecord {
                topic: out.topic,
                key: out.key,
                value: out.value,
                headers: out.headers,
                ..record.clone()
            };
            records.put_as(id, put);
            Transformed::Put
        }
        Ok(None) => Transformed::Dropped,
        Err(failure) => Transformed::Failed(failure),
    }
}
