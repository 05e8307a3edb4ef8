//! `put()` throughput of the example sinks in Python and JavaScript beside
//! the Rust plugins, on the same batches, in the same run:
//!
//!     scripts/build-examples.sh && cargo bench -p spillway -p spillway-sdk -p s3-sink -p sql-sink -p mirror --bench languages
//!
//! Batches of 500 records with 1 KB text values. The baselines are
//! `noop-sink` (the runtime's own cost: what the ratios are against)
//! and `file-sink`, the Rust sink that does the same work as the two
//! examples (JSON lines, held until a flush). Each language's noop sink
//! (`python-noop-sink`, `javascript-noop-sink`) measures what a `put` costs
//! in that language before any work. Each sink is flushed after every put,
//! outside the timed put. Every instance may use 512 MB: SpiderMonkey
//! collects garbage late, and a limit only bounds, it costs nothing.
//!
//! `SPILLWAY_BENCH_PLUGINS=a.wasm,b.wasm` measures other components too,
//! each beside `noop-sink` (a sink of your own, or a language's floor: a
//! `put` that only accepts).

use spillway::capabilities::Grants;
#[path = "support/batch.rs"]
mod batch;
mod scale;

use spillway::runtime::batch::{FlushScope, SinkRecord};
use spillway::runtime::{Limits, Runtime};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const BATCH: usize = 500;
const VALUE_BYTES: usize = 1024;
/// Each sink runs at least this long, after a warm-up.
/// How long each sink is measured: 3 s, or 0.3 s in a smoke run.
fn measure_for() -> Duration {
    if scale::smoke() { Duration::from_millis(300) } else { Duration::from_secs(3) }
}

fn main() {
    // One thread, as a task runs its calls.
    let executor = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    executor.block_on(bench());
}

struct Rate {
    put: f64,
    put_and_flush: f64,
}

async fn bench() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    // The tests' cache: in `.ci/run` they compiled these components already
    // (seconds each for Python and JavaScript).
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-test-cache")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let batch: Vec<SinkRecord> = (0..BATCH).map(|i| batch::record(i, VALUE_BYTES)).collect();
    println!(
        "put() of batches of {BATCH} records x {VALUE_BYTES} B values, one core, each sink for {:?}",
        measure_for()
    );
    let mut rates = Vec::new();
    for (label, wasm) in [
        ("noop-sink (Rust)", repo.join("target/plugins/noop-sink.wasm")),
        ("file-sink (Rust)", repo.join("target/plugins/file-sink.wasm")),
        ("python-sink", repo.join("target/example-plugins/python-sink.wasm")),
        ("javascript-sink", repo.join("target/example-plugins/javascript-sink.wasm")),
        ("python-noop-sink", repo.join("target/example-plugins/python-noop-sink.wasm")),
        ("javascript-noop-sink", repo.join("target/example-plugins/javascript-noop-sink.wasm")),
    ] {
        if !wasm.exists() {
            println!("{label:<21} missing: {} (scripts/build-plugins.sh, scripts/build-examples.sh)", wasm.display());
            rates.push(None);
            continue;
        }
        let rate = measure(&runtime, &wasm, out.path(), &batch).await;
        println!("{label:<21} put {:>10.0} records/s   put+flush {:>10.0} records/s", rate.put, rate.put_and_flush);
        rates.push(Some(rate));
    }
    let ratio = |a: &Option<Rate>, b: &Option<Rate>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.2} (put+flush {:.2})", a.put / b.put, a.put_and_flush / b.put_and_flush),
        _ => "n/a".into(),
    };
    let [noop, file, python, javascript, python_noop, javascript_noop] = &rates[..] else { unreachable!() };
    let extra = std::env::var("SPILLWAY_BENCH_PLUGINS").unwrap_or_default();
    for wasm in extra.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let rate = measure(&runtime, Path::new(wasm), out.path(), &batch).await;
        let put = rate.put;
        println!("{wasm}: put {put:>10.0} records/s, ratio to noop-sink {}", ratio(&Some(rate), noop));
    }
    println!("ratio python/noop-sink: {}   target 0.25", ratio(python, noop));
    println!("ratio javascript/noop-sink: {}   target 0.10", ratio(javascript, noop));
    println!("ratio python/file-sink: {}   (the same work in Rust)", ratio(python, file));
    println!("ratio javascript/file-sink: {}", ratio(javascript, file));
    println!("ratio python-noop/noop-sink: {}   (a put before any work)", ratio(python_noop, noop));
    println!("ratio javascript-noop/noop-sink: {}", ratio(javascript_noop, noop));
}

async fn measure(runtime: &Runtime, wasm: &Path, dir: &Path, batch: &[SinkRecord]) -> Rate {
    let plugin = runtime.load_file(wasm).await.unwrap();
    let grants = Grants::from_config([("plugin.grant.fs.out.path", dir.to_str().unwrap())]).unwrap();
    let limits = Limits { memory_bytes: 512 << 20, ..Limits::default() };
    let mut instance = runtime.instantiate(&plugin, "bench", &grants, &limits).await.unwrap();
    let file = dir.join(format!("{}.jsonl", plugin.metadata.name));
    let config = [
        ("file".to_string(), file.to_str().unwrap().to_string()),
        ("fields".to_string(), "topic,partition,offset,key,value".to_string()),
        ("task.id".to_string(), "0".to_string()),
    ];
    instance.start(&config).await.unwrap();
    for _ in 0..5 {
        black_box(instance.put(batch).await.unwrap());
        instance.flush(&FlushScope::All).await.unwrap();
    }
    let (mut put, mut total, mut rounds) = (Duration::ZERO, Instant::now(), 0usize);
    let started = Instant::now();
    while started.elapsed() < measure_for() {
        let t = Instant::now();
        black_box(instance.put(black_box(batch)).await.unwrap());
        put += t.elapsed();
        instance.flush(&FlushScope::All).await.unwrap();
        rounds += 1;
        let _ = std::fs::OpenOptions::new().write(true).truncate(true).open(&file); // keep the file small
    }
    let elapsed = std::mem::replace(&mut total, Instant::now()).elapsed();
    let records = (rounds * BATCH) as f64;
    Rate { put: records / put.as_secs_f64(), put_and_flush: records / elapsed.as_secs_f64() }
}
