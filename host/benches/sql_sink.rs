//! The SQL sink's rows per second into PostgreSQL, through the host and the
//! plugin, beside a native `sqlx` batch insert of the same rows from the
//! host, in the same run, for plain inserts and for upserts.
//!
//!     cargo bench -p spillway --bench sql_sink
//!
//! Runs against `SPILLWAY_TEST_POSTGRES_URL` or a PostgreSQL it starts
//! (`tests/support/db-server.sh`). Records are plain JSON objects of five
//! fields, put in batches of 500 into a table made beforehand. The baseline
//! is what a Rust program would write by hand: `QueryBuilder::push_values`,
//! one multi-row statement per 500 rows, each batch in a transaction
//! (`INSERT ... ON CONFLICT DO UPDATE` for upserts). The plugin parses each
//! record, binds it to its column's type and, for plain inserts, uses the
//! capability's COPY.

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use scale::Scaled;
use serde_json::json;
use spillway::capabilities::Grants;
use spillway::runtime::batch::{FlushScope, Outcome, SinkRecord, TimestampType};
use spillway::runtime::{Limits, Runtime};
use sqlx::{Connection, Executor, PgConnection, QueryBuilder};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::databases::postgres;

static RECORDS: Scaled = Scaled::new(30_000, 3000);
const BATCH: usize = 500;
static ROUNDS: Scaled = Scaled::new(5, 1);

fn main() {
    let executor = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    executor.block_on(bench());
}

async fn bench() {
    let server = postgres();
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins/sql-sink.wasm");
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-bench-cache")).unwrap();
    let plugin = runtime.load_file(&wasm).await.expect("run scripts/build-plugins.sh first");
    let mut conn = PgConnection::connect(&server.url_with_password()).await.unwrap();
    // Upserts run twice over the same keys: the second pass updates every row.
    for mode in ["insert", "upsert"] {
        let (mut through, mut native) = (Vec::new(), Vec::new());
        for round in 0..ROUNDS.get() {
            let (plugin_table, native_table) =
                (format!("bench_{mode}_plugin_{round}"), format!("bench_{mode}_native_{round}"));
            for table in [&plugin_table, &native_table] {
                conn.execute(format!("DROP TABLE IF EXISTS {table}").as_str()).await.unwrap();
                conn.execute(
                    format!(
                        "CREATE TABLE {table} (id TEXT PRIMARY KEY, n BIGINT NOT NULL, name TEXT, amount DOUBLE PRECISION, \
                         ok BOOLEAN)"
                    )
                    .as_str(),
                )
                .await
                .unwrap();
            }
            let batches: Vec<Vec<SinkRecord>> = (0..RECORDS.get() / BATCH)
                .map(|b| (b * BATCH..(b + 1) * BATCH).map(|i| record(&plugin_table, i)).collect())
                .collect();
            let passes = if mode == "upsert" { 2 } else { 1 };
            through.push(run_plugin(&runtime, &plugin, server, mode, &batches, passes).await);
            native.push(run_native(&mut conn, &native_table, mode, passes).await);
            for table in [&plugin_table, &native_table] {
                let (count,): (i64,) =
                    sqlx::query_as(&format!("SELECT count(*) FROM {table}")).fetch_one(&mut conn).await.unwrap();
                assert_eq!(count as usize, RECORDS.get(), "{table}");
            }
        }
        let (through, native) = (median(through), median(native));
        let rows = (RECORDS.get() * if mode == "upsert" { 2 } else { 1 }) as f64;
        println!("sql_sink {mode}: {rows} rows of 5 columns into PostgreSQL, batches of {BATCH}, medians of {ROUNDS}");
        println!("  through host and plugin: {:>8.1} ms  {:>9.0} rows/s", ms(through), rows / through.as_secs_f64());
        println!("  native sqlx push_values: {:>8.1} ms  {:>9.0} rows/s", ms(native), rows / native.as_secs_f64());
        println!(
            "  ratio (plugin rate / native rate): {:.2} (target >= 0.80)",
            native.as_secs_f64() / through.as_secs_f64()
        );
    }
    // Where the plugin's time went: the host's side of each capability call.
    for (key, stats) in runtime.capability_metrics().snapshot() {
        println!(
            "  host time in {} {}: {:.1} ms over {} calls",
            key.capability,
            key.op,
            stats.seconds * 1000.0,
            stats.ok
        );
    }
}

