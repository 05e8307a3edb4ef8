//! SQL databases the operator granted (`spillway:sql`).
//!
//! A plugin opens a database by the name of its grant, never by a URL or
//! credentials: with `plugin.grant.sql.db.url=postgres://127.0.0.1:5432/app`
//! (and `.user`, `.password`) in the connector config, `Database::open("db")`
//! reaches that database through a pool of connections in the host, and the
//! plugin never sees a credential. [`Database::dialect`] says which SQL it
//! speaks (PostgreSQL, MySQL/MariaDB or SQLite): placeholders (`$1` or `?`),
//! identifier quoting and upsert syntax follow it.
//!
//! Statements carry bound parameters ([`Value`]), typed as the column
//! expects them: `json`, `uuid`, `decimal`, `date`, `time` and `timestamp`
//! have variants of their own. [`Database::execute_batch`] runs several
//! [`Statement`]s (each prepared once, run once per parameter row) in one
//! transaction; a row the database refuses is a [`BatchOutcome::RowFailed`]
//! ([`RowFailure`] says which statement, and which row when the database
//! said), not an error. [`Database::copy_in`] appends rows in bulk
//! (PostgreSQL's `COPY`), [`Database::describe_table`] reads a table's
//! [`Column`]s from the catalogue, and [`Database::query`] returns [`Rows`].
//!
//! [`Database::begin_batch`] and [`Database::begin_copy_in`] start the same
//! writes in the host and return a [`PendingBatch`] at once, so that the
//! plugin works on (say, turns its next records into rows) while the
//! database writes: [`PendingBatch::wait`] (bounded by the plugin call: past
//! it, a retriable error and the batch goes on) or [`PendingBatch::ready`]
//! tells how it ended. One batch runs at a time per database, in the order
//! begun, and any other write waits for it.
//!
//! Errors are the one [`TaskError`](crate::TaskError) classification, so `?`
//! in `put` turns a lost connection or a deadlock into a retry of the batch
//! and a refused statement into a failed task. A plugin that calls nothing
//! here does not import the capability and needs no grant for it.

pub use crate::__private::bindings::spillway::sql::databases::{
    BatchOutcome, Column, Database, Dialect, PendingBatch, RowFailure, Rows, Statement, Value,
};
