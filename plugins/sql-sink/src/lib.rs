//! The SQL sink: Kafka records into rows of a granted PostgreSQL,
//! MySQL/MariaDB or SQLite database, as Confluent's JDBC sink writes them
//! (its configuration keys, insert / upsert / update modes, primary keys
//! from the record, tombstones as deletes, tables created and evolved),
//! through the `sql` capability.
//!
//! In a `put`, records become rows ([`rows`]; plain JSON objects straight
//! from their bytes, [`plain`]) and rows are bound to their columns' types
//! ([`bind`]; where each field goes is worked out once for a run of rows
//! with the same fields); then the batch goes to the database in one
//! transaction ([`write`]). Write-behind ([`flight`]): when that write is
//! one capability call, it is begun in the host and the records are
//! `Hold`, so that the database writes while the next `put`'s records
//! become rows; the next call (`put`, `put([])` or `flush`) waits for it
//! and settles them, `Accept` once it committed, before anything of a later
//! batch is written. One write is in flight at a time. A record that cannot
//! become a row, or that the database refuses, is rejected with the
//! reason; the rest are written. See the README for the whole behaviour.

pub mod bind;
pub mod config;
pub mod db;
pub mod dialect;
pub mod flight;
pub mod plain;
pub mod rows;
pub mod tables;
pub mod write;

use config::Settings;
use db::{Db, GrantedDb};
use dialect::Sql;
use flight::Flight;
use rows::{Cell, Op, Row};
use spillway_sdk::data::Type;
use spillway_sdk::sql::{Database, Dialect};
use spillway_sdk::{
    Config, ConfigError, ConnectNames, FlushScope, Outcome, PluginMetadata, PutReport, Settlement, Sink, SinkRecord,
    TaskError,
};
use std::rc::Rc;
use tables::{Prepared, TableInfo, Tables};
use write::{Bound, Layout, Outcomes};

pub struct SqlSink {
    settings: Settings,
    db: Box<dyn Db>,
    sql: Sql,
    tables: Tables,
    /// The write in flight, begun by the last `put`.
    flight: Flight,
    /// A fatal error met after records were settled (part of a batch
    /// committed, or held records settled): they were settled exactly in
    /// that call, and the next call fails the task.
    failed: Option<TaskError>,
}

impl Sink for SqlSink {
    fn metadata() -> PluginMetadata {
        config::keys().into_iter().fold(
            PluginMetadata::new(
                "sql-sink",
                env!("CARGO_PKG_VERSION"),
                "Writes records as rows of a granted PostgreSQL, MySQL/MariaDB or SQLite database: inserts, \
                 idempotent upserts, updates and deletes, with tables created and evolved, as Confluent's JDBC \
                 sink does.",
            ),
            PluginMetadata::key,
        )
    }

    /// Confluent's and Debezium's JDBC sinks: their classes, and the keys of
    /// the database and its user, which become the SQL grant `db` (the
    /// default `sql.grant`); a JDBC URL is read as the database's own.
    /// Confluent's `max.retries` is the grant's retries.
    fn connect_names() -> ConnectNames {
        let grant = |names: ConnectNames, key: &str, setting: &str| names.grant(key, "sql", "db", setting, "{}");
        let names = ConnectNames::default()
            .class("io.confluent.connect.jdbc.JdbcSinkConnector")
            .class("io.debezium.connector.jdbc.JdbcSinkConnector");
        let names = grant(names, "connection.url", "url");
        let names = grant(names, "connection.user", "user");
        let names = grant(names, "connection.username", "user");
        let names = grant(names, "connection.password", "password");
        grant(names, "max.retries", "retries")
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        Settings::parse(config).err().unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let settings = Settings::parse(&config)?;
        let database = Database::open(&settings.grant)?;
        Ok(SqlSink::with_db(settings, Box::new(GrantedDb(database))))
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        let result = self.write(&batch);
        let settled = self.flight.take_settled();
        match result {
            Ok(mut report) => {
                report.settled = settled;
                Ok(report)
            }
            Err(error) => {
                // Nothing of the batch was written: it is delivered again.
                let reason = self.after_error(error, &settled)?;
                Ok(PutReport { settled, ..retry_all(&batch, reason) })
            }
        }
    }

    fn flush(&mut self, _scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        // Every scope: only the write in flight holds records.
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        let result = self.flight.settle(self.db.as_mut(), &self.sql);
        let settled = self.flight.take_settled();
        match result {
            Ok(None) => {}
            Ok(Some(_retry)) => self.tables.forget(),
            Err(error) => {
                self.after_error(error, &settled)?;
            }
        }
        Ok(settled)
    }
}

impl SqlSink {
    /// A sink on any database (tests use a fake).
    pub fn with_db(settings: Settings, db: Box<dyn Db>) -> SqlSink {
        let sql = Sql::new(db.dialect(), settings.quote);
        SqlSink { settings, db, sql, tables: Tables::default(), flight: Flight::default(), failed: None }
    }

