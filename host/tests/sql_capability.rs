//! The SQL capability's host functions, called as a plugin would call them,
//! against real PostgreSQL and MariaDB servers (started by
//! `tests/support/db-server.sh`, or named by the environment) and SQLite.
//! What goes in is read back through the capability and, for the types
//! that matter, checked with the database's own functions.

mod support;

use spillway::capabilities::sql::SqlCtx;
use spillway::capabilities::sql::bindings::spillway::sql::databases::{
    BatchOutcome, Dialect, HostDatabase, RowFailure, Statement, Value,
};
use spillway::capabilities::{CallBudget, CapabilityMetrics, Grants};
use spillway::policy::InstanceBounds;
use std::sync::Arc;
use support::databases::{DbServer, mariadb, postgres};
use wasmtime::component::Resource;

/// Where a test runs: a context granted `db`, and the database it opened.
struct Db {
    ctx: SqlCtx,
    rep: u32,
    dialect: Dialect,
    _dir: tempfile::TempDir,
}

impl Db {
    /// Opens grant `db`, with `dir` granted to the connector too.
    async fn open(grant: &[(String, String)], dir: tempfile::TempDir) -> Db {
        Db::open_within(grant, dir, InstanceBounds::default()).await
    }

    /// As [`Db::open`], within the worker's `bounds`.
    async fn open_within(grant: &[(String, String)], dir: tempfile::TempDir, bounds: InstanceBounds) -> Db {
        let mut config: Vec<(String, String)> = grant.to_vec();
        config.push(("plugin.grant.fs.data.path".into(), dir.path().display().to_string()));
        let mut grants = Grants::from_config(config.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        grants.bounds = bounds;
        let mut ctx =
            SqlCtx::new(&grants.sql, &grants.bounds, CallBudget::default(), Arc::new(CapabilityMetrics::default()));
        let db = ctx.open("db".into()).await.unwrap().unwrap_or_else(|e| panic!("open: {e:?}"));
        let rep = db.rep();
        let dialect = ctx.dialect(Resource::new_borrow(rep)).await.unwrap();
        Db { ctx, rep, dialect, _dir: dir }
    }

    async fn server(server: &DbServer) -> Db {
        Db::open(&server.grant("db"), tempfile::tempdir().unwrap()).await
    }

    async fn sqlite() -> Db {
        Db::sqlite_within(InstanceBounds::default()).await
    }

    async fn sqlite_within(bounds: InstanceBounds) -> Db {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/app.db", dir.path().display());
        Db::open_within(&[("plugin.grant.sql.db.url".into(), url)], dir, bounds).await
    }

    fn handle(&self) -> Resource<spillway::capabilities::sql::OpenDatabase> {
        Resource::new_borrow(self.rep)
    }

    fn p(&self, n: usize) -> String {
        if self.dialect == Dialect::Postgres { format!("${n}") } else { "?".to_string() }
    }

    async fn execute(&mut self, sql: &str, params: Vec<Value>) -> Result<u64, String> {
        let h = self.handle();
        self.ctx.execute(h, sql.to_string(), params).await.unwrap().map_err(|e| format!("{e:?}"))
    }

    async fn query(&mut self, sql: &str, params: Vec<Value>) -> Vec<Vec<Value>> {
        let h = self.handle();
        self.ctx.query(h, sql.to_string(), params).await.unwrap().unwrap_or_else(|e| panic!("{sql}: {e:?}")).rows
    }

    async fn batch(&mut self, statements: Vec<Statement>) -> BatchOutcome {
        let h = self.handle();
        self.ctx.execute_batch(h, statements).await.unwrap().unwrap_or_else(|e| panic!("batch: {e:?}"))
    }
}

fn table(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// The column types each database gives the values a sink writes.
fn typed_table(dialect: Dialect, name: &str) -> String {
    let types = match dialect {
        Dialect::Postgres => {
            "id BIGINT PRIMARY KEY, flag BOOLEAN, small SMALLINT, ratio REAL, amount NUMERIC(20,4), \
             name TEXT, data BYTEA, doc JSONB, doc_text JSON, ref UUID, day DATE, at_time TIME, at TIMESTAMP, \
             at_tz TIMESTAMPTZ"
        }
        Dialect::Mysql => {
            "id BIGINT PRIMARY KEY, flag BOOLEAN, small SMALLINT, ratio FLOAT, amount DECIMAL(20,4), \
             name TEXT, data BLOB, doc JSON, doc_text LONGTEXT, ref VARCHAR(36), day DATE, at_time TIME(6), \
             at DATETIME(6), at_tz TIMESTAMP(6) NULL"
        }
        Dialect::Sqlite => {
            "id INTEGER PRIMARY KEY, flag BOOLEAN, small SMALLINT, ratio REAL, amount NUMERIC, \
             name TEXT, data BLOB, doc TEXT, doc_text TEXT, ref TEXT, day DATE, at_time TIME, at DATETIME, \
             at_tz DATETIME"
        }
    };
    format!("CREATE TABLE {name} ({types})")
}

const COLUMNS: &str = "id, flag, small, ratio, amount, name, data, doc, doc_text, ref, day, at_time, at, at_tz";

/// 2024-02-29 12:34:56.789012 UTC.
const AT_MICROS: i64 = 1_709_210_096_789_012;
const DAY: i32 = 19_782; // 2024-02-29
const TIME_MICROS: i64 = (12 * 3600 + 34 * 60 + 56) * 1_000_000 + 789_012;

fn typed_row(id: i64) -> Vec<Value> {
    vec![
        Value::Int(id),
        Value::Boolean(true),
        Value::Int(7),
        Value::Double(0.5),
        Value::Decimal("12345.6789".into()),
        Value::Text("naïve \"quoted\", with comma\nand newline".into()),
        Value::Bytes(vec![0, 1, 2, 255]),
        Value::Json(r#"{"nested": {"a": [1, 2]}}"#.into()),
        Value::Json(r#"{"b": true}"#.into()),
        Value::Uuid("6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b1c00".into()),
        Value::Date(DAY),
        Value::Time(TIME_MICROS),
        Value::Timestamp(AT_MICROS),
        Value::Timestamp(AT_MICROS),
    ]
}

fn insert_sql(db: &Db, name: &str) -> String {
    let placeholders: Vec<String> = (1..=14).map(|n| db.p(n)).collect();
    format!("INSERT INTO {name} ({COLUMNS}) VALUES ({})", placeholders.join(", "))
}

async fn every_type_goes_in_and_comes_back(mut db: Db) {
    let name = table("typed");
    db.execute(&typed_table(db.dialect, &name), vec![]).await.unwrap();
    let insert = insert_sql(&db, &name);
    let mut nulls = vec![Value::Null; 14];
    nulls[0] = Value::Int(2);
    let outcome = db.batch(vec![Statement { sql: insert, rows: vec![typed_row(1), nulls] }]).await;
    assert_eq!(outcome, BatchOutcome::Committed(vec![2]));
    let rows = db.query(&format!("SELECT {COLUMNS} FROM {name} ORDER BY id"), vec![]).await;
    assert_eq!(rows.len(), 2);
    assert!(rows[1][1..].iter().all(|v| *v == Value::Null), "{:?}", rows[1]);
    let row = &rows[0];
    let expected = typed_row(1);
    assert_eq!(row[0], Value::Int(1));
    assert!(matches!(row[1], Value::Boolean(true) | Value::Int(1)), "{:?}", row[1]);
    assert_eq!(row[2], Value::Int(7));
    assert_eq!(row[3], Value::Double(0.5));
    match &row[4] {
        Value::Decimal(d) => assert_eq!(d.trim_end_matches('0'), "12345.6789"),
        Value::Double(d) => assert_eq!(*d, 12345.6789), // SQLite's NUMERIC
        other => panic!("amount: {other:?}"),
    }
    assert_eq!(row[5], expected[5]);
    assert_eq!(row[6], expected[6]);
    let json = |v: &Value| match v {
        Value::Json(s) | Value::Text(s) => serde_json::from_str::<serde_json::Value>(s).unwrap(),
        // MariaDB's JSON is LONGTEXT with a binary collation, which its
        // protocol marks as binary.
        Value::Bytes(b) if db.dialect == Dialect::Mysql => serde_json::from_slice(b).unwrap(),
        other => panic!("not JSON: {other:?}"),
    };
    assert_eq!(json(&row[7]), serde_json::json!({"nested": {"a": [1, 2]}}));
    assert_eq!(json(&row[8]), serde_json::json!({"b": true}));
    match (&row[9], db.dialect) {
        (Value::Uuid(u) | Value::Text(u), _) => assert_eq!(u, "6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b1c00"),
        other => panic!("ref: {other:?}"),
    }
    if db.dialect == Dialect::Sqlite {
        // SQLite keeps ISO-8601 text, which its date functions read.
        assert_eq!(row[10], Value::Text("2024-02-29".into()));
        assert_eq!(row[11], Value::Text("12:34:56.789012".into()));
        assert_eq!(row[12], Value::Text("2024-02-29 12:34:56.789012".into()));
        let epoch =
            db.query(&format!("SELECT CAST(strftime('%s', at) AS INTEGER) FROM {name} WHERE id = 1"), vec![]).await;
        assert_eq!(epoch[0][0], Value::Int(AT_MICROS / 1_000_000));
    } else {
        assert_eq!(row[10], Value::Date(DAY));
        assert_eq!(row[11], Value::Time(TIME_MICROS));
        assert_eq!(row[12], Value::Timestamp(AT_MICROS));
        assert_eq!(row[13], Value::Timestamp(AT_MICROS));
    }
    if db.dialect == Dialect::Postgres {
        // The database's own reading: jsonb navigable, uuid a uuid, numeric exact.
        let checks = db
            .query(
                &format!(
                    "SELECT doc->'nested'->'a'->>1, ref = '6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b1c00'::uuid, \
                     amount = 12345.6789, at_tz = '2024-02-29T12:34:56.789012Z'::timestamptz FROM {name} WHERE id = 1"
                ),
                vec![],
            )
            .await;
        assert_eq!(
            checks[0],
            vec![Value::Text("2".into()), Value::Boolean(true), Value::Boolean(true), Value::Boolean(true)]
        );
        // Text into uuid and jsonb columns, as plain-JSON records give it.
        let sql = format!("INSERT INTO {name} (id, ref, doc) VALUES ($1, $2, $3)");
        let row =
            vec![Value::Int(3), Value::Text("6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b1c03".into()), Value::Text("[1]".into())];
        assert_eq!(db.batch(vec![Statement { sql, rows: vec![row] }]).await, BatchOutcome::Committed(vec![1]));
    }
}

async fn a_refused_row_names_itself_and_commits_nothing(mut db: Db) {
    let name = table("refused");
    let (p1, p2) = (db.p(1), db.p(2));
    let create = format!("CREATE TABLE {name} (id BIGINT PRIMARY KEY, label VARCHAR(10) NOT NULL)");
    let insert = format!("INSERT INTO {name} (id, label) VALUES ({p1}, {p2})");
    db.execute(&create, vec![]).await.unwrap();
    let row = |id: i64, label: Option<&str>| vec![Value::Int(id), label.map_or(Value::Null, |l| Value::Text(l.into()))];
    let first = Statement { sql: insert.clone(), rows: vec![row(1, Some("a"))] };
    let second = Statement { sql: insert.clone(), rows: vec![row(2, Some("b")), row(3, None), row(4, Some("d"))] };
    let outcome = db.batch(vec![first.clone(), second]).await;
    let BatchOutcome::RowFailed(RowFailure { statement: 1, row: Some(1), code: Some(_), message }) = &outcome else {
        panic!("{outcome:?}")
    };
    println!("{:?}: NOT NULL refused: {message}", db.dialect);
    // Statement 0 ran in the same transaction: rolled back too.
    assert!(db.query(&format!("SELECT id FROM {name}"), vec![]).await.is_empty());

    // A duplicate key in a statement run once: no row index.
    db.batch(vec![first.clone()]).await;
    let outcome = db.batch(vec![first]).await;
    assert!(matches!(&outcome, BatchOutcome::RowFailed(RowFailure { statement: 0, row: None, .. })), "{outcome:?}");

    // A value that does not fit its column, found by the host (PostgreSQL)
    // or the database: a row failure, not a failed call.
    let sql = insert;
    let outcome = db
        .batch(vec![Statement {
            sql,
            rows: vec![row(5, Some("e")), vec![Value::Text("six".into()), Value::Text("f".into())]],
        }])
        .await;
    if db.dialect != Dialect::Sqlite {
        // SQLite stores text in an INTEGER column: it refuses nothing here.
        assert!(matches!(&outcome, BatchOutcome::RowFailed(RowFailure { row: Some(1), .. })), "{outcome:?}");
    }
}

async fn copy_in_appends_and_names_the_bad_row(mut db: Db) {
    let name = table("copied");
    db.execute(&typed_table(db.dialect, &name), vec![]).await.unwrap();
    let columns: Vec<String> = COLUMNS.split(", ").map(str::to_string).collect();
    let rows: Vec<Vec<Value>> = (1..=500).map(typed_row).collect();
    let h = db.handle();
    let outcome = db.ctx.copy_in(h, name.clone(), columns.clone(), rows).await.unwrap().unwrap();
    assert_eq!(outcome, BatchOutcome::Committed(vec![500]));
    let again = db.query(&format!("SELECT {COLUMNS} FROM {name} WHERE id = 250"), vec![]).await;
    assert_eq!(again[0][5], typed_row(250)[5], "text survives COPY's CSV");
    assert_eq!(again[0][6], typed_row(250)[6], "bytes survive COPY's CSV");

    // Row 3 repeats a key: that row is named, and nothing is appended.
    let rows: Vec<Vec<Value>> = [1000, 1001, 1002, 1].into_iter().map(typed_row).collect();
    let h = db.handle();
    let outcome = db.ctx.copy_in(h, name.clone(), columns, rows).await.unwrap().unwrap();
    assert!(matches!(&outcome, BatchOutcome::RowFailed(RowFailure { row: Some(3), .. })), "{outcome:?}");
    let count = db.query(&format!("SELECT count(*) FROM {name}"), vec![]).await;
    assert_eq!(count[0][0], Value::Int(500));
}

async fn the_catalogue_describes_tables(mut db: Db) {
    let name = table("described");
    let create =
        format!("CREATE TABLE {name} (id BIGINT NOT NULL, part INTEGER NOT NULL, note TEXT, PRIMARY KEY (id, part))");
    db.execute(&create, vec![]).await.unwrap();
    let h = db.handle();
    let columns = db.ctx.describe_table(h, name.clone()).await.unwrap().unwrap().expect("the table exists");
    let got: Vec<(String, bool, bool)> = columns.iter().map(|c| (c.name.clone(), c.nullable, c.primary_key)).collect();
    assert_eq!(
        got,
        vec![("id".into(), false, true), ("part".into(), false, true), ("note".into(), true, false)],
        "{columns:?}"
    );
    assert!(columns[0].data_type.starts_with("bigint"), "{columns:?}");
    let h = db.handle();
    assert_eq!(db.ctx.describe_table(h, table("missing")).await.unwrap().unwrap(), None);
}

async fn statements_that_reach_past_the_database_are_refused(mut db: Db) {
    let refused = match db.dialect {
        Dialect::Postgres => "COPY (SELECT 1) TO PROGRAM 'touch /tmp/spillway-pwned'",
        Dialect::Mysql => "SELECT 1 INTO OUTFILE '/tmp/spillway-pwned'",
        Dialect::Sqlite => "ATTACH DATABASE '/tmp/spillway-pwned.db' AS pwned",
    };
    let err = db.execute(refused, vec![]).await.unwrap_err();
    assert!(err.contains("Fatal") && err.contains("refused"), "{err}");
    let h = db.handle();
    let statement = Statement { sql: format!("SELECT 1; {refused}"), rows: vec![] };
    let err = db.ctx.execute_batch(h, vec![statement]).await.unwrap().unwrap_err();
    assert!(err.message().contains("more than one statement"), "{err:?}");
}

async fn begun_batches_run_in_the_background_in_the_order_begun(mut db: Db) {
    use spillway::capabilities::sql::bindings::spillway::sql::databases::HostPendingBatch;
    let name = table("begun");
    let (p1, p2) = (db.p(1), db.p(2));
    db.execute(&format!("CREATE TABLE {name} (id BIGINT PRIMARY KEY, label TEXT)"), vec![]).await.unwrap();
    let insert = format!("INSERT INTO {name} (id, label) VALUES ({p1}, {p2})");
    let update = format!("UPDATE {name} SET label = {p1} WHERE id = {p2}");
    // Ten batches begun back to back, each relabelling row 1: the last
    // label wins only if they ran in the order begun.
    let first = Statement { sql: insert.clone(), rows: vec![vec![Value::Int(1), Value::Text("0".into())]] };
    let mut pending = vec![db.ctx.begin_batch(db.handle(), vec![first]).await.unwrap().unwrap()];
    for n in 1..10 {
        let relabel = Statement { sql: update.clone(), rows: vec![vec![Value::Text(n.to_string()), Value::Int(1)]] };
        pending.push(db.ctx.begin_batch(db.handle(), vec![relabel]).await.unwrap().unwrap());
    }
    for batch in &pending {
        let outcome = db.ctx.wait(Resource::new_borrow(batch.rep())).await.unwrap().unwrap();
        assert_eq!(outcome, BatchOutcome::Committed(vec![1]));
        let again = db.ctx.ready(Resource::new_borrow(batch.rep())).await.unwrap();
        assert!(matches!(again, Some(Ok(BatchOutcome::Committed(ref n))) if *n == vec![1]), "{again:?}");
    }
    let label = db.query(&format!("SELECT label FROM {name} WHERE id = 1"), vec![]).await;
    assert_eq!(label[0][0], Value::Text("9".into()));

    // A refused row comes back through the pending batch, and nothing of it
    // was written.
    let columns = vec!["id".to_string(), "label".to_string()];
    let rows = vec![vec![Value::Int(2), Value::Text("two".into())], vec![Value::Int(1), Value::Text("dup".into())]];
    let copy = db.ctx.begin_copy_in(db.handle(), name.clone(), columns, rows).await.unwrap().unwrap();
    let outcome = db.ctx.wait(Resource::new_borrow(copy.rep())).await.unwrap().unwrap();
    assert!(matches!(&outcome, BatchOutcome::RowFailed(RowFailure { row: Some(1), .. })), "{outcome:?}");
    let count = db.query(&format!("SELECT count(*) FROM {name}"), vec![]).await;
    assert_eq!(count[0][0], Value::Int(1));
}

macro_rules! on_each_database {
    ($($test:ident),* $(,)?) => {
        mod on_postgres {
            use super::*;
            $(#[tokio::test] async fn $test() { super::$test(Db::server(postgres()).await).await })*
        }
        mod on_mariadb {
            use super::*;
            $(#[tokio::test] async fn $test() { super::$test(Db::server(mariadb()).await).await })*
        }
        mod on_sqlite {
            use super::*;
            $(#[tokio::test] async fn $test() { super::$test(Db::sqlite().await).await })*
        }
    };
}

on_each_database!(
    every_type_goes_in_and_comes_back,
    a_refused_row_names_itself_and_commits_nothing,
    copy_in_appends_and_names_the_bad_row,
    the_catalogue_describes_tables,
    statements_that_reach_past_the_database_are_refused,
    begun_batches_run_in_the_background_in_the_order_begun,
);

#[tokio::test]
async fn opening_fails_clearly_and_keeps_the_password() {
    let server = postgres();
    let mut grant = server.grant("db");
    grant[1].1 = "wrong-password".into();
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let mut ctx =
        SqlCtx::new(&grants.sql, &grants.bounds, CallBudget::default(), Arc::new(CapabilityMetrics::default()));
    let err = ctx.open("db".into()).await.unwrap().unwrap_err();
    assert!(!err.is_retriable(), "{err:?}");
    assert!(err.message().contains("sql grant 'db' (postgres://"), "{err:?}");
    assert!(!err.message().contains("wrong-password"), "{err:?}");
    let err = ctx.open("other".into()).await.unwrap().unwrap_err();
    assert!(err.message().contains("no sql grant named 'other' (granted: db)"), "{err:?}");

    // Nothing listens: retriable, for the host to try again later.
    let closed =
        [("plugin.grant.sql.db.url", "postgres://u@127.0.0.1:1/db"), ("plugin.grant.sql.db.timeout.ms", "2000")];
    let grants = Grants::from_config(closed).unwrap();
    let mut ctx =
        SqlCtx::new(&grants.sql, &grants.bounds, CallBudget::default(), Arc::new(CapabilityMetrics::default()));
    let err = ctx.open("db".into()).await.unwrap().unwrap_err();
    assert!(err.is_retriable(), "{err:?}");
}

/// `pool.size` bounds the instance, not one handle: every database the
/// grant opens shares the grant's one pool, so with `pool.size=1` each
/// handle's statements run on the same server connection.
async fn every_open_of_a_grant_shares_its_pool(server: &DbServer, connection_id: &str) {
    let mut grant = server.grant("db");
    grant.push(("plugin.grant.sql.db.pool.size".into(), "1".into()));
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let mut ctx =
        SqlCtx::new(&grants.sql, &grants.bounds, CallBudget::default(), Arc::new(CapabilityMetrics::default()));
    let mut connections = Vec::new();
    for _ in 0..4 {
        let db = ctx.open("db".into()).await.unwrap().unwrap_or_else(|e| panic!("open: {e:?}"));
        let rows = ctx.query(Resource::new_borrow(db.rep()), connection_id.into(), vec![]).await.unwrap().unwrap();
        connections.push(format!("{:?}", rows.rows[0][0]));
    }
    assert_eq!(connections.len(), 4);
    assert!(connections.iter().all(|c| c == &connections[0]), "the handles ran on connections {connections:?}");
}

#[tokio::test]
async fn every_open_of_a_grant_shares_its_pool_on_postgres() {
    every_open_of_a_grant_shares_its_pool(postgres(), "SELECT pg_backend_pid()").await;
}

#[tokio::test]
async fn every_open_of_a_grant_shares_its_pool_on_mariadb() {
    every_open_of_a_grant_shares_its_pool(mariadb(), "SELECT CONNECTION_ID()").await;
}

#[test]
fn a_sqlite_file_outside_the_granted_directories_is_refused() {
    let err = Grants::from_config([("plugin.grant.sql.db.url", "sqlite:///etc/app.db")]).unwrap_err().to_string();
    assert!(err.contains("not under a directory granted"), "{err}");
}

/// A query returns at most `policy.plugin.return.bytes.max` of rows: past
/// it, the query is refused as it reads, not held whole in the host first.
#[tokio::test]
async fn a_query_returning_more_than_a_call_may_is_refused() {
    let bounds = InstanceBounds { return_bytes: 64 << 10, ..InstanceBounds::default() };
    let mut db = Db::sqlite_within(bounds.clone()).await;
    let name = table("wide");
    db.execute(&format!("CREATE TABLE {name} (id INTEGER PRIMARY KEY, doc TEXT)"), vec![]).await.unwrap();
    let row_bytes = 4 << 10;
    // Together just past the bound (each value counts a little more than its text).
    let rows = bounds.return_bytes / row_bytes;
    for id in 0..rows {
        let doc = Value::Text("x".repeat(row_bytes));
        db.execute(&format!("INSERT INTO {name} (id, doc) VALUES (?, ?)"), vec![Value::Int(id as i64), doc])
            .await
            .unwrap();
    }
    let h = db.handle();
    let err = db.ctx.query(h, format!("SELECT doc FROM {name}"), vec![]).await.unwrap().unwrap_err();
    assert!(err.message().contains("read them in pages"), "{err:?}");
    // All but one row fit.
    let fit = db.query(&format!("SELECT doc FROM {name} WHERE id < ?"), vec![Value::Int(rows as i64 - 1)]).await;
    assert_eq!(fit.len(), rows - 1);
}
