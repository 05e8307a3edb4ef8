//! Every record a task took from its source and has not acknowledged yet,
//! with the stage it is in: the one owner of a record's state in the task.

use spillway_kafka::ConsumedRecord;
use spillway_kafka::classic::Unfinished;
use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

/// Where a record is between poll and acknowledgement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    /// Given to `put()`, no outcome yet.
    Delivered,
    /// The plugin buffers it; a later `put` or `flush` settles it.
    Held { since: Instant },
    /// Failed in a way that may pass: kept and put again after a backoff
    /// (not released, which would cost a delivery), since `since`.
    Retrying { since: Instant, reason: String },
    /// Fetched while a batch failed; put with the retried records.
    Waiting,
}

pub(super) struct Tracked {
    /// As consumed: what is acknowledged, and copied to the dead-letter queue.
    pub record: ConsumedRecord,
    pub stage: Stage,
    /// As the converters and transforms made it, where they changed it:
    /// what the plugin is given.
    put_as: Option<ConsumedRecord>,
}

impl Tracked {
    /// The record the plugin is given.
    pub fn as_put(&self) -> &ConsumedRecord {
        self.put_as.as_ref().unwrap_or(&self.record)
    }
}

/// The records, by the delivery id the plugin knows them by. Ids grow with
/// arrival, so iteration is oldest first.
#[derive(Default)]
pub(super) struct InFlight {
    records: BTreeMap<u64, Tracked>,
    next_id: u64,
    counts: Counts,
    /// Per topic and partition, the offsets here and how many records have
    /// each: a classic group commits below the oldest.
    offsets: HashMap<String, HashMap<i32, BTreeMap<i64, u32>>>,
}

/// How many records are in the stages the loop asks about often.
#[derive(Default)]
struct Counts {
    held: usize,
    retrying: usize,
}

impl Counts {
    fn add(&mut self, stage: &Stage, delta: isize) {
        match stage {
            Stage::Held { .. } => self.held = self.held.saturating_add_signed(delta),
            Stage::Retrying { .. } | Stage::Waiting => self.retrying = self.retrying.saturating_add_signed(delta),
            Stage::Delivered => {}
        }
    }
}

impl InFlight {
    /// Takes a record in at `stage`; returns its id.
    pub fn admit(&mut self, record: ConsumedRecord, stage: Stage) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.counts.add(&stage, 1);
        self.index(&record, true);
        self.records.insert(id, Tracked { record, stage, put_as: None });
        id
    }

    /// Adds the record's offset to the index, or takes it out.
    fn index(&mut self, record: &ConsumedRecord, add: bool) {
        if add && !self.offsets.contains_key(&record.topic) {
            self.offsets.insert(record.topic.clone(), HashMap::new());
        }
        let Some(topic) = self.offsets.get_mut(&record.topic) else { return };
        let partition = topic.entry(record.partition).or_default();
        if add {
            *partition.entry(record.offset).or_default() += 1;
            return;
        }
        if let Some(count) = partition.get_mut(&record.offset) {
            *count -= 1;
            if *count == 0 {
                partition.remove(&record.offset);
            }
        }
        if partition.is_empty() {
            topic.remove(&record.partition);
            if topic.is_empty() {
                self.offsets.remove(&record.topic);
            }
        }
    }

    pub fn get(&self, id: u64) -> Option<&Tracked> {
        self.records.get(&id)
    }

    /// Gives the plugin `record` in place of record `id` as consumed (its
    /// key and value as the converters read them, the transforms' changes).
    pub fn put_as(&mut self, id: u64, record: ConsumedRecord) {
        if let Some(tracked) = self.records.get_mut(&id) {
            tracked.put_as = Some(record);
        }
    }

    /// Moves a record to `stage`; false if the id is unknown.
    pub fn set_stage(&mut self, id: u64, stage: Stage) -> bool {
        let Some(tracked) = self.records.get_mut(&id) else { return false };
        self.counts.add(&tracked.stage, -1);
        self.counts.add(&stage, 1);
        tracked.stage = stage;
        true
    }

    /// Every record, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Tracked)> {
        self.records.iter().map(|(id, t)| (*id, t))
    }

    /// The record leaves the task (it is being acknowledged).
    pub fn remove(&mut self, id: u64) -> Option<ConsumedRecord> {
        let tracked = self.records.remove(&id)?;
        self.counts.add(&tracked.stage, -1);
        self.index(&tracked.record, false);
        Some(tracked.record)
    }

    /// Forgets every record of `partitions` (no longer this task's); returns
    /// how many there were.
    pub fn forget_partitions(&mut self, partitions: &[(String, i32)]) -> usize {
        let ids: Vec<u64> = self
            .iter()
            .filter(|(_, t)| partitions.iter().any(|(topic, p)| (topic, *p) == (&t.record.topic, t.record.partition)))
            .map(|(id, _)| id)
            .collect();
        for id in &ids {
            self.remove(*id);
        }
        ids.len()
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_holding(&self) -> bool {
        self.counts.held > 0
    }

    /// True while records wait to be put again (failed, or fetched behind
    /// failed ones).
    pub fn is_retrying(&self) -> bool {
        self.counts.retrying > 0
    }

    pub fn ids(&self) -> Vec<u64> {
        self.records.keys().copied().collect()
    }

    /// Held records, oldest first.
    pub fn held(&self) -> impl Iterator<Item = (u64, &Tracked)> {
        self.records.iter().filter(|(_, t)| matches!(t.stage, Stage::Held { .. })).map(|(id, t)| (*id, t))
    }

    /// Records waiting to be put again (`Retrying` or `Waiting`), oldest first.
    pub fn retrying(&self) -> impl Iterator<Item = (u64, &Tracked)> {
        self.records
            .iter()
            .filter(|(_, t)| matches!(t.stage, Stage::Retrying { .. } | Stage::Waiting))
            .map(|(id, t)| (*id, t))
    }
}