/// Puts every batch through a fresh sql-sink instance, `passes` times;
/// returns how long that took.
async fn run_plugin(
    runtime: &Runtime,
    plugin: &spillway::runtime::Plugin,
    server: &support::databases::DbServer,
    mode: &str,
    batches: &[Vec<SinkRecord>],
    passes: usize,
) -> Duration {
    let grant = server.grant("db");
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let mut sink = runtime.instantiate(plugin, "bench", &grants, &Limits::default()).await.unwrap();
    let mut config: Vec<(&str, &str)> = vec![("task.id", "0"), ("insert.mode", mode), ("batch.size", "500")];
    if mode == "upsert" {
        config.extend([("pk.mode", "record_value"), ("pk.fields", "id")]);
    }
    let config: Vec<(String, String)> = config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    sink.start(&config).await.unwrap();
    let started = Instant::now();
    // Every record is accepted, at once or (held while its write goes on in
    // the host) by a later call.
    let mut accepted = 0;
    for _ in 0..passes {
        for batch in batches {
            let report = sink.put(batch).await.unwrap();
            accepted += report.outcomes.iter().filter(|o| matches!(o, Outcome::Accept)).count();
            accepted += report.settled.iter().filter(|s| matches!(s.outcome, Outcome::Accept)).count();
        }
    }
    let settled = sink.flush(&FlushScope::All).await.unwrap();
    accepted += settled.iter().filter(|s| matches!(s.outcome, Outcome::Accept)).count();
    assert_eq!(accepted, passes * RECORDS.get(), "records not all accepted");
    let took = started.elapsed();
    sink.stop().await.unwrap();
    took
}

/// The same rows from the host, as a Rust program would insert them.
async fn run_native(conn: &mut PgConnection, table: &str, mode: &str, passes: usize) -> Duration {
    let started = Instant::now();
    for _ in 0..passes {
        for b in 0..RECORDS.get() / BATCH {
            let mut tx = conn.begin().await.unwrap();
            let mut query = QueryBuilder::new(format!("INSERT INTO {table} (id, n, name, amount, ok) "));
            query.push_values(b * BATCH..(b + 1) * BATCH, |mut row, i| {
                let (id, n, name, amount, ok) = fields(i);
                row.push_bind(id).push_bind(n).push_bind(name).push_bind(amount).push_bind(ok);
            });
            if mode == "upsert" {
                query.push(
                    " ON CONFLICT (id) DO UPDATE SET n = EXCLUDED.n, name = EXCLUDED.name, amount = EXCLUDED.amount, \
                     ok = EXCLUDED.ok",
                );
            }
            query.build().execute(&mut *tx).await.unwrap();
            tx.commit().await.unwrap();
        }
    }
    started.elapsed()
}

fn fields(i: usize) -> (String, i64, String, f64, bool) {
    (format!("record-{i}"), i as i64, format!("customer {i} of the benchmark"), i as f64 * 1.25, i.is_multiple_of(3))
}

fn record(topic: &str, i: usize) -> SinkRecord {
    let (id, n, name, amount, ok) = fields(i);
    let value = json!({"id": id, "n": n, "name": name, "amount": amount, "ok": ok});
    SinkRecord {
        id: i as u64,
        topic: topic.into(),
        partition: 0,
        offset: i as i64,
        timestamp: 1_700_000_000_000 + i as i64,
        timestamp_type: TimestampType::CreateTime,
        key: Some(format!("k{i}").into_bytes()),
        value: Some(value.to_string().into_bytes()),
        headers: Vec::new(),
        delivery_count: 1,
        lock_deadline: None,
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1000.0
}
