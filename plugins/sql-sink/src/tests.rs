//! The sink end to end on a fake database: the statements each dialect
//! gets, tables created and evolved, binding by column type, runs and
//! their order, upsert dedupe, finding refused rows, copy-in, writes begun
//! in the background and how every record is settled.

use super::*;
use db::Pending;
use serde_json::json;
use spillway_sdk::TimestampType;
use spillway_sdk::sql::{BatchOutcome, Column, Dialect, RowFailure, Statement, Value};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

type FailHook = Box<dyn FnMut(&str) -> Option<TaskError>>;

/// A database in memory that knows its tables' columns (kept from the DDL
/// the sink sends), logs every call, and refuses a row holding a text
/// parameter that starts with `BAD`.
#[derive(Default)]
struct Fake {
    dialect: Option<Dialect>,
    tables: BTreeMap<String, Vec<Column>>,
    /// Every call: `describe t`, `execute <sql>`, `batch`, `copy t`.
    log: Vec<String>,
    /// Every execute-batch call's statements.
    batches: Vec<Vec<Statement>>,
    /// Every copy-in call: table, columns, rows.
    copies: Vec<(String, Vec<String>, Vec<Vec<Value>>)>,
    /// Parameters of everything committed, in order.
    written: Vec<Vec<Value>>,
    /// Say which row was refused when a statement or copy has at most this
    /// many parameter rows (0: never; else `row` is none).
    name_rows: usize,
    /// Decides, before a call is logged, whether it fails: given `batch`,
    /// `copy <table>`, `execute <sql>` or `describe <table>`.
    fail: Option<FailHook>,
    /// DDL takes effect and then fails, as when another task ran it first.
    lose_ddl_race: bool,
    /// Writes begun (`begin batch`, `begin copy t`: the fail hook may refuse
    /// them) run at once, as `batch` / `copy t` calls (the hook may fail
    /// them: `wait` then returns the error); `wait` runs out of the call's
    /// time this many times first.
    stalls: usize,
    /// Writes begun and not yet waited for to their end: while one is, any
    /// other write is a bug of the sink (its refused rows must be found and
    /// the rest written first).
    in_flight: usize,
}

#[derive(Clone, Default)]
struct FakeDb(Rc<RefCell<Fake>>);

impl FakeDb {
    fn new(dialect: Dialect) -> Self {
        let db = FakeDb::default();
        db.0.borrow_mut().dialect = Some(dialect);
        db
    }

    fn with_table(self, name: &str, columns: &[(&str, &str, bool)]) -> Self {
        let columns = columns
            .iter()
            .map(|(n, t, pk)| Column { name: n.to_string(), data_type: t.to_string(), nullable: !pk, primary_key: *pk })
            .collect();
        self.0.borrow_mut().tables.insert(name.to_string(), columns);
        self
    }

