//! Writing bound rows: consecutive runs of the same table, operation and
//! columns become statements (multi-row INSERTs and upserts, one prepared
//! UPDATE or DELETE over many rows), all of a put in one `execute-batch`
//! transaction; plain inserts go by `copy-in` instead. A row the database
//! refuses is found (by halving a statement's rows when the database does
//! not say which) and rejected, and the rest written again.

use crate::dialect::Sql;
use crate::rows::Op;
use spillway_sdk::sql::{BatchOutcome, RowFailure, Statement, Value};
use spillway_sdk::{Outcome, PutReport, TaskError};
use std::collections::{HashMap, VecDeque};
use std::ops::Range;

use crate::db::Db;

/// Most parameters one multi-row statement binds: below SQLite's 32766
/// and PostgreSQL's and MySQL's 65535.
pub const MAX_PARAMS: usize = 30_000;

/// A row ready to write: its columns (as the catalogue names them) and
/// their parameters.
#[derive(Clone, Debug)]
pub struct Bound {
    /// The record's index in the batch.
    pub record: usize,
    /// The table as `table.name.format` gives it (for SQL text).
    pub table: String,
    /// The table as the catalogue names it (for `copy-in`).
    pub catalog: String,
    pub op: Op,
    pub key_cols: Vec<String>,
    pub val_cols: Vec<String>,
    pub key: Vec<Value>,
    pub vals: Vec<Value>,
}

impl Bound {
    fn columns(&self) -> Vec<String> {
        self.key_cols.iter().chain(&self.val_cols).cloned().collect()
    }

    fn params(&self) -> impl Iterator<Item = Value> + '_ {
        self.key.iter().chain(&self.vals).cloned()
    }

    fn same_run(&self, other: &Bound) -> bool {
        self.table == other.table
            && self.op == other.op
            && self.key_cols == other.key_cols
            && self.val_cols == other.val_cols
    }

    /// The key's values, comparable.
    fn key_text(&self) -> String {
        format!("{:?}", self.key)
    }
}

/// What became of each record of a batch; each is settled exactly once.
pub struct Outcomes(Vec<Option<Outcome>>);

impl Outcomes {
    pub fn new(len: usize) -> Self {
        Outcomes(vec![None; len])
    }

    pub fn settle(&mut self, record: usize, outcome: Outcome) {
        debug_assert!(self.0[record].is_none(), "record {record} settled twice: {:?} then {outcome:?}", self.0[record]);
        if self.0[record].is_none() {
            self.0[record] = Some(outcome);
        }
    }

    pub fn is_settled(&self, record: usize) -> bool {
        self.0[record].is_some()
    }

    pub fn into_report(self) -> PutReport {
        let outcomes = self
            .0
            .into_iter()
            .map(|o| {
                debug_assert!(o.is_some(), "a record was not settled");
                o.unwrap_or_else(|| Outcome::Retry("not written (sql-sink did not settle it)".into()))
            })
            .collect();
        PutReport { outcomes, settled: Vec::new() }
    }
}

/// Consecutive rows of the same table, operation and columns.
pub fn runs(bound: &[Bound]) -> Vec<Range<usize>> {
    let mut runs: Vec<Range<usize>> = Vec::new();
    for i in 0..bound.len() {
        match runs.last_mut() {
            Some(run) if bound[run.start].same_run(&bound[i]) => run.end = i + 1,
            _ => runs.push(i..i + 1),
        }
    }
    runs
}

/// One statement's rows: slots of indexes into the bound rows. A slot's
/// last row is the one written; the earlier ones are upserts of the same
/// key that it supersedes (settled with it, or written in its place if it
/// is refused).
#[derive(Clone, Debug)]
pub struct Chunk {
    pub slots: Vec<Vec<usize>>,
}

impl Chunk {
    fn lead<'a>(&self, bound: &'a [Bound]) -> &'a Bound {
        &bound[*self.slots[0].last().expect("slots are never empty")]
    }
}

/// The statements' rows of one run: upserts keep the last row of each key
/// (PostgreSQL refuses a statement that touches a row twice, and the last
/// is what upserts one after another leave); at most `batch_size` rows,
/// and at most [`MAX_PARAMS`] parameters, in a multi-row statement.
pub fn chunks(bound: &[Bound], run: Range<usize>, batch_size: usize) -> Vec<Chunk> {
    let first = &bound[run.start];
    let slots: Vec<Vec<usize>> = if first.op == Op::Upsert {
        let mut by_key: HashMap<String, usize> = HashMap::new();
        let mut slots: Vec<Vec<usize>> = Vec::new();
        for i in run {
            match by_key.get(&bound[i].key_text()) {
                Some(&slot) => slots[slot].push(i),
                None => {
                    by_key.insert(bound[i].key_text(), slots.len());
                    slots.push(vec![i]);
                }
            }
        }
        slots
    } else {
        run.map(|i| vec![i]).collect()
    };
    let per_statement = match first.op {
        Op::Insert | Op::Upsert => batch_size.min((MAX_PARAMS / first.columns().len().max(1)).max(1)),
        Op::Update | Op::Delete => batch_size,
    };
    slots.chunks(per_statement).map(|s| Chunk { slots: s.to_vec() }).collect()
}

