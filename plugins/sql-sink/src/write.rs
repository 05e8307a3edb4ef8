//! Writing bound rows: consecutive runs of the same table, operation and
//! columns become statements (multi-row INSERTs and upserts, one prepared
//! UPDATE or DELETE over many rows), all of a put in one `execute-batch`
//! transaction; plain inserts go by `copy-in` instead. A row the database
//! refuses is found (by halving a statement's rows when the database does
//! not say which) and rejected, and the rest written again. A write begun
//! in the host ([`crate::flight`]) that found a refused row goes on here,
//! from that failure.

use crate::dialect::Sql;
use crate::rows::Op;
use spillway_sdk::sql::{BatchOutcome, RowFailure, Statement, Value};
use spillway_sdk::{Outcome, PutReport, TaskError};
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::ops::Range;
use std::rc::Rc;

use crate::db::Db;

/// Most parameters one multi-row statement binds: below SQLite's 32766
/// and PostgreSQL's and MySQL's 65535.
pub const MAX_PARAMS: usize = 30_000;

/// The table and columns of bound rows, shared by the rows that write the
/// same ones.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    /// The table as `table.name.format` gives it (for SQL text).
    pub table: String,
    /// The table as the catalogue names it (for `copy-in`).
    pub catalog: String,
    /// The key's columns, then the others, as the catalogue names them.
    pub columns: Vec<String>,
    /// How many of `columns` are the key's.
    pub key_len: usize,
}

impl Layout {
    pub fn key(&self) -> &[String] {
        &self.columns[..self.key_len]
    }

    pub fn vals(&self) -> &[String] {
        &self.columns[self.key_len..]
    }

    /// Whether rows of both go to one `copy-in`.
    fn same_copy(self: &Rc<Self>, other: &Rc<Layout>) -> bool {
        Rc::ptr_eq(self, other) || (self.catalog == other.catalog && self.columns == other.columns)
    }
}

/// A row ready to write: its layout's columns' parameters.
#[derive(Clone, Debug)]
pub struct Bound {
    /// The record's index in the batch.
    pub record: usize,
    pub op: Op,
    pub layout: Rc<Layout>,
    /// One per column of the layout, the key's first. While a statement
    /// runs, it holds them (see [`statement`]).
    pub params: Vec<Value>,
}

impl Bound {
    fn same_run(&self, other: &Bound) -> bool {
        self.op == other.op && (Rc::ptr_eq(&self.layout, &other.layout) || self.layout == other.layout)
    }

    fn key(&self) -> KeyValues<'_> {
        KeyValues(&self.params[..self.layout.key_len])
    }
}

/// A row's key, to find upserts of the same key: equal when each value is
/// the same variant holding the same content (floats by their bits, every
/// NaN alike).
struct KeyValues<'a>(&'a [Value]);

/// A float's bits, every NaN the same.
fn float_bits(v: f64) -> u64 {
    if v.is_nan() { f64::NAN.to_bits() } else { v.to_bits() }
}

impl PartialEq for KeyValues<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(other.0).all(|pair| match pair {
                (Value::Null, Value::Null) => true,
                (Value::Boolean(a), Value::Boolean(b)) => a == b,
                (Value::Int(a), Value::Int(b))
                | (Value::Time(a), Value::Time(b))
                | (Value::Timestamp(a), Value::Timestamp(b)) => a == b,
                (Value::Date(a), Value::Date(b)) => a == b,
                (Value::Double(a), Value::Double(b)) => float_bits(*a) == float_bits(*b),
                (Value::Text(a), Value::Text(b))
                | (Value::Json(a), Value::Json(b))
                | (Value::Uuid(a), Value::Uuid(b))
                | (Value::Decimal(a), Value::Decimal(b)) => a == b,
                (Value::Bytes(a), Value::Bytes(b)) => a == b,
                _ => false,
            })
    }
}

impl Eq for KeyValues<'_> {}

impl Hash for KeyValues<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        for value in self.0 {
            std::mem::discriminant(value).hash(state);
            match value {
                Value::Null => {}
                Value::Boolean(v) => v.hash(state),
                Value::Int(v) | Value::Time(v) | Value::Timestamp(v) => v.hash(state),
                Value::Date(v) => v.hash(state),
                Value::Double(v) => float_bits(*v).hash(state),
                Value::Text(v) | Value::Json(v) | Value::Uuid(v) | Value::Decimal(v) => v.hash(state),
                Value::Bytes(v) => v.hash(state),
            }
        }
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

    /// Holds every record not settled yet (they are being written in the
    /// background) and returns their indices.
    pub fn hold_rest(&mut self) -> Vec<usize> {
        let mut held = Vec::new();
        for (i, outcome) in self.0.iter_mut().enumerate() {
            if outcome.is_none() {
                *outcome = Some(Outcome::Hold);
                held.push(i);
            }
        }
        held
    }

    /// A record's outcome, taken out.
    pub fn take(&mut self, record: usize) -> Outcome {
        let outcome = self.0[record].take();
        debug_assert!(outcome.is_some(), "record {record} was not settled");
        outcome.unwrap_or_else(|| Outcome::Retry("not written (sql-sink did not settle it)".into()))
    }

    pub fn into_report(mut self) -> PutReport {
        let outcomes = (0..self.0.len()).map(|i| self.take(i)).collect();
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

/// A row a statement writes (an index into the bound rows), with the
/// upserts of the same key that it supersedes, in order: settled with it,
/// or written in its place if it is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub row: usize,
    pub superseded: Vec<usize>,
}

