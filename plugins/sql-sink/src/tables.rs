//! What the sink knows of its tables: their columns from `describe-table`,
//! cached per table and read again after DDL; missing tables created
//! (`auto.create`) and missing columns added (`auto.evolve`).

use crate::bind::{self, Kind};
use crate::config::{Settings, check_table_name};
use crate::db::Db;
use crate::dialect::{ColumnDef, Sql};
use crate::rows::Row;
use spillway_sdk::TaskError;
use spillway_sdk::data::Type;
use spillway_sdk::sql::{Column, Dialect};
use std::collections::HashMap;

/// A table as the catalogue has it.
#[derive(Clone, Debug)]
pub struct TableInfo {
    /// The name the catalogue knows it by (what `describe-table` and
    /// `copy-in` take).
    pub catalog: String,
    pub columns: Vec<Column>,
    /// What each column holds, from its type: read once, not per value.
    pub kinds: Vec<Kind>,
    /// Columns by name, and by lower-case name when only one has it.
    exact: HashMap<String, usize>,
    folded: HashMap<String, Option<usize>>,
}

impl TableInfo {
    pub fn new(dialect: Dialect, catalog: String, columns: Vec<Column>) -> Self {
        let kinds = columns.iter().map(|c| bind::kind(dialect, &c.data_type)).collect();
        let mut exact = HashMap::with_capacity(columns.len());
        let mut folded: HashMap<String, Option<usize>> = HashMap::with_capacity(columns.len());
        for (i, column) in columns.iter().enumerate() {
            exact.insert(column.name.clone(), i);
            folded.entry(column.name.to_lowercase()).and_modify(|seen| *seen = None).or_insert(Some(i));
        }
        TableInfo { catalog, columns, kinds, exact, folded }
    }

    /// The index of a field's column: the same name, else the one column
    /// whose name differs only in case (a database that folded an unquoted
    /// name).
    pub fn index(&self, name: &str) -> Option<usize> {
        match self.exact.get(name) {
            Some(&i) => Some(i),
            None => *self.folded.get(&name.to_lowercase())?,
        }
    }

    /// The column of a field (see [`TableInfo::index`]).
    pub fn column(&self, name: &str) -> Option<&Column> {
        self.index(name).map(|i| &self.columns[i])
    }
}

/// What [`Tables::prepare`] found or did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// The table has what its rows need (or cannot be created yet: none of
    /// their fields has a type); nothing was changed.
    Ready,
    /// It was created, or given columns: DDL ran.
    Altered,
    /// It needs DDL, which the call did not allow: nothing was changed.
    NeedsDdl,
}

#[derive(Default)]
pub struct Tables {
    cache: HashMap<String, TableInfo>,
}

impl Tables {
    /// The table `name` (as `table.name.format` gives it), if it is known to exist.
    pub fn get(&self, name: &str) -> Option<&TableInfo> {
        self.cache.get(name)
    }

    /// Forgets every table: the next use describes it again.
    pub fn forget(&mut self) {
        self.cache.clear();
    }