/// Whether a chunk's statement runs once per row (so that a failure's
/// `row` names the row) rather than once with every row in it.
fn per_row(op: Op) -> bool {
    matches!(op, Op::Update | Op::Delete)
}

/// The statement of a chunk.
pub fn statement(sql: &Sql, bound: &[Bound], chunk: &Chunk) -> Statement {
    let lead = chunk.lead(bound);
    let live = chunk.slots.iter().map(|slot| &bound[*slot.last().expect("slots are never empty")]);
    match lead.op {
        Op::Insert | Op::Upsert => {
            let upsert = (lead.op == Op::Upsert).then_some(lead.key_cols.as_slice());
            Statement {
                sql: sql.insert(&lead.table, &lead.columns(), chunk.slots.len(), upsert),
                rows: vec![live.flat_map(Bound::params).collect()],
            }
        }
        Op::Update => Statement {
            sql: sql.update(&lead.table, &lead.val_cols, &lead.key_cols),
            rows: live.map(|b| b.vals.iter().chain(&b.key).cloned().collect()).collect(),
        },
        Op::Delete => {
            Statement { sql: sql.delete(&lead.table, &lead.key_cols), rows: live.map(|b| b.key.clone()).collect() }
        }
    }
}

/// Why the database refused a row, for the record's rejection.
fn refused(failure: &RowFailure) -> String {
    match &failure.code {
        Some(code) => format!("the database refused the row: {} (code {code})", failure.message),
        None => format!("the database refused the row: {}", failure.message),
    }
}

/// Writes the chunks in one transaction: on a refused row, rejects it
/// (halving its statement's rows until the database names it) and runs the
/// batch again, until it commits. A retriable or fatal error is returned as
/// it is; nothing of the batch was committed then.
pub fn write_batch(
    db: &mut dyn Db,
    sql: &Sql,
    bound: &[Bound],
    mut chunks: Vec<Chunk>,
    outcomes: &mut Outcomes,
) -> Result<(), TaskError> {
    let mut attempts = 0;
    while !chunks.is_empty() {
        attempts += 1;
        let statements: Vec<Statement> = chunks.iter().map(|c| statement(sql, bound, c)).collect();
        let failure = match db.execute_batch(&statements)? {
            BatchOutcome::Committed(_) => {
                for &b in chunks.iter().flat_map(|c| &c.slots).flatten() {
                    outcomes.settle(bound[b].record, Outcome::Accept);
                }
                if attempts > 1 {
                    spillway_sdk::log::debug(&format!("batch committed after {attempts} attempts"));
                }
                return Ok(());
            }
            BatchOutcome::RowFailed(failure) => failure,
        };
        let i = failure.statement as usize;
        let Some(chunk) = chunks.get_mut(i) else {
            return Err(TaskError::Fatal(format!(
                "the database refused a row of statement {i}, but the batch had {} statements: {}",
                statements.len(),
                failure.message
            )));
        };
        let named = if chunk.slots.len() == 1 {
            Some(0)
        } else if per_row(chunk.lead(bound).op) {
            failure.row.map(|r| r as usize).filter(|&r| r < chunk.slots.len())
        } else {
            None
        };
        match named {
            Some(s) => {
                let b = chunk.slots[s].pop().expect("slots are never empty");
                outcomes.settle(bound[b].record, Outcome::Reject(refused(&failure)));
                if chunk.slots[s].is_empty() {
                    chunk.slots.remove(s);
                }
                if chunk.slots.is_empty() {
                    chunks.remove(i);
                }
            }
            None => {
                // The database did not say which row: halve the statement.
                let second = chunk.slots.split_off(chunk.slots.len() / 2);
                chunks.insert(i + 1, Chunk { slots: second });
            }
        }
    }
    Ok(())
}

