//! Distributed mode: this worker's part in the group's rebalances, as
//! Connect's `DistributedHerder` with incremental cooperative assignment.

use super::HerderLoop;
use crate::herder::distributed::{Assignment, MemberMetadata, WorkSet, protocol};
use crate::herder::types::*;
use crate::herder::worker::TaskRuntime;
use std::collections::BTreeMap;

impl HerderLoop {
    /// Who carries out writes to connectors (Connect's leader).
    pub fn leadership(&self) -> Leadership {
        match &self.membership {
            None => Leadership::Here,
            Some(m) if m.is_leader => Leadership::Here,
            Some(m) => m.leader_url.clone().map_or(Leadership::Unknown, Leadership::Elsewhere),
        }
    }

    /// What this worker tells the group when it joins.
    pub fn member_metadata(&self) -> bytes::Bytes {
        let membership = self.membership.as_ref().expect("only members join");
        let metadata = MemberMetadata {
            version: protocol::VERSION,
            url: self.config.advertised_url(),
            worker_id: self.config.worker_id(),
            config_offset: self.store.read_offset(),
            owned: membership.owned.clone(),
        };
        serde_json::to_vec(&metadata).expect("plain data serializes").into()
    }

    /// The leader's part of a rebalance: every member's assignment.
    pub fn assign_group(&mut self, joined: &crate::kafka::group_member::Joined) -> Vec<(String, bytes::Bytes)> {
        let work = self.work_set();
        let config_offset = self.store.read_offset();
        let membership = self.membership.as_mut().expect("only members assign");
        let mut owned = BTreeMap::new();
        for (member, metadata) in &joined.members {
            let metadata = serde_json::from_slice::<MemberMetadata>(metadata).map(|m| m.owned).unwrap_or_else(|e| {
                tracing::warn!(member, error = %e, "a member's metadata does not parse: taken to run nothing");
                WorkSet::default()
            });
            owned.insert(member.clone(), metadata);
        }
        let plan = membership.assignor.assign(std::time::Instant::now(), &work, &owned);
        membership.assigned_work = Some(work);
        let rejoin_after_ms = plan.rejoin_after.map(|d| d.as_millis() as u64);
        plan.owned
            .into_iter()
            .map(|(member, owned)| {
                let assignment = Assignment {
                    version: protocol::VERSION,
                    leader: joined.member_id.clone(),
                    leader_url: self.config.advertised_url(),
                    config_offset,
                    owned,
                    rejoin_after_ms,
                };
                (member, serde_json::to_vec(&assignment).expect("plain data serializes").into())
            })
            .collect()
    }

    /// Runs what the assignment gives this worker and stops what it takes
    /// away; having given work back, joins again so it can move.
    pub async fn on_assignment(&mut self, generation: i32, is_leader: bool, assignment: Assignment) {
        let Some(membership) = self.membership.as_mut() else { return };
        let before = std::mem::replace(&mut membership.owned, assignment.owned);
        membership.generation = generation;
        membership.is_leader = is_leader;
        membership.leader_url = Some(assignment.leader_url);
        let revoked = !before.is_subset(&membership.owned);
        tracing::info!(
            generation,
            connectors = membership.owned.connectors.len(),
            tasks = membership.owned.tasks.len(),
            revoked,
            "assignment received"
        );
        self.apply_placement().await;
        if revoked && let Some(membership) = &self.membership {
            membership.rejoin("work was revoked");
        }
    }

    /// The coordinator forgot this worker (its session ran out): another
    /// may run its work by now, so it stops all of it.
    pub async fn on_membership_lost(&mut self) {
        if let Some(membership) = self.membership.as_mut() {
            membership.owned = WorkSet::default();
            membership.is_leader = false;
            // Whoever leads now, the next assignment says.
            membership.leader_url = None;
        }
        self.apply_placement().await;
    }

    /// Stops the tasks this worker no longer owns and starts those it owns
    /// and does not run.
    pub(super) async fn apply_placement(&mut self) {
        let names: Vec<String> = self.worker.connectors.keys().cloned().collect();
        for name in names {
            let local: Vec<u32> = self.worker.connectors[&name].tasks.keys().copied().collect();
            let moved: Vec<u32> = local.iter().copied().filter(|t| !self.owns_task(&name, *t)).collect();
            self.worker.stop_tasks(&name, &moved, None).await;
            let Some(config) = self.worker.connectors[&name].config.clone() else { continue };
            let target = self.target_of(&name);
            let missing: Vec<u32> = (0..config.tasks_max)
                .filter(|t| self.owns_task(&name, *t) && !self.worker.connectors[&name].tasks.contains_key(t))
                .collect();
            for task in missing {
                match target {
                    TargetState::Started => self.spawn_task(&name, task),
                    TargetState::Paused => {
                        let connector = self.worker.connectors.get_mut(&name).expect("listed");
                        connector.tasks.insert(task, TaskRuntime::idle(State::Paused));
                    }
                    TargetState::Stopped => {}
                }
            }
        }
    }

    /// The leader rebalances when the work to assign changed (a connector
    /// created or deleted here or elsewhere, `tasks.max` changed).
    pub(super) fn rebalance_if_work_changed(&mut self) {
        let Some(membership) = self.membership.as_ref().filter(|m| m.is_leader) else { return };
        let work = self.work_set();
        if membership.assigned_work.as_ref() != Some(&work) {
            let membership = self.membership.as_mut().expect("checked");
            membership.assigned_work = Some(work);
            membership.rejoin("the work to assign changed");
        }
    }

    /// Whether this worker is to run the task: always standalone; in a
    /// group, when the last assignment gave it to this worker.
    pub(super) fn owns_task(&self, name: &str, task: u32) -> bool {
        self.membership.as_ref().is_none_or(|m| m.owned.tasks.contains(&(name.to_string(), task)))
    }

    /// Every connector and task there is to run, for the leader to assign:
    /// a stopped connector has no tasks, and one whose config is invalid or
    /// whose plugin is missing has none either (it is FAILED).
    pub(super) fn work_set(&self) -> WorkSet {
        let mut work = WorkSet::default();
        for name in self.worker.connectors.keys() {
            work.connectors.insert(name.clone());
            work.tasks.extend((0..self.task_count(name)).map(|t| (name.clone(), t)));
        }
        work
    }

    pub(super) fn task_count(&self, name: &str) -> u32 {
        let config = self.worker.connectors.get(name).and_then(|c| c.config.as_ref());
        match (config, self.target_of(name)) {
            (_, TargetState::Stopped) | (None, _) => 0,
            (Some(config), _) => config.tasks_max,
        }
    }
}
