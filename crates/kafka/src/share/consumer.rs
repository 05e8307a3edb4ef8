//! The share consumer: fetch from every leader of the assignment, hand out
//! acquired records, send their acknowledgements back.

use super::acks::{AckRange, AckTracker, Acquisition, GAP};
use super::cluster::Cluster;
use super::configs::{DeliveryLimit, delivery_limit, set_group_configs, settled_group_configs, start_position};
use super::connection::Connection;
use super::error::{AckFailure, ShareError};
use super::fetch::decode_partition;
use super::membership::Membership;
use super::renew::{self, RenewRequest, RenewResponse};
use super::session::{Session, Tip};
use super::subscription::Subscription;
use super::{CommitResult, ShareConsumerConfig, TopicPartition};
use crate::{AckType, ConsumedRecord};
use futures::future::join_all;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
};
use kafka_protocol::protocol::{Request, StrBytes};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

const SHARE_FETCH_VERSION: i16 = 1;
const SHARE_ACKNOWLEDGE_VERSION: i16 = 1;
const MAX_FETCH_BYTES: i32 = 50 * 1024 * 1024;
/// Used if a broker reports no acquisition lock timeout (30 s is Kafka's default).
const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);
/// The group configs a task's status shows.
const SHOWN_GROUP_CONFIGS: [&str; 4] =
    ["share.record.lock.duration.ms", "share.delivery.count.limit", "share.isolation.level", RESET];
const RESET: &str = "share.auto.offset.reset";
const METADATA_RETRY: Duration = Duration::from_millis(100);
const RETRY_BACKOFF: Duration = Duration::from_millis(100);

pub struct ShareConsumer {
    config: ShareConsumerConfig,
    subscription: Subscription,
    cluster: Arc<Cluster>,
    membership: Membership,
    /// Share session with each partition leader, by node id.
    sessions: HashMap<i32, Session>,
    tracker: AckTracker,
    /// Outcome of acks sent since the last `commit_sync`.
    results: CommitResult,
    metadata_stale: bool,
    /// Offsets a broker sent again while we held them, not handed on.
    resent_held: u64,
    delivery_limit: DeliveryLimit,
    group_configs: BTreeMap<String, String>,
    /// Partitions the coordinator moved to another member while the
    /// application still had records of them, and since when. Forgetting
    /// such a partition in the share session releases what we acquired from
    /// it, and its new owner would write those records a second time; so it
    /// stays in the session until the application settled them (as Connect
    /// commits in `onPartitionsRevoked`), for at most one lock timeout.
    revoked: HashMap<TopicPartition, Instant>,
    /// The acquisition lock timeout the brokers last reported.
    lock_timeout: Duration,
}

/// One ShareFetch or ShareAcknowledge on its way to a broker.
struct Exchange<P> {
    node: i32,
    conn: Arc<Connection>,
    /// Partitions whose acks ride on this request.
    acked: Vec<TopicPartition>,
    plan: P,
}

