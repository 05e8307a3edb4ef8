//! Which records we hold acquired, how the application acknowledged them, and
//! the acknowledgement batches that go to the broker.

use super::TopicPartition;
use super::error::ShareError;
use super::renew::RENEW;
use crate::AckType;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

type FastMap<K, V> = foldhash::HashMap<K, V>;

/// AcknowledgeType 0: an acquired offset with no record for the application
/// (a control record, a compacted hole).
pub(crate) const GAP: i8 = 0;

/// Forget expired locks this long after they ran out, so `acknowledge` can
/// still tell "expired" from "never ours" for a while.
const FORGET_AFTER: Duration = Duration::from_secs(300);

/// Consecutive offsets with one acknowledge type, as the protocol batches them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckRange {
    pub first: i64,
    pub last: i64,
    pub kind: i8,
}

struct Held {
    expires_at: Instant,
    /// The broker's delivery count of this acquisition.
    delivery_count: u16,
    /// The acknowledgement to send, once the application made one.
    ack: Option<i8>,
    /// False for gaps, which the application never sees.
    visible: bool,
}

struct Partition {
    /// The broker whose share session acquired these records.
    node: i32,
    held: BTreeMap<i64, Held>,
}

/// One offset as a ShareFetch response acquired it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Acquisition {
    pub offset: i64,
    pub delivery_count: u16,
    pub expires_at: Instant,
    /// When the response arrived.
    pub received: Instant,
}

/// Acknowledgements taken out for sending to one broker.
#[derive(Default)]
pub(crate) struct Outgoing {
    pub ranges: HashMap<TopicPartition, Vec<AckRange>>,
    /// Partitions whose acks were not sent because their locks ran out.
    pub expired: Vec<TopicPartition>,
}

/// The one owner of a share record's state on this side: its lock's expiry
/// (renewals included) and the delivery it belongs to. The task asks here
/// rather than keeping a copy.
#[derive(Default)]
pub(crate) struct AckTracker {
    /// By topic, then partition, so a record's topic looks its state up
    /// without building a key. Looked up several times per record, so with
    /// a fast hasher (foldhash, still seeded per map).
    parts: FastMap<String, FastMap<i32, Partition>>,
}

impl AckTracker {
    /// Remember an acquired offset; false when it is not a new acquisition
    /// but one we hold already, sent again (librdkafka's mock repeats every
    /// held record in each ShareFetch response), which must not reach the
    /// application twice. A real redelivery (the lock ran out, the record
    /// was released) carries a higher delivery count and is new. With
    /// `preset` the ack is decided already (GAP, or RELEASE for what we
    /// could not decode) and the application never sees the offset.
    pub fn acquired(&mut self, tp: &TopicPartition, node: i32, at: Acquisition, preset: Option<i8>) -> bool {
        if !self.parts.contains_key(&tp.topic) {
            self.parts.insert(tp.topic.clone(), FastMap::default());
        }
        let topic = self.parts.get_mut(&tp.topic).expect("inserted above");
        let part = topic.entry(tp.partition).or_insert_with(|| Partition { node, held: BTreeMap::new() });
        if let Some(held) = part.held.get(&at.offset)
            && held.expires_at > at.received
            && at.delivery_count <= held.delivery_count
            && part.node == node
        {
            return false;
        }
        part.node = node;
        let held = Held {
            expires_at: at.expires_at,
            delivery_count: at.delivery_count,
            ack: preset,
            visible: preset.is_none(),
        };
        part.held.insert(at.offset, held);
        true
    }

    /// Record the application's acknowledgement of one delivered record.
    pub fn acknowledge(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
        ack: AckType,
        now: Instant,
    ) -> Result<(), ShareError> {
        let not_acquired = || ShareError::NotAcquired { topic: topic.to_string(), partition, offset };
        let part = self.part_mut(topic, partition).ok_or_else(not_acquired)?;
        let held = part.held.get_mut(&offset).filter(|h| h.visible).ok_or_else(not_acquired)?;
        if held.expires_at <= now {
            part.held.remove(&offset);
            return Err(ShareError::LockExpired { topic: topic.to_string(), partition, offset });
        }
        // Until it is sent, a later acknowledgement replaces an earlier one.
        held.ack = Some(ack as i8);
        Ok(())
    }

