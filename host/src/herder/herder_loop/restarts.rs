//! KIP-745 restarts: a request is answered, recorded in the store (so the
//! workers that run the targets see it) and carried out right after.

use super::HerderLoop;
use crate::herder::store::RestartRequest;
use crate::herder::types::*;
use crate::herder::{HerderError, HerderResult};

/// Which of this worker's instances a restart request targets, decided
/// when it was accepted or read.
#[derive(Clone, Debug)]
pub(super) struct RestartPlan {
    connector: bool,
    tasks: Vec<u32>,
    /// Accepted by this worker, which clears the request once it is done;
    /// a request read from another is that one's to clear.
    requested_here: bool,
}

impl HerderLoop {
    /// Decides the targets, records the request durably, marks the targets
    /// RESTARTING and answers; the main loop restarts them right after.
    pub async fn request_restart(
        &mut self,
        name: String,
        include_tasks: bool,
        only_failed: bool,
    ) -> HerderResult<Option<ConnectorStateInfo>> {
        self.connector(&name)?;
        if !include_tasks && !only_failed && self.membership.is_none() {
            self.start_connector_instance(&name);
            return Ok(None);
        }
        let request = RestartRequest { include_tasks, only_failed };
        // What will restart across the cluster, for the answer: other
        // workers restart theirs as they read the request.
        let mut status = self.status(&name)?;
        if !only_failed || status.connector.state == State::Failed {
            status.connector.state = State::Restarting;
            status.connector.trace = None;
        }
        for task in status.tasks.iter_mut().filter(|t| include_tasks && (!only_failed || t.state == State::Failed)) {
            task.state = State::Restarting;
            task.trace = None;
        }
        self.save_change(|s| {
            s.restart_requests.insert(name.clone(), request);
        })
        .await?;
        self.plan_restart(&name, request, true);
        if !include_tasks && !only_failed {
            return Ok(None);
        }
        Ok(Some(status))
    }

    /// Marks this worker's instances that `request` targets RESTARTING; the
    /// main loop restarts them right after.
    pub(super) fn plan_restart(&mut self, name: &str, request: RestartRequest, requested_here: bool) {
        let owns_connector = self.membership.as_ref().is_none_or(|m| m.owned.connectors.contains(name));
        let Some(connector) = self.worker.connectors.get_mut(name) else { return };
        let RestartRequest { include_tasks, only_failed } = request;
        let plan = RestartPlan {
            connector: owns_connector && (!only_failed || connector.state == State::Failed),
            tasks: if include_tasks {
                connector
                    .tasks
                    .iter()
                    .filter(|(_, t)| !only_failed || t.state == State::Failed)
                    .map(|(id, _)| *id)
                    .collect()
            } else {
                Vec::new()
            },
            requested_here,
        };
        if plan.connector {
            connector.state = State::Restarting;
            connector.trace = None;
        }
        for id in &plan.tasks {
            if let Some(task) = connector.tasks.get_mut(id) {
                task.state = State::Restarting;
                task.trace = None;
            }
        }
        self.pending_restarts.push((name.to_string(), plan));
    }

    pub(super) async fn carry_out_restarts(&mut self) {
        for (name, plan) in std::mem::take(&mut self.pending_restarts) {
            if !self.worker.connectors.contains_key(&name) {
                continue;
            }
            self.worker.stop_tasks(&name, &plan.tasks, Some(State::Restarting)).await;
            if plan.connector {
                self.start_connector_instance(&name);
            }
            let (ready, target) = (self.worker.connectors[&name].config.is_some(), self.target_of(&name));
            for id in &plan.tasks {
                let idle = match (ready, target) {
                    (true, TargetState::Started) => {
                        self.spawn_task(&name, *id);
                        continue;
                    }
                    (_, TargetState::Paused) => State::Paused,
                    _ => State::Unassigned,
                };
                if let Some(t) = self.worker.connectors.get_mut(&name).and_then(|c| c.tasks.get_mut(id)) {
                    t.state = idle;
                }
            }
            if !plan.requested_here {
                continue;
            }
            if let Err(e) = self
                .save_change(|s| {
                    s.restart_requests.remove(&name);
                })
                .await
            {
                tracing::error!(connector = name, error = %e, "could not clear a finished restart request");
            }
        }
    }

    pub async fn restart_task(&mut self, name: String, task: u32) -> HerderResult<()> {
        let connector = self.connector(&name)?;
        if !connector.tasks.contains_key(&task) {
            if self.membership.is_some() && self.task_ids(&name).contains(&task) {
                let runs_on = self.status(&name)?.tasks.into_iter().find(|t| t.id == task).map(|t| t.worker_id);
                return Err(HerderError::Conflict(format!(
                    "Task {name}-{task} runs on another worker ({}); restart it there, or restart the connector \
                     with includeTasks=true from any worker",
                    runs_on.filter(|w| !w.is_empty()).as_deref().unwrap_or("none reported yet")
                )));
            }
            return Err(HerderError::NotFound(format!("Task {name}-{task} not found")));
        }
        self.worker.stop_tasks(&name, &[task], Some(State::Restarting)).await;
        if self.target_of(&name) == TargetState::Started && self.worker.connectors[&name].config.is_some() {
            self.spawn_task(&name, task);
        }
        Ok(())
    }
}
