//! Share-group membership: a background task that owns the coordinator
//! connection and heartbeats on the interval the coordinator asks for, so the
//! member stays in the group however rarely `poll` is called. For a pattern
//! subscription it also matches the pattern again on its refresh interval,
//! and sends the subscribed names with the next heartbeat when they changed.

use super::cluster::Cluster;
use super::connection::Connection;
use super::error::{ShareError, coordinator_moving};
use super::subscription::Subscription;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};
use uuid::Uuid;

const SHARE_GROUP_HEARTBEAT_VERSION: i16 = 1;
/// Member epoch that joins the group, and the one that leaves it.
const JOIN_EPOCH: i32 = 0;
const LEAVE_EPOCH: i32 = -1;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);

/// What the consumer side sees of the membership.
#[derive(Clone, Debug, Default)]
pub(crate) struct MemberState {
    pub epoch: i32,
    /// Assigned partitions by topic id; empty while joining, and the last
    /// one while rejoining after a fence.
    pub assignment: Vec<(Uuid, Vec<i32>)>,
    /// Set when the coordinator refused us for good.
    pub fatal: Option<String>,
}

/// Dropping it without `leave` makes the task leave the group on its own.
pub(crate) struct Membership {
    member_id: String,
    state: watch::Receiver<MemberState>,
    leave: Option<oneshot::Sender<oneshot::Sender<Result<(), ShareError>>>>,
    task: JoinHandle<()>,
}

impl Membership {
    /// Join the group subscribed to `topics` (what `subscription` comes to
    /// now) and return once the coordinator accepted us.
    pub async fn join(
        cluster: Arc<Cluster>,
        group_id: &str,
        subscription: Subscription,
        topics: Vec<String>,
    ) -> Result<Self, ShareError> {
        let member_id = Uuid::new_v4().to_string();
        let mut heartbeat = Heartbeat {
            cluster,
            group_id: group_id.to_string(),
            member_id: member_id.clone(),
            subscription,
            topics,
            resubscribe: false,
            coordinator: None,
            find_coordinator: true,
            epoch: JOIN_EPOCH,
            interval: Duration::from_secs(5),
        };
        let first = heartbeat.first_beat().await?;
        let (tx, state) = watch::channel(MemberState::default());
        heartbeat.apply(&first, &tx);
        let (leave_tx, leave_rx) = oneshot::channel();
        let task = tokio::spawn(heartbeat.run(tx, leave_rx));
        Ok(Membership { member_id, state, leave: Some(leave_tx), task })
    }

    pub fn member_id(&self) -> &str {
        &self.member_id
    }

    pub fn state(&self) -> MemberState {
        self.state.borrow().clone()
    }

    /// Resolves when the membership state changes.
    pub async fn changed(&mut self) {
        if self.state.changed().await.is_err() {
            // The task ended; nothing will change any more.
            std::future::pending::<()>().await;
        }
    }

    /// Leave the group (heartbeat with epoch -1) and stop the task.
    pub async fn leave(mut self) -> Result<(), ShareError> {
        let (done_tx, done_rx) = oneshot::channel();
        let Some(leave) = self.leave.take() else {
            return Ok(());
        };
        if leave.send(done_tx).is_err() {
            return Err(ShareError::Membership("heartbeat task already ended".into()));
        }
        let result = done_rx.await.unwrap_or_else(|_| Err(ShareError::Membership("heartbeat task ended".into())));
        self.task.await.ok();
        result
    }
}

struct Heartbeat {
    cluster: Arc<Cluster>,
    group_id: String,
    member_id: String,
    subscription: Subscription,
    /// The names subscribed to.
    topics: Vec<String>,
    /// `topics` changed since the coordinator last heard them.
    resubscribe: bool,
    coordinator: Option<Connection>,
    /// Ask which broker coordinates the group before the next heartbeat.
    find_coordinator: bool,
    epoch: i32,
    interval: Duration,
}

type LeaveRequest = oneshot::Receiver<oneshot::Sender<Result<(), ShareError>>>;

impl Heartbeat {
    async fn run(mut self, tx: watch::Sender<MemberState>, mut leave: LeaveRequest) {
        let mut next_beat = Instant::now() + self.interval;
        let mut next_match = self.subscription.refresh().map(|every| Instant::now() + every);
        loop {
            tokio::select! {
                _ = sleep_until(next_beat) => {}
                _ = sleep_until(next_match.unwrap_or(next_beat)), if next_match.is_some() => {
                    next_match = self.subscription.refresh().map(|every| Instant::now() + every);
                    if !self.match_again().await {
                        continue;
                    }
                    // Changed: the coordinator hears it now, not a heartbeat interval later.
                }
                request = &mut leave => {
                    let result = self.leave().await;
                    if let Ok(done) = request {
                        done.send(result).ok();
                    }
                    return;
                }
            }
            let wait = match self.beat().await {
                Ok(reply) => {
                    self.apply(&reply, &tx);
                    self.interval
                }
                Err(e) => self.recover(e, &tx),
            };
            next_beat = Instant::now() + wait;
        }
    }

    /// Match the subscription's pattern against the cluster's topics again;
    /// true when the subscribed names changed.
    async fn match_again(&mut self) -> bool {
        // Never holding up a heartbeat by more than an interval.
        let matched = tokio::time::timeout(self.interval, self.subscription.topics(&self.cluster)).await;
        let matched = matched.unwrap_or_else(|_| Err(ShareError::Protocol("no metadata in time".into())));
        match matched {
            Ok(topics) if topics != self.topics => {
                tracing::info!(group = self.group_id, ?topics, "the subscription's pattern matches other topics now");
                self.topics = topics;
                self.resubscribe = true;
                true
            }
            Ok(_) => false,
            Err(e) => {
                tracing::warn!(error = %e, "matching the subscription's pattern; keeping the topics it matched");
                false
            }
        }
    }