impl Slot {
    fn new(row: usize) -> Self {
        Slot { row, superseded: Vec::new() }
    }

    /// Every row of the slot, the one written last.
    pub fn rows(&self) -> impl Iterator<Item = usize> + '_ {
        self.superseded.iter().copied().chain([self.row])
    }
}

/// One statement's rows.
#[derive(Clone, Debug)]
pub struct Chunk {
    pub slots: Vec<Slot>,
}

impl Chunk {
    fn lead<'a>(&self, bound: &'a [Bound]) -> &'a Bound {
        &bound[self.slots[0].row]
    }
}

/// The statements' rows of one run: upserts keep the last row of each key
/// (PostgreSQL refuses a statement that touches a row twice, and the last
/// is what upserts one after another leave); at most `batch_size` rows,
/// and at most [`MAX_PARAMS`] parameters, in a multi-row statement.
pub fn chunks(bound: &[Bound], run: Range<usize>, batch_size: usize) -> Vec<Chunk> {
    let first = &bound[run.start];
    let slots: Vec<Slot> = if first.op == Op::Upsert {
        let mut by_key: HashMap<KeyValues, usize> = HashMap::with_capacity(run.len());
        let mut slots: Vec<Slot> = Vec::with_capacity(run.len());
        for i in run {
            match by_key.get(&bound[i].key()) {
                Some(&s) => {
                    let slot = &mut slots[s];
                    slot.superseded.push(slot.row);
                    slot.row = i;
                }
                None => {
                    by_key.insert(bound[i].key(), slots.len());
                    slots.push(Slot::new(i));
                }
            }
        }
        slots
    } else {
        run.map(Slot::new).collect()
    };
    let per_statement = match first.op {
        Op::Insert | Op::Upsert => batch_size.min((MAX_PARAMS / first.layout.columns.len().max(1)).max(1)),
        Op::Update | Op::Delete => batch_size,
    };
    let mut slots = slots.into_iter().peekable();
    let mut chunks = Vec::new();
    while slots.peek().is_some() {
        chunks.push(Chunk { slots: slots.by_ref().take(per_statement).collect() });
    }
    chunks
}

/// Whether a chunk's statement runs once per row (so that a failure's
/// `row` names the row) rather than once with every row in it.
fn per_row(op: Op) -> bool {
    matches!(op, Op::Update | Op::Delete)
}

/// The statement of a chunk. It takes the parameters of the rows it
/// writes; [`give_back`] returns them.
pub fn statement(sql: &Sql, bound: &mut [Bound], chunk: &Chunk) -> Statement {
    let lead = chunk.lead(bound);
    let (op, layout) = (lead.op, Rc::clone(&lead.layout));
    match op {
        Op::Insert | Op::Upsert => {
            let mut params = Vec::with_capacity(chunk.slots.len() * layout.columns.len());
            for slot in &chunk.slots {
                params.append(&mut bound[slot.row].params);
            }
            let upsert = (op == Op::Upsert).then_some(layout.key());
            Statement { sql: sql.insert(&layout.table, &layout.columns, chunk.slots.len(), upsert), rows: vec![params] }
        }
        Op::Update => Statement {
            sql: sql.update(&layout.table, layout.vals(), layout.key()),
            // The set columns' values, then the key's.
            rows: chunk
                .slots
                .iter()
                .map(|slot| {
                    let mut params = std::mem::take(&mut bound[slot.row].params);
                    params.rotate_left(layout.key_len);
                    params
                })
                .collect(),
        },
        Op::Delete => Statement {
            sql: sql.delete(&layout.table, layout.key()),
            rows: chunk.slots.iter().map(|slot| std::mem::take(&mut bound[slot.row].params)).collect(),
        },
    }
}

