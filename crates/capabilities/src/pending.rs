//! Work that runs in the host while the plugin goes on: the resource behind
//! `spillway:sql`'s `pending-batch` and `spillway:kafka`'s `pending-send`.
//!
//! A `begin-*` call hands its input to a task of the host's and returns;
//! the plugin converts its next records meanwhile, so that its work and the
//! outside service's overlap instead of taking turns. Each capability keeps
//! a few going per instance at most ([`room`]): each holds its input in
//! the host's memory until it ends.

use super::CallBudget;
use super::errors::Error;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Waits for room for one more piece of work going on in the host, within
/// the plugin call's time: `begin-*` waits while `limit` are going on, as a
/// producer blocks on a full buffer. At the call's end it is a retriable
/// error, and the plugin's batch is retried.
pub(super) async fn room(
    going: &Arc<Semaphore>,
    budget: &CallBudget,
    limit: usize,
    what: &str,
) -> Result<OwnedSemaphorePermit, Error> {
    let room = going.clone().acquire_owned();
    let permit = match budget.until() {
        Some(until) => tokio::time::timeout_at(until, room).await.map_err(|_| {
            Error::retriable(format!("{limit} {what} are still going on at the end of the plugin call"))
        })?,
        None => room.await,
    };
    Ok(permit.expect("the semaphore is never closed"))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn room_is_waited_for_within_the_call_and_refused_past_it() {
        let going = Arc::new(Semaphore::new(2));
        let budget = CallBudget::default();
        budget.set(Some(Instant::now() + Duration::from_secs(1)));
        let first = room(&going, &budget, 2, "writes").await.unwrap();
        let _second = room(&going, &budget, 2, "writes").await.unwrap();
        let err = room(&going, &budget, 2, "writes").await.unwrap_err();
        assert!(err.is_retriable() && err.message().contains("2 writes are still going on"), "{err:?}");
        // One ends while the next waits: it gets the room.
        budget.set(Some(Instant::now() + Duration::from_secs(1)));
        let waiting = tokio::spawn({
            let (going, budget) = (going.clone(), budget.clone());
            async move { room(&going, &budget, 2, "writes").await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(first);
        assert!(waiting.await.unwrap().is_ok());
    }
}