    /// Decide what to do after a failed heartbeat; returns when to retry.
    fn recover(&mut self, e: ShareError, tx: &watch::Sender<MemberState>) -> Duration {
        match e.response_error() {
            Some(error) if coordinator_moving(error) => {
                tracing::info!(error = %e, "share group coordinator moved; rediscovering");
                self.find_coordinator = true;
                RETRY_BACKOFF
            }
            Some(ResponseError::FencedMemberEpoch) | Some(ResponseError::UnknownMemberId) => {
                tracing::warn!(error = %e, "fenced from share group; rejoining");
                // The assignment stays until the rejoin answers with the
                // next one. A share-partition leader checks record locks, not
                // membership, and forgetting a partition would make it
                // release the records we hold there: they would be delivered
                // again after a sink may have written them.
                self.epoch = JOIN_EPOCH;
                tx.send_modify(|s| s.epoch = JOIN_EPOCH);
                Duration::ZERO
            }
            Some(code) if !code.is_retriable() => {
                tracing::error!(error = %e, "share group heartbeat refused");
                tx.send_modify(|s| s.fatal = Some(e.to_string()));
                self.interval
            }
            _ => {
                if e.is_transport() {
                    self.coordinator = None;
                }
                tracing::warn!(error = %e, "share group heartbeat failed; retrying");
                RETRY_BACKOFF
            }
        }
    }

    fn apply(&mut self, reply: &ShareGroupHeartbeatResponse, tx: &watch::Sender<MemberState>) {
        self.epoch = reply.member_epoch;
        if reply.heartbeat_interval_ms > 0 {
            self.interval = Duration::from_millis(reply.heartbeat_interval_ms as u64);
        }
        let assignment = reply
            .assignment
            .as_ref()
            .map(|a| a.topic_partitions.iter().map(|tp| (tp.topic_id, tp.partitions.clone())).collect::<Vec<_>>());
        tx.send_if_modified(|s| {
            let before = (s.epoch, s.assignment.clone(), s.fatal.clone());
            s.epoch = reply.member_epoch;
            s.fatal = None;
            // A null assignment means "unchanged".
            if let Some(assignment) = assignment {
                s.assignment = assignment;
            }
            before != (s.epoch, s.assignment.clone(), s.fatal.clone())
        });
    }

    /// The joining heartbeat, retried while the coordinator is not ready.
    async fn first_beat(&mut self) -> Result<ShareGroupHeartbeatResponse, ShareError> {
        let deadline = tokio::time::Instant::now() + self.cluster.timeout;
        loop {
            match self.beat().await {
                Ok(reply) => return Ok(reply),
                Err(e) if tokio::time::Instant::now() < deadline && retriable(&e) => {
                    tracing::debug!(error = %e, "joining the share group; retrying");
                    self.find_coordinator = true;
                    tokio::time::sleep(RETRY_BACKOFF).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn beat(&mut self) -> Result<ShareGroupHeartbeatResponse, ShareError> {
        // Subscriptions go with the join and after a change only: null
        // means "unchanged".
        let subscription = (self.epoch == JOIN_EPOCH || self.resubscribe)
            .then(|| self.topics.iter().map(|t| TopicName(StrBytes::from_string(t.clone()))).collect());
        let reply = self.send(self.epoch, subscription).await?;
        // The broker's own message says why, e.g. Apache Kafka's "Group X
        // is not a share group." (one namespace for every kind of group).
        let context = match reply.error_message.as_ref().filter(|m| !m.is_empty()) {
            Some(message) => format!("ShareGroupHeartbeat for group {} ({})", self.group_id, message.as_str()),
            None => format!("ShareGroupHeartbeat for group {}", self.group_id),
        };
        if let Some(e) = ShareError::broker(reply.error_code, context) {
            return Err(e);
        }
        self.resubscribe = false;
        if let Some(id) = reply.member_id.as_ref().filter(|id| !id.is_empty()) {
            self.member_id = id.to_string();
        }
        Ok(reply)
    }

    async fn leave(&mut self) -> Result<(), ShareError> {
        let reply = self.send(LEAVE_EPOCH, None).await?;
        match ShareError::broker(reply.error_code, "leaving the share group") {
            // Already gone from the group: leaving succeeded.
            Some(e) if e.response_error() == Some(ResponseError::UnknownMemberId) => Ok(()),
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn send(
        &mut self,
        epoch: i32,
        subscription: Option<Vec<TopicName>>,
    ) -> Result<ShareGroupHeartbeatResponse, ShareError> {
        let dead = self.coordinator.as_ref().is_none_or(|c| !c.is_alive());
        if dead || self.find_coordinator {
            let addr = self.cluster.find_coordinator(&self.group_id).await?;
            // A live connection to the same broker is kept: on librdkafka's
            // mock, closing any connection ends every share session on that
            // broker, and with them the locks of the records we hold.
            if dead || self.coordinator.as_ref().is_some_and(|c| c.addr() != addr) {
                self.coordinator = Some(self.cluster.connect(&addr).await?);
            }
            self.find_coordinator = false;
        }
        let conn = self.coordinator.as_ref().expect("connected above");
        let req = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group_id.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(epoch)
            .with_subscribed_topic_names(subscription);
        let result = conn.send(&req, SHARE_GROUP_HEARTBEAT_VERSION, self.cluster.timeout).await;
        if result.is_err() {
            self.coordinator = None;
        }
        result
    }
}

fn retriable(e: &ShareError) -> bool {
    match e.response_error() {
        Some(code) => code.is_retriable() || code == ResponseError::NotCoordinator,
        None => e.is_transport(),
    }
}
