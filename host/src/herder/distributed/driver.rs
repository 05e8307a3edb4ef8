//! The worker's group membership, on a task of its own: it joins, lets the
//! leader's main loop assign, hands each assignment to the main loop and
//! heartbeats until the group rebalances. It never waits for the main loop
//! to carry an assignment out (stopping a task can take longer than a
//! session), so a busy worker is not taken for a dead one.

use super::protocol::Assignment;
use crate::herder::Herder;
use crate::kafka::group_member::{Beat, GroupMember};
use kafka_protocol::ResponseError;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

pub enum Command {
    /// Join again now: this worker revoked work, or (the leader) the work
    /// to assign changed.
    Rejoin,
    /// Leave the group (the worker is stopping), then say so.
    Leave(oneshot::Sender<()>),
}

/// How long to wait before trying again after the coordinator failed us.
const RETRY: Duration = Duration::from_secs(1);
const LEADER_SYNC_DELAY: Duration = Duration::from_millis(200);

pub async fn drive(
    herder: Herder,
    mut member: GroupMember,
    mut commands: mpsc::UnboundedReceiver<Command>,
    heartbeat: Duration,
) {
    loop {
        let Ok(metadata) = herder.ask(|w| Box::pin(async move { Ok(w.member_metadata()) })).await else { return };
        let joined = tokio::select! {
            joined = member.join(metadata) => joined,
            command = commands.recv() => match command {
                Some(Command::Rejoin) => continue,
                Some(Command::Leave(done)) => return leave(member, done).await,
                None => return,
            },
        };
        let joined = match joined {
            Ok(joined) => joined,
            Err(e) => {
                tracing::warn!(error = %e, "joining the group failed; trying again");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        tracing::info!(
            generation = joined.generation,
            member = joined.member_id,
            leader = joined.is_leader(),
            members = joined.members.len(),
            "joined the group"
        );
        let assignments = if joined.is_leader() {
            let group = joined.clone();
            let assignments = match herder.ask(move |w| Box::pin(async move { Ok(w.assign_group(&group)) })).await {
                Ok(assignments) => assignments,
                Err(_) => return,
            };
            // Apache Kafka hands a follower its assignment whenever its
            // SyncGroup comes; librdkafka's mock refuses one that comes
            // after the leader's (INVALID_REQUEST). A moment's wait lets
            // the followers' arrive first.
            tokio::time::sleep(LEADER_SYNC_DELAY).await;
            assignments
        } else {
            Vec::new()
        };
        let assignment = match member.sync(assignments).await {
            Ok(assignment) => assignment,
            Err(e) if e.response_error() == Some(ResponseError::RebalanceInProgress) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "syncing with the group failed; joining again");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let assignment: Assignment = match serde_json::from_slice(&assignment) {
            Ok(assignment) => assignment,
            Err(e) => {
                tracing::error!(error = %e, "the leader's assignment does not parse; joining again");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let rejoin_at = assignment.rejoin_after_ms.map(|ms| tokio::time::Instant::now() + Duration::from_millis(ms));
        let (generation, leader) = (joined.generation, joined.is_leader());
        if herder.tell(move |w| Box::pin(w.on_assignment(generation, leader, assignment))).await.is_err() {
            return;
        }
        loop {
            let scheduled = async {
                match rejoin_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(heartbeat) => match member.heartbeat().await {
                    Ok(Beat::Alive) => {}
                    Ok(Beat::Rebalance) => break,
                    Ok(Beat::Gone) => {
                        // Our work may be someone else's by now: stop it all
                        // before joining again as a new member.
                        if herder.tell(|w| Box::pin(w.on_membership_lost())).await.is_err() {
                            return;
                        }
                        break;
                    }
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed; trying at the next one"),
                },
                () = scheduled => break,
                command = commands.recv() => match command {
                    Some(Command::Rejoin) => break,
                    Some(Command::Leave(done)) => return leave(member, done).await,
                    None => return,
                },
            }
        }
    }
}

async fn leave(mut member: GroupMember, done: oneshot::Sender<()>) {
    member.leave().await;
    let _ = done.send(());
}