impl Unfinished for InFlight {
    fn oldest(&self, topic: &str, partition: i32) -> Option<i64> {
        self.offsets.get(topic)?.get(&partition)?.keys().next().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(offset: i64) -> ConsumedRecord {
        ConsumedRecord::without_payload("t", 0, offset)
    }

    #[test]
    fn stages_are_counted_as_records_move_and_leave() {
        let mut f = InFlight::default();
        let (a, b) = (f.admit(record(0), Stage::Delivered), f.admit(record(1), Stage::Delivered));
        assert!(!f.is_holding() && !f.is_retrying());
        f.set_stage(a, Stage::Held { since: Instant::now() });
        f.set_stage(b, Stage::Retrying { since: Instant::now(), reason: "down".into() });
        assert!(f.is_holding() && f.is_retrying());
        assert_eq!(f.held().map(|(id, _)| id).collect::<Vec<_>>(), vec![a]);
        f.set_stage(b, Stage::Held { since: Instant::now() });
        assert!(!f.is_retrying());
        assert_eq!(f.remove(a).map(|r| r.offset), Some(0));
        assert_eq!(f.remove(b).map(|r| r.offset), Some(1));
        assert!(!f.is_holding());
        assert!(!f.set_stage(a, Stage::Delivered), "a removed record is unknown");
        f.admit(record(2), Stage::Waiting);
        assert!(f.is_retrying(), "a waiting record is put with the retried ones");
    }

    #[test]
    fn the_oldest_offset_per_partition_follows_admissions_and_removals() {
        let mut f = InFlight::default();
        let at = |topic: &str, partition, offset| ConsumedRecord::without_payload(topic, partition, offset);
        let a = f.admit(at("t", 0, 7), Stage::Delivered);
        let b = f.admit(at("t", 0, 5), Stage::Delivered);
        let c = f.admit(at("t", 1, 9), Stage::Delivered);
        let again = f.admit(at("t", 0, 5), Stage::Waiting);
        assert_eq!((f.oldest("t", 0), f.oldest("t", 1), f.oldest("u", 0)), (Some(5), Some(9), None));
        f.remove(b);
        assert_eq!(f.oldest("t", 0), Some(5), "a second record at offset 5 keeps it");
        f.remove(again);
        assert_eq!(f.oldest("t", 0), Some(7));
        assert_eq!(f.forget_partitions(&[("t".into(), 1)]), 1);
        assert!(f.get(c).is_none() && f.oldest("t", 1).is_none());
        f.remove(a);
        assert!(f.oldest("t", 0).is_none() && f.offsets.is_empty(), "an emptied partition leaves no entry");
    }
}