impl ShareConsumer {
    /// Bootstrap, learn the topics, and join the share group.
    pub async fn connect(config: ShareConsumerConfig) -> Result<Self, ShareError> {
        if config.group_id.is_empty() {
            return Err(ShareError::Config("group_id is required".into()));
        }
        let subscription = Subscription::of(&config)?;
        let cluster =
            Cluster::bootstrap(&config.bootstrap_servers, &config.client_id, config.request_timeout, &config.security)
                .await?;
        if let Subscription::Topics(topics) = &subscription {
            // Topics may be created by this request; their ids appear shortly after.
            let deadline = Instant::now() + config.request_timeout;
            loop {
                cluster.refresh(topics).await?;
                let known = topics.iter().all(|t| cluster.topic_id(t).is_some());
                if known {
                    break;
                }
                if Instant::now() >= deadline {
                    // Joining anyway: the assignment follows once the topic exists.
                    tracing::warn!(?topics, "a subscribed topic does not exist yet; waiting for it");
                    break;
                }
                tokio::time::sleep(METADATA_RETRY).await;
            }
        }
        let topics = subscription.topics(&cluster).await?;
        if topics.is_empty() {
            // Joining anyway: the pattern is matched again on its refresh interval.
            tracing::warn!(pattern = ?config.topics_regex, "no topic matches topics_regex yet; waiting for one");
        }
        set_group_configs(&cluster, &config.group_id, &config.group_configs).await?;
        let group_configs =
            settled_group_configs(&cluster, &config.group_id, &SHOWN_GROUP_CONFIGS, &config.group_configs).await;
        let delivery_limit = delivery_limit(&cluster, &config.group_id).await;
        if let Some(reset) = config.auto_offset_reset.as_ref().filter(|_| !config.group_configs.contains_key(RESET)) {
            let position = start_position(&cluster, &config.group_id, reset).await;
            tracing::info!(group = %config.group_id, "a new share group starts at: {position}");
        }
        let membership = Membership::join(cluster.clone(), &config.group_id, subscription.clone(), topics).await?;
        tracing::info!(
            group = %config.group_id,
            member = membership.member_id(),
            "joined share group"
        );
        Ok(ShareConsumer {
            config,
            subscription,
            cluster,
            membership,
            sessions: HashMap::new(),
            tracker: AckTracker::default(),
            results: CommitResult::default(),
            metadata_stale: false,
            resent_held: 0,
            delivery_limit,
            group_configs,
            revoked: HashMap::new(),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
        })
    }

    /// How many deliveries the broker allows a record of this group.
    pub fn delivery_limit(&self) -> &DeliveryLimit {
        &self.delivery_limit
    }

    /// The group's configs as the broker had them after the join: the
    /// connector's, read back, and the broker's defaults for the rest.
    pub fn group_configs(&self) -> &BTreeMap<String, String> {
        &self.group_configs
    }

    /// Records a broker sent again while this consumer still held them
    /// (librdkafka's mock does so on every fetch); they were not handed on.
    pub fn resent_while_held(&self) -> u64 {
        self.resent_held
    }

    pub fn member_id(&self) -> &str {
        self.membership.member_id()
    }

    /// Partitions moved to another member while the application holds
    /// records of them, which it should settle now (flush, acknowledge):
    /// they stay in the share session until it does, or their wait ends.
    pub fn revoked_with_records(&self) -> Vec<TopicPartition> {
        let now = Instant::now();
        self.revoked.iter().filter(|(_, since)| self.still_waits(**since, now)).map(|(tp, _)| tp.clone()).collect()
    }

    fn still_waits(&self, revoked_at: Instant, now: Instant) -> bool {
        now.duration_since(revoked_at) < self.lock_timeout
    }

    /// Partitions the coordinator assigned to this member.
    pub fn assignment(&self) -> Vec<(String, i32)> {
        let mut out: Vec<(String, i32)> = self
            .membership
            .state()
            .assignment
            .iter()
            .filter_map(|(id, ps)| Some((self.cluster.topic_name(*id)?, ps)))
            .flat_map(|(name, ps)| ps.iter().map(move |p| (name.clone(), *p)))
            .collect();
        out.sort();
        out
    }

