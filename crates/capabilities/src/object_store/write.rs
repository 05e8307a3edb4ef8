//! Writes that go on in the host while the plugin works: the resource
//! behind `pending-write`.
//!
//! `begin-create` hands the object's bytes to a task of the host's and
//! returns; the plugin encodes its next object meanwhile, so encoding and
//! uploading overlap instead of taking turns. At most
//! `policy.plugin.work.in.flight.max` go on per plugin instance, which bounds the memory
//! they hold in the host.

use crate::errors::Error;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub struct PendingWrite {
    /// The plugin's path, for messages.
    path: String,
    state: State,
}

enum State {
    Going(JoinHandle<Result<bool, Error>>),
    Ended(Result<bool, Error>),
}

impl PendingWrite {
    pub(super) fn new(path: String, task: JoinHandle<Result<bool, Error>>) -> Self {
        PendingWrite { path, state: State::Going(task) }
    }

    /// How the write ended, or none while it goes on.
    pub(super) async fn ready(&mut self) -> Option<Result<bool, Error>> {
        if let State::Going(task) = &self.state
            && !task.is_finished()
        {
            return None;
        }
        Some(self.wait(None).await)
    }

    /// Waits for the end of the write until `until`; past it, a retriable
    /// error, and the write goes on.
    pub(super) async fn wait(&mut self, until: Option<Instant>) -> Result<bool, Error> {
        let State::Going(task) = &mut self.state else { return self.ended() };
        let ended = match until {
            Some(until) => match tokio::time::timeout_at(until, task).await {
                Ok(ended) => ended,
                Err(_) => {
                    return Err(Error::retriable(format!(
                        "the write of {} is still going on at the end of the plugin call",
                        self.path
                    )));
                }
            },
            None => task.await,
        };
        let result = ended.unwrap_or_else(|e| Err(Error::retriable(format!("the write of {}: {e}", self.path))));
        self.state = State::Ended(result);
        self.ended()
    }

    fn ended(&self) -> Result<bool, Error> {
        match &self.state {
            State::Ended(result) => result.clone(),
            State::Going(_) => unreachable!("called once the write ended"),
        }
    }
}
