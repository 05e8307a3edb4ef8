//! A member of a classic Kafka group with an embedded protocol of its own,
//! as Kafka Connect's workers are (`WorkerGroupMember`): JoinGroup,
//! SyncGroup, Heartbeat and LeaveGroup against the group coordinator. The
//! coordinator only collects each member's metadata, picks a leader and
//! hands back what the leader assigned: what the bytes mean is the
//! caller's. This is how workers agree on who runs what without consensus
//! code of their own.

use super::share::{Cluster, Connection, ShareError};
use bytes::{Buf, Bytes};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Request, StrBytes};
use std::sync::Arc;
use std::time::Duration;

/// What a group is and how its members behave.
#[derive(Clone, Debug)]
pub struct GroupSettings {
    pub group_id: String,
    /// Every member must give the same: the coordinator refuses a member of
    /// another kind (a consumer, a Kafka Connect worker) with
    /// INCONSISTENT_GROUP_PROTOCOL.
    pub protocol_type: &'static str,
    pub protocol_name: &'static str,
    /// A member not heard from for this long is out of the group.
    pub session_timeout: Duration,
    /// How long the coordinator waits for every member to rejoin.
    pub rebalance_timeout: Duration,
}

/// A generation of the group, as JoinGroup answered it.
#[derive(Clone, Debug)]
pub struct Joined {
    pub generation: i32,
    pub member_id: String,
    pub leader_id: String,
    /// Every member and its metadata; only the leader is told.
    pub members: Vec<(String, Bytes)>,
}

impl Joined {
    pub fn is_leader(&self) -> bool {
        self.member_id == self.leader_id
    }
}

/// How a heartbeat went.
#[derive(Debug, PartialEq, Eq)]
pub enum Beat {
    Alive,
    /// The group is rebalancing: join again.
    Rebalance,
    /// The coordinator no longer knows us (the session ran out): join again
    /// as a new member.
    Gone,
}

pub struct GroupMember {
    cluster: Arc<Cluster>,
    settings: GroupSettings,
    coordinator: Option<Connection>,
    member_id: String,
    generation: i32,
}

/// The newest versions used: all that is needed (KIP-394's member ids,
/// LeaveGroup by member list) is there; a broker that serves less is asked
/// in what it serves.
const JOIN_VERSION: i16 = 5;
const SYNC_VERSION: i16 = 3;
const HEARTBEAT_VERSION: i16 = 3;
const LEAVE_VERSION: i16 = 3;