    fn fake(&self) -> std::cell::RefMut<'_, Fake> {
        self.0.borrow_mut()
    }

    /// A write: none may be sent while one is in flight.
    fn check_write(&self, call: &str) -> Result<(), TaskError> {
        assert_eq!(self.0.borrow().in_flight, 0, "{call} while a write is in flight");
        self.check(call)
    }

    /// Runs a write begun in the background at once; `wait` tells how it ended.
    fn begin(
        &mut self,
        call: &str,
        run: impl FnOnce(&mut Self) -> Result<BatchOutcome, TaskError>,
    ) -> Result<Box<dyn Pending>, TaskError> {
        self.check_write(call)?;
        let ended = run(self);
        self.0.borrow_mut().in_flight += 1;
        Ok(Box::new(FakePending { db: self.clone(), ended, running: false, done: false }))
    }

    fn check(&self, call: &str) -> Result<(), TaskError> {
        let mut fake = self.0.borrow_mut();
        if let Some(error) = fake.fail.as_mut().and_then(|f| f(call)) {
            return Err(error);
        }
        fake.log.push(call.to_string());
        Ok(())
    }

    /// The first row holding a `BAD...` text, if any.
    fn refused(rows: &[Vec<Value>]) -> Option<usize> {
        rows.iter().position(|row| row.iter().any(|v| matches!(v, Value::Text(t) if t.starts_with("BAD"))))
    }

    /// Every `tag`-like text written, in order (the tests give each record one).
    fn written_texts(&self) -> Vec<String> {
        self.0
            .borrow()
            .written
            .iter()
            .flatten()
            .filter_map(|v| match v {
                Value::Text(t) if t.starts_with('r') || t.starts_with("BAD") => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    fn sql_of_batches(&self) -> Vec<Vec<String>> {
        self.0.borrow().batches.iter().map(|b| b.iter().map(|s| s.sql.clone()).collect()).collect()
    }
}

fn unquote(name: &str) -> String {
    let name = name.trim();
    match name.chars().next() {
        Some(q @ ('"' | '`')) => name[1..name.len() - 1].replace(&format!("{q}{q}"), &q.to_string()),
        _ => name.to_string(),
    }
}

fn table_of(quoted: &str) -> String {
    quoted.split('.').map(unquote).collect::<Vec<_>>().join(".")
}

/// `"name" TYPE [NOT NULL]` (the name possibly quoted, with spaces).
fn column_def(line: &str) -> (String, String, bool) {
    let line = line.trim();
    let (name, rest) = match line.chars().next() {
        Some(q @ ('"' | '`')) => {
            let mut end = 1;
            let bytes = line.as_bytes();
            while end < bytes.len() {
                if bytes[end] == q as u8 {
                    if bytes.get(end + 1) == Some(&(q as u8)) {
                        end += 2;
                        continue;
                    }
                    break;
                }
                end += 1;
            }
            (unquote(&line[..=end]), &line[end + 1..])
        }
        _ => {
            let (n, r) = line.split_once(' ').unwrap();
            (n.to_string(), r)
        }
    };
    let not_null = rest.contains("NOT NULL");
    (name, rest.replace("NOT NULL", "").trim().to_ascii_lowercase(), not_null)
}

/// A write of the fake's, run when it was begun.
struct FakePending {
    db: FakeDb,
    ended: Result<BatchOutcome, TaskError>,
    running: bool,
    done: bool,
}

impl Pending for FakePending {
    fn wait(&mut self) -> Result<BatchOutcome, TaskError> {
        let mut fake = self.db.0.borrow_mut();
        if fake.stalls > 0 {
            fake.stalls -= 1;
            self.running = true;
            return Err(TaskError::Retriable("the batch is still running at the end of the plugin call".into()));
        }
        self.running = false;
        if !self.done {
            self.done = true;
            fake.in_flight -= 1;
        }
        self.ended.clone()
    }
    fn running(&self) -> bool {
        self.running
    }
}

impl Db for FakeDb {
    fn dialect(&self) -> Dialect {
        self.0.borrow().dialect.unwrap()
    }

    fn begin_batch(&mut self, statements: &[Statement]) -> Result<Box<dyn Pending>, TaskError> {
        self.begin("begin batch", |db| db.execute_batch(statements))
    }

    fn begin_copy_in(
        &mut self,
        table: &str,
        columns: &[String],
        rows: &[Vec<Value>],
    ) -> Result<Box<dyn Pending>, TaskError> {
        self.begin(&format!("begin copy {table}"), |db| db.copy_in(table, columns, rows))
    }

    fn execute_batch(&mut self, statements: &[Statement]) -> Result<BatchOutcome, TaskError> {
        self.check_write("batch")?;
        let mut fake = self.0.borrow_mut();
        fake.batches.push(statements.to_vec());
        for (i, statement) in statements.iter().enumerate() {
            if let Some(r) = FakeDb::refused(&statement.rows) {
                return Ok(BatchOutcome::RowFailed(RowFailure {
                    statement: i as u32,
                    row: (statement.rows.len() <= fake.name_rows).then_some(r as u32),
                    code: Some("23514".into()),
                    message: "new row violates check constraint \"no_bad\"".into(),
                }));
            }
        }
        let rows: Vec<Vec<Value>> = statements.iter().flat_map(|s| s.rows.clone()).collect();
        fake.written.extend(rows);
        Ok(BatchOutcome::Committed(statements.iter().map(|s| s.rows.len() as u64).collect()))
    }

    fn execute(&mut self, sql: &str) -> Result<u64, TaskError> {
        self.check_write(&format!("execute {sql}"))?;
        let mut fake = self.0.borrow_mut();
        if let Some(rest) = sql.strip_prefix("CREATE TABLE IF NOT EXISTS ") {
            let (table, body) = rest.split_once(" (\n").unwrap();
            let body = body.strip_suffix("\n)").unwrap();
            let mut columns: Vec<Column> = Vec::new();
            for line in body.split(",\n") {
                if let Some(keys) = line.strip_prefix("PRIMARY KEY (") {
                    for key in keys.trim_end_matches(')').split(", ") {
                        let key = unquote(key);
                        columns.iter_mut().find(|c| c.name == key).unwrap().primary_key = true;
                    }
                } else {
                    let (name, data_type, not_null) = column_def(line);
                    columns.push(Column { name, data_type, nullable: !not_null, primary_key: false });
                }
            }
            let table = table_of(table);
            let existed = fake.tables.contains_key(&table);
            fake.tables.entry(table).or_insert(columns);
            if fake.lose_ddl_race && !existed {
                return Err(TaskError::Fatal("relation already exists".into()));
            }
        } else if let Some(rest) = sql.strip_prefix("ALTER TABLE ") {
            let (table, column) = rest.split_once(" ADD COLUMN ").unwrap();
            let (name, data_type, _) = column_def(column.trim_start_matches("IF NOT EXISTS "));
            let columns = fake.tables.get_mut(&table_of(table)).unwrap();
            columns.push(Column { name, data_type, nullable: true, primary_key: false });
            if fake.lose_ddl_race {
                return Err(TaskError::Fatal("duplicate column name".into()));
            }
        } else {
            panic!("unexpected statement {sql}");
        }
        Ok(0)
    }

    fn copy_in(&mut self, table: &str, columns: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError> {
        self.check_write(&format!("copy {table}"))?;
        let mut fake = self.0.borrow_mut();
        fake.copies.push((table.to_string(), columns.to_vec(), rows.to_vec()));
        if let Some(r) = FakeDb::refused(rows) {
            return Ok(BatchOutcome::RowFailed(RowFailure {
                statement: 0,
                row: (rows.len() <= fake.name_rows).then_some(r as u32),
                code: None,
                message: "bad row".into(),
            }));
        }
        fake.written.extend(rows.iter().cloned());
        Ok(BatchOutcome::Committed(vec![rows.len() as u64]))
    }

    fn describe_table(&mut self, table: &str) -> Result<Option<Vec<Column>>, TaskError> {
        self.check(&format!("describe {table}"))?;
        Ok(self.0.borrow().tables.get(table).cloned())
    }
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    let config = Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
    Settings::parse(&config).unwrap_or_else(|e| panic!("{e:?}"))
}

fn sink(db: &FakeDb, pairs: &[(&str, &str)]) -> SqlSink {
    SqlSink::with_db(settings(pairs), Box::new(db.clone()))
}

fn record(id: u64, topic: &str, key: Option<&str>, value: Option<&str>) -> SinkRecord {
    SinkRecord {
        id,
        topic: topic.into(),
        partition: 0,
        offset: id as i64,
        timestamp: 0,
        timestamp_type: TimestampType::CreateTime,
        key: key.map(|k| k.as_bytes().to_vec()),
        value: value.map(|v| v.as_bytes().to_vec()),
        headers: vec![],
        delivery_count: 1,
        lock_deadline: None,
    }
}

/// `n` records of `orders` with values `{"id": i, "tag": tag(i)}`.
fn tagged(n: u64, tag: impl Fn(u64) -> String) -> Vec<SinkRecord> {
    (1..=n).map(|i| record(i, "orders", None, Some(&json!({"id": i, "tag": tag(i)}).to_string()))).collect()
}

/// Outcomes as text: `accept`, `hold`, `retry: why`, `reject: why`.
fn kinds(report: &PutReport) -> Vec<String> {
    report
        .outcomes
        .iter()
        .map(|o| match o {
            Outcome::Accept => "accept".to_string(),
            Outcome::Hold => "hold".to_string(),
            Outcome::Retry(why) => format!("retry: {why}"),
            Outcome::Reject(why) => format!("reject: {why}"),
        })
        .collect()
}

/// An error as text: `retriable: why`, `fatal: why`.
fn error(e: TaskError) -> String {
    match e {
        TaskError::Retriable(why) => format!("retriable: {why}"),
        TaskError::Fatal(why) => format!("fatal: {why}"),
    }
}

/// Puts a batch and, when records are held, flushes: the report with each
/// held record's settlement in its place (each settled once, all of them).
fn put_flushed(s: &mut SqlSink, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
    let ids: Vec<u64> = batch.iter().map(|r| r.id).collect();
    let mut report = s.put(batch)?;
    assert!(report.settled.is_empty(), "nothing was held before");
    let held = |report: &PutReport| report.outcomes.iter().any(|o| matches!(o, Outcome::Hold));
    if held(&report) {
        for Settlement { id, outcome } in s.flush(FlushScope::All)? {
            let i = ids.iter().position(|&r| r == id).unwrap_or_else(|| panic!("{id} is no record of the batch"));
            assert!(matches!(report.outcomes[i], Outcome::Hold), "record {id} settled twice");
            report.outcomes[i] = outcome;
        }
        assert!(!held(&report), "a held record was not settled: {:?}", kinds(&report));
    }
    Ok(report)
}

fn accepted(report: &PutReport) -> usize {
    report.outcomes.iter().filter(|o| matches!(o, Outcome::Accept)).count()
}

const ORDERS: &[(&str, &str, bool)] = &[("id", "bigint", true), ("tag", "text", false)];

#[test]
fn plain_inserts_go_by_copy_in_one_per_table() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS).with_table("audit", &[("tag", "text", false)]);
    let mut s = sink(&db, &[]);
    let mut batch = tagged(3, |i| format!("r{i}"));
    batch.insert(1, record(10, "audit", None, Some(r#"{"tag": "r10"}"#)));
    let report = s.put(batch).unwrap();
    assert_eq!(kinds(&report), ["accept"; 4]);
    let fake = db.fake();
    assert!(fake.batches.is_empty());
    let copies: Vec<(&str, usize)> = fake.copies.iter().map(|(t, _, rows)| (t.as_str(), rows.len())).collect();
    assert_eq!(copies, [("orders", 3), ("audit", 1)]);
    assert_eq!(fake.copies[0].1, ["id", "tag"]);
    assert_eq!(format!("{:?}", fake.copies[0].2[0]), r#"[Value::Int(1), Value::Text("r1")]"#);
}

#[test]
fn upserts_are_one_transaction_of_multi_row_statements_last_row_per_key() {
    for (dialect, expected) in [
        (
            Dialect::Postgres,
            "INSERT INTO \"orders\" (\"id\", \"tag\") VALUES ($1, $2), ($3, $4) \
             ON CONFLICT (\"id\") DO UPDATE SET \"tag\" = EXCLUDED.\"tag\"",
        ),
        (
            Dialect::Mysql,
            "INSERT INTO `orders` (`id`, `tag`) VALUES (?, ?), (?, ?) ON DUPLICATE KEY UPDATE `tag` = VALUES(`tag`)",
        ),
        (
            Dialect::Sqlite,
            "INSERT INTO \"orders\" (\"id\", \"tag\") VALUES (?, ?), (?, ?) \
             ON CONFLICT (\"id\") DO UPDATE SET \"tag\" = EXCLUDED.\"tag\"",
        ),
    ] {
        let db = FakeDb::new(dialect).with_table("orders", ORDERS);
        let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
        let batch: Vec<SinkRecord> = [(1, "r1-old"), (2, "r2"), (1, "r1-new")]
            .iter()
            .enumerate()
            .map(|(i, (id, tag))| record(i as u64, "orders", None, Some(&json!({"id": id, "tag": tag}).to_string())))
            .collect();
        let report = put_flushed(&mut s, batch).unwrap();
        assert_eq!(kinds(&report), ["accept"; 3], "{dialect:?}");
        assert_eq!(db.sql_of_batches(), [[expected]], "{dialect:?}");
        // Key 1 once, with its last value.
        assert_eq!(db.written_texts(), ["r1-new", "r2"]);
        assert!(db.fake().copies.is_empty());
    }
}

#[test]
fn runs_keep_the_order_of_records() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(
        &db,
        &[("insert.mode", "upsert"), ("pk.mode", "record_key"), ("delete.enabled", "true"), ("batch.size", "2")],
    );
    let up = |id: u64, k: &str| record(id, "orders", Some(k), Some(&json!({"tag": format!("r{id}")}).to_string()));
    let del = |id: u64, k: &str| record(id, "orders", Some(k), None);
    let batch = vec![
        up(1, r#"{"id": 1}"#),
        up(2, r#"{"id": 2}"#),
        up(3, r#"{"id": 3}"#),
        del(4, r#"{"id": 1}"#),
        del(5, r#"{"id": 2}"#),
        up(6, r#"{"id": 1}"#),
    ];
    let report = put_flushed(&mut s, batch).unwrap();
    assert_eq!(kinds(&report), ["accept"; 6]);
    let upsert = |n: usize| {
        let values: Vec<String> = (0..n).map(|r| format!("(${}, ${})", 2 * r + 1, 2 * r + 2)).collect();
        format!(
            "INSERT INTO \"orders\" (\"id\", \"tag\") VALUES {} ON CONFLICT (\"id\") DO UPDATE SET \"tag\" = EXCLUDED.\"tag\"",
            values.join(", ")
        )
    };
    let delete = "DELETE FROM \"orders\" WHERE \"id\" = $1".to_string();
    // One transaction: upserts of 1, 2 (batch.size) then 3, the deletes of 1 and 2 as one
    // prepared statement over two rows, then 1 again.
    assert_eq!(db.sql_of_batches(), [vec![upsert(2), upsert(1), delete, upsert(1)]]);
    let fake = db.fake();
    assert_eq!(format!("{:?}", fake.batches[0][2].rows), "[[Value::Int(1)], [Value::Int(2)]]");
    assert_eq!(format!("{:?}", fake.batches[0][3].rows), r#"[[Value::Int(1), Value::Text("r6")]]"#);
}

#[test]
fn statements_bind_at_most_max_params() {
    let columns: Vec<(String, String, bool)> = (0..1000).map(|i| (format!("c{i}"), "integer".into(), false)).collect();
    let borrowed: Vec<(&str, &str, bool)> = columns.iter().map(|(n, t, k)| (n.as_str(), t.as_str(), *k)).collect();
    let db = FakeDb::new(Dialect::Sqlite).with_table("wide", &borrowed);
    let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "kafka"), ("auto.evolve", "true")]);
    let value: serde_json::Map<String, serde_json::Value> = (0..1000).map(|i| (format!("c{i}"), json!(i))).collect();
    let value = serde_json::Value::Object(value).to_string();
    let batch: Vec<SinkRecord> = (0..95).map(|i| record(i, "wide", None, Some(&value))).collect();
    let report = s.put(batch).unwrap();
    assert_eq!(accepted(&report), 95);
    let fake = db.fake();
    // 1003 columns a row: 29 rows (29087 parameters) a statement.
    let sizes: Vec<usize> = fake.batches[0].iter().map(|s| s.rows[0].len() / 1003).collect();
    assert_eq!(sizes, [29, 29, 29, 8]);
    assert!(fake.batches[0].iter().all(|s| s.rows[0].len() <= write::MAX_PARAMS));
}

#[test]
fn bisection_finds_the_one_refused_record_among_many() {
    for name_rows in [0, usize::MAX] {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        // Naming a row of a multi-row statement (always row 0: it has one
        // parameter row) must not reject the wrong record.
        db.fake().name_rows = name_rows;
        let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
        let report =
            put_flushed(&mut s, tagged(1000, |i| if i == 377 { "BAD".into() } else { format!("r{i}") })).unwrap();
        let kinds = kinds(&report);
        for (i, kind) in kinds.iter().enumerate() {
            if i == 376 {
                assert_eq!(
                    kind,
                    "reject: the database refused the row: new row violates check constraint \"no_bad\" (code 23514)"
                );
            } else {
                assert_eq!(kind, "accept", "record {}", i + 1);
            }
        }
        // Every other record written exactly once, in order, in one committed batch.
        let expected: Vec<String> = (1..=1000).filter(|&i| i != 377).map(|i| format!("r{i}")).collect();
        assert_eq!(db.written_texts(), expected);
        // Halving 1000 rows down to one: about log2(1000) attempts.
        let attempts = db.fake().batches.len();
        assert!((10..=12).contains(&attempts), "{attempts} attempts");
    }
}

#[test]
fn several_refused_records_are_all_found() {
    let db = FakeDb::new(Dialect::Mysql).with_table("orders", ORDERS);
    let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
    let bad = [1, 64, 65, 200];
    let report =
        put_flushed(&mut s, tagged(200, |i| if bad.contains(&i) { format!("BAD{i}") } else { format!("r{i}") }))
            .unwrap();
    let rejected: Vec<u64> = report
        .outcomes
        .iter()
        .enumerate()
        .filter(|(_, o)| matches!(o, Outcome::Reject(_)))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    assert_eq!(rejected, bad);
    assert_eq!(accepted(&report), 196);
    assert_eq!(db.written_texts().len(), 196);
}

#[test]
fn a_refused_upsert_lets_the_row_it_superseded_be_written() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
    let values = [(1, "r-first"), (2, "r-two"), (1, "BAD-second")];
    let batch: Vec<SinkRecord> = values
        .iter()
        .enumerate()
        .map(|(i, (id, tag))| record(i as u64, "orders", None, Some(&json!({"id": id, "tag": tag}).to_string())))
        .collect();
    let report = put_flushed(&mut s, batch).unwrap();
    let kinds = kinds(&report);
    assert_eq!(kinds[..2], ["accept", "accept"]);
    assert!(kinds[2].starts_with("reject: the database refused the row"), "{kinds:?}");
    // Upserting one after another would have left the first value.
    let mut written = db.written_texts();
    written.sort();
    assert_eq!(written, ["r-first", "r-two"]);
}

#[test]
fn per_row_statements_reject_the_row_the_database_names() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    db.fake().name_rows = usize::MAX;
    let mut s = sink(&db, &[("insert.mode", "update"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
    let report = put_flushed(&mut s, tagged(50, |i| if i == 20 { "BAD".into() } else { format!("r{i}") })).unwrap();
    assert!(matches!(report.outcomes[19], Outcome::Reject(_)));
    assert_eq!(accepted(&report), 49);
    let batches = db.sql_of_batches();
    assert_eq!(batches.len(), 2, "the named row is rejected at once: {batches:?}");
    assert_eq!(batches[1], ["UPDATE \"orders\" SET \"tag\" = $1 WHERE \"id\" = $2"]);
    assert_eq!(db.fake().batches[1][0].rows.len(), 49);
    // Without the row named, halving finds it.
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(&db, &[("insert.mode", "update"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
    let report = put_flushed(&mut s, tagged(50, |i| if i == 20 { "BAD".into() } else { format!("r{i}") })).unwrap();
    assert!(matches!(report.outcomes[19], Outcome::Reject(_)));
    assert_eq!(accepted(&report), 49);
    assert!(db.fake().batches.len() > 2);
}

#[test]
fn copy_in_rejects_refused_rows_and_copies_the_rest() {
    // Never named, always named, and named only once halving made the copies small.
    for name_rows in [0, usize::MAX, 30] {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        db.fake().name_rows = name_rows;
        let mut s = sink(&db, &[]);
        let report =
            put_flushed(&mut s, tagged(100, |i| if i == 42 || i == 43 { format!("BAD{i}") } else { format!("r{i}") }))
                .unwrap();
        let rejected: Vec<usize> = report
            .outcomes
            .iter()
            .enumerate()
            .filter(|(_, o)| matches!(o, Outcome::Reject(_)))
            .map(|(i, _)| i + 1)
            .collect();
        assert_eq!(rejected, [42, 43]);
        assert_eq!(accepted(&report), 98);
        // Each written once, in the records' order.
        let expected: Vec<String> = (1..=100).filter(|i| ![42, 43].contains(i)).map(|i| format!("r{i}")).collect();
        assert_eq!(db.written_texts(), expected, "name_rows {name_rows}");
        if name_rows == usize::MAX {
            assert_eq!(db.fake().copies.len(), 3, "named rows need no halving");
        }
    }
}

#[test]
fn a_copy_that_fails_after_another_committed_settles_exactly() {
    let db = FakeDb::new(Dialect::Postgres)
        .with_table("orders", ORDERS)
        .with_table("audit", &[("tag", "text", false)])
        .with_table("later", &[("tag", "text", false)]);
    db.fake().fail =
        Some(Box::new(|call| (call == "copy audit").then(|| TaskError::Retriable("connection reset".into()))));
    let mut s = sink(&db, &[]);
    let batch = vec![
        record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1"}"#)),
        record(2, "audit", None, Some(r#"{"tag": "r2"}"#)),
        record(3, "orders", None, Some(r#"{"id": 3, "tag": "r3"}"#)),
        record(4, "later", None, Some(r#"{"tag": "r4"}"#)),
        record(5, "orders", None, Some(r#"{"id": 5, "tag": "not json"#)),
    ];
    let report = s.put(batch).unwrap();
    let first = kinds(&report);
    assert_eq!(first[0], "accept");
    assert_eq!(first[2], "accept");
    assert_eq!(first[1], "retry: not written: copy into audit failed: connection reset");
    assert_eq!(first[3], first[1]);
    assert!(first[4].starts_with("reject: the value cannot be read"), "{first:?}");
    assert_eq!(db.written_texts(), ["r1", "r3"]);
    assert!(!db.fake().log.contains(&"copy later".to_string()), "nothing is tried after the failure");

    // When the first copy fails, nothing was written: the whole batch is retried.
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS).with_table("audit", &[("tag", "text", false)]);
    db.fake().fail = Some(Box::new(|call| call.starts_with("copy").then(|| TaskError::Retriable("timeout".into()))));
    let mut s = sink(&db, &[]);
    let batch = vec![
        record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1"}"#)),
        record(2, "audit", None, Some(r#"{"tag": "r2"}"#)),
    ];
    assert_eq!(error(s.put(batch).unwrap_err()), "retriable: timeout");

    // A fatal error after a commit: settled exactly now, the task fails on the next call.
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS).with_table("audit", &[("tag", "text", false)]);
    db.fake().fail =
        Some(Box::new(|call| (call == "copy audit").then(|| TaskError::Fatal("permission denied".into()))));
    let mut s = sink(&db, &[]);
    let report = s
        .put(vec![
            record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1"}"#)),
            record(2, "audit", None, Some(r#"{"tag": "r2"}"#)),
        ])
        .unwrap();
    assert_eq!(kinds(&report), ["accept", "retry: not written: copy into audit failed: permission denied"]);
    assert_eq!(error(s.put(vec![]).unwrap_err()), "fatal: permission denied");
    assert!(s.put(vec![]).is_ok());
}

#[test]
fn batch_errors_fail_the_put_as_they_are() {
    // A write refused when it is begun, and a write made on the spot (after
    // DDL) that fails: the put fails with the error, nothing written. (A
    // write that fails in the background: see the tests of held records.)
    for (call, upsert_qty) in [("begin batch", false), ("batch", true)] {
        for failure in [TaskError::Retriable("deadlock detected".into()), TaskError::Fatal("syntax error".into())] {
            let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
            let e = failure.clone();
            db.fake().fail = Some(Box::new(move |c| (c == call).then(|| e.clone())));
            let mut s = sink(
                &db,
                &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id"), ("auto.evolve", "true")],
            );
            let batch = || match upsert_qty {
                false => tagged(3, |i| format!("r{i}")),
                true => {
                    (1..=3).map(|i| record(i, "orders", None, Some(&json!({"id": i, "qty": i}).to_string()))).collect()
                }
            };
            assert_eq!(error(s.put(batch()).unwrap_err()), error(failure), "{call}");
            assert!(db.written_texts().is_empty());
            // The table is described again after a failure (it may have changed).
            let describes = |db: &FakeDb| db.fake().log.iter().filter(|c| c.starts_with("describe")).count();
            let before = describes(&db);
            db.fake().fail = None;
            assert_eq!(accepted(&put_flushed(&mut s, batch()).unwrap()), 3);
            assert_eq!(describes(&db), before + 1, "{call}");
        }
    }
}

/// An outcome as text, as [`kinds`] gives it.
fn kind(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Accept => "accept".to_string(),
        Outcome::Hold => "hold".to_string(),
        Outcome::Retry(why) => format!("retry: {why}"),
        Outcome::Reject(why) => format!("reject: {why}"),
    }
}

/// Settlements as (id, outcome as text).
fn settlements(settled: &[Settlement]) -> Vec<(u64, String)> {
    settled.iter().map(|s| (s.id, kind(&s.outcome))).collect()
}

/// `{"id": key, "tag": tag}` of `orders`, as record `id`.
fn keyed(id: u64, key: u64, tag: &str) -> SinkRecord {
    record(id, "orders", None, Some(&json!({"id": key, "tag": tag}).to_string()))
}

/// The write calls begun so far.
fn begun(db: &FakeDb) -> Vec<String> {
    db.fake().log.iter().filter(|c| c.starts_with("begin")).cloned().collect()
}

/// Upserts go by one execute-batch, plain inserts on PostgreSQL by one
/// copy-in: either is begun in the host, with the sink's settings for it.
const BACKGROUND: [(&str, &str); 2] = [("upsert", "begin batch"), ("insert", "begin copy orders")];

fn keyed_sink(db: &FakeDb, mode: &str) -> SqlSink {
    sink(db, &[("insert.mode", mode), ("pk.mode", "record_value"), ("pk.fields", "id")])
}

#[test]
fn held_records_are_accepted_by_the_next_put_flush_or_empty_put() {
    for (mode, begin) in BACKGROUND {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        let mut s = keyed_sink(&db, mode);
        let batch = |ids: std::ops::RangeInclusive<u64>| ids.map(|i| keyed(i, i, &format!("r{i}"))).collect::<Vec<_>>();
        let accepts = |ids: &[u64]| ids.iter().map(|&i| (i, "accept".to_string())).collect::<Vec<_>>();

        let first = s.put(batch(1..=3)).unwrap();
        assert_eq!(kinds(&first), ["hold"; 3], "{mode}");
        assert!(first.settled.is_empty());
        assert_eq!(begun(&db), [begin]);

        // The next put holds its own records and settles the earlier ones; a
        // record that cannot become a row is rejected at once.
        let mut second = batch(4..=5);
        second.push(record(9, "orders", None, Some("nope")));
        let second = s.put(second).unwrap();
        assert_eq!(kinds(&second)[..2], ["hold", "hold"]);
        assert!(kinds(&second)[2].starts_with("reject: the value cannot be read"), "{:?}", kinds(&second));
        assert_eq!(settlements(&second.settled), accepts(&[1, 2, 3]));

        // put([]) when idle settles what is held, and then asks nothing.
        let idle = s.put(vec![]).unwrap();
        assert!(idle.outcomes.is_empty());
        assert_eq!(settlements(&idle.settled), accepts(&[4, 5]));
        let calls = db.fake().log.len();
        assert!(s.put(vec![]).unwrap().settled.is_empty());
        assert!(s.flush(FlushScope::All).unwrap().is_empty());
        assert_eq!(db.fake().log.len(), calls, "nothing held, nothing asked");

        // A flush of any scope settles the write in flight.
        assert_eq!(kinds(&s.put(batch(6..=8)).unwrap()), ["hold"; 3]);
        assert_eq!(settlements(&s.flush(FlushScope::Records(vec![7])).unwrap()), accepts(&[6, 7, 8]));
        assert!(s.flush(FlushScope::All).unwrap().is_empty());
        assert_eq!(db.written_texts(), (1..=8).map(|i| format!("r{i}")).collect::<Vec<_>>(), "{mode}");
        assert_eq!(begun(&db).len(), 3);
    }
}

#[test]
fn a_row_refused_in_flight_is_rejected_and_the_rest_of_both_batches_written_in_order() {
    for (mode, _) in BACKGROUND {
        // The refused row never named (halving finds it), or named.
        for name_rows in [0, usize::MAX] {
            let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
            db.fake().name_rows = name_rows;
            let mut s = keyed_sink(&db, mode);
            let first = s.put(tagged(100, |i| if i == 37 { "BAD".into() } else { format!("r{i}") })).unwrap();
            assert_eq!(kinds(&first), ["hold"; 100]);
            let second = s.put((101..=150).map(|i| keyed(i, i, &format!("r{i}"))).collect()).unwrap();
            assert_eq!(kinds(&second), ["hold"; 50]);
            // Every record of the first batch settled once, in order; 37 rejected.
            let settled = settlements(&second.settled);
            assert_eq!(settled.iter().map(|(id, _)| *id).collect::<Vec<_>>(), (1..=100).collect::<Vec<_>>());
            for (id, kind) in &settled {
                if *id == 37 {
                    assert!(kind.starts_with("reject: the database refused the row"), "{mode}: {kind}");
                } else {
                    assert_eq!(kind, "accept", "{mode}: record {id}");
                }
            }
            // The first batch's other rows were written (again) before anything
            // of the second: the fake fails on a write while another is in
            // flight, and here the order of the rows committed says it.
            assert_eq!(settlements(&s.flush(FlushScope::All).unwrap()).len(), 50);
            let expected: Vec<String> = (1..=150).filter(|&i| i != 37).map(|i| format!("r{i}")).collect();
            assert_eq!(db.written_texts(), expected, "{mode}, name_rows {name_rows}");
        }
    }
}

#[test]
fn a_retriable_failure_in_flight_retries_its_records_and_the_next_batch_unwritten() {
    for (mode, begin) in BACKGROUND {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        // The first write fails in the background.
        let call = begin.strip_prefix("begin ").unwrap();
        let mut failures = 1;
        db.fake().fail = Some(Box::new(move |c| {
            (c == call && failures > 0).then(|| {
                failures -= 1;
                TaskError::Retriable("deadlock detected".into())
            })
        }));
        let mut s = keyed_sink(&db, mode);
        let first = || (1..=3).map(|i| keyed(i, i, &format!("r{i}"))).collect::<Vec<_>>();
        // Later records of the same keys.
        let later = || (4..=6).map(|i| keyed(i, i - 3, &format!("r{i}"))).collect::<Vec<_>>();
        assert_eq!(kinds(&s.put(first()).unwrap()), ["hold"; 3]);
        let report = s.put(later()).unwrap();
        let retry = "retry: not written: deadlock detected";
        assert_eq!(kinds(&report), [retry; 3], "{mode}");
        assert_eq!(settlements(&report.settled), (1..=3).map(|i| (i, retry.to_string())).collect::<Vec<_>>());
        // Nothing of the later batch was sent.
        assert_eq!(begun(&db), [begin]);
        assert!(db.written_texts().is_empty());

        // Delivered again, in order: each key's later value is written last.
        assert_eq!(kinds(&s.put(first()).unwrap()), ["hold"; 3]);
        let report = s.put(later()).unwrap();
        assert_eq!(kinds(&report), ["hold"; 3]);
        let accepts = |ids: std::ops::RangeInclusive<u64>| ids.map(|i| (i, "accept".to_string())).collect::<Vec<_>>();
        assert_eq!(settlements(&report.settled), accepts(1..=3));
        assert_eq!(settlements(&s.flush(FlushScope::All).unwrap()), accepts(4..=6));
        assert_eq!(db.written_texts(), ["r1", "r2", "r3", "r4", "r5", "r6"]);
    }
}

#[test]
fn a_fatal_failure_in_flight_fails_the_call() {
    for settle_by in ["put", "put([])", "flush"] {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        db.fake().fail = Some(Box::new(|call| (call == "batch").then(|| TaskError::Fatal("permission denied".into()))));
        let mut s = keyed_sink(&db, "upsert");
        assert_eq!(kinds(&s.put(tagged(3, |i| format!("r{i}"))).unwrap()), ["hold"; 3]);
        let result = match settle_by {
            "put" => s.put((4..=5).map(|i| keyed(i, i, &format!("r{i}"))).collect()).map(|_| ()),
            "put([])" => s.put(vec![]).map(|_| ()),
            _ => s.flush(FlushScope::All).map(|_| ()),
        };
        assert_eq!(error(result.unwrap_err()), "fatal: permission denied", "{settle_by}");
        assert_eq!(begun(&db).len(), 1, "nothing more was sent");
    }
}

#[test]
fn a_write_still_running_at_the_end_of_the_call_stays_held() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = keyed_sink(&db, "upsert");
    let second = || (4..=5).map(|i| keyed(i, i, &format!("r{i}"))).collect::<Vec<_>>();
    assert_eq!(kinds(&s.put(tagged(3, |i| format!("r{i}"))).unwrap()), ["hold"; 3]);
    // Nothing could be settled: each call fails retriably, nothing is sent,
    // and the write stays in flight (it may well commit).
    let still = "retriable: the batch is still running at the end of the plugin call";
    db.fake().stalls = 1;
    assert_eq!(error(s.put(second()).unwrap_err()), still);
    db.fake().stalls = 1;
    assert_eq!(error(s.flush(FlushScope::All).unwrap_err()), still);
    db.fake().stalls = 1;
    assert_eq!(error(s.put(vec![]).unwrap_err()), still);
    assert_eq!(begun(&db).len(), 1);
    // Then it ends: its records are accepted, once.
    let report = s.put(second()).unwrap();
    assert_eq!(kinds(&report), ["hold"; 2]);
    assert_eq!(settlements(&report.settled), (1..=3).map(|i| (i, "accept".to_string())).collect::<Vec<_>>());
    assert_eq!(settlements(&s.flush(FlushScope::All).unwrap()).len(), 2);
    assert!(s.flush(FlushScope::All).unwrap().is_empty());
    assert_eq!(db.written_texts(), ["r1", "r2", "r3", "r4", "r5"]);
}

#[test]
fn a_put_that_settled_held_records_and_then_fails_returns_them() {
    for failure in [TaskError::Retriable("lock timeout".into()), TaskError::Fatal("permission denied".into())] {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        let mut s = keyed_sink(&db, "upsert");
        assert_eq!(kinds(&s.put(tagged(3, |i| format!("r{i}"))).unwrap()), ["hold"; 3]);
        // The next batch's write is refused when begun, after the first
        // batch's records were settled: they are returned, the batch retried.
        let e = failure.clone();
        db.fake().fail = Some(Box::new(move |call| (call == "begin batch").then(|| e.clone())));
        let second = || (4..=5).map(|i| keyed(i, i, &format!("r{i}"))).collect::<Vec<_>>();
        let report = s.put(second()).unwrap();
        let why = error(failure.clone());
        let why = why.split_once(": ").unwrap().1;
        assert_eq!(kinds(&report), vec![format!("retry: not written: {why}"); 2]);
        assert_eq!(settlements(&report.settled), (1..=3).map(|i| (i, "accept".to_string())).collect::<Vec<_>>());
        db.fake().fail = None;
        match failure {
            // A fatal error fails the task on the next call.
            TaskError::Fatal(_) => assert_eq!(error(s.put(second()).unwrap_err()), "fatal: permission denied"),
            TaskError::Retriable(_) => assert_eq!(accepted(&put_flushed(&mut s, second()).unwrap()), 2),
        }
    }
}

#[test]
fn ddl_waits_for_the_write_in_flight_and_its_batch_is_written_on_the_spot() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(
        &db,
        &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id"), ("auto.evolve", "true")],
    );
    let first = s.put(tagged(3, |i| if i == 2 { "BAD".into() } else { format!("r{i}") })).unwrap();
    assert_eq!(kinds(&first), ["hold"; 3]);
    // A new field: the write in flight is settled (its refused row found and
    // the rest written) before the ALTER (the fake fails on DDL while a
    // write is in flight), and the batch is written before the put returns.
    let report = s.put(vec![record(4, "orders", None, Some(r#"{"id": 4, "tag": "r4", "qty": 1}"#))]).unwrap();
    assert_eq!(kinds(&report), ["accept"]);
    let settled = settlements(&report.settled);
    assert_eq!((settled[0].1.as_str(), settled[2].1.as_str()), ("accept", "accept"));
    assert!(settled[1].1.starts_with("reject: the database refused the row"), "{settled:?}");
    let log: Vec<String> = db.fake().log.iter().map(|c| c.split(" \"").next().unwrap().to_string()).collect();
    // The write begun, refused; halving finds the row; the ALTER; the new batch.
    let begun = ["describe orders", "begin batch", "batch"];
    let halving = ["batch"; 3];
    let then = ["execute ALTER TABLE", "describe orders", "batch"];
    assert_eq!(log, [&begun[..], &halving, &then].concat());
    assert_eq!(db.written_texts(), ["r1", "r3", "r4"]);
    assert!(s.flush(FlushScope::All).unwrap().is_empty());
}

/// What became of the deliveries of a stream of records.
#[derive(Default)]
struct Tally {
    /// Final outcomes per delivery id.
    settled: std::collections::HashMap<u64, usize>,
    held: std::collections::HashSet<u64>,
    /// Sequence numbers of the records accepted, rejected, and to retry.
    accepted: Vec<u64>,
    rejected: Vec<u64>,
    retried: Vec<u64>,
}

impl Tally {
    fn settle(&mut self, id: u64, seq: u64, outcome: Outcome) {
        if let Outcome::Hold = outcome {
            assert!(self.held.insert(id), "{id} held twice");
            return;
        }
        *self.settled.entry(id).or_default() += 1;
        match outcome {
            Outcome::Accept => self.accepted.push(seq),
            Outcome::Reject(_) => self.rejected.push(seq),
            Outcome::Retry(_) => self.retried.push(seq),
            Outcome::Hold => unreachable!(),
        }
    }
}

/// The next number of a pseudo-random sequence.
fn roll(state: &RefCell<u64>, below: u64) -> u64 {
    let mut x = state.borrow_mut();
    *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*x >> 33) % below
}

#[test]
fn every_record_is_settled_exactly_once_across_many_puts() {
    use std::collections::{HashMap, VecDeque};
    for (mode, _) in BACKGROUND {
        let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
        // Faults at random: writes that fail retriably (in the background or
        // when written again), writes refused when begun.
        let rng = Rc::new(RefCell::new(7_u64));
        let faults = Rc::clone(&rng);
        db.fake().fail = Some(Box::new(move |call| {
            let roll = roll(&faults, 100);
            match call {
                "batch" | "copy orders" if roll < 15 => Some(TaskError::Retriable("deadlock detected".into())),
                c if c.starts_with("begin") && roll < 5 => Some(TaskError::Retriable("lock timeout".into())),
                _ => None,
            }
        }));
        let mut s = keyed_sink(&db, mode);
        // Records by sequence number, 13 keys; some refused by the database,
        // some not JSON. Each delivery has an id of its own, as the host gives.
        let value = |seq: u64| match seq {
            _ if seq.is_multiple_of(31) => "nope".to_string(),
            _ if seq.is_multiple_of(29) => json!({"id": seq % 13, "tag": format!("BAD{seq}")}).to_string(),
            _ => json!({"id": seq % 13, "tag": format!("r{seq}")}).to_string(),
        };
        let mut queue: VecDeque<u64> = (1..=600).collect();
        let mut seq_of: HashMap<u64, u64> = HashMap::new();
        let mut tally = Tally::default();
        let mut again: Option<Vec<SinkRecord>> = None;
        for step in 0.. {
            assert!(step < 5000, "{mode}: no end");
            if queue.is_empty() && tally.held.is_empty() && again.is_none() {
                break;
            }
            if roll(&rng, 10) == 0 {
                db.fake().stalls = 1;
            }
            let settlements = if !tally.held.is_empty() && again.is_none() && roll(&rng, 4) == 0 {
                let result = match roll(&rng, 2) {
                    0 => s.put(vec![]).map(|r| {
                        assert!(r.outcomes.is_empty());
                        r.settled
                    }),
                    _ => s.flush(FlushScope::Records(vec![*tally.held.iter().next().unwrap()])),
                };
                match result {
                    Ok(settled) => settled,
                    Err(TaskError::Retriable(_)) => Vec::new(),
                    Err(e) => panic!("{mode}: {e:?}"),
                }
            } else {
                let batch = again.take().unwrap_or_else(|| {
                    let n = 1 + roll(&rng, 40) as usize;
                    (0..n.min(queue.len()))
                        .map(|_| {
                            let seq = queue.pop_front().unwrap();
                            let id = seq_of.len() as u64;
                            seq_of.insert(id, seq);
                            record(id, "orders", None, Some(&value(seq)))
                        })
                        .collect()
                });
                match s.put(batch.clone()) {
                    Ok(report) => {
                        assert_eq!(report.outcomes.len(), batch.len());
                        for (record, outcome) in batch.iter().zip(report.outcomes) {
                            tally.settle(record.id, seq_of[&record.id], outcome);
                        }
                        report.settled
                    }
                    // The host puts the same records again.
                    Err(TaskError::Retriable(_)) => {
                        again = Some(batch);
                        Vec::new()
                    }
                    Err(e) => panic!("{mode}: {e:?}"),
                }
            };
            for Settlement { id, outcome } in settlements {
                assert!(tally.held.remove(&id), "{mode}: {id} settled, but not held");
                tally.settle(id, seq_of[&id], outcome);
            }
            // Records to retry are delivered again, in order, before the rest.
            tally.retried.sort();
            for seq in tally.retried.drain(..).rev() {
                queue.push_front(seq);
            }
        }
        let Tally { settled, accepted, rejected, .. } = tally;
        assert_eq!(settled.len(), seq_of.len(), "{mode}: every delivery settled");
        assert!(settled.values().all(|&n| n == 1), "{mode}: every delivery settled once");
        // Each record accepted or rejected, once: not JSON, rejected; refused
        // by the database, rejected (or accepted with the later upsert of
        // its key that superseded it in a statement); the others accepted.
        let mut all = [accepted.clone(), rejected.clone()].concat();
        all.sort();
        assert_eq!(all, (1..=600).collect::<Vec<_>>(), "{mode}");
        let not_json = |seq: u64| seq.is_multiple_of(31);
        let refused = |seq: u64| not_json(seq) || seq.is_multiple_of(29);
        assert!(rejected.iter().all(|&seq| refused(seq)), "{mode}: {rejected:?}");
        assert!((1..=600).filter(|&seq| not_json(seq)).all(|seq| rejected.contains(&seq)), "{mode}");
        if mode == "insert" {
            assert_eq!(rejected.len(), (1..=600).filter(|&seq| refused(seq)).count());
        }
        assert!(seq_of.len() > 700, "{mode}: faults were met ({} deliveries)", seq_of.len());
        // Each key's rows were written in the records' order.
        let fake = db.fake();
        let values: Vec<&Value> = fake.written.iter().flatten().collect();
        let mut last: HashMap<i64, u64> = HashMap::new();
        for pair in values.chunks(2) {
            let (Value::Int(key), Value::Text(tag)) = (pair[0], pair[1]) else { panic!("{pair:?}") };
            let seq: u64 = tag.trim_start_matches('r').parse().unwrap();
            assert!(
                last.insert(*key, seq).is_none_or(|before| before < seq),
                "{mode}: key {key}: {seq} after a later one"
            );
        }
    }
}

#[test]
fn tables_are_described_once_and_cached() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(&db, &[]);
    s.put(tagged(2, |i| format!("r{i}"))).unwrap();
    s.put(tagged(2, |i| format!("r{i}"))).unwrap();
    let describes: Vec<String> = db.fake().log.iter().filter(|c| c.starts_with("describe")).cloned().collect();
    assert_eq!(describes, ["describe orders"]);
}

#[test]
fn auto_create_makes_the_table_from_the_schema() {
    let value = json!({"schema": {"type": "struct", "fields": [
        {"field": "id", "type": "int64"},
        {"field": "name", "type": "string"},
        {"field": "note", "type": "string", "optional": true},
        {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "optional": true},
        {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date", "optional": true},
        {"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "optional": true},
        {"field": "attrs", "type": "map", "keys": {"type": "string"}, "values": {"type": "string"}, "optional": true}]},
        "payload": {"id": 1, "name": "a", "price": "MDk=", "day": 19723, "at": 1704067200000_i64, "attrs": {"k": "v"}}})
    .to_string();
    let expected = [
        (
            Dialect::Postgres,
            "CREATE TABLE IF NOT EXISTS \"app\".\"orders\" (\n\"id\" BIGINT NOT NULL,\n\"name\" TEXT NOT NULL,\n\
             \"note\" TEXT,\n\"price\" NUMERIC,\n\"day\" DATE,\n\"at\" TIMESTAMP,\n\"attrs\" JSONB,\nPRIMARY KEY (\"id\")\n)",
        ),
        (
            Dialect::Mysql,
            "CREATE TABLE IF NOT EXISTS `app`.`orders` (\n`id` BIGINT NOT NULL,\n`name` TEXT NOT NULL,\n`note` TEXT,\n\
             `price` DECIMAL(65,2),\n`day` DATE,\n`at` DATETIME(6),\n`attrs` JSON,\nPRIMARY KEY (`id`)\n)",
        ),
        (
            Dialect::Sqlite,
            "CREATE TABLE IF NOT EXISTS \"app\".\"orders\" (\n\"id\" INTEGER NOT NULL,\n\"name\" TEXT NOT NULL,\n\
             \"note\" TEXT,\n\"price\" NUMERIC,\n\"day\" TEXT,\n\"at\" TEXT,\n\"attrs\" TEXT,\nPRIMARY KEY (\"id\")\n)",
        ),
    ];
    for (dialect, create) in expected {
        let db = FakeDb::new(dialect);
        let mut s = sink(
            &db,
            &[
                ("auto.create", "true"),
                ("table.name.format", "app.${topic}"),
                ("pk.mode", "record_value"),
                ("pk.fields", "id"),
                ("insert.mode", "upsert"),
            ],
        );
        let report = s.put(vec![record(1, "orders", None, Some(&value))]).unwrap();
        assert_eq!(kinds(&report), ["accept"], "{dialect:?}");
        let log = db.fake().log.clone();
        assert_eq!(
            log[..4],
            [
                "describe app.orders".to_string(),
                format!("execute {create}"),
                "describe app.orders".into(),
                "batch".into()
            ]
        );
        let fake = db.fake();
        let params = format!("{:?}", fake.batches[0][0].rows[0]);
        let attrs = if dialect == Dialect::Postgres || dialect == Dialect::Mysql {
            r#"Value::Json("{\"k\":\"v\"}")"#
        } else {
            r#"Value::Text("{\"k\":\"v\"}")"#
        };
        // On SQLite's TEXT columns too, dates and times go as what they are, rendered by the host.
        let temporal = "Value::Date(19723), Value::Timestamp(1704067200000000)";
        assert_eq!(
            params,
            format!(r#"[Value::Int(1), Value::Text("a"), Value::Null, Value::Decimal("123.45"), {temporal}, {attrs}]"#),
            "{dialect:?}"
        );
    }
}

#[test]
fn a_missing_table_without_auto_create_fails_the_task_naming_the_key() {
    let db = FakeDb::new(Dialect::Postgres);
    let mut s = sink(&db, &[]);
    let failure = error(s.put(tagged(1, |_| "r".into())).unwrap_err());
    assert_eq!(failure, "fatal: table orders does not exist: create it, or set auto.create=true");
}

#[test]
fn two_tasks_creating_the_same_table_both_go_on() {
    let db = FakeDb::new(Dialect::Postgres);
    db.fake().lose_ddl_race = true;
    let mut s = sink(&db, &[("auto.create", "true")]);
    let report = s.put(tagged(2, |i| format!("r{i}"))).unwrap();
    assert_eq!(kinds(&report), ["accept"; 2]);
    assert_eq!(db.written_texts(), ["r1", "r2"]);
}

#[test]
fn auto_evolve_adds_nullable_columns() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(
        &db,
        &[("auto.evolve", "true"), ("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")],
    );
    let batch = vec![
        record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1", "qty": 5, "gone": null}"#)),
        record(2, "orders", None, Some(r#"{"id": 2, "tag": "r2", "meta": {"a": [1]}}"#)),
        // The same fields, first null then typed: a column for the typed one.
        record(3, "orders", None, Some(r#"{"id": 3, "tag": "r3", "late": null}"#)),
        record(4, "orders", None, Some(r#"{"id": 4, "tag": "r4", "late": "now"}"#)),
    ];
    let report = s.put(batch).unwrap();
    assert_eq!(kinds(&report), ["accept"; 4]);
    let fake = db.fake();
    let ddl: Vec<&String> = fake.log.iter().filter(|c| c.starts_with("execute")).collect();
    assert_eq!(
        ddl,
        [
            "execute ALTER TABLE \"orders\" ADD COLUMN IF NOT EXISTS \"qty\" BIGINT",
            "execute ALTER TABLE \"orders\" ADD COLUMN IF NOT EXISTS \"meta\" JSONB",
            "execute ALTER TABLE \"orders\" ADD COLUMN IF NOT EXISTS \"late\" TEXT"
        ]
    );
    assert!(
        fake.batches[0][2]
            .sql
            .starts_with("INSERT INTO \"orders\" (\"id\", \"late\", \"tag\") VALUES ($1, $2, $3), ($4, $5, $6)")
    );
    // Described again after the DDL; a field only seen null makes no column and is left out.
    assert_eq!(fake.log.iter().filter(|c| c.starts_with("describe")).count(), 2);
    assert_eq!(fake.batches[0][0].sql.matches("INSERT").count(), 1);
    assert!(
        fake.batches[0][0].sql.starts_with("INSERT INTO \"orders\" (\"id\", \"qty\", \"tag\") VALUES ($1, $2, $3)")
    );
    assert!(
        fake.batches[0][1].sql.starts_with("INSERT INTO \"orders\" (\"id\", \"meta\", \"tag\") VALUES ($1, $2, $3)")
    );
    assert_eq!(format!("{:?}", fake.batches[0][1].rows[0][1]), r#"Value::Json("{\"a\":[1]}")"#);
}

#[test]
fn a_column_another_task_added_first_is_found() {
    let db = FakeDb::new(Dialect::Mysql).with_table("orders", ORDERS);
    db.fake().lose_ddl_race = true;
    let mut s = sink(&db, &[("auto.evolve", "true")]);
    let report = s.put(vec![record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1", "qty": 5}"#))]).unwrap();
    assert_eq!(kinds(&report), ["accept"]);
    // MySQL takes plain inserts as multi-row INSERTs (copy-in is PostgreSQL's COPY only).
    let insert = db.fake().batches[0][0].sql.clone();
    assert!(insert.contains("(`id`, `qty`, `tag`)"), "{insert}");
    // A column that is still missing after a failed ALTER fails the task with the error.
    let db = FakeDb::new(Dialect::Mysql).with_table("orders", ORDERS);
    db.fake().fail = Some(Box::new(|call| {
        call.starts_with("execute ALTER").then(|| TaskError::Retriable("lock wait timeout".into()))
    }));
    let mut s = sink(&db, &[("auto.evolve", "true")]);
    let failure =
        error(s.put(vec![record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1", "qty": 5}"#))]).unwrap_err());
    assert_eq!(failure, "retriable: lock wait timeout");
}

#[test]
fn a_new_field_without_auto_evolve_fails_the_task_naming_the_key() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(&db, &[]);
    let failure =
        error(s.put(vec![record(1, "orders", None, Some(r#"{"id": 1, "tag": "r1", "qty": 5}"#))]).unwrap_err());
    assert_eq!(failure, "fatal: table orders has no column for field(s) qty: add them, or set auto.evolve=true");
}

#[test]
fn values_are_bound_by_the_columns_catalogue_type() {
    let db = FakeDb::new(Dialect::Postgres).with_table(
        "events",
        &[
            ("id", "uuid", true),
            ("doc", "jsonb", false),
            ("raw", "json", false),
            ("amount", "numeric(12,2)", false),
            ("day", "date", false),
            ("at", "timestamp with time zone", false),
            ("n", "integer", false),
            ("ratio", "double precision", false),
        ],
    );
    let mut s = sink(&db, &[("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")]);
    let value = json!({"id": "123e4567-e89b-12d3-a456-426614174000", "doc": {"a": {"b": [1, 2]}}, "raw": "text",
        "amount": "12.50", "day": "2024-01-01", "at": "2024-01-01T00:00:00Z", "n": 3, "ratio": 1});
    let mut bad = value.clone();
    bad["n"] = json!("three");
    let batch =
        vec![record(1, "events", None, Some(&value.to_string())), record(2, "events", None, Some(&bad.to_string()))];
    let report = put_flushed(&mut s, batch).unwrap();
    let kinds = kinds(&report);
    assert_eq!(kinds[0], "accept");
    assert_eq!(
        kinds[1],
        "reject: field 'n' (string) cannot go into column n (integer) of table events: string does not fit"
    );
    let fake = db.fake();
    assert_eq!(
        format!("{:?}", fake.batches[0][0].rows[0]),
        "[Value::Uuid(\"123e4567-e89b-12d3-a456-426614174000\"), Value::Decimal(\"12.50\"), \
         Value::Timestamp(1704067200000000), Value::Date(19723), Value::Json(\"{\\\"a\\\":{\\\"b\\\":[1,2]}}\"), \
         Value::Int(3), Value::Double(1.0), Value::Json(\"\\\"text\\\"\")]"
    );
    // The key, then the value's fields (plain JSON: in name order).
    assert!(fake.batches[0][0].sql.starts_with(
        "INSERT INTO \"events\" (\"id\", \"amount\", \"at\", \"day\", \"doc\", \"n\", \"ratio\", \"raw\")"
    ));
}

#[test]
fn tombstones_delete_by_key_or_are_rejected() {
    let db = FakeDb::new(Dialect::Mysql).with_table("orders", ORDERS);
    let mut s = sink(&db, &[("pk.mode", "record_key"), ("delete.enabled", "true"), ("pk.fields", "id")]);
    let batch = vec![
        record(1, "orders", Some("7"), Some(r#"{"tag": "r1"}"#)),
        record(2, "orders", Some("7"), None),
        record(3, "orders", None, None),
    ];
    let report = put_flushed(&mut s, batch).unwrap();
    assert_eq!(kinds(&report)[..2], ["accept", "accept"]);
    assert_eq!(kinds(&report)[2], "reject: the record has no key, and pk.mode=record_key");
    // A delete among the inserts: one transaction, not copy-in.
    assert_eq!(
        db.sql_of_batches(),
        [["INSERT INTO `orders` (`id`, `tag`) VALUES (?, ?)", "DELETE FROM `orders` WHERE `id` = ?"]]
    );
    assert!(db.fake().copies.is_empty());

    let db = FakeDb::new(Dialect::Mysql).with_table("orders", ORDERS);
    let mut s = sink(&db, &[("pk.mode", "record_key"), ("pk.fields", "id")]);
    let report = put_flushed(&mut s, vec![record(1, "orders", Some("7"), None)]).unwrap();
    assert_eq!(kinds(&report), ["reject: a tombstone (null value), and delete.enabled=false: nothing to write"]);
    assert!(db.fake().log.is_empty(), "nothing to write, nothing asked");
}

#[test]
fn pk_kafka_updates_by_coordinates() {
    let db = FakeDb::new(Dialect::Sqlite).with_table(
        "orders",
        &[
            ("__connect_topic", "text", true),
            ("__connect_partition", "integer", true),
            ("__connect_offset", "integer", true),
            ("tag", "text", false),
        ],
    );
    let mut s = sink(&db, &[("pk.mode", "kafka"), ("insert.mode", "update")]);
    let report = put_flushed(&mut s, vec![record(9, "orders", None, Some(r#"{"tag": "r9"}"#))]).unwrap();
    assert_eq!(kinds(&report), ["accept"]);
    assert_eq!(
        db.sql_of_batches(),
        [[
            "UPDATE \"orders\" SET \"tag\" = ? WHERE \"__connect_topic\" = ? AND \"__connect_partition\" = ? AND \"__connect_offset\" = ?"
        ]]
    );
    assert_eq!(
        format!("{:?}", db.fake().batches[0][0].rows),
        r#"[[Value::Text("r9"), Value::Text("orders"), Value::Int(0), Value::Int(9)]]"#
    );
}

#[test]
fn unquoted_identifiers_on_postgres_match_folded_names() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", &[("id", "bigint", true), ("tagname", "text", false)]);
    let mut s = sink(
        &db,
        &[
            ("quote.sql.identifiers", "never"),
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
        ],
    );
    let report = put_flushed(&mut s, vec![record(1, "Orders", None, Some(r#"{"id": 1, "tagName": "r1"}"#))]).unwrap();
    assert_eq!(kinds(&report), ["accept"]);
    assert_eq!(db.fake().log[0], "describe orders");
    assert_eq!(
        db.sql_of_batches(),
        [[
            "INSERT INTO Orders (id, tagname) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET tagname = EXCLUDED.tagname"
        ]]
    );
    // copy-in gets the catalogue's names.
    let mut s = sink(&db, &[("quote.sql.identifiers", "never")]);
    put_flushed(&mut s, vec![record(2, "Orders", None, Some(r#"{"id": 2, "tagName": "r2"}"#))]).unwrap();
    let fake = db.fake();
    assert_eq!(
        (fake.copies[0].0.as_str(), fake.copies[0].1.as_slice()),
        ("orders", ["id", "tagname"].map(String::from).as_slice())
    );
}

#[test]
fn a_bad_table_name_from_the_topic_fails_the_task() {
    let db = FakeDb::new(Dialect::Postgres);
    let mut s = sink(&db, &[]);
    let failure = error(s.put(vec![record(1, "a.b.c", None, Some(r#"{"id": 1}"#))]).unwrap_err());
    assert!(failure.starts_with("fatal: table.name.format") && failure.contains("'a.b.c'"), "{failure}");
}

#[test]
fn empty_and_all_rejected_batches_touch_nothing() {
    let db = FakeDb::new(Dialect::Postgres).with_table("orders", ORDERS);
    let mut s = sink(&db, &[]);
    assert!(s.put(vec![]).unwrap().outcomes.is_empty());
    let report = s.put(vec![record(1, "orders", None, Some("nope"))]).unwrap();
    assert!(matches!(&report.outcomes[0], Outcome::Reject(_)));
    assert!(db.fake().log.is_empty());
    assert!(s.flush(FlushScope::All).unwrap().is_empty());
}

#[test]
fn validation_names_the_keys() {
    let config = Config::from(vec![
        ("insert.mode".to_string(), "upsert".to_string()),
        ("batch.size".to_string(), "-1".to_string()),
    ]);
    let errors: Vec<String> = SqlSink::validate(&config).into_iter().map(|e| e.key).collect();
    assert_eq!(errors, ["batch.size", "insert.mode"]);
    assert!(SqlSink::validate(&Config::default()).is_empty());
}

#[test]
fn readme_lists_every_config_key_as_metadata_declares_it() {
    let table =
        spillway_sdk::readme_key_table(include_str!("../README.md")).expect("README has the config-keys markers");
    let expected = spillway_sdk::markdown_key_table(&SqlSink::metadata().config);
    assert!(
        table == expected,
        "plugins/sql-sink/README.md's key table differs from SqlSink::metadata(); put this between the markers:\n\n{expected}"
    );
}

/// A database that answers at once: what the sink itself costs per record.
struct NullDb(Vec<Column>);

/// A write that ended when it was begun.
struct Ended(Result<BatchOutcome, TaskError>);

impl Pending for Ended {
    fn wait(&mut self) -> Result<BatchOutcome, TaskError> {
        self.0.clone()
    }
    fn running(&self) -> bool {
        false
    }
}

impl Db for NullDb {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }
    fn execute_batch(&mut self, statements: &[Statement]) -> Result<BatchOutcome, TaskError> {
        Ok(BatchOutcome::Committed(statements.iter().map(|s| s.rows.len() as u64).collect()))
    }
    fn begin_batch(&mut self, statements: &[Statement]) -> Result<Box<dyn Pending>, TaskError> {
        Ok(Box::new(Ended(self.execute_batch(statements))))
    }
    fn begin_copy_in(&mut self, t: &str, c: &[String], rows: &[Vec<Value>]) -> Result<Box<dyn Pending>, TaskError> {
        Ok(Box::new(Ended(self.copy_in(t, c, rows))))
    }
    fn execute(&mut self, _sql: &str) -> Result<u64, TaskError> {
        Ok(0)
    }
    fn copy_in(&mut self, _t: &str, _c: &[String], rows: &[Vec<Value>]) -> Result<BatchOutcome, TaskError> {
        Ok(BatchOutcome::Committed(vec![rows.len() as u64]))
    }
    fn describe_table(&mut self, _table: &str) -> Result<Option<Vec<Column>>, TaskError> {
        Ok(Some(self.0.clone()))
    }
}

/// `cargo test --release -p sql-sink -- --ignored --nocapture cost`: the
/// sink's own time per record, natively, for the benchmark's records.
#[test]
#[ignore]
fn cost_per_record() {
    let columns = [
        ("id", "text", true),
        ("n", "bigint", false),
        ("name", "text", false),
        ("amount", "double precision", false),
        ("ok", "boolean", false),
    ]
    .iter()
    .map(|(n, t, pk)| Column { name: n.to_string(), data_type: t.to_string(), nullable: !pk, primary_key: *pk })
    .collect::<Vec<_>>();
    let batch: Vec<SinkRecord> = (0..500)
        .map(|i| {
            let value = format!(
                r#"{{"id":"record-{i}","n":{i},"name":"customer {i} of the benchmark","amount":{},"ok":{}}}"#,
                i as f64 * 1.25,
                i % 3 == 0
            );
            record(i, "bench", Some("k"), Some(&value))
        })
        .collect();
    for mode in [
        vec![("insert.mode", "insert")],
        vec![("insert.mode", "upsert"), ("pk.mode", "record_value"), ("pk.fields", "id")],
    ] {
        let mut sink = SqlSink::with_db(settings(&mode), Box::new(NullDb(columns.clone())));
        let started = std::time::Instant::now();
        for _ in 0..60 {
            sink.put(batch.clone()).unwrap();
        }
        println!("{mode:?}: {:.2} µs per record", started.elapsed().as_secs_f64() * 1e6 / 30_000.0);
    }
}
