//! Unique records/s through the whole task loop (share consumer, convert,
//! wasm `put()` with the no-op plugin, acknowledge, commit) beside the raw
//! share consumer alone (poll, accept; acknowledgements ride on the next
//! fetch), on the same broker and the same records, in the same run.
//! Duplicates (a record handed on twice) are counted on both sides.
//!
//!     cargo bench -p spillway --bench share_loop
//!
//! Uses `SPILLWAY_TEST_BOOTSTRAP` or starts the librdkafka mock
//! (`tests/support/kafka-mock.py`, needs confluent-kafka).

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use scale::Scaled;
use spillway::connector::{ConnectorConfig, WorkerDefaults};
use spillway::kafka::AckType;
use spillway::kafka::share::{ShareConsumer, ShareConsumerConfig};
use spillway::runtime::Runtime;
use spillway::task::{self, TaskMetrics, TaskSpec};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Enough for rounds of about half a second on Apache Kafka here: at 20,000
/// a round took 150 ms, and joining the group swung the ratio by 0.4.
static RECORDS: Scaled = Scaled::new(200_000, 2000);
/// Each side runs this many times, alternating; the median is reported.
static ROUNDS: Scaled = Scaled::new(5, 1);
const VALUE_BYTES: usize = 1024;

#[tokio::main]
async fn main() {
    let broker = support::Broker::start_or_env();
    let bootstrap = broker.bootstrap.clone();
    let topic = format!("bench-{}", uuid::Uuid::new_v4().simple());
    let raw_groups: Vec<String> =
        (0..ROUNDS.get()).map(|i| format!("bench-raw-{i}-{}", uuid::Uuid::new_v4().simple())).collect();
    let connectors: Vec<String> =
        (0..ROUNDS.get()).map(|i| format!("bench-{i}-{}", uuid::Uuid::new_v4().simple())).collect();

    // On the mock a share group starts at the latest offset (it serves no
    // group configs): register every group on the topic before producing,
    // so that all of them then read the same records. On Apache Kafka every
    // group starts at the earliest.
    eprintln!("registering {} groups", 2 * ROUNDS.get());
    let loop_groups = connectors.iter().map(|c| format!("connect-{c}"));
    for group in raw_groups.iter().cloned().chain(loop_groups) {
        let mut consumer = ShareConsumer::connect(raw_config(&bootstrap, &group, &topic)).await.unwrap();
        consumer.poll(Duration::from_millis(500)).await.unwrap();
        consumer.close().await.unwrap();
    }
    eprintln!("producing");
    produce(&bootstrap, &topic).await;
    println!("{RECORDS} records x {VALUE_BYTES} B on {bootstrap}, {ROUNDS} rounds per side, alternating");

    let (mut raw, mut through_loop, mut memory) = (Vec::new(), Vec::new(), String::new());
    let (mut raw_duplicates, mut loop_duplicates) = (0, 0);
    for round in 0..ROUNDS.get() {
        let (elapsed, duplicates) = bounded("raw consumer", raw_consumer(&bootstrap, &raw_groups[round], &topic)).await;
        raw.push(elapsed);
        raw_duplicates += duplicates;
        let (elapsed, duplicates, mem) = bounded("task loop", task_loop(&bootstrap, &connectors[round], &topic)).await;
        through_loop.push(elapsed);
        loop_duplicates += duplicates;
        memory = mem;
        eprintln!("round {round}: raw {:?}, loop {:?}", raw[round], elapsed);
    }
    let (raw, through_loop) = (median(raw), median(through_loop));
    let rate = |d: Duration| RECORDS.get() as f64 / d.as_secs_f64();
    println!("raw share consumer (poll, accept)           {:>9.0} unique records/s", rate(raw));
    println!("task loop with the no-op wasm plugin        {:>9.0} unique records/s", rate(through_loop));
    println!("ratio loop/raw: {:.2}", raw.as_secs_f64() / through_loop.as_secs_f64());
    println!("duplicates over {ROUNDS} rounds: raw {raw_duplicates}, loop {loop_duplicates}");
    println!("host memory: {memory}");
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

/// A stalled broker ends the benchmark with a message instead of a hang.
async fn bounded<T>(what: &str, work: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(120), work).await {
        Ok(v) => v,
        Err(_) => {
            eprintln!("{what} stalled: not all {RECORDS} records arrived in 120 s");
            std::process::exit(2);
        }
    }
}