    /// Fetch acquired records, waiting up to `timeout` for some. Pending
    /// acknowledgements ride along with the fetches.
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedRecord>, ShareError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(fatal) = self.membership.state().fatal {
                return Err(ShareError::Membership(fatal));
            }
            self.tracker.purge(Instant::now());
            if self.metadata_stale {
                self.refresh_metadata().await;
            }
            let assigned = self.assigned();
            let targets = self.fetch_targets(&assigned);
            self.acknowledge_revoked(&assigned).await;
            if targets.is_empty() {
                // Nothing assigned yet: wait for the coordinator to change that.
                tokio::select! {
                    _ = self.membership.changed() => continue,
                    _ = tokio::time::sleep_until(deadline.into()) => return Ok(Vec::new()),
                }
            }
            let max_wait = self.config.max_wait.min(deadline.saturating_duration_since(Instant::now()));
            let records = self.fetch_round(targets, max_wait).await;
            if !records.is_empty() || Instant::now() >= deadline {
                return Ok(records);
            }
            if self.metadata_stale {
                // Something failed: do not spin on a broker that is down.
                tokio::time::sleep_until(deadline.min(Instant::now() + RETRY_BACKOFF).into()).await;
            }
        }
    }

    /// Record how the application handled a record from `poll`. Sent with the
    /// next poll or `commit_sync`.
    pub fn acknowledge(&mut self, topic: &str, partition: i32, offset: i64, ack: AckType) -> Result<(), ShareError> {
        self.tracker.acknowledge(topic, partition, offset, ack, Instant::now())
    }

    /// When the acquisition lock of this delivery of a record runs out
    /// (renewals counted); `None` once it is no longer held.
    pub fn lock_expiry(&self, topic: &str, partition: i32, offset: i64, delivery_count: u16) -> Option<Instant> {
        self.tracker.lock_expiry(topic, partition, offset, delivery_count)
    }

    /// [`Self::lock_expiry`] of many records, in their order.
    pub fn lock_expiries<'a>(&'a self, records: impl Iterator<Item = &'a ConsumedRecord> + 'a) -> Vec<Option<Instant>> {
        self.tracker
            .lock_expiries(records.map(|r| (r.topic.as_str(), r.partition, r.offset, r.delivery_count)))
            .collect()
    }

    /// Send every pending acknowledgement and report, per partition, how the
    /// acks sent since the last commit fared.
    pub async fn commit_sync(&mut self) -> Result<CommitResult, ShareError> {
        self.send_acks(self.tracker.nodes_with_pending()).await;
        Ok(std::mem::take(&mut self.results))
    }

    /// Whether the brokers renew acquisition locks (KIP-1222, Kafka 4.2+:
    /// ShareAcknowledge v2).
    pub fn renews_locks(&self) -> bool {
        self.cluster.versions.max_version(ShareAcknowledgeRequest::KEY).is_some_and(|v| v >= renew::VERSION)
    }

    /// Restart the acquisition locks of `records` (offset and delivery
    /// count) the application still works on (KIP-1222 RENEW): they stay
    /// acquired, their delivery counts unchanged. Returns how many were
    /// renewed ([`Self::lock_expiry`] tells until when); the rest keep
    /// their locks (and are redelivered when those run out).
    pub async fn renew(&mut self, records: &[(TopicPartition, i64, u16)]) -> usize {
        let mut renewed = 0;
        if !self.renews_locks() {
            return renewed;
        }
        // Pending acknowledgements go first: a renewal that fails loses the
        // session, and with it whatever still waits to be sent.
        self.send_acks(self.tracker.nodes_with_pending()).await;
        let sent_at = Instant::now();
        let mut offsets: BTreeMap<&TopicPartition, Vec<(i64, u16)>> = BTreeMap::new();
        for (tp, offset, delivery_count) in records {
            offsets.entry(tp).or_default().push((*offset, *delivery_count));
        }
        let mut by_node: BTreeMap<i32, BTreeMap<Tip, (TopicPartition, Vec<AckRange>)>> = BTreeMap::new();
        for (tp, offsets) in offsets {
            if let Some((node, ranges)) = self.tracker.renewable(tp, &offsets, sent_at)
                && let Some(id) = self.cluster.topic_id(&tp.topic)
                && self.sessions.get(&node).is_some_and(Session::is_open)
            {
                by_node.entry(node).or_default().insert((id, tp.partition), (tp.clone(), ranges));
            }
        }
        let mut exchanges = Vec::new();
        for (node, parts) in by_node {
            let Ok(conn) = self.cluster.broker(node).await else { continue };
            let acks = parts.iter().map(|(tip, (_, ranges))| (*tip, ranges.clone())).collect();
            let request = RenewRequest(self.sessions[&node].ack_request(self.ack_base(), &acks, false));
            exchanges.push((Exchange { node, conn, acked: Vec::new(), plan: request }, parts));
        }
        let timeout = self.config.request_timeout;
        let replies = join_all(exchanges.iter().map(|(x, _)| x.conn.send(&x.plan, renew::VERSION, timeout))).await;
        for ((x, parts), reply) in exchanges.into_iter().zip(replies) {
            let reply = match ShareError::top_level(reply, |r| r.reply.error_code, "renewing locks") {
                Ok(reply) => reply,
                Err(e) => {
                    // The session's epoch is unknown now: start it over.
                    tracing::info!(node = x.node, error = %e, "renewing locks failed; share session reopened");
                    self.lose_session(x.node, AckFailure::from(&e));
                    continue;
                }
            };
            self.sessions.entry(x.node).or_default().acknowledged();
            let RenewResponse { reply, acquisition_lock_timeout_ms } = reply;
            let lock = Duration::from_millis(acquisition_lock_timeout_ms.max(0) as u64);
            let expires_at = sent_at + if lock.is_zero() { self.lock_timeout } else { lock };
            for topic in &reply.responses {
                for part in &topic.partitions {
                    let Some((tp, ranges)) = parts.get(&(topic.topic_id, part.partition_index)) else { continue };
                    if let Some(error) = ResponseError::try_from_code(part.error_code) {
                        tracing::warn!(partition = %tp, %error, "lock renewal refused");
                        self.partition_error(x.node, tp, error);
                        continue;
                    }
                    renewed += self.tracker.renewed(tp, x.node, ranges, expires_at);
                }
            }
        }
        renewed
    }

    /// Acknowledgements of partitions that moved away go out on their own
    /// (ShareAcknowledge) before the fetch that forgets those partitions:
    /// riding on that fetch would keep them in the session, where the
    /// broker acquires more of their records for us.
    async fn acknowledge_revoked(&mut self, assigned: &BTreeSet<TopicPartition>) {
        let nodes = self.tracker.nodes_with_pending_where(|tp| !assigned.contains(tp));
        if !nodes.is_empty() {
            self.send_acks(nodes).await;
        }
    }

    /// Sends the pending acknowledgements of records acquired through
    /// `nodes`; the outcomes wait in `results` for the next `commit_sync`.
    async fn send_acks(&mut self, nodes: Vec<i32>) {
        let now = Instant::now();
        let mut exchanges = Vec::new();
        for node in nodes {
            let conn = match self.cluster.broker(node).await {
                Ok(conn) => conn,
                Err(e) => {
                    self.lose_session(node, AckFailure::from(&e));
                    continue;
                }
            };
            if !self.sessions.entry(node).or_default().is_open() {
                // Records outlive no session: they were released with it.
                let failure = AckFailure::Broker(ResponseError::ShareSessionNotFound);
                self.lose_session(node, failure);
                continue;
            }
            let (acks, acked) = self.take_acks(node, now);
            if acks.is_empty() {
                continue;
            }
            let request = self.sessions[&node].ack_request(self.ack_base(), &acks, false);
            exchanges.push(Exchange { node, conn, acked, plan: request });
        }
        let timeout = self.config.request_timeout;
        let replies =
            join_all(exchanges.iter().map(|x| x.conn.send(&x.plan, SHARE_ACKNOWLEDGE_VERSION, timeout))).await;
        for (exchange, reply) in exchanges.into_iter().zip(replies) {
            self.handle_ack_reply(exchange, reply);
        }
    }

    /// Release what the application did not acknowledge, commit, close the
    /// share sessions and leave the group.
    pub async fn close(mut self) -> Result<(), ShareError> {
        self.tracker.release_unacknowledged(Instant::now());
        let committed = self.commit_sync().await;
        let open: Vec<i32> = self.sessions.iter().filter(|(_, s)| s.is_open()).map(|(node, _)| *node).collect();
        for node in open {
            if let Err(e) = self.close_session(node).await {
                tracing::debug!(node, error = %e, "closing share session");
            }
        }
        let left = self.membership.leave().await;
        self.cluster.shutdown().await;
        let committed = committed?;
        left?;
        if committed.is_ok() { Ok(()) } else { Err(ShareError::CommitFailed(committed.failures())) }
    }

    async fn close_session(&mut self, node: i32) -> Result<(), ShareError> {
        let conn = self.cluster.broker(node).await?;
        let request = self.sessions[&node].ack_request(self.ack_base(), &BTreeMap::new(), true);
        let reply = conn.send(&request, SHARE_ACKNOWLEDGE_VERSION, self.config.request_timeout).await?;
        self.sessions.remove(&node);
        ShareError::top_level(Ok(reply), |r| r.error_code, "closing share session").map(drop)
    }

    async fn refresh_metadata(&mut self) {
        match self.subscription.refresh_metadata(&self.cluster).await {
            Ok(()) => self.metadata_stale = false,
            Err(e) => tracing::warn!(error = %e, "metadata refresh failed"),
        }
    }

    /// The partitions the coordinator assigned to us, by name.
    fn assigned(&self) -> BTreeSet<TopicPartition> {
        let mut assigned = BTreeSet::new();
        for (topic_id, partitions) in self.membership.state().assignment {
            if let Some(topic) = self.cluster.topic_name(topic_id) {
                assigned.extend(partitions.into_iter().map(|p| TopicPartition::new(&topic, p)));
            }
        }
        assigned
    }

    /// Partitions to fetch, by leader: the assignment, and partitions that
    /// moved away while the application still has records of them. Leaders
    /// that only need to forget partitions or take acks get an entry too.
    fn fetch_targets(&mut self, assigned: &BTreeSet<TopicPartition>) -> BTreeMap<i32, BTreeSet<Tip>> {
        let mut targets: BTreeMap<i32, BTreeSet<Tip>> = BTreeMap::new();
        for (topic_id, partitions) in self.membership.state().assignment {
            let Some(topic) = self.cluster.topic_name(topic_id) else {
                self.metadata_stale = true;
                continue;
            };
            for partition in partitions {
                match self.cluster.leader(&topic, partition) {
                    Some(node) => {
                        targets.entry(node).or_default().insert((topic_id, partition));
                    }
                    None => self.metadata_stale = true,
                }
            }
        }
        let now = Instant::now();
        let mut revoked = HashMap::new();
        for (tp, node) in self.tracker.unsettled(now) {
            if assigned.contains(&tp) {
                continue;
            }
            let since = self.revoked.get(&tp).copied().unwrap_or(now);
            if self.still_waits(since, now)
                && let Some(topic_id) = self.cluster.topic_id(&tp.topic)
            {
                targets.entry(node).or_default().insert((topic_id, tp.partition));
            }
            revoked.insert(tp, since);
        }
        self.revoked = revoked;
        for node in self.tracker.nodes_with_pending() {
            targets.entry(node).or_default();
        }
        for (node, session) in &self.sessions {
            if session.is_open() && !session.is_empty() {
                targets.entry(*node).or_default();
            }
        }
        targets
    }

    /// One ShareFetch to each target leader, concurrently.
    async fn fetch_round(&mut self, targets: BTreeMap<i32, BTreeSet<Tip>>, max_wait: Duration) -> Vec<ConsumedRecord> {
        let sent_at = Instant::now();
        let mut exchanges = Vec::new();
        for (node, wanted) in targets {
            let conn = match self.cluster.broker(node).await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(node, error = %e, "cannot reach partition leader");
                    self.lose_session(node, AckFailure::from(&e));
                    continue;
                }
            };
            let open = self.sessions.entry(node).or_default().is_open();
            // Acks need an open session; a new one has nothing to ack.
            let (acks, acked) = if open { self.take_acks(node, sent_at) } else { Default::default() };
            let base = self.fetch_base(max_wait);
            let plan = self.sessions[&node].plan_fetch(base, &wanted, &acks);
            exchanges.push(Exchange { node, conn, acked, plan });
        }
        let timeout = self.config.request_timeout + max_wait;
        let replies =
            join_all(exchanges.iter().map(|x| x.conn.send(&x.plan.request, SHARE_FETCH_VERSION, timeout))).await;
        let mut records = Vec::new();
        for (exchange, reply) in exchanges.into_iter().zip(replies) {
            self.handle_fetch_reply(exchange, reply, sent_at, &mut records);
        }
        records
    }

    fn handle_fetch_reply(
        &mut self,
        x: Exchange<super::session::FetchPlan>,
        reply: Result<ShareFetchResponse, ShareError>,
        sent_at: Instant,
        records: &mut Vec<ConsumedRecord>,
    ) {
        let reply = match ShareError::top_level(reply, |r| r.error_code, "ShareFetch") {
            Ok(reply) => reply,
            Err(e) => {
                tracing::info!(node = x.node, error = %e, "share session lost; reopening");
                let failure = AckFailure::from(&e);
                for tp in x.acked {
                    self.results.record(tp, Some(failure.clone()));
                }
                self.lose_session(x.node, failure);
                return;
            }
        };
        self.sessions.entry(x.node).or_default().fetched(x.plan);
        let lock = match reply.acquisition_lock_timeout_ms {
            ms if ms > 0 => Duration::from_millis(ms as u64),
            _ => DEFAULT_LOCK_TIMEOUT,
        };
        self.lock_timeout = lock;
        // Measured from sending: the broker started the clock before replying.
        let expires_at = sent_at + lock;
        let received = Instant::now();
        let mut answered = BTreeSet::new();
        for topic in &reply.responses {
            let Some(name) = self.cluster.topic_name(topic.topic_id) else {
                self.metadata_stale = true;
                continue;
            };
            for part in &topic.partitions {
                let tp = TopicPartition::new(&name, part.partition_index);
                if x.acked.contains(&tp) {
                    let outcome = ResponseError::try_from_code(part.acknowledge_error_code);
                    self.results.record(tp.clone(), outcome.map(AckFailure::Broker));
                    answered.insert(tp.clone());
                }
                if let Some(error) = ResponseError::try_from_code(part.error_code) {
                    self.partition_error(x.node, &tp, error);
                    continue;
                }
                let acquired = decode_partition(&name, part);
                let at = |offset, delivery_count| Acquisition { offset, delivery_count, expires_at, received };
                for r in acquired.records {
                    if self.tracker.acquired(&tp, x.node, at(r.offset, r.delivery_count), None) {
                        records.push(r);
                    } else {
                        self.resent_held += 1;
                    }
                }
                for (offset, count) in acquired.gaps {
                    self.tracker.acquired(&tp, x.node, at(offset, count), Some(GAP));
                }
                for (offset, count) in acquired.truncated {
                    self.tracker.acquired(&tp, x.node, at(offset, count), Some(AckType::Release as i8));
                }
            }
        }
        for tp in x.acked.into_iter().filter(|tp| !answered.contains(tp)) {
            self.results.record(tp, Some(AckFailure::NoResponse));
        }
    }

    fn handle_ack_reply(
        &mut self,
        x: Exchange<ShareAcknowledgeRequest>,
        reply: Result<ShareAcknowledgeResponse, ShareError>,
    ) {
        let reply = match ShareError::top_level(reply, |r| r.error_code, "ShareAcknowledge") {
            Ok(reply) => reply,
            Err(e) => {
                tracing::info!(node = x.node, error = %e, "acknowledgements failed");
                let failure = AckFailure::from(&e);
                for tp in x.acked {
                    self.results.record(tp, Some(failure.clone()));
                }
                self.lose_session(x.node, failure);
                return;
            }
        };
        self.sessions.entry(x.node).or_default().acknowledged();
        let mut answered = BTreeSet::new();
        for topic in &reply.responses {
            let Some(name) = self.cluster.topic_name(topic.topic_id) else {
                continue;
            };
            for part in &topic.partitions {
                let tp = TopicPartition::new(&name, part.partition_index);
                let error = ResponseError::try_from_code(part.error_code);
                if let Some(e) = error {
                    self.partition_error(x.node, &tp, e);
                }
                self.results.record(tp.clone(), error.map(AckFailure::Broker));
                answered.insert(tp);
            }
        }
        for tp in x.acked.into_iter().filter(|tp| !answered.contains(tp)) {
            self.results.record(tp, Some(AckFailure::NoResponse));
        }
    }

    /// React to a partition-level error from a leader.
    fn partition_error(&mut self, node: i32, tp: &TopicPartition, error: ResponseError) {
        match error {
            ResponseError::NotLeaderOrFollower
            | ResponseError::UnknownTopicOrPartition
            | ResponseError::UnknownTopicId
            | ResponseError::FencedLeaderEpoch
            | ResponseError::LeaderNotAvailable => {
                // The partition moved: what we held through this leader is gone.
                self.metadata_stale = true;
                if self.tracker.lose_partition(tp, Instant::now()) {
                    self.results.record(tp.clone(), Some(AckFailure::Broker(error)));
                }
            }
            _ => tracing::warn!(node, partition = %tp, %error, "share partition error"),
        }
    }

    /// The session with `node` is gone, and with it every record acquired
    /// through it; acks still waiting for it fail with `failure`.
    fn lose_session(&mut self, node: i32, failure: AckFailure) {
        if let Some(session) = self.sessions.get_mut(&node) {
            session.reset();
        }
        for tp in self.tracker.lose_node(node, Instant::now()) {
            self.results.record(tp, Some(failure.clone()));
        }
        self.metadata_stale = true;
    }

    /// Pending acks for `node`, keyed for the wire; expired ones are reported
    /// as failures instead of being sent.
    fn take_acks(&mut self, node: i32, now: Instant) -> (BTreeMap<Tip, Vec<AckRange>>, Vec<TopicPartition>) {
        let outgoing = self.tracker.take(node, now);
        for tp in outgoing.expired {
            self.results.record(tp, Some(AckFailure::LockExpired));
        }
        let mut acks = BTreeMap::new();
        let mut acked = Vec::new();
        for (tp, ranges) in outgoing.ranges {
            match self.cluster.topic_id(&tp.topic) {
                Some(id) => {
                    acks.insert((id, tp.partition), ranges);
                    acked.push(tp);
                }
                // Cannot happen: we fetched it by this id.
                None => self.results.record(tp, Some(AckFailure::NoResponse)),
            }
        }
        (acks, acked)
    }

    fn fetch_base(&self, max_wait: Duration) -> ShareFetchRequest {
        ShareFetchRequest::default()
            .with_group_id(Some(self.group_id()))
            .with_member_id(Some(self.member_str()))
            .with_max_wait_ms(max_wait.as_millis().min(i32::MAX as u128) as i32)
            .with_min_bytes(1)
            .with_max_bytes(MAX_FETCH_BYTES)
            .with_max_records(self.config.max_records)
            .with_batch_size(self.config.max_records)
    }

    fn ack_base(&self) -> ShareAcknowledgeRequest {
        ShareAcknowledgeRequest::default().with_group_id(Some(self.group_id())).with_member_id(Some(self.member_str()))
    }

    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.config.group_id.clone()))
    }

    fn member_str(&self) -> StrBytes {
        StrBytes::from_string(self.member_id().to_string())
    }
}
