//! The few database operations the sink uses, behind a trait: the granted
//! [`Database`] in a plugin, a fake in native tests (where the host's
//! imports cannot be called).

use spillway_sdk::TaskError;
use spillway_sdk::sql::{BatchOutcome, Column, Database, Dialect, PendingBatch, Statement, Value};

pub trait Db {
    fn dialect(&self) -> Dialect;
    /// Runs the statements in one transaction.
    fn execute_batch(&mut self, statements: &[Statement]) -> Result<BatchOutcome, TaskError>;
    /// Starts [`Db::execute_batch`] in the host and returns at once. One
    /// batch runs at a time, in the order begun; this waits for the batch
    /// before it, if it still runs.
    fn begin_batch(&mut self, statements: &[Statement]) -> Result<Box<dyn Pending>, TaskError>;
    /// Runs one statement on its own (DDL).
    fn execute(&mut self, sql: &str) -> Result<u64, TaskError>;
    /// Appends rows to a table in one transaction; `table` and `columns`
    /// are plain names, quoted by the host.
    fn copy_in(&mut self, table: &str, columns: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError>;
    /// Starts [`Db::copy_in`] as [`Db::begin_batch`] starts a batch.
    fn begin_copy_in(
        &mut self,
        table: &str,
        columns: &[String],
        rows: &[Vec<Value>],
    ) -> Result<Box<dyn Pending>, TaskError>;
    /// A table's columns, none when it does not exist.
    fn describe_table(&mut self, table: &str) -> Result<Option<Vec<Column>>, TaskError>;
}

/// A write begun with [`Db::begin_batch`] or [`Db::begin_copy_in`].
pub trait Pending {
    /// Waits for the write to end, as long as the plugin call allows, and
    /// says how it ended. Past the call's time, a retriable error with
    /// [`Pending::running`] true: the write goes on, and a later call waits
    /// again.
    fn wait(&mut self) -> Result<BatchOutcome, TaskError>;
    /// Whether the last [`Pending::wait`]'s error is the call's time running
    /// out with the write still going, rather than how the write ended.
    fn running(&self) -> bool;
}

/// The database granted to the connector.
pub struct GrantedDb(pub Database);

impl Db for GrantedDb {
    fn dialect(&self) -> Dialect {
        self.0.dialect()
    }
    fn execute_batch(&mut self, statements: &[Statement]) -> Result<BatchOutcome, TaskError> {
        self.0.execute_batch(statements)
    }
    fn begin_batch(&mut self, statements: &[Statement]) -> Result<Box<dyn Pending>, TaskError> {
        let batch = self.0.begin_batch(statements)?;
        Ok(Box::new(Granted { batch, running: false }))
    }
    fn execute(&mut self, sql: &str) -> Result<u64, TaskError> {
        self.0.execute(sql, &[])
    }
    fn copy_in(&mut self, table: &str, columns: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError> {
        self.0.copy_in(table, columns, rows)
    }
    fn begin_copy_in(
        &mut self,
        table: &str,
        columns: &[String],
        rows: &[Vec<Value>],
    ) -> Result<Box<dyn Pending>, TaskError> {
        let batch = self.0.begin_copy_in(table, columns, rows)?;
        Ok(Box::new(Granted { batch, running: false }))
    }
    fn describe_table(&mut self, table: &str) -> Result<Option<Vec<Column>>, TaskError> {
        self.0.describe_table(table)
    }
}

/// A batch running in the host.
struct Granted {
    batch: PendingBatch,
    running: bool,
}

impl Pending for Granted {
    fn wait(&mut self) -> Result<BatchOutcome, TaskError> {
        let waited = self.batch.wait();
        // A retriable error is either the call's time running out or how
        // the batch ended: `ready` tells them apart (and catches a batch
        // that ended just after the wait gave up).
        let ended = match waited {
            Err(TaskError::Retriable(why)) => match self.batch.ready() {
                None => {
                    self.running = true;
                    return Err(TaskError::Retriable(why));
                }
                Some(ended) => ended,
            },
            ended => ended,
        };
        self.running = false;
        ended
    }
    fn running(&self) -> bool {
        self.running
    }
}
