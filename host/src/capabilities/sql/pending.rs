//! Batches that run in the host while the plugin works: the resource
//! behind `pending-batch`.
//!
//! `begin-batch` and `begin-copy-in` hand the rows to a task of the host's
//! and return; the plugin turns its next records into rows meanwhile, so
//! that its work and the database's overlap instead of taking turns. One
//! batch runs at a time per database (its writer lock), in the order begun.

use super::bindings::spillway::sql::databases::BatchOutcome;
use crate::capabilities::errors::Error;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub struct PendingBatch {
    state: State,
}

enum State {
    Going(JoinHandle<Result<BatchOutcome, Error>>),
    Ended(Result<BatchOutcome, Error>),
}

impl PendingBatch {
    pub(super) fn new(task: JoinHandle<Result<BatchOutcome, Error>>) -> Self {
        PendingBatch { state: State::Going(task) }
    }

    /// How the batch ended, or none while it runs.
    pub(super) async fn ready(&mut self) -> Option<Result<BatchOutcome, Error>> {
        if let State::Going(task) = &self.state
            && !task.is_finished()
        {
            return None;
        }
        Some(self.wait(None).await)
    }

    /// Waits for the end of the batch until `until`; past it, a retriable
    /// error, and the batch goes on.
    pub(super) async fn wait(&mut self, until: Option<Instant>) -> Result<BatchOutcome, Error> {
        let State::Going(task) = &mut self.state else { return self.ended() };
        let ended = match until {
            Some(until) => match tokio::time::timeout_at(until, task).await {
                Ok(ended) => ended,
                Err(_) => return Err(Error::retriable("the batch is still running at the end of the plugin call")),
            },
            None => task.await,
        };
        let result = ended.unwrap_or_else(|e| Err(Error::retriable(format!("the batch's task ended: {e}"))));
        self.state = State::Ended(result);
        self.ended()
    }

    fn ended(&self) -> Result<BatchOutcome, Error> {
        match &self.state {
            State::Ended(result) => result.clone(),
            State::Going(_) => unreachable!("called once the batch ended"),
        }
    }
}
