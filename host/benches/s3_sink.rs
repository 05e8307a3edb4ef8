//! The S3 sink's throughput into an S3-compatible server, through the host
//! and the plugin, beside `object_store` uploading the same bytes straight
//! from the host, in the same run.
//!
//!     cargo bench -p spillway --bench s3_sink
//!
//! Runs against `SPILLWAY_TEST_S3_ENDPOINT` or moto, which it starts. Records
//! are 1 KB JSON objects, put in batches of 500 and closed into objects of
//! 5,000 records. The baseline uploads the objects the plugin wrote, read
//! back, so it carries the same bytes with no encoding. The plugin's
//! encoding cost is measured apart, by the same run into a directory in
//! memory (`/dev/shm` where there is one). The plugin uploads an object
//! while it encodes the next, so its time tends to the slower of the two;
//! the bound that sets is printed beside the ratio. `bytes` writes values
//! as they come (no parsing), `json` checks each is JSON, `parquet` builds
//! columns.

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use scale::Scaled;
use serde_json::json;
use spillway::capabilities::Grants;
use spillway::runtime::batch::{FlushScope, SinkRecord, TimestampType};
use spillway::runtime::{Limits, Runtime};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use support::s3_server;

static RECORDS: Scaled = Scaled::new(20_000, 5000);
const BATCH: usize = 500;
const OBJECT_RECORDS: &str = "5000";
static ROUNDS: Scaled = Scaled::new(3, 1);

fn main() {
    let executor = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    executor.block_on(bench());
}

async fn bench() {
    let s3 = s3_server();
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins/s3-sink.wasm");
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-bench-cache")).unwrap();
    let plugin = runtime.load_file(&wasm).await.expect("run scripts/build-plugins.sh first");
    let batches: Vec<Vec<SinkRecord>> =
        (0..RECORDS.get() / BATCH).map(|b| (b * BATCH..(b + 1) * BATCH).map(record).collect()).collect();
    let megabytes = batches.iter().flatten().map(|r| r.value.as_ref().unwrap().len()).sum::<usize>() as f64 / 1e6;

    for format in ["json", "bytes", "parquet"] {
        let (mut through, mut direct, mut local) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS.get() {
            // Through the plugin into S3.
            let bucket = s3.new_bucket(&format!("bench-{format}"));
            let grant = s3.grant("s3", &bucket, "plugin");
            through.push(run_plugin(&runtime, &plugin, &grant, format, &batches).await);

            // The same bytes, uploaded directly.
            let store = s3.bucket(&bucket);
            let written: Vec<_> = store.list(Some(&ObjectPath::from("plugin"))).try_collect().await.unwrap();
            let mut objects = Vec::new();
            for meta in &written {
                objects.push(store.get(&meta.location).await.unwrap().bytes().await.unwrap());
            }
            let started = Instant::now();
            for (i, bytes) in objects.iter().enumerate() {
                store.put(&ObjectPath::from(format!("direct/{round}/{i}")), bytes.clone().into()).await.unwrap();
            }
            direct.push(started.elapsed());

            // The plugin's encoding and the host's calls, with no network.
            let shm = std::path::Path::new("/dev/shm");
            let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() }.unwrap();
            let grant =
                vec![("plugin.grant.object-store.s3.url".to_string(), format!("file://{}", dir.path().display()))];
            local.push(run_plugin(&runtime, &plugin, &grant, format, &batches).await);
        }
        let (through, direct, local) = (median(through), median(direct), median(local));
        let rate = |t: Duration| (megabytes / t.as_secs_f64(), RECORDS.get() as f64 / t.as_secs_f64());
        let (mb, rps) = rate(through);
        let (direct_mb, _) = rate(direct);
        println!("s3_sink {format}: {RECORDS} records of 1 KB, {megabytes:.1} MB of values, medians of {ROUNDS}");
        println!("  through host and plugin: {:>8.1} ms  {mb:>7.1} MB/s  {rps:>9.0} records/s", ms(through));
        println!(
            "  object_store directly:   {:>8.1} ms  {direct_mb:>7.1} MB/s  (same objects, no encoding)",
            ms(direct)
        );
        println!("  encoding alone (plugin into memory): {:>8.1} ms", ms(local));
        println!("  ratio (plugin rate / direct rate): {:.2} (target >= 0.80)", ratio(direct, through));
        // Uploads overlap the next object's encoding; the slower of the two
        // bounds the plugin.
        println!("  bound with encoding and upload overlapped: {:.2}", ratio(direct, direct.max(local)));
    }
}

/// Puts every batch through a fresh s3-sink instance and closes its objects;
/// returns how long that took.
async fn run_plugin(
    runtime: &Runtime,
    plugin: &spillway::runtime::Plugin,
    grant: &[(String, String)],
    format: &str,
    batches: &[Vec<SinkRecord>],
) -> Duration {
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let mut sink = runtime.instantiate(plugin, "bench", &grants, &Limits::default()).await.unwrap();
    let config: Vec<(String, String)> =
        [("task.id", "0"), ("format.class", format), ("flush.size", OBJECT_RECORDS), ("partitioner.class", "default")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    sink.start(&config).await.unwrap();
    let started = Instant::now();
    for batch in batches {
        sink.put(batch).await.unwrap();
    }
    sink.flush(&FlushScope::All).await.unwrap();
    let took = started.elapsed();
    sink.stop().await.unwrap();
    took
}

fn record(i: usize) -> SinkRecord {
    // About 1 KB of JSON, with fields of several types.
    let value = json!({
        "id": format!("record-{i}"),
        "n": i,
        "amount": i as f64 * 1.25,
        "ok": i.is_multiple_of(3),
        "text": "x".repeat(940),
    });
    SinkRecord {
        id: i as u64,
        topic: "bench".into(),
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

fn ratio(baseline: Duration, measured: Duration) -> f64 {
    baseline.as_secs_f64() / measured.as_secs_f64()
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(t: Duration) -> f64 {
    t.as_secs_f64() * 1000.0
}
