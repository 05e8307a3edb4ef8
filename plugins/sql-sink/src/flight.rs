//! Write-behind: a put's write, when it is one capability call (one
//! `execute-batch`, or one `copy-in`), is begun in the host and its
//! records held, so that the database writes while the next put's records
//! become rows; the next call (a `put`, `put([])` or `flush`) waits for it
//! and settles them. One write is in flight at a time, so at most two
//! batches of rows are held: the one written and the one being prepared.
//!
//! Settling the write in flight comes before anything of the next batch is
//! written, so that its refused rows are found and the rest written again
//! (as [`write`] does for a write made on the spot) before a later record
//! of the same key reaches the database.

use crate::db::{Db, Pending};
use crate::dialect::Sql;
use crate::write::{self, Bound, Chunk, Group, Outcomes};
use spillway_sdk::sql::{BatchOutcome, Statement};
use spillway_sdk::{Outcome, Settlement, SinkRecord, TaskError};

/// The write in flight, if any, and the settlements of the current call.
#[derive(Default)]
pub struct Flight {
    current: Option<InFlight>,
    /// Records held by earlier calls that this call settled.
    settled: Vec<Settlement>,
}

/// A write begun in the host.
struct InFlight {
    pending: Box<dyn Pending>,
    /// The records held for it: their index in their batch, and their id.
    held: Vec<(usize, u64)>,
    /// Their outcomes (by index in their batch), as they are settled.
    outcomes: Outcomes,
    write: Write,
}

/// What a write in flight writes, kept to write it again without the rows
/// the database refused.
enum Write {
    /// One `execute-batch`: the chunks' statements, which hold the bound
    /// rows' parameters meanwhile.
    Batch { bound: Vec<Bound>, chunks: Vec<Chunk>, statements: Vec<Statement> },
    /// One `copy-in`.
    Copy(Group),
}

impl Flight {
    /// Whether a write is in flight.
    pub fn is_empty(&self) -> bool {
        self.current.is_none()
    }

    /// The settlements made since the last call of this, for the call's
    /// report.
    pub fn take_settled(&mut self) -> Vec<Settlement> {
        std::mem::take(&mut self.settled)
    }

    /// Begins the chunks' statements as one `execute-batch` in the host and
    /// holds the records of `batch` that `outcomes` has not settled (those
    /// the statements write). Nothing may be in flight.
    pub fn begin_batch(
        &mut self,
        db: &mut dyn Db,
        sql: &Sql,
        mut bound: Vec<Bound>,
        chunks: Vec<Chunk>,
        batch: &[SinkRecord],
        outcomes: &mut Outcomes,
    ) -> Result<(), TaskError> {
        let statements: Vec<Statement> = chunks.iter().map(|c| write::statement(sql, &mut bound, c)).collect();
        let pending = db.begin_batch(&statements)?;
        self.hold(pending, Write::Batch { bound, chunks, statements }, batch, outcomes);
        Ok(())
    }

    /// Begins one `copy-in` of the group in the host, as
    /// [`Flight::begin_batch`] begins a batch.
    pub fn begin_copy(
        &mut self,
        db: &mut dyn Db,
        group: Group,
        batch: &[SinkRecord],
        outcomes: &mut Outcomes,
    ) -> Result<(), TaskError> {
        let pending = db.begin_copy_in(&group.layout.catalog, &group.layout.columns, &group.rows)?;
        self.hold(pending, Write::Copy(group), batch, outcomes);
        Ok(())
    }

    fn hold(&mut self, pending: Box<dyn Pending>, write: Write, batch: &[SinkRecord], outcomes: &mut Outcomes) {
        debug_assert!(self.current.is_none(), "a write begun while another is in flight");
        let held = outcomes.hold_rest().into_iter().map(|i| (i, batch[i].id)).collect();
        self.current = Some(InFlight { pending, held, outcomes: Outcomes::new(batch.len()), write });
    }

    /// Waits for the write in flight, if any, and settles its records (see
    /// [`Flight::take_settled`]): accepted once it committed; when the
    /// database refused a row, that record rejected and the others written
    /// again here, as a write made on the spot does. `Ok(None)`: nothing is
    /// in flight any more. `Ok(Some(reason))`: the write failed retriably,
    /// its records not written are `Retry(reason)`, and nothing written
    /// after it may go to the database in this call (a later record of the
    /// same key would overtake one to be retried). `Err`: a fatal error (the
    /// records settled before it, if any, are settled exactly), or the
    /// call's time ran out with the write still going (retriable, nothing
    /// settled: it stays in flight for the next call).
    pub fn settle(&mut self, db: &mut dyn Db, sql: &Sql) -> Result<Option<String>, TaskError> {
        let Some(mut flight) = self.current.take() else { return Ok(None) };
        let ended = flight.pending.wait();
        if ended.is_err() && flight.pending.running() {
            self.current = Some(flight);
            return ended.map(|_| None);
        }
        let InFlight { held, mut outcomes, write, .. } = flight;
        let written = match (ended, write) {
            (Err(error), _) => Err(error),
            (Ok(BatchOutcome::Committed(_)), Write::Batch { bound, chunks, .. }) => {
                write::accept(&bound, &chunks, &mut outcomes);
                Ok(None)
            }
            (Ok(BatchOutcome::Committed(_)), Write::Copy(group)) => {
                for &record in &group.records {
                    outcomes.settle(record, Outcome::Accept);
                }
                Ok(None)
            }
            (Ok(BatchOutcome::RowFailed(failure)), Write::Batch { mut bound, chunks, statements }) => {
                for (statement, chunk) in statements.into_iter().zip(&chunks) {
                    write::give_back(statement, &mut bound, chunk);
                }
                write::write_batch(db, sql, &mut bound, chunks, &mut outcomes, Some(failure)).map(|()| None)
            }
            (Ok(BatchOutcome::RowFailed(failure)), Write::Copy(group)) => {
                write::write_copies(db, vec![group], &mut outcomes, Some(failure))
            }
        };
        let fatal = match written {
            Ok(fatal) => fatal,
            Err(TaskError::Retriable(why)) => {
                spillway_sdk::log::warn(&format!("a batch written in the background failed: {why}"));
                // Rejected rows stay rejected: the database refused them.
                let reason = format!("not written: {why}");
                for &(i, _) in &held {
                    if !outcomes.is_settled(i) {
                        outcomes.settle(i, Outcome::Retry(reason.clone()));
                    }
                }
                None
            }
            Err(fatal) => return Err(fatal),
        };
        let mut retry = None;
        for (i, id) in held {
            let outcome = outcomes.take(i);
            if let (None, Outcome::Retry(why)) = (&retry, &outcome) {
                retry = Some(why.clone());
            }
            self.settled.push(Settlement { id, outcome });
        }
        match fatal {
            Some(error) => Err(error),
            None => Ok(retry),
        }
    }
}
