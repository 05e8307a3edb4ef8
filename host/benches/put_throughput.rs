//! `put()` throughput through the wasm runtime with the no-op plugin, beside a
//! native call of the same plugin code, in the same run.
//!
//!     cargo bench -p spillway --bench put_throughput
//!
//! Batches of 500 records with 1 KB values. The native side clones the batch
//! each round, because the wasm side must copy it into guest memory: the ratio
//! is the runtime's cost over the unavoidable copy.

use scale::Scaled;
use spillway::capabilities::Grants;
#[path = "support/batch.rs"]
mod batch;
mod scale;

use spillway::runtime::batch::SinkRecord;
use spillway::runtime::{Limits, Runtime};
use spillway_sdk::Sink;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const BATCH: usize = 500;
const VALUE_BYTES: usize = 1024;
static ROUNDS: Scaled = Scaled::new(4000, 200);

fn main() {
    // One thread, as a task runs its calls: the cost of the async calls
    // (fibers, yields) is part of what is measured.
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    executor.block_on(bench());
}

async fn bench() {
    let wasm = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins/noop-sink.wasm");
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-bench-cache")).unwrap();
    let plugin = runtime.load_file(&wasm).await.expect("run scripts/build-plugins.sh first");
    let mut instance = runtime.instantiate(&plugin, "bench", &Grants::default(), &Limits::default()).await.unwrap();
    instance.start(&[]).await.unwrap();

    let host_batch: Vec<SinkRecord> = (0..BATCH).map(|i| batch::record(i, VALUE_BYTES)).collect();
    let guest_batch: Vec<spillway_sdk::SinkRecord> = (0..BATCH).map(sdk_record).collect();
    let mut native = noop_sink::NoopSink::start(Default::default()).unwrap();

    // Warm up both paths.
    for _ in 0..200 {
        black_box(instance.put(&host_batch).await.unwrap());
        black_box(native.put(guest_batch.clone()).unwrap());
    }

    let start = Instant::now();
    for _ in 0..ROUNDS.get() {
        black_box(instance.put(black_box(&host_batch)).await.unwrap());
    }
    let wasm_time = start.elapsed();
    let native_time = timed(|| {
        for _ in 0..ROUNDS.get() {
            black_box(native.put(black_box(guest_batch.clone())).unwrap());
        }
    });

    let records = (ROUNDS.get() * BATCH) as f64;
    let megabytes = records * VALUE_BYTES as f64 / 1e6;
    let report = |label: &str, t: Duration| {
        println!(
            "{label:<28} {:>10.0} records/s {:>8.0} MB/s  ({:.2} us per batch of {BATCH})",
            records / t.as_secs_f64(),
            megabytes / t.as_secs_f64(),
            t.as_secs_f64() * 1e6 / ROUNDS.get() as f64
        );
    };
    println!("put() of {ROUNDS} batches x {BATCH} records x {VALUE_BYTES} B values, one core");
    report("wasm (noop-sink component)", wasm_time);
    report("native (same code + clone)", native_time);
    println!(
        "ratio wasm/native throughput: {:.2}   plugin memory: {} KiB",
        native_time.as_secs_f64() / wasm_time.as_secs_f64(),
        instance.memory_bytes() / 1024
    );
}

fn timed(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn sdk_record(i: usize) -> spillway_sdk::SinkRecord {
    spillway_sdk::SinkRecord {
        id: i as u64,
        topic: "bench".into(),
        partition: (i % 4) as i32,
        offset: i as i64,
        timestamp: 1_700_000_000_000,
        timestamp_type: spillway_sdk::TimestampType::CreateTime,
        key: Some(format!("key-{i}").into_bytes()),
        value: Some(vec![b'x'; VALUE_BYTES]),
        headers: vec![spillway_sdk::Header { key: "h".into(), value: Some(b"v".to_vec()) }],
        delivery_count: 1,
        lock_deadline: None,
    }
}