    /// Makes sure `table` exists and has a column for every cell of `rows`
    /// (those with a type), creating or altering it as the settings allow.
    /// A table none of whose fields has a type yet (plain JSON that was
    /// only null) is left missing: its rows are rejected. With `ddl` false,
    /// only reads: a table that needs DDL is [`Prepared::NeedsDdl`] (the
    /// settings' refusal of it is an error all the same).
    pub fn prepare(
        &mut self,
        db: &mut dyn Db,
        sql: &Sql,
        settings: &Settings,
        table: &str,
        rows: &[&Row<'_>],
        ddl: bool,
    ) -> Result<Prepared, TaskError> {
        check_table_name(table, settings.quote)
            .map_err(|e| TaskError::Fatal(format!("table.name.format gives no usable table name: {e}")))?;
        let catalog = catalog_name(sql, table);
        let mut altered = false;
        if !self.cache.contains_key(table) {
            match db.describe_table(&catalog)? {
                Some(columns) => {
                    self.cache.insert(table.to_string(), TableInfo::new(sql.dialect, catalog.clone(), columns));
                }
                None => {
                    if !settings.auto_create {
                        return Err(TaskError::Fatal(format!(
                            "table {table} does not exist: create it, or set auto.create=true"
                        )));
                    }
                    let (columns, keys) = definitions(sql, rows);
                    if columns.is_empty() {
                        return Ok(Prepared::Ready);
                    }
                    if !ddl {
                        return Ok(Prepared::NeedsDdl);
                    }
                    let create = sql.create_table(table, &columns, &keys);
                    spillway_sdk::log::info(&format!("creating table {table}: {create}"));
                    let created = db.execute(&create);
                    // Another task may have created it first: what counts is
                    // that it exists now.
                    match db.describe_table(&catalog)? {
                        Some(columns) => {
                            self.cache.insert(table.to_string(), TableInfo::new(sql.dialect, catalog.clone(), columns));
                        }
                        None => {
                            return Err(created.err().unwrap_or_else(|| {
                                TaskError::Fatal(format!(
                                    "table {table} was created, but describe-table does not find {catalog}"
                                ))
                            }));
                        }
                    }
                    altered = true;
                }
            }
        }

        let info = &self.cache[table];
        let mut missing: Vec<ColumnDef> = Vec::new();
        let mut previous: Option<&Row<'_>> = None;
        for &row in rows {
            // Consecutive records mostly have the same fields: check those once.
            let same = previous.is_some_and(|p| typed_fields(p).eq(typed_fields(row)));
            previous = Some(row);
            if same {
                continue;
            }
            for (i, cell) in row.cells().enumerate() {
                let known = info.column(&cell.name).is_some()
                    || missing.iter().any(|m| m.name.eq_ignore_ascii_case(&cell.name));
                if known {
                    continue;
                }
                if let Some(ty) = sql.column_type(&cell.schema, i < row.key.len()) {
                    missing.push(ColumnDef { name: cell.name.to_string(), ty, not_null: false });
                }
            }
        }
        if missing.is_empty() {
            return Ok(if altered { Prepared::Altered } else { Prepared::Ready });
        }
        let names: Vec<&str> = missing.iter().map(|m| m.name.as_str()).collect();
        if !settings.auto_evolve {
            return Err(TaskError::Fatal(format!(
                "table {table} has no column for field(s) {}: add them, or set auto.evolve=true",
                names.join(", ")
            )));
        }
        if !ddl {
            return Ok(Prepared::NeedsDdl);
        }
        let mut failed = None;
        for column in &missing {
            let alter = sql.add_column(table, column);
            spillway_sdk::log::info(&format!("adding a column to {table}: {alter}"));
            if let Err(e) = db.execute(&alter) {
                // Perhaps another task added it first: the describe below says.
                failed = Some(e);
            }
        }
        let columns = db.describe_table(&catalog)?.unwrap_or_default();
        let info = TableInfo::new(sql.dialect, catalog, columns);
        let absent: Vec<&str> = names.iter().copied().filter(|n| info.column(n).is_none()).collect();
        self.cache.insert(table.to_string(), info);
        if !absent.is_empty() {
            return Err(failed.unwrap_or_else(|| {
                TaskError::Fatal(format!("table {table} still has no column {} after ALTER TABLE", absent.join(", ")))
            }));
        }
        Ok(Prepared::Altered)
    }
}

/// A row's field names, each with whether its type is known.
fn typed_fields<'r>(row: &'r Row<'_>) -> impl Iterator<Item = (&'r str, bool)> {
    row.cells().map(|c| (c.name.as_ref(), c.schema.ty != Type::Null))
}

/// The name to look a table up by: PostgreSQL folds unquoted names to
/// lower case.
fn catalog_name(sql: &Sql, table: &str) -> String {
    if !sql.quote && sql.dialect == Dialect::Postgres { table.to_ascii_lowercase() } else { table.to_string() }
}

/// The columns and primary key of a table for `rows`: the first row's key,
/// then every field with a type in the order first seen, NOT NULL when its
/// schema is required.
fn definitions(sql: &Sql, rows: &[&Row<'_>]) -> (Vec<ColumnDef>, Vec<String>) {
    let mut columns: Vec<ColumnDef> = Vec::new();
    let keys: Vec<String> =
        rows.first().map(|r| r.key.iter().map(|c| c.name.to_string()).collect()).unwrap_or_default();
    if let Some(first) = rows.first() {
        for cell in &first.key {
            if let Some(ty) = sql.column_type(&cell.schema, true) {
                columns.push(ColumnDef { name: cell.name.to_string(), ty, not_null: true });
            }
        }
    }
    for row in rows {
        for cell in &row.values {
            if cell.schema.ty == Type::Null || columns.iter().any(|c| c.name.eq_ignore_ascii_case(&cell.name)) {
                continue;
            }
            if let Some(ty) = sql.column_type(&cell.schema, keys.iter().any(|k| *k == cell.name)) {
                columns.push(ColumnDef { name: cell.name.to_string(), ty, not_null: !cell.schema.optional });
            }
        }
    }
    (columns, keys)
}
