//! A share session with one broker (KIP-932): epoch 0 opens it with the full
//! partition list, each later request carries the next epoch and only the
//! changes, -1 closes it.

use super::acks::AckRange;
use kafka_protocol::messages::{
    ShareAcknowledgeRequest, ShareFetchRequest, share_acknowledge_request, share_fetch_request,
};
use std::collections::{BTreeMap, BTreeSet};
use uuid::Uuid;

pub(crate) const OPEN_EPOCH: i32 = 0;
pub(crate) const FINAL_EPOCH: i32 = -1;

pub(crate) type Tip = (Uuid, i32);

#[derive(Debug, Default)]
pub(crate) struct Session {
    epoch: i32,
    /// Partitions the broker has in the session.
    partitions: BTreeSet<Tip>,
}

/// What an incremental ShareFetch changes in the session.
pub(crate) struct FetchPlan {
    pub request: ShareFetchRequest,
    /// The session's partitions once the broker accepted the request.
    after: BTreeSet<Tip>,
}

impl Session {
    /// True once a ShareFetch opened it: acks need an open session.
    pub fn is_open(&self) -> bool {
        self.epoch > OPEN_EPOCH
    }

    /// True when the broker has no partitions of ours in the session.
    pub fn is_empty(&self) -> bool {
        self.partitions.is_empty()
    }

    /// The broker lost the session (or we did): start over at epoch 0.
    pub fn reset(&mut self) {
        *self = Session::default();
    }

    /// Fill `request` (group, member, limits already set) with the session
    /// epoch, the partitions to add or forget, and the acks to piggyback.
    /// Acks are only allowed once the session is open.
    pub fn plan_fetch(
        &self,
        mut request: ShareFetchRequest,
        wanted: &BTreeSet<Tip>,
        acks: &BTreeMap<Tip, Vec<AckRange>>,
    ) -> FetchPlan {
        debug_assert!(self.is_open() || acks.is_empty());
        request.share_session_epoch = self.epoch;
        let mut listed: BTreeMap<Tip, Vec<AckRange>> =
            wanted.difference(&self.partitions).map(|tip| (*tip, Vec::new())).collect();
        for (tip, ranges) in acks {
            listed.insert(*tip, ranges.clone());
        }
        // Partitions with acks stay in the session for this round.
        let forgotten: BTreeSet<Tip> =
            self.partitions.iter().filter(|tip| !wanted.contains(tip) && !acks.contains_key(tip)).copied().collect();
        let mut topics: BTreeMap<Uuid, share_fetch_request::FetchTopic> = BTreeMap::new();
        for ((topic_id, partition), ranges) in &listed {
            let partition = share_fetch_request::FetchPartition::default()
                .with_partition_index(*partition)
                .with_acknowledgement_batches(ranges.iter().map(fetch_batch).collect());
            topics
                .entry(*topic_id)
                .or_insert_with(|| share_fetch_request::FetchTopic::default().with_topic_id(*topic_id))
                .partitions
                .push(partition);
        }
        request.topics = topics.into_values().collect();
        request.forgotten_topics_data = group_by_topic(&forgotten)
            .into_iter()
            .map(|(id, partitions)| {
                share_fetch_request::ForgottenTopic::default().with_topic_id(id).with_partitions(partitions)
            })
            .collect();
        let after =
            self.partitions.iter().chain(listed.keys()).filter(|tip| !forgotten.contains(tip)).copied().collect();
        FetchPlan { request, after }
    }

    /// The broker accepted the fetch planned from this session.
    pub fn fetched(&mut self, plan: FetchPlan) {
        self.partitions = plan.after;
        self.epoch = next_epoch(self.epoch);
    }

    /// A ShareAcknowledge at the current epoch (or `FINAL_EPOCH` to close).
    pub fn ack_request(
        &self,
        mut request: ShareAcknowledgeRequest,
        acks: &BTreeMap<Tip, Vec<AckRange>>,
        close: bool,
    ) -> ShareAcknowledgeRequest {
        request.share_session_epoch = if close { FINAL_EPOCH } else { self.epoch };
        let mut topics: BTreeMap<Uuid, share_acknowledge_request::AcknowledgeTopic> = BTreeMap::new();
        for ((topic_id, partition), ranges) in acks {
            let partition = share_acknowledge_request::AcknowledgePartition::default()
                .with_partition_index(*partition)
                .with_acknowledgement_batches(ranges.iter().map(ack_batch).collect());
            topics
                .entry(*topic_id)
                .or_insert_with(|| share_acknowledge_request::AcknowledgeTopic::default().with_topic_id(*topic_id))
                .partitions
                .push(partition);
        }
        request.topics = topics.into_values().collect();
        request
    }

    /// The broker accepted a ShareAcknowledge at the current epoch.
    pub fn acknowledged(&mut self) {
        self.epoch = next_epoch(self.epoch);
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX { 1 } else { epoch + 1 }
}

fn group_by_topic(tips: &BTreeSet<Tip>) -> BTreeMap<Uuid, Vec<i32>> {
    let mut by_topic: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (id, partition) in tips {
        by_topic.entry(*id).or_default().push(*partition);
    }
    by_topic
}

fn fetch_batch(r: &AckRange) -> share_fetch_request::AcknowledgementBatch {
    share_fetch_request::AcknowledgementBatch::default()
        .with_first_offset(r.first)
        .with_last_offset(r.last)
        .with_acknowledge_types(vec![r.kind])
}

fn ack_batch(r: &AckRange) -> share_acknowledge_request::AcknowledgementBatch {
    share_acknowledge_request::AcknowledgementBatch::default()
        .with_first_offset(r.first)
        .with_last_offset(r.last)
        .with_acknowledge_types(vec![r.kind])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_full_then_sends_only_changes() {
        let t = Uuid::new_v4();
        let mut s = Session::default();
        let wanted: BTreeSet<Tip> = [(t, 0), (t, 1)].into();
        let plan = s.plan_fetch(ShareFetchRequest::default(), &wanted, &BTreeMap::new());
        assert_eq!(plan.request.share_session_epoch, 0);
        assert_eq!(plan.request.topics[0].partitions.len(), 2);
        s.fetched(plan);

        let acks: BTreeMap<Tip, Vec<AckRange>> = [((t, 0), vec![AckRange { first: 5, last: 9, kind: 1 }])].into();
        let wanted: BTreeSet<Tip> = [(t, 1), (t, 2)].into();
        let plan = s.plan_fetch(ShareFetchRequest::default(), &wanted, &acks);
        let r = &plan.request;
        assert_eq!(r.share_session_epoch, 1);
        let listed: Vec<i32> = r.topics[0].partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!(listed, vec![0, 2]); // acks for 0, new partition 2
        assert!(r.forgotten_topics_data.is_empty()); // 0 has acks this round
        s.fetched(plan);

        let plan = s.plan_fetch(ShareFetchRequest::default(), &wanted, &BTreeMap::new());
        assert_eq!(plan.request.share_session_epoch, 2);
        assert!(plan.request.topics.is_empty());
        assert_eq!(plan.request.forgotten_topics_data[0].partitions, vec![0]);
    }
}
