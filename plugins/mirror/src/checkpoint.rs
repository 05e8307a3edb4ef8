//! Consumer group offsets translated from the source cluster to the target,
//! as MirrorMaker 2's checkpoints with `sync.group.offsets.enabled` do: a
//! group that fails over to the target resumes about where it stopped,
//! re-reading a little, never skipping.
//!
//! A group's committed offset `O` on a source partition is translated by
//! the offset sync of that partition with the largest source offset `s <=
//! O` (record `s` landed at target offset `t`): `t` when `O == s`, else
//! `t + 1` (the records between `s` and `O` landed after `t`, exactly where
//! is not known). No sync at or below `O`: no translation.

use crate::cluster::{Source, Target};
use crate::config::Settings;
use spillway_sdk::TaskError;
use spillway_sdk::kafka::{GroupOffset, OffsetSync};
use spillway_sdk::log;
use std::collections::{HashMap, HashSet};

/// Offset syncs by source partition, each partition's sorted by source offset.
#[derive(Default)]
pub struct SyncIndex {
    by_partition: HashMap<(String, i32), Vec<OffsetSync>>,
    /// Source topics with a sync into another target partition: their
    /// records were hashed, so a target partition mixes source partitions
    /// and no single source offset says how far a group read it.
    unkept: HashSet<String>,
}

impl SyncIndex {
    pub fn new(syncs: Vec<OffsetSync>) -> SyncIndex {
        let mut index = SyncIndex::default();
        for sync in syncs {
            if sync.target_partition != sync.source_partition {
                index.unkept.insert(sync.source_topic.clone());
            }
            index.by_partition.entry((sync.source_topic.clone(), sync.source_partition)).or_default().push(sync);
        }
        for syncs in index.by_partition.values_mut() {
            syncs.sort_by_key(|s| s.source_offset);
        }
        index
    }

    /// Whether the topic's records went to other partitions in the target.
    pub fn partitions_unkept(&self, topic: &str) -> bool {
        self.unkept.contains(topic)
    }

    /// The sync a group offset is translated by: the one of its partition
    /// with the largest source offset at or below it.
    pub fn sync_for(&self, topic: &str, partition: i32, offset: i64) -> Option<&OffsetSync> {
        // One lookup per group offset, once an interval: the key's copy is no cost.
        let syncs = self.by_partition.get(&(topic.to_string(), partition))?;
        let below = syncs.partition_point(|s| s.source_offset <= offset);
        below.checked_sub(1).map(|i| &syncs[i])
    }
}

/// A source group offset in the target, by its sync (MirrorMaker 2's
/// conservative rule: may re-read, never skips).
pub fn translated(offset: i64, sync: &OffsetSync) -> i64 {
    if offset == sync.source_offset { sync.target_offset } else { sync.target_offset + 1 }
}

/// Task 0's translation, every `emit.checkpoints.interval.seconds`.
pub struct Checkpoints {
    interval_ms: u64,
    /// When the last run began (the task's clock, milliseconds).
    last: Option<u64>,
    /// What this task committed: group, then (target topic, partition),
    /// so that no group is moved backwards.
    committed: HashMap<String, HashMap<(String, i32), i64>>,
    /// Source topics already logged as untranslatable.
    logged: HashSet<String>,
}

impl Checkpoints {
    pub fn new(interval_ms: u64) -> Checkpoints {
        Checkpoints { interval_ms, last: None, committed: HashMap::new(), logged: HashSet::new() }
    }

