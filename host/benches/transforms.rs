//! Transform throughput: the `*-redact` transform plugins in Rust, Python and
//! JavaScript beside the built-in that does the same work in the host,
//! Connect's `MaskField$Value` (a field of a JSON value replaced by a fixed
//! string), on the same batches, in the same run:
//!
//!     scripts/build-plugins.sh && scripts/build-examples.sh && cargo bench -p spillway --bench transforms
//!
//! Batches of 500 records whose values are JSON objects of about 200 bytes.
//! The built-in runs record by record, as the task runs it; each plugin gets
//! the batch in one `apply` call, the records crossing as the batch's
//! columns and coming back one by one.

#[path = "support/batch.rs"]
mod batch;
mod scale;

use spillway::capabilities::Grants;
use spillway::connector::{ConnectorConfig, WorkerDefaults};
use spillway::runtime::batch::{RecordBatch, SinkRecord};
use spillway::runtime::{Limits, Runtime};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const BATCH: usize = 500;

/// How long each transform is measured: 3 s, or 0.3 s in a smoke run.
fn measure_for() -> Duration {
    if scale::smoke() { Duration::from_millis(300) } else { Duration::from_secs(3) }
}

fn main() {
    // One thread, as a task runs its calls.
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    executor.block_on(bench());
}

fn batch() -> Vec<SinkRecord> {
    (0..BATCH)
        .map(|i| {
            let value = serde_json::json!({
                "id": i, "name": format!("person {i}"), "email": format!("p{i}@example.com"),
                "city": "Lisbon", "score": i as f64 * 0.5, "active": i % 2 == 0, "note": "x".repeat(60),
            });
            SinkRecord { value: Some(value.to_string().into_bytes()), ..batch::record(i, 0) }
        })
        .collect()
}

async fn bench() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let records = batch();
    let bytes = records[0].value.as_ref().unwrap().len();
    println!(
        "transform batches of {BATCH} records x about {bytes} B JSON values, one core, each for {:?}",
        measure_for()
    );
    let builtin = measure_builtin(&records);
    println!("{:<38} {builtin:>10.0} records/s", "MaskField$Value (built in, baseline)");
    // The tests' cache: in `.ci/run` they compiled these components already.
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-test-cache")).unwrap();
    for (label, wasm) in [
        ("rust-redact (plugin)", repo.join("target/example-plugins/rust-redact.wasm")),
        ("python-redact (plugin)", repo.join("target/example-plugins/python-redact.wasm")),
        ("javascript-redact (plugin)", repo.join("target/example-plugins/javascript-redact.wasm")),
    ] {
        if !wasm.exists() {
            println!("{label:<38} missing: {} (scripts/build-plugins.sh, scripts/build-examples.sh)", wasm.display());
            continue;
        }
        let rate = measure_plugin(&runtime, &wasm, &records).await;
        println!("{label:<38} {rate:>10.0} records/s   ratio to the built-in {:.2}", rate / builtin);
    }
}

/// The built-in through the chain a connector config makes of it.
fn measure_builtin(records: &[SinkRecord]) -> f64 {
    let raw: BTreeMap<String, String> = [
        ("name", "bench"),
        ("connector.class", "noop-sink"),
        ("topics", "bench"),
        ("transforms", "mask"),
        ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
        ("transforms.mask.fields", "email"),
        ("transforms.mask.replacement", "****"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = ConnectorConfig::parse(&raw, &WorkerDefaults::default()).unwrap();
    let input: Vec<spillway_transforms::Record> = records
        .iter()
        .map(|r| spillway_transforms::Record {
            topic: r.topic.clone(),
            partition: r.partition,
            offset: r.offset,
            timestamp: r.timestamp,
            key: r.key.clone().map(Into::into),
            value: r.value.clone().map(Into::into),
            headers: Vec::new(),
        })
        .collect();
    let round = || {
        for record in &input {
            let out = config.transforms.apply(record.clone()).unwrap().unwrap();
            assert!(out.value.as_ref().unwrap().windows(6).any(|w| w == b"\"****\""), "masked");
            black_box(out);
        }
    };
    round();
    let (started, mut rounds) = (Instant::now(), 0usize);
    while started.elapsed() < measure_for() {
        round();
        rounds += 1;
    }
    (rounds * BATCH) as f64 / started.elapsed().as_secs_f64()
}

/// A plugin's `apply`, the batch packed once outside the timing (as the
/// task packs it for the sink's `put` too).
async fn measure_plugin(runtime: &Runtime, wasm: &std::path::Path, records: &[SinkRecord]) -> f64 {
    let plugin = runtime.load_file(wasm).await.unwrap();
    let limits = Limits { memory_bytes: 512 << 20, ..Limits::default() };
    let mut instance = runtime.instantiate(&plugin, "bench", &Grants::default(), &limits).await.unwrap();
    let config = [("fields".to_string(), "email".to_string()), ("replacement".to_string(), "****".to_string())];
    instance.start(&config).await.unwrap();
    let batch = RecordBatch::from(records);
    for _ in 0..5 {
        let out = instance.apply(&batch).await.unwrap();
        assert_eq!(out.len(), BATCH);
    }
    let (started, mut rounds) = (Instant::now(), 0usize);
    while started.elapsed() < measure_for() {
        black_box(instance.apply(black_box(&batch)).await.unwrap());
        rounds += 1;
    }
    (rounds * BATCH) as f64 / started.elapsed().as_secs_f64()
}
