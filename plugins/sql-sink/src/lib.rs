//! The SQL sink: Kafka records into rows of a granted PostgreSQL,
//! MySQL/MariaDB or SQLite database, as Confluent's JDBC sink writes them
//! (its configuration keys, insert / upsert / update modes, primary keys
//! from the record, tombstones as deletes, tables created and evolved),
//! through the `sql` capability.
//!
//! Each `put` is written before it returns: records become rows
//! ([`rows`]), rows are bound to their columns' types ([`bind`]), and the
//! batch goes to the database in one transaction ([`write`]): records are
//! `Accept` once it committed. A record that cannot become a row, or that
//! the database refuses, is rejected with the reason; the rest are written.
//! See the README for the whole behaviour.

pub mod bind;
pub mod config;
pub mod db;
pub mod dialect;
pub mod rows;
pub mod tables;
pub mod write;

use config::Settings;
use db::{Db, GrantedDb};
use dialect::Sql;
use rows::{Op, Row};
use spillway_sdk::data::Type;
use spillway_sdk::sql::{Database, Dialect};
use spillway_sdk::{
    Config, ConfigError, FlushScope, Outcome, PluginMetadata, PutReport, Settlement, Sink, SinkRecord, TaskError,
};
use tables::{TableInfo, Tables};
use write::{Bound, Outcomes};

pub struct SqlSink {
    settings: Settings,
    db: Box<dyn Db>,
    sql: Sql,
    tables: Tables,
    /// A fatal error met after part of a batch was committed: that batch's
    /// records were settled exactly, and the next call fails the task.
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

    fn validate(config: &Config) -> Vec<ConfigError> {
        Settings::parse(config).err().unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let settings = Settings::parse(&config).map_err(|errors| {
            let all: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.key, e.message)).collect();
            TaskError::Fatal(format!("invalid configuration: {}", all.join("; ")))
        })?;
        let database = Database::open(&settings.grant)?;
        Ok(SqlSink::with_db(settings, Box::new(GrantedDb(database))))
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        if let Some(error) = self.failed.take() {
            return Err(error);
        }
        let result = self.write(&batch);
        if result.is_err() {
            // The table may have changed under the sink: describe it again.
            self.tables.forget();
        }
        result
    }

    fn flush(&mut self, _scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        // Every put is written before it returns: nothing is held.
        match self.failed.take() {
            Some(error) => Err(error),
            None => Ok(Vec::new()),
        }
    }
}

impl SqlSink {
    /// A sink on any database (tests use a fake).
    pub fn with_db(settings: Settings, db: Box<dyn Db>) -> SqlSink {
        let sql = Sql::new(db.dialect(), settings.quote);
        SqlSink { settings, db, sql, tables: Tables::default(), failed: None }
    }

    fn write(&mut self, batch: &[SinkRecord]) -> Result<PutReport, TaskError> {
        let mut outcomes = Outcomes::new(batch.len());
        let mut rows: Vec<(usize, Row)> = Vec::with_capacity(batch.len());
        for (i, record) in batch.iter().enumerate() {
            match rows::build(&self.settings, record) {
                Ok(row) => rows.push((i, row)),
                Err(reason) => outcomes.settle(i, Outcome::Reject(reason)),
            }
        }

        // Tables in the order first seen, each created or evolved for its rows.
        let mut names: Vec<&str> = Vec::new();
        for (_, row) in &rows {
            if !names.contains(&row.table.as_str()) {
                names.push(&row.table);
            }
        }
        for name in names {
            let of_table: Vec<&Row> = rows.iter().map(|(_, r)| r).filter(|r| r.table == name).collect();
            self.tables.prepare(self.db.as_mut(), &self.sql, &self.settings, name, &of_table)?;
        }

        let mut bound = Vec::with_capacity(rows.len());
        for (i, row) in &rows {
            let result = match self.tables.get(&row.table) {
                Some(info) => bind_row(*i, row, info, &self.sql),
                None => Err(format!(
                    "table {} does not exist, and no field of the record has a type to create a column from",
                    row.table
                )),
            };
            match result {
                Ok(Some(b)) => bound.push(b),
                // An update with nothing to set changes nothing.
                Ok(None) => outcomes.settle(*i, Outcome::Accept),
                Err(reason) => outcomes.settle(*i, Outcome::Reject(reason)),
            }
        }

        if bound.is_empty() {
            // Every record was rejected, or was an update with nothing to set.
        } else if self.sql.dialect == Dialect::Postgres && bound.iter().all(|b| b.op == Op::Insert) {
            // Plain inserts only: appended with COPY, a transaction per table.
            // (Elsewhere the host's copy-in is an INSERT per row; multi-row
            // INSERTs in one batch are faster there.)
            self.failed = write::write_copies(self.db.as_mut(), &bound, &mut outcomes)?;
        } else {
            let chunks: Vec<write::Chunk> = write::runs(&bound)
                .into_iter()
                .flat_map(|run| write::chunks(&bound, run, self.settings.batch_size))
                .collect();
            write::write_batch(self.db.as_mut(), &self.sql, &bound, chunks, &mut outcomes)?;
        }
        Ok(outcomes.into_report())
    }
}

/// A row's cells as parameters of their columns (catalogue names). A field
/// only ever seen null, whose column does not exist, is left out. None
/// for an update with nothing to set.
pub fn bind_row(record: usize, row: &Row, info: &TableInfo, sql: &Sql) -> Result<Option<Bound>, String> {
    let mut b = Bound {
        record,
        table: row.table.clone(),
        catalog: info.catalog.clone(),
        op: row.op,
        key_cols: Vec::with_capacity(row.key.len()),
        val_cols: Vec::with_capacity(row.values.len()),
        key: Vec::with_capacity(row.key.len()),
        vals: Vec::with_capacity(row.values.len()),
    };
    for (i, cell) in row.cells().enumerate() {
        let Some(column) = info.column(&cell.name) else {
            if cell.schema.ty == Type::Null {
                continue;
            }
            return Err(format!("table {} has no column for field '{}'", row.table, cell.name));
        };
        if b.key_cols.contains(&column.name) || b.val_cols.contains(&column.name) {
            return Err(format!("two fields go to column {} of table {}", column.name, row.table));
        }
        let kind = bind::kind(sql.dialect, &column.data_type);
        let value = bind::bind(&cell.data, kind).map_err(|e| {
            format!(
                "field '{}' ({}) cannot go into column {} ({}) of table {}: {e}",
                cell.name,
                describe(&cell.schema),
                column.name,
                column.data_type,
                row.table
            )
        })?;
        if i < row.key.len() {
            b.key_cols.push(column.name.clone());
            b.key.push(value);
        } else {
            b.val_cols.push(column.name.clone());
            b.vals.push(value);
        }
    }
    if b.op == Op::Update && b.vals.is_empty() {
        return Ok(None);
    }
    if b.key.is_empty() && b.vals.is_empty() {
        return Err(format!("no field of the record has a column in table {}", row.table));
    }
    Ok(Some(b))
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