    /// When the lock of this delivery of a record runs out (renewals
    /// counted): in the past once its session or partition was lost (kept
    /// a while so that an acknowledgement says LockExpired); `None` once it
    /// is not held (acknowledged, forgotten, delivered again since, or
    /// never ours).
    pub fn lock_expiry(&self, topic: &str, partition: i32, offset: i64, delivery_count: u16) -> Option<Instant> {
        self.lock_expiries(std::iter::once((topic, partition, offset, delivery_count))).next().flatten()
    }

    /// [`Self::lock_expiry`] of many records (topic, partition, offset,
    /// delivery count) at once; a run of one partition's records looks the
    /// partition up once.
    pub fn lock_expiries<'a>(
        &'a self,
        records: impl Iterator<Item = (&'a str, i32, i64, u16)> + 'a,
    ) -> impl Iterator<Item = Option<Instant>> + 'a {
        let mut last: Option<(&str, i32, Option<&Partition>)> = None;
        records.map(move |(topic, partition, offset, delivery_count)| {
            let part = match last {
                Some((t, p, part)) if p == partition && t == topic => part,
                _ => {
                    let part = self.part(topic, partition);
                    last = Some((topic, partition, part));
                    part
                }
            };
            let held = part?.held.get(&offset)?;
            (held.visible && held.ack.is_none() && held.delivery_count == delivery_count).then_some(held.expires_at)
        })
    }

    /// Of the `(offset, delivery count)`s of `tp`, those a RENEW may
    /// extend: this very delivery (not a later one of the same offset),
    /// visible, not acknowledged yet, lock still running. With the broker
    /// that holds them.
    pub fn renewable(&self, tp: &TopicPartition, records: &[(i64, u16)], now: Instant) -> Option<(i32, Vec<AckRange>)> {
        let part = self.part(&tp.topic, tp.partition)?;
        let mut ranges = Vec::new();
        let mut sorted = records.to_vec();
        sorted.sort_unstable();
        for (offset, delivery_count) in sorted {
            let held = part.held.get(&offset);
            if held.is_some_and(|h| {
                h.delivery_count == delivery_count && h.visible && h.ack.is_none() && h.expires_at > now
            }) {
                push_offset(&mut ranges, offset, RENEW);
            }
        }
        (!ranges.is_empty()).then_some((part.node, ranges))
    }

    /// The broker renewed these records' locks until `expires_at`; returns
    /// how many are still held through `node` (an acknowledgement made
    /// meanwhile keeps its record, which is no longer the application's).
    pub fn renewed(&mut self, tp: &TopicPartition, node: i32, ranges: &[AckRange], expires_at: Instant) -> usize {
        let Some(part) = self.part_mut(&tp.topic, tp.partition).filter(|p| p.node == node) else { return 0 };
        let mut renewed = 0;
        for range in ranges {
            for held in part.held.range_mut(range.first..=range.last).map(|(_, held)| held) {
                if held.visible && held.ack.is_none() {
                    held.expires_at = expires_at;
                    renewed += 1;
                }
            }
        }
        renewed
    }

    /// Release every record the application has not acknowledged (on close).
    pub fn release_unacknowledged(&mut self, now: Instant) {
        for part in self.parts.values_mut().flat_map(FastMap::values_mut) {
            for held in part.held.values_mut() {
                if held.ack.is_none() && held.expires_at > now {
                    held.ack = Some(AckType::Release as i8);
                }
            }
        }
    }

    /// Brokers that have acknowledgements waiting.
    pub fn nodes_with_pending(&self) -> Vec<i32> {
        self.nodes_with_pending_where(|_| true)
    }

    /// Brokers that have acknowledgements waiting for partitions `pick` takes.
    pub fn nodes_with_pending_where(&self, pick: impl Fn(&TopicPartition) -> bool) -> Vec<i32> {
        let nodes: std::collections::BTreeSet<i32> =
            self.pending().into_iter().filter(|(tp, _)| pick(tp)).map(|(_, node)| node).collect();
        nodes.into_iter().collect()
    }

    /// Partitions with records the application has and has not acknowledged
    /// yet (their locks still running), with the broker that acquired them.
    pub fn unsettled(&self, now: Instant) -> Vec<(TopicPartition, i32)> {
        self.partitions()
            .filter(|(_, p)| p.held.values().any(|h| h.visible && h.ack.is_none() && h.expires_at > now))
            .map(|(tp, p)| (tp, p.node))
            .collect()
    }

    /// Partitions with acknowledgements waiting to be sent, with their broker.
    pub fn pending(&self) -> Vec<(TopicPartition, i32)> {
        self.partitions()
            .filter(|(_, p)| p.held.values().any(|h| h.ack.is_some()))
            .map(|(tp, p)| (tp, p.node))
            .collect()
    }

    /// Take the pending acknowledgements for records acquired through `node`.
    pub fn take(&mut self, node: i32, now: Instant) -> Outgoing {
        let mut out = Outgoing::default();
        let of_node = self.parts.iter_mut().flat_map(|(topic, parts)| {
            parts
                .iter_mut()
                .filter(|(_, p)| p.node == node)
                .map(|(partition, p)| (TopicPartition::new(topic, *partition), p))
        });
        for (tp, part) in of_node {
            let acked: Vec<i64> = part.held.iter().filter(|(_, h)| h.ack.is_some()).map(|(o, _)| *o).collect();
            let mut ranges: Vec<AckRange> = Vec::new();
            let mut expired = false;
            for offset in acked {
                let held = part.held.remove(&offset).expect("listed above");
                if held.expires_at <= now {
                    // Sending it could ack someone else's redelivery.
                    expired |= held.visible;
                    continue;
                }
                push_offset(&mut ranges, offset, held.ack.expect("filtered"));
            }
            if !ranges.is_empty() {
                out.ranges.insert(tp.clone(), ranges);
            }
            if expired {
                out.expired.push(tp);
            }
        }
        out
    }

    /// The broker released everything acquired through `node` (its share
    /// session is gone). Returns the partitions that had acks waiting.
    pub fn lose_node(&mut self, node: i32, now: Instant) -> Vec<TopicPartition> {
        let lost: Vec<TopicPartition> = self.partitions().filter(|(_, p)| p.node == node).map(|(tp, _)| tp).collect();
        lost.into_iter().filter(|tp| self.lose_partition(tp, now)).collect()
    }

    /// Like `lose_node` for one partition; true if it had acks waiting.
    pub fn lose_partition(&mut self, tp: &TopicPartition, now: Instant) -> bool {
        let Some(part) = self.part_mut(&tp.topic, tp.partition) else {
            return false;
        };
        // Acks of visible records fail; gap acks simply vanish.
        let had_pending = part.held.values().any(|h| h.visible && h.ack.is_some());
        part.held.retain(|_, h| h.visible && h.ack.is_none());
        for held in part.held.values_mut() {
            // Keep them as expired so acknowledge() says LockExpired.
            held.expires_at = held.expires_at.min(now);
        }
        had_pending
    }

    /// Drop records whose locks ran out long ago.
    pub fn purge(&mut self, now: Instant) {
        for parts in self.parts.values_mut() {
            for part in parts.values_mut() {
                part.held.retain(|_, h| h.ack.is_some() || h.expires_at + FORGET_AFTER > now);
            }
            parts.retain(|_, p| !p.held.is_empty());
        }
        self.parts.retain(|_, parts| !parts.is_empty());
    }

    fn part(&self, topic: &str, partition: i32) -> Option<&Partition> {
        self.parts.get(topic)?.get(&partition)
    }

    fn part_mut(&mut self, topic: &str, partition: i32) -> Option<&mut Partition> {
        self.parts.get_mut(topic)?.get_mut(&partition)
    }

    fn partitions(&self) -> impl Iterator<Item = (TopicPartition, &Partition)> {
        self.parts
            .iter()
            .flat_map(|(topic, parts)| parts.iter().map(|(p, part)| (TopicPartition::new(topic, *p), part)))
    }
}