impl GroupMember {
    pub fn new(cluster: Arc<Cluster>, settings: GroupSettings) -> Self {
        GroupMember { cluster, settings, coordinator: None, member_id: String::new(), generation: -1 }
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    async fn coordinator(&mut self) -> Result<&Connection, ShareError> {
        if self.coordinator.as_ref().is_none_or(|c| !c.is_alive()) {
            let addr = self.cluster.find_coordinator(&self.settings.group_id).await?;
            self.coordinator = Some(self.cluster.connect(&addr).await?);
        }
        Ok(self.coordinator.as_ref().expect("just set"))
    }

    /// After an error that means the coordinator moved, or a broken
    /// connection: find it again on the next call.
    fn on_error(&mut self, e: &ShareError) {
        if e.coordinator_moving() || e.is_transport() {
            self.coordinator = None;
        }
        if matches!(
            e.response_error(),
            Some(ResponseError::UnknownMemberId | ResponseError::IllegalGeneration | ResponseError::FencedInstanceId)
        ) {
            self.member_id.clear();
            self.generation = -1;
        }
    }

    /// Sends `request` to the coordinator at the newest version both sides
    /// know up to `newest`, waiting `wait` for the reply body; a failure
    /// forgets the coordinator or the membership where it means that.
    async fn request<R: Request>(
        &mut self,
        request: &R,
        newest: i16,
        wait: Duration,
    ) -> Result<(Bytes, i16), ShareError> {
        let version = self.cluster.versions.pick::<R>(newest).min(newest);
        let sent = async { self.coordinator().await?.send_raw(request, version, wait).await };
        match sent.await {
            Ok(body) => Ok((body, version)),
            Err(e) => {
                self.on_error(&e);
                Err(e)
            }
        }
    }

    /// Like [`Self::request`], decoding the reply.
    async fn call<R: Request>(&mut self, request: &R, newest: i16, wait: Duration) -> Result<R::Response, ShareError> {
        let (mut body, version) = self.request(request, newest, wait).await?;
        R::Response::decode(&mut body, version)
            .map_err(|e| ShareError::Protocol(format!("decoding reply to api {}: {e}", R::KEY)))
    }

    /// Joins (or rejoins) the group with `metadata`, waiting while the
    /// coordinator collects every member, up to the rebalance timeout.
    pub async fn join(&mut self, metadata: Bytes) -> Result<Joined, ShareError> {
        loop {
            let protocol = JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(self.settings.protocol_name))
                .with_metadata(metadata.clone());
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(self.settings.group_id.clone())))
                .with_session_timeout_ms(self.settings.session_timeout.as_millis() as i32)
                .with_rebalance_timeout_ms(self.settings.rebalance_timeout.as_millis() as i32)
                .with_member_id(StrBytes::from_string(self.member_id.clone()))
                .with_protocol_type(StrBytes::from_static_str(self.settings.protocol_type))
                .with_protocols(vec![protocol]);
            // The coordinator answers once the rebalance is complete.
            let wait = self.settings.rebalance_timeout + self.cluster.timeout;
            let reply = self.call(&request, JOIN_VERSION, wait).await?;
            match ResponseError::try_from_code(reply.error_code) {
                None => {}
                // KIP-394: the first join only learns the member id it must use.
                Some(ResponseError::MemberIdRequired) => {
                    self.member_id = reply.member_id.to_string();
                    continue;
                }
                Some(error) => {
                    let e = ShareError::Broker { error, context: format!("JoinGroup {}", self.settings.group_id) };
                    self.on_error(&e);
                    return Err(e);
                }
            }
            self.member_id = reply.member_id.to_string();
            self.generation = reply.generation_id;
            return Ok(Joined {
                generation: reply.generation_id,
                member_id: self.member_id.clone(),
                leader_id: reply.leader.to_string(),
                members: reply.members.into_iter().map(|m| (m.member_id.to_string(), m.metadata)).collect(),
            });
        }
    }

    /// Sends the leader's assignments (empty from the others) and returns
    /// this member's. REBALANCE_IN_PROGRESS means: join again.
    pub async fn sync(&mut self, assignments: Vec<(String, Bytes)>) -> Result<Bytes, ShareError> {
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.settings.group_id.clone())))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_assignments(
                assignments
                    .into_iter()
                    .map(|(member, assignment)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(StrBytes::from_string(member))
                            .with_assignment(assignment)
                    })
                    .collect(),
            );
        let wait = self.settings.rebalance_timeout + self.cluster.timeout;
        let context = format!("SyncGroup {}", self.settings.group_id);
        let (mut body, version) = self.request(&request, SYNC_VERSION, wait).await?;
        // The error code first: librdkafka's mock sends a null assignment
        // with an error, which does not decode.
        let mut head = body.clone();
        if version >= 1 {
            head.advance(4); // throttle_time_ms
        }
        if let Some(e) = ShareError::broker(head.try_get_i16().unwrap_or(0), context.clone()) {
            self.on_error(&e);
            return Err(e);
        }
        SyncGroupResponse::decode(&mut body, version)
            .map(|reply| reply.assignment)
            .map_err(|e| ShareError::Protocol(format!("{context}: {e}")))
    }

    /// One heartbeat; call it more often than the session timeout.
    pub async fn heartbeat(&mut self) -> Result<Beat, ShareError> {
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.settings.group_id.clone())))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()));
        let reply = self.call(&request, HEARTBEAT_VERSION, self.cluster.timeout).await?;
        match ResponseError::try_from_code(reply.error_code) {
            None => Ok(Beat::Alive),
            Some(ResponseError::RebalanceInProgress) => Ok(Beat::Rebalance),
            Some(
                error @ (ResponseError::UnknownMemberId
                | ResponseError::IllegalGeneration
                | ResponseError::FencedInstanceId),
            ) => {
                tracing::warn!(group = self.settings.group_id, %error, "no longer a member of the group");
                self.on_error(&ShareError::Broker { error, context: String::new() });
                Ok(Beat::Gone)
            }
            Some(error) => {
                let e = ShareError::Broker { error, context: format!("Heartbeat {}", self.settings.group_id) };
                self.on_error(&e);
                Err(e)
            }
        }
    }

    /// Leaves the group, so that the others rebalance at once rather than
    /// after the session timeout. Errors are only logged: we are going.
    pub async fn leave(&mut self) {
        if self.member_id.is_empty() {
            return;
        }
        let preferred = self.cluster.versions.pick::<LeaveGroupRequest>(LEAVE_VERSION).min(LEAVE_VERSION);
        // librdkafka's mock reads every LeaveGroup as v0-v2 (one member id)
        // and answers so: a v3 reply that does not decode is asked again at v1.
        for version in [preferred, 1] {
            let mut request = LeaveGroupRequest::default()
                .with_group_id(GroupId(StrBytes::from_string(self.settings.group_id.clone())));
            let member_id = StrBytes::from_string(self.member_id.clone());
            if version >= 3 {
                request.members = vec![MemberIdentity::default().with_member_id(member_id)];
            } else {
                request.member_id = member_id;
            }
            match self.call(&request, version, self.cluster.timeout).await {
                Ok(reply) if reply.error_code == 0 => {
                    tracing::info!(group = self.settings.group_id, "left the group");
                    break;
                }
                Ok(reply) => {
                    tracing::warn!(group = self.settings.group_id, code = reply.error_code, "leaving the group");
                    break;
                }
                Err(ShareError::Protocol(e)) if version > 1 => {
                    tracing::debug!(error = e, "LeaveGroup v{version} answered in another shape; asking at v1");
                }
                Err(e) => {
                    tracing::warn!(group = self.settings.group_id, error = %e, "leaving the group");
                    break;
                }
            }
        }
        self.member_id.clear();
        self.generation = -1;
    }
}