/// Appends plain inserts with `copy-in`, one call (one transaction) per
/// table and column set, in the order first seen. A refused row is
/// rejected and the others copied again (by halves, when the database does
/// not say which). When a copy fails after an earlier one committed, the
/// records written are accepted and every other one is `Retry`: a
/// retriable error ends there (`Ok(None)`), a fatal one is handed back to
/// fail the task on its next call (`Ok(Some(error))`). When nothing was
/// committed, the error is returned as it is.
pub fn write_copies(db: &mut dyn Db, bound: &[Bound], outcomes: &mut Outcomes) -> Result<Option<TaskError>, TaskError> {
    let mut groups: Vec<(&str, Vec<String>, Vec<usize>)> = Vec::new();
    for (i, b) in bound.iter().enumerate() {
        let columns = b.columns();
        match groups.iter_mut().find(|(t, c, _)| *t == b.catalog && *c == columns) {
            Some(group) => group.2.push(i),
            None => groups.push((&b.catalog, columns, vec![i])),
        }
    }
    let mut committed = false;
    for (table, columns, rows) in &groups {
        let mut pending: VecDeque<Vec<usize>> = VecDeque::from([rows.clone()]);
        while let Some(part) = pending.pop_front() {
            let values: Vec<Vec<Value>> = part.iter().map(|&b| bound[b].params().collect()).collect();
            match db.copy_in(table, columns, &values) {
                Ok(BatchOutcome::Committed(_)) => {
                    committed = true;
                    for &b in &part {
                        outcomes.settle(bound[b].record, Outcome::Accept);
                    }
                }
                Ok(BatchOutcome::RowFailed(failure)) => {
                    let named = if part.len() == 1 {
                        Some(0)
                    } else {
                        failure.row.map(|r| r as usize).filter(|&r| r < part.len())
                    };
                    match named {
                        Some(r) => {
                            outcomes.settle(bound[part[r]].record, Outcome::Reject(refused(&failure)));
                            let rest: Vec<usize> =
                                part.iter().enumerate().filter(|&(j, _)| j != r).map(|(_, &b)| b).collect();
                            if !rest.is_empty() {
                                pending.push_front(rest);
                            }
                        }
                        None => {
                            let (first, second) = part.split_at(part.len() / 2);
                            pending.push_front(second.to_vec());
                            pending.push_front(first.to_vec());
                        }
                    }
                }
                Err(error) if !committed => return Err(error),
                Err(error) => {
                    let message = match &error {
                        TaskError::Retriable(m) | TaskError::Fatal(m) => m.clone(),
                    };
                    spillway_sdk::log::warn(&format!(
                        "copy into {table} failed after other rows of the batch were written: {message}"
                    ));
                    let reason = format!("not written: copy into {table} failed: {message}");
                    for b in bound {
                        if !outcomes.is_settled(b.record) {
                            outcomes.settle(b.record, Outcome::Retry(reason.clone()));
                        }
                    }
                    return Ok(match error {
                        TaskError::Fatal(_) => Some(error),
                        TaskError::Retriable(_) => None,
                    });
                }
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(record: usize, table: &str, op: Op, key: &[(&str, i64)], vals: &[&str]) -> Bound {
        Bound {
            record,
            table: table.into(),
            catalog: table.into(),
            op,
            key_cols: key.iter().map(|(c, _)| c.to_string()).collect(),
            val_cols: vals.iter().map(|c| c.to_string()).collect(),
            key: key.iter().map(|(_, v)| Value::Int(*v)).collect(),
            vals: vals.iter().map(|_| Value::Text(format!("v{record}"))).collect(),
        }
    }

    #[test]
    fn runs_split_on_table_operation_and_columns_keeping_order() {
        let rows = vec![
            bound(0, "a", Op::Upsert, &[("id", 1)], &[]),
            bound(1, "a", Op::Upsert, &[("id", 2)], &[]),
            bound(2, "a", Op::Delete, &[("id", 1)], &[]),
            bound(3, "b", Op::Delete, &[("id", 1)], &[]),
            bound(4, "b", Op::Delete, &[("id", 2)], &[]),
            bound(5, "b", Op::Delete, &[("k", 2)], &[]),
            bound(6, "b", Op::Upsert, &[("k", 2)], &["x"]),
            bound(7, "b", Op::Upsert, &[("k", 3)], &["x", "y"]),
            bound(8, "a", Op::Upsert, &[("id", 3)], &[]),
        ];
        assert_eq!(runs(&rows), [0..2, 2..3, 3..5, 5..6, 6..7, 7..8, 8..9]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn upsert_chunks_keep_the_last_row_of_each_key() {
        let rows: Vec<Bound> = [1, 2, 1, 3, 2, 1]
            .iter()
            .enumerate()
            .map(|(i, k)| bound(i, "t", Op::Upsert, &[("id", *k)], &["x"]))
            .collect();
        let chunks = chunks(&rows, 0..6, 2);
        let slots: Vec<Vec<Vec<usize>>> = chunks.iter().map(|c| c.slots.clone()).collect();
        assert_eq!(slots, [vec![vec![0, 2, 5], vec![1, 4]], vec![vec![3]]]);
        let sql = Sql::new(spillway_sdk::sql::Dialect::Postgres, true);
        let statement = statement(&sql, &rows, &chunks[0]);
        assert_eq!(
            format!("{:?}", statement.rows),
            r#"[[Value::Int(1), Value::Text("v5"), Value::Int(2), Value::Text("v4")]]"#
        );
        // Inserts and updates keep every row.
        let rows: Vec<Bound> =
            [1, 1, 1].iter().enumerate().map(|(i, k)| bound(i, "t", Op::Update, &[("id", *k)], &["x"])).collect();
        let chunks = super::chunks(&rows, 0..3, 10);
        assert_eq!(chunks[0].slots, [vec![0], vec![1], vec![2]]);
        assert_eq!(super::statement(&sql, &rows, &chunks[0]).rows.len(), 3);
    }
}