    /// After an error of a call that wrote nothing of its batch: when the
    /// call settled nothing, the error, which fails the call as a whole.
    /// Otherwise the settlements must reach the host: the call returns them,
    /// its batch is `Retry` with the reason returned here, and a fatal error
    /// fails the task on the next call.
    fn after_error(&mut self, error: TaskError, settled: &[Settlement]) -> Result<String, TaskError> {
        // The table may have changed under the sink: describe it again.
        self.tables.forget();
        if settled.is_empty() {
            return Err(error);
        }
        let reason = match &error {
            TaskError::Retriable(why) | TaskError::Fatal(why) => format!("not written: {why}"),
        };
        if let TaskError::Fatal(_) = error {
            self.failed = Some(error);
        }
        Ok(reason)
    }

    fn write(&mut self, batch: &[SinkRecord]) -> Result<PutReport, TaskError> {
        let mut outcomes = Outcomes::new(batch.len());
        let mut rows: Vec<(usize, Row)> = Vec::with_capacity(batch.len());
        // The last topic's table: a batch is mostly runs of one topic.
        let mut table: Option<(&str, Rc<str>)> = None;
        for (i, record) in batch.iter().enumerate() {
            let name = match &table {
                Some((topic, name)) if *topic == record.topic => Rc::clone(name),
                _ => {
                    let name: Rc<str> = self.settings.table_for(&record.topic).into();
                    table = Some((&record.topic, Rc::clone(&name)));
                    name
                }
            };
            match rows::build(&self.settings, record, name) {
                Ok(row) => rows.push((i, row)),
                Err(reason) => outcomes.settle(i, Outcome::Reject(reason)),
            }
        }

        // Tables in the order first seen, each created or evolved for its rows.
        let mut names: Vec<&str> = Vec::new();
        for (_, row) in &rows {
            if !names.contains(&&*row.table) {
                names.push(&row.table);
            }
        }
        // DDL is a write: while a write is in flight, it waits until that
        // one is settled (its refused rows found and the rest written).
        let mut altered = false;
        for name in names {
            let of_table: Vec<&Row> = rows.iter().map(|(_, r)| r).filter(|r| *r.table == *name).collect();
            let (db, sql, settings) = (self.db.as_mut(), &self.sql, &self.settings);
            let mut prepared = self.tables.prepare(db, sql, settings, name, &of_table, self.flight.is_empty())?;
            if prepared == Prepared::NeedsDdl {
                if let Some(reason) = self.flight.settle(self.db.as_mut(), &self.sql)? {
                    self.tables.forget();
                    return Ok(retry_all(batch, reason));
                }
                prepared = self.tables.prepare(self.db.as_mut(), &self.sql, &self.settings, name, &of_table, true)?;
            }
            altered |= prepared == Prepared::Altered;
        }

        let mut bound = Vec::with_capacity(rows.len());
        let mut plan: Option<Plan> = None;
        for (i, row) in rows {
            if !plan.as_ref().is_some_and(|p| p.fits(&row)) {
                plan = self.tables.get(&row.table).map(|info| Plan::new(&row, info));
            }
            let result = match &plan {
                Some(plan) => bind_row(i, row, plan),
                None => Err(format!(
                    "table {} does not exist, and no field of the record has a type to create a column from",
                    row.table
                )),
            };
            match result {
                Ok(Some(b)) => bound.push(b),
                // An update with nothing to set changes nothing.
                Ok(None) => outcomes.settle(i, Outcome::Accept),
                Err(reason) => outcomes.settle(i, Outcome::Reject(reason)),
            }
        }

        // The batch is ready: now the write in flight ends before any of it
        // is written.
        if let Some(reason) = self.flight.settle(self.db.as_mut(), &self.sql)? {
            // Records of this batch may follow its records to be retried:
            // they are delivered again with them, in order.
            self.tables.forget();
            return Ok(retry_all(batch, reason));
        }

        // Written in the background (the records held) when the write is one
        // capability call and no DDL ran; otherwise here, before returning.
        let db = self.db.as_mut();
        if bound.is_empty() {
            // Every record was rejected, or was an update with nothing to set.
        } else if self.sql.dialect == Dialect::Postgres && bound.iter().all(|b| b.op == Op::Insert) {
            // Plain inserts only: appended with COPY, a transaction per table.
            // (Elsewhere the host's copy-in is an INSERT per row; multi-row
            // INSERTs in one batch are faster there.)
            let mut groups = write::copy_groups(&mut bound);
            if groups.len() == 1 && !altered {
                let group = groups.pop().expect("one group");
                self.flight.begin_copy(db, group, batch, &mut outcomes)?;
            } else {
                self.failed = write::write_copies(db, groups, &mut outcomes, None)?;
            }
        } else {
            let chunks: Vec<write::Chunk> = write::runs(&bound)
                .into_iter()
                .flat_map(|run| write::chunks(&bound, run, self.settings.batch_size))
                .collect();
            if altered {
                write::write_batch(db, &self.sql, &mut bound, chunks, &mut outcomes, None)?;
            } else {
                self.flight.begin_batch(db, &self.sql, bound, chunks, batch, &mut outcomes)?;
            }
        }
        Ok(outcomes.into_report())
    }
}

