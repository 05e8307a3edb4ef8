//! The few database operations the sink uses, behind a trait: the granted
//! [`Database`] in a plugin, a fake in native tests (where the host's
//! imports cannot be called).

use spillway_sdk::TaskError;
use spillway_sdk::sql::{BatchOutcome, Column, Database, Dialect, Statement, Value};

pub trait Db {
    fn dialect(&self) -> Dialect;
    /// Runs the statements in one transaction.
    fn execute_batch(&mut self, statements: &[Statement]) -> Result<BatchOutcome, TaskError>;
    /// Runs one statement on its own (DDL).
    fn execute(&mut self, sql: &str) -> Result<u64, TaskError>;
    /// Appends rows to a table in one transaction; `table` and `columns`
    /// are plain names, quoted by the host.
    fn copy_in(&mut self, table: &str, columns: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError>;
    /// A table's columns, none when it does not exist.
    fn describe_table(&mut self, table: &str) -> Result<Option<Vec<Column>>, TaskError>;
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
    fn execute(&mut self, sql: &str) -> Result<u64, TaskError> {
        self.0.execute(sql, &[])
    }
    fn copy_in(&mut self, table: &str, columns: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError> {
        self.0.copy_in(table, columns, rows)
    }
    fn describe_table(&mut self, table: &str) -> Result<Option<Vec<Column>>, TaskError> {
        self.0.describe_table(table)
    }
}