/// Append `offset` to the ranges, extending the last range when it is the
/// next offset with the same type.
fn push_offset(ranges: &mut Vec<AckRange>, offset: i64, kind: i8) {
    match ranges.last_mut() {
        Some(r) if r.last + 1 == offset && r.kind == kind => r.last = offset,
        _ => ranges.push(AckRange { first: offset, last: offset, kind }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp() -> TopicPartition {
        TopicPartition { topic: "t".into(), partition: 0 }
    }

    fn at(offset: i64, delivery_count: u16, expires_at: Instant, received: Instant) -> Acquisition {
        Acquisition { offset, delivery_count, expires_at, received }
    }

    #[test]
    fn an_offset_sent_again_while_held_is_not_new_but_a_redelivery_is() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        assert!(t.acquired(&tp(), 1, at(5, 1, later, now), None));
        // The mock repeats held records with the same delivery count.
        assert!(!t.acquired(&tp(), 1, at(5, 1, later + Duration::from_secs(1), now), None));
        // Released and acquired again: the broker counts another delivery.
        t.acknowledge("t", 0, 5, AckType::Release, now).unwrap();
        t.take(1, now);
        assert!(t.acquired(&tp(), 1, at(5, 2, later, now), None));
        // A higher count while we still think we hold it: our lock ran out on
        // the broker first. It is new, and keeps its new lock.
        assert!(t.acquired(&tp(), 1, at(5, 3, later, now), None));
        // Our lock ran out and the broker hands the record back.
        let expired = now + Duration::from_secs(31);
        assert!(t.acquired(&tp(), 1, at(5, 3, expired + Duration::from_secs(30), expired), None));
    }

    #[test]
    fn only_records_the_application_still_works_on_are_renewed() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        let soon = now + Duration::from_secs(15);
        for o in 0..5 {
            t.acquired(&tp(), 1, at(o, 1, soon, now), (o == 2).then_some(GAP));
        }
        t.acknowledge("t", 0, 3, AckType::Accept, now).unwrap();
        // 2 is a gap, 3 is acknowledged, 9 was never ours; 5 is delivered
        // again (count 2), and its first delivery is not this one.
        t.acquired(&tp(), 1, at(5, 2, soon, now), None);
        let asked = [(4, 1), (0, 1), (1, 1), (2, 1), (3, 1), (9, 1), (5, 1)];
        let (node, ranges) = t.renewable(&tp(), &asked, now).unwrap();
        assert_eq!(node, 1);
        let renew = |first, last| AckRange { first, last, kind: RENEW };
        assert_eq!(ranges, vec![renew(0, 1), renew(4, 4)]);
        let later = now + Duration::from_secs(40);
        assert_eq!(t.renewed(&tp(), 1, &ranges, later), 3);
        for o in [0, 1, 4] {
            assert_eq!(t.lock_expiry("t", 0, o, 1), Some(later), "the renewal is the one expiry kept");
        }
        assert_eq!(t.lock_expiry("t", 0, 5, 1), None, "that delivery of 5 is over");
        assert_eq!(t.lock_expiry("t", 0, 3, 1), None, "3 is acknowledged");
        // Renewed, 0 can be acknowledged after its first lock would have run out.
        t.acknowledge("t", 0, 0, AckType::Accept, soon + Duration::from_secs(1)).unwrap();
        let after = later + Duration::from_millis(1);
        assert!(t.renewable(&tp(), &[(1, 1), (4, 1)], after).is_none(), "expired locks are not renewed");
        assert_eq!(t.renewed(&tp(), 2, &ranges, later), 0, "another broker's answer renews nothing");
    }

    #[test]
    fn a_lock_is_read_for_its_own_delivery_across_topics_and_partitions() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        let (a, b) = (now + Duration::from_secs(10), now + Duration::from_secs(20));
        let of = |topic: &str, partition| TopicPartition { topic: topic.into(), partition };
        t.acquired(&of("a", 0), 1, at(7, 1, a, now), None);
        t.acquired(&of("a", 1), 1, at(7, 1, b, now), None);
        t.acquired(&of("b", 0), 2, at(7, 1, b, now), None);
        // One run of lookups that changes partition and topic in between:
        // each answer is its own record's.
        let asked = [("a", 0, 7, 1), ("b", 0, 7, 1), ("a", 0, 7, 1), ("a", 1, 7, 1), ("a", 1, 8, 1), ("c", 0, 7, 1)];
        let got: Vec<_> = t.lock_expiries(asked.into_iter()).collect();
        assert_eq!(got, vec![Some(a), Some(b), Some(a), Some(b), None, None]);
        // Delivered again (its first lock ran out on the broker): the first
        // delivery's lock is over, the second's is the one kept.
        t.acquired(&of("a", 0), 1, at(7, 2, b, now), None);
        assert_eq!((t.lock_expiry("a", 0, 7, 1), t.lock_expiry("a", 0, 7, 2)), (None, Some(b)));
        // Its partition lost: run out as of then.
        let later = now + Duration::from_secs(1);
        t.lose_partition(&of("a", 1), later);
        assert_eq!(t.lock_expiry("a", 1, 7, 1), Some(later));
    }

    #[test]
    fn groups_consecutive_offsets_of_one_type() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        for o in 0..6 {
            t.acquired(&tp(), 1, at(o, 1, later, now), (o == 3).then_some(GAP));
        }
        for (o, ack) in [
            (0, AckType::Accept),
            (1, AckType::Accept),
            (2, AckType::Release),
            (4, AckType::Release),
            (5, AckType::Release),
        ] {
            t.acknowledge("t", 0, o, ack, now).unwrap();
        }
        let out = t.take(1, now);
        let kinds = |first, last, kind| AckRange { first, last, kind };
        assert_eq!(out.ranges[&tp()], vec![kinds(0, 1, 1), kinds(2, 2, 2), kinds(3, 3, GAP), kinds(4, 5, 2)]);
        assert!(t.take(1, now).ranges.is_empty());
    }

    #[test]
    fn expired_and_unknown_records_are_refused() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        t.acquired(&tp(), 1, at(7, 1, now, now), None);
        let err = t.acknowledge("t", 0, 7, AckType::Accept, now).unwrap_err();
        assert!(matches!(err, ShareError::LockExpired { offset: 7, .. }));
        let err = t.acknowledge("t", 0, 8, AckType::Accept, now).unwrap_err();
        assert!(matches!(err, ShareError::NotAcquired { offset: 8, .. }));
    }

    #[test]
    fn losing_a_session_fails_pending_acks() {
        let mut t = AckTracker::default();
        let now = Instant::now();
        let later = now + Duration::from_secs(30);
        t.acquired(&tp(), 1, at(0, 1, later, now), None);
        t.acquired(&tp(), 1, at(1, 1, later, now), None);
        t.acknowledge("t", 0, 0, AckType::Accept, now).unwrap();
        assert_eq!(t.lose_node(1, now), vec![tp()]);
        assert!(t.take(1, now).ranges.is_empty());
        let err = t.acknowledge("t", 0, 1, AckType::Accept, now).unwrap_err();
        assert!(matches!(err, ShareError::LockExpired { .. }));
    }
}
