//! Work that runs in the host while the plugin goes on: the resource behind
//! `spillway:sql`'s `pending-batch` and `spillway:kafka`'s `pending-send`.
//!
//! A `begin-*` call hands its input to a task of the host's and returns;
//! the plugin converts its next records meanwhile, so that its work and the
//! outside service's overlap instead of taking turns.

use super::errors::Error;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub struct Pending<T> {
    state: State<T>,
}

enum State<T> {
    Going(JoinHandle<Result<T, Error>>),
    Ended(Result<T, Error>),
}

impl<T: Clone> Pending<T> {
    pub(super) fn new(task: JoinHandle<Result<T, Error>>) -> Self {
        Pending { state: State::Going(task) }
    }

    /// How the work ended, or none while it runs.
    pub(super) async fn ready(&mut self) -> Option<Result<T, Error>> {
        if let State::Going(task) = &self.state
            && !task.is_finished()
        {
            return None;
        }
        Some(self.wait(None).await)
    }

    /// Waits for the end of the work until `until`; past it, a retriable
    /// error, and the work goes on.
    pub(super) async fn wait(&mut self, until: Option<Instant>) -> Result<T, Error> {
        let State::Going(task) = &mut self.state else { return self.ended() };
        let ended = match until {
            Some(until) => match tokio::time::timeout_at(until, task).await {
                Ok(ended) => ended,
                Err(_) => return Err(Error::retriable("still running at the end of the plugin call; it goes on")),
            },
            None => task.await,
        };
        let result = ended.unwrap_or_else(|e| Err(Error::retriable(format!("the host's task ended: {e}"))));
        self.state = State::Ended(result);
        self.ended()
    }

    fn ended(&self) -> Result<T, Error> {
        match &self.state {
            State::Ended(result) => result.clone(),
            State::Going(_) => unreachable!("called once the work ended"),
        }
    }
}