/// Returns the parameters a chunk's statement took to its rows.
pub fn give_back(statement: Statement, bound: &mut [Bound], chunk: &Chunk) {
    let lead = chunk.lead(bound);
    let (op, width, key_len) = (lead.op, lead.layout.columns.len(), lead.layout.key_len);
    match op {
        Op::Insert | Op::Upsert => {
            let mut params = statement.rows.into_iter().flatten();
            for slot in &chunk.slots {
                bound[slot.row].params.extend(params.by_ref().take(width));
            }
        }
        Op::Update | Op::Delete => {
            for (slot, mut params) in chunk.slots.iter().zip(statement.rows) {
                if op == Op::Update {
                    params.rotate_right(key_len);
                }
                bound[slot.row].params = params;
            }
        }
    }
}

/// Why the database refused a row, for the record's rejection.
fn refused_row(failure: &RowFailure) -> String {
    match &failure.code {
        Some(code) => format!("the database refused the row: {} (code {code})", failure.message),
        None => format!("the database refused the row: {}", failure.message),
    }
}

/// Accepts every record the chunks' statements wrote (they committed).
pub fn accept(bound: &[Bound], chunks: &[Chunk], outcomes: &mut Outcomes) {
    for b in chunks.iter().flat_map(|c| &c.slots).flat_map(Slot::rows) {
        outcomes.settle(bound[b].record, Outcome::Accept);
    }
}