/// Every record of the batch `Retry`: none was written.
fn retry_all(batch: &[SinkRecord], reason: String) -> PutReport {
    PutReport { outcomes: vec![Outcome::Retry(reason); batch.len()], settled: Vec::new() }
}

/// Where the cells of a row go in its table, worked out once for
/// consecutive rows of a table with the same fields (most of a batch).
pub struct Plan<'t> {
    info: &'t TableInfo,
    /// The fields it was made for, in order, and how many are the key's.
    fields: Vec<String>,
    key_cells: usize,
    /// Each field's column.
    targets: Vec<Target>,
    layout: Rc<Layout>,
}

#[derive(Clone, Copy)]
enum Target {
    Column(usize),
    /// The table has no column of the field's name: a null is left out,
    /// anything else rejects the row.
    Missing,
    /// An earlier field went to this column.
    Taken(usize),
}

impl<'t> Plan<'t> {
    /// The plan for rows like `row` in the table `info` describes.
    pub fn new(row: &Row, info: &'t TableInfo) -> Self {
        let mut targets = Vec::with_capacity(row.key.len() + row.values.len());
        let mut columns: Vec<String> = Vec::with_capacity(targets.capacity());
        let mut key_len = 0;
        for (i, cell) in row.cells().enumerate() {
            targets.push(match info.index(&cell.name) {
                None => Target::Missing,
                Some(c) if columns.contains(&info.columns[c].name) => Target::Taken(c),
                Some(c) => {
                    columns.push(info.columns[c].name.clone());
                    key_len += usize::from(i < row.key.len());
                    Target::Column(c)
                }
            });
        }
        Plan {
            info,
            fields: row.cells().map(|c| c.name.to_string()).collect(),
            key_cells: row.key.len(),
            targets,
            layout: Rc::new(Layout { table: row.table.to_string(), catalog: info.catalog.clone(), columns, key_len }),
        }
    }

    /// Whether the row has the table and fields the plan was made for.
    pub fn fits(&self, row: &Row) -> bool {
        *self.layout.table == *row.table
            && self.key_cells == row.key.len()
            && self.fields.len() == row.key.len() + row.values.len()
            && self.fields.iter().zip(row.cells()).all(|(f, c)| *f == c.name)
    }
}

/// A row's cells as parameters of their columns, as its plan says. A field
/// only ever seen null, whose column does not exist, is left out. None for
/// an update with nothing to set.
pub fn bind_row(record: usize, row: Row, plan: &Plan) -> Result<Option<Bound>, String> {
    let Row { table, op, key, values } = row;
    let info = plan.info;
    let mut params = Vec::with_capacity(plan.layout.columns.len());
    for (cell, &target) in key.into_iter().chain(values).zip(&plan.targets) {
        let c = match target {
            Target::Column(c) => c,
            Target::Missing if cell.schema.ty == Type::Null => continue,
            Target::Missing => return Err(format!("table {table} has no column for field '{}'", cell.name)),
            Target::Taken(c) => {
                return Err(format!("two fields go to column {} of table {table}", info.columns[c].name));
            }
        };
        let Cell { name, schema, data } = cell;
        let value = bind::bind_owned(data, info.kinds[c]).map_err(|e| {
            let column = &info.columns[c];
            format!(
                "field '{name}' ({}) cannot go into column {} ({}) of table {table}: {e}",
                describe(&schema),
                column.name,
                column.data_type,
            )
        })?;
        params.push(value);
    }
    let key_len = plan.layout.key_len;
    if op == Op::Update && params.len() == key_len {
        return Ok(None);
    }
    if params.is_empty() {
        return Err(format!("no field of the record has a column in table {table}"));
    }
    Ok(Some(Bound { record, op, layout: Rc::clone(&plan.layout), params }))
}

/// A schema for messages: `int64`, `Date`, `Decimal(2)`, ...
fn describe(schema: &spillway_sdk::data::Schema) -> String {
    use spillway_sdk::data::Logical;
    match schema.logical() {
        Some(Logical::Date) => "Date".into(),
        Some(Logical::Time) => "Time".into(),
        Some(Logical::Timestamp) => "Timestamp".into(),
        Some(Logical::Decimal { scale, .. }) => format!("Decimal({scale})"),
        None => schema.ty.name().into(),
    }
}

spillway_sdk::export_sink!(SqlSink);

#[cfg(test)]
mod tests;