/// Time until every record was seen once, and how many arrived again.
/// The raw consumer's config: its group starts at the earliest offset, as
/// the task loop's does.
fn raw_config(bootstrap: &str, group: &str, topic: &str) -> ShareConsumerConfig {
    let mut config = ShareConsumerConfig::new(bootstrap, group, &[topic]);
    config.auto_offset_reset = Some("earliest".into());
    config
}

async fn raw_consumer(bootstrap: &str, group: &str, topic: &str) -> (Duration, usize) {
    let mut consumer = ShareConsumer::connect(raw_config(bootstrap, group, topic)).await.unwrap();
    let started = Instant::now();
    let (mut seen, mut duplicates) = (std::collections::HashSet::new(), 0);
    while seen.len() < RECORDS.get() {
        let records = consumer.poll(Duration::from_millis(500)).await.unwrap();
        for r in &records {
            consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).unwrap();
            if !seen.insert((r.partition, r.offset)) {
                duplicates += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    consumer.commit_sync().await.unwrap();
    consumer.close().await.unwrap();
    (elapsed, duplicates)
}

/// Time until the plugin accepted as many records as were produced, how many
/// more it was handed than produced (duplicates), and the host's memory.
async fn task_loop(bootstrap: &str, connector: &str, topic: &str) -> (Duration, usize, String) {
    // Share groups are opt-in (KIP-1302): the connector asks for one.
    let raw = [
        ("name", connector),
        ("connector.class", "noop-sink"),
        ("topics", topic),
        ("consumer.override.group.protocol", "share"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = Arc::new(ConnectorConfig::parse(&raw, &WorkerDefaults::default()).unwrap());
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-bench-cache")).unwrap();
    let plugin =
        runtime.load_file(&plugin_dir().join("noop-sink.wasm")).await.expect("run scripts/build-plugins.sh first");
    let metrics = Arc::new(TaskMetrics::default());
    let spec = TaskSpec {
        task_id: 0,
        config,
        plugin,
        transforms: Vec::new(),
        bootstrap_servers: bootstrap.to_string(),
        metrics: metrics.clone(),
    };
    let task_loop = task::start(&runtime, spec).await.unwrap();
    let stop = CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn(task_loop.run(stop.clone()));
    while (metrics.accepted.load(Relaxed) as usize) < RECORDS.get() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    // Anything handed on beyond the records produced was a duplicate.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let duplicates = (metrics.put.load(Relaxed) as usize).saturating_sub(RECORDS.get());
    stop.cancel();
    running.await.unwrap();
    (elapsed, duplicates, memory())
}

async fn produce(bootstrap: &str, topic: &str) {
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("linger.ms", "20").create().unwrap();
    let value = vec![b'x'; VALUE_BYTES];
    let mut pending = Vec::new();
    for i in 0..RECORDS.get() {
        let key = format!("key-{i}");
        pending.push(producer.send_result(FutureRecord::to(topic).key(&key).payload(&value)).unwrap());
        if pending.len() == 10_000 {
            for p in pending.drain(..) {
                p.await.unwrap().unwrap();
            }
        }
    }
    for p in pending {
        p.await.unwrap().unwrap();
    }
}

fn plugin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins")
}

/// Resident and peak memory of this process (host, plugin, both consumers).
fn memory() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status.lines().find(|l| l.starts_with(name)).map(|l| l[name.len()..].trim().to_string()).unwrap_or_default()
    };
    format!("resident {} (peak {})", field("VmRSS:"), field("VmHWM:"))
}