/// Writes the chunks in one transaction: on a refused row, rejects it
/// (halving its statement's rows until the database names it) and runs the
/// batch again, until it commits. `refused` is how an attempt made already
/// (begun in the background) failed: the first to act on. A retriable or
/// fatal error is returned as it is; nothing of the batch was committed
/// then (the records rejected so far were refused by the database).
pub fn write_batch(
    db: &mut dyn Db,
    sql: &Sql,
    bound: &mut [Bound],
    mut chunks: Vec<Chunk>,
    outcomes: &mut Outcomes,
    mut refused: Option<RowFailure>,
) -> Result<(), TaskError> {
    let mut attempts = usize::from(refused.is_some());
    loop {
        let failure = match refused.take() {
            Some(failure) => failure,
            None if chunks.is_empty() => return Ok(()),
            None => {
                attempts += 1;
                let statements: Vec<Statement> = chunks.iter().map(|c| statement(sql, bound, c)).collect();
                match db.execute_batch(&statements)? {
                    BatchOutcome::Committed(_) => {
                        accept(bound, &chunks, outcomes);
                        if attempts > 1 {
                            spillway_sdk::log::debug(&format!("batch committed after {attempts} attempts"));
                        }
                        return Ok(());
                    }
                    BatchOutcome::RowFailed(failure) => {
                        for (statement, chunk) in statements.into_iter().zip(&chunks) {
                            give_back(statement, bound, chunk);
                        }
                        failure
                    }
                }
            }
        };
        let (i, count) = (failure.statement as usize, chunks.len());
        let Some(chunk) = chunks.get_mut(i) else {
            return Err(TaskError::Fatal(format!(
                "the database refused a row of statement {i}, but the batch had {count} statements: {}",
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
                let slot = &mut chunk.slots[s];
                outcomes.settle(bound[slot.row].record, Outcome::Reject(refused_row(&failure)));
                match slot.superseded.pop() {
                    Some(previous) => slot.row = previous,
                    None => {
                        chunk.slots.remove(s);
                    }
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
}

/// The rows of one table and column set, for one `copy-in`.
pub struct Group {
    pub layout: Rc<Layout>,
    /// The records of the rows, in order.
    pub records: Vec<usize>,
    pub rows: Vec<Vec<Value>>,
}

/// Plain inserts as `copy-in` groups, one per table and column set, in the
/// order first seen; the rows' parameters are taken from the bound rows.
pub fn copy_groups(bound: &mut [Bound]) -> Vec<Group> {
    let mut groups: Vec<Group> = Vec::new();
    for b in bound.iter_mut() {
        let params = std::mem::take(&mut b.params);
        match groups.iter_mut().find(|g| g.layout.same_copy(&b.layout)) {
            Some(group) => {
                group.records.push(b.record);
                group.rows.push(params);
            }
            None => groups.push(Group { layout: Rc::clone(&b.layout), records: vec![b.record], rows: vec![params] }),
        }
    }
    groups
}

/// Appends the groups with `copy-in`, one call (one transaction) each, in
/// order. A refused row is rejected and the others copied again (by
/// halves, when the database does not say which); `refused` is how the
/// first group's copy, begun in the background, failed. When a copy fails
/// after an earlier one committed, the records written are accepted and
/// every other one is `Retry`: a retriable error ends there (`Ok(None)`), a
/// fatal one is handed back to fail the task on its next call
/// (`Ok(Some(error))`). When nothing was committed, the error is returned
/// as it is (the records rejected so far were refused by the database).
pub fn write_copies(
    db: &mut dyn Db,
    groups: Vec<Group>,
    outcomes: &mut Outcomes,
    mut refused: Option<RowFailure>,
) -> Result<Option<TaskError>, TaskError> {
    let mut committed = false;
    let mut groups = groups.into_iter();
    while let Some(Group { layout, mut records, mut rows }) = groups.next() {
        let table = &layout.catalog;
        // The parts still to copy are in the order of their rows (`pending`
        // holds their lengths), so each starts at `done`, the first row not
        // yet settled. A refused row is taken out of `rows`: every part is
        // one slice of it, copied without cloning a value.
        let mut done = 0;
        let mut pending: VecDeque<usize> = VecDeque::from([rows.len()]);
        while let Some(len) = pending.pop_front() {
            let part = done..done + len;
            let copied = match refused.take() {
                Some(failure) => Ok(BatchOutcome::RowFailed(failure)),
                None => db.copy_in(table, &layout.columns, &rows[part.clone()]),
            };
            match copied {
                Ok(BatchOutcome::Committed(_)) => {
                    committed = true;
                    for &record in &records[part] {
                        outcomes.settle(record, Outcome::Accept);
                    }
                    done += len;
                }
                Ok(BatchOutcome::RowFailed(failure)) => {
                    let named = if len == 1 { Some(0) } else { failure.row.map(|r| r as usize).filter(|&r| r < len) };
                    match named {
                        Some(r) => {
                            outcomes.settle(records.remove(done + r), Outcome::Reject(refused_row(&failure)));
                            rows.remove(done + r);
                            if len > 1 {
                                pending.push_front(len - 1);
                            }
                        }
                        None => {
                            pending.push_front(len - len / 2);
                            pending.push_front(len / 2);
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
                    // This group's rows from `done` on, and every later group's.
                    for record in records.drain(done..).chain(groups.flat_map(|g| g.records)) {
                        outcomes.settle(record, Outcome::Retry(reason.clone()));
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
        let columns = key.iter().map(|(c, _)| c.to_string()).chain(vals.iter().map(|c| c.to_string())).collect();
        let layout = Layout { table: table.into(), catalog: table.into(), columns, key_len: key.len() };
        Bound {
            record,
            op,
            layout: Rc::new(layout),
            params: key
                .iter()
                .map(|(_, v)| Value::Int(*v))
                .chain(vals.iter().map(|_| Value::Text(format!("v{record}"))))
                .collect(),
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
        let mut rows: Vec<Bound> = [1, 2, 1, 3, 2, 1]
            .iter()
            .enumerate()
            .map(|(i, k)| bound(i, "t", Op::Upsert, &[("id", *k)], &["x"]))
            .collect();
        let chunks = chunks(&rows, 0..6, 2);
        let slots: Vec<Vec<Vec<usize>>> =
            chunks.iter().map(|c| c.slots.iter().map(|s| s.rows().collect()).collect()).collect();
        assert_eq!(slots, [vec![vec![0, 2, 5], vec![1, 4]], vec![vec![3]]]);
        let sql = Sql::new(spillway_sdk::sql::Dialect::Postgres, true);
        let taken = statement(&sql, &mut rows, &chunks[0]);
        let params = r#"[[Value::Int(1), Value::Text("v5"), Value::Int(2), Value::Text("v4")]]"#;
        assert_eq!(format!("{:?}", taken.rows), params);
        // Given back, the same statement again.
        give_back(taken, &mut rows, &chunks[0]);
        assert_eq!(format!("{:?}", statement(&sql, &mut rows, &chunks[0]).rows), params);
        // Inserts and updates keep every row.
        let mut rows: Vec<Bound> =
            [1, 1, 1].iter().enumerate().map(|(i, k)| bound(i, "t", Op::Update, &[("id", *k)], &["x"])).collect();
        let chunks = super::chunks(&rows, 0..3, 10);
        assert_eq!(chunks[0].slots, [Slot::new(0), Slot::new(1), Slot::new(2)]);
        let taken = super::statement(&sql, &mut rows, &chunks[0]);
        assert_eq!(format!("{:?}", taken.rows[2]), r#"[Value::Text("v2"), Value::Int(1)]"#);
        give_back(taken, &mut rows, &chunks[0]);
        assert_eq!(format!("{:?}", rows[2].params), r#"[Value::Int(1), Value::Text("v2")]"#);
    }

    #[test]
    fn keys_are_equal_as_their_values_are_the_same() {
        let same = |a: Value, b: Value| KeyValues(&[a]) == KeyValues(&[b]);
        assert!(same(Value::Int(1), Value::Int(1)));
        assert!(!same(Value::Int(1), Value::Text("1".into())));
        assert!(!same(Value::Text("a".into()), Value::Json("a".into())));
        assert!(!same(Value::Double(0.0), Value::Double(-0.0)));
        assert!(same(Value::Double(f64::NAN), Value::Double(-f64::NAN)));
        assert!(KeyValues(&[Value::Int(1), Value::Null]) != KeyValues(&[Value::Int(1)]));
    }
}