    /// Whether a run is due at `now`; when it is, it counts as begun.
    pub fn due(&mut self, now: u64) -> bool {
        match self.last {
            Some(last) if now.saturating_sub(last) < self.interval_ms => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }

    /// What this task committed for a group, by (target topic, partition).
    pub fn committed(&self, group: &str) -> Option<&HashMap<(String, i32), i64>> {
        self.committed.get(group)
    }

    /// Translates the wanted groups' offsets and commits those that moved
    /// forward. A retriable error is logged and the work is tried again on
    /// the next interval; a fatal one (a grant that denies it) fails the task.
    pub fn run(
        &mut self,
        settings: &Settings,
        target: &mut dyn Target,
        source: &mut dyn Source,
    ) -> Result<(), TaskError> {
        let Some(groups) = tolerate(source.list_groups(), "listing the source's consumer groups")? else {
            return Ok(());
        };
        let groups: Vec<String> = groups.into_iter().filter(|g| settings.group_wanted(g)).collect();
        if groups.is_empty() {
            return Ok(());
        }
        let Some(syncs) = tolerate(target.offset_syncs(), "reading the offset syncs")? else {
            return Ok(());
        };
        let index = SyncIndex::new(syncs);
        for group in groups {
            let Some(offsets) = tolerate(source.group_offsets(&group), &format!("reading group {group}'s offsets"))?
            else {
                continue;
            };
            let committed = self.committed.entry(group.clone()).or_default();
            let mut forward = Vec::new();
            for offset in &offsets {
                let topic = offset.topic.as_str();
                if offset.offset < 0 || settings.topics_exclude.matches(topic) || settings.policy.is_cycle(topic) {
                    continue;
                }
                if index.partitions_unkept(topic) {
                    if self.logged.insert(topic.to_string()) {
                        log::info(&format!(
                            "group offsets of topic {topic} are not translated: its target has fewer partitions, \
                             so its records were hashed across them"
                        ));
                    }
                    continue;
                }
                let Some(sync) = index.sync_for(topic, offset.partition, offset.offset) else { continue };
                let to = translated(offset.offset, sync);
                let target_topic = if sync.target_topic.is_empty() {
                    settings.policy.remote_topic(topic)
                } else {
                    sync.target_topic.clone()
                };
                let key = (target_topic, sync.target_partition);
                if committed.get(&key).is_some_and(|&done| done >= to) {
                    continue;
                }
                forward.push(GroupOffset { topic: key.0, partition: key.1, offset: to });
            }
            if forward.is_empty() {
                continue;
            }
            match target.commit_group_offsets(&group, &forward) {
                Ok(()) => {
                    log::debug(&format!("committed {} translated offsets of group {group}", forward.len()));
                    for o in forward {
                        committed.insert((o.topic, o.partition), o.offset);
                    }
                }
                // Members of the group are active on the target: it is theirs.
                Err(TaskError::Retriable(why)) => {
                    log::debug(&format!("group {group}'s translated offsets not committed (next interval): {why}"))
                }
                Err(TaskError::Fatal(why)) => return Err(fatal(&format!("committing group {group}'s offsets"), why)),
            }
        }
        Ok(())
    }
}

/// A read's result; a retriable error is logged and gives none.
fn tolerate<T>(result: Result<T, TaskError>, doing: &str) -> Result<Option<T>, TaskError> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(TaskError::Retriable(why)) => {
            log::warn(&format!("translating group offsets: {doing} failed (tried again next interval): {why}"));
            Ok(None)
        }
        Err(TaskError::Fatal(why)) => Err(fatal(doing, why)),
    }
}

fn fatal(doing: &str, why: String) -> TaskError {
    TaskError::Fatal(format!("translating group offsets (emit.checkpoints.enabled=false turns it off): {doing}: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sync(partition: i32, source: i64, target: i64) -> OffsetSync {
        OffsetSync {
            source_topic: "orders".into(),
            source_partition: partition,
            source_offset: source,
            target_topic: "us.orders".into(),
            target_partition: partition,
            target_offset: target,
        }
    }

    #[test]
    fn the_sync_at_or_below_translates_exactly_or_plus_one() {
        let index = SyncIndex::new(vec![sync(0, 100, 40), sync(0, 10, 5), sync(0, 50, 20), sync(1, 7, 70)]);
        let at = |p, o| index.sync_for("orders", p, o).map(|s| translated(o, s));
        assert_eq!(at(0, 50), Some(20), "exactly a sync's offset");
        assert_eq!(at(0, 51), Some(21), "past it: one more");
        assert_eq!(at(0, 99), Some(21), "still the sync below");
        assert_eq!(at(0, 100), Some(40));
        assert_eq!(at(0, 1000), Some(41));
        assert_eq!(at(0, 10), Some(5));
        assert_eq!(at(0, 9), None, "no sync at or below");
        assert_eq!(at(1, 7), Some(70));
        assert_eq!(at(2, 7), None, "no sync of the partition");
        assert_eq!(index.sync_for("other", 0, 50).map(|s| s.source_offset), None);
    }

    #[test]
    fn a_sync_into_another_partition_marks_the_topic() {
        let mut moved = sync(3, 10, 10);
        moved.target_partition = 0;
        let index = SyncIndex::new(vec![sync(0, 1, 1), moved]);
        assert!(index.partitions_unkept("orders"));
        assert!(!SyncIndex::new(vec![sync(0, 1, 1)]).partitions_unkept("orders"));
    }

    #[test]
    fn runs_are_due_once_an_interval() {
        let mut c = Checkpoints::new(1000);
        assert!(c.due(5), "the first run is at once");
        assert!(!c.due(5));
        assert!(!c.due(1004));
        assert!(c.due(1005));
        assert!(!c.due(2004));
        assert!(c.due(2005));
    }
}
