//! Helpers shared by integration tests: a Kafka-protocol broker to talk to, and
//! a producer.
#![allow(dead_code)]

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Environment variable naming an external cluster's bootstrap servers.
pub const BOOTSTRAP_ENV: &str = "SPILLWAY_TEST_BOOTSTRAP";

/// Repository-level `tests/support` (scripts shared with non-Rust tests).
pub fn support_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/support")
}

/// A broker to run against: the one in `SPILLWAY_TEST_BOOTSTRAP`, or a
/// librdkafka mock cluster started for this test and killed on drop.
pub struct Broker {
    pub bootstrap: String,
    /// Human-readable: which server this is.
    pub description: String,
    child: Option<Child>,
    _dir: Option<tempfile::TempDir>,
}

impl Broker {
    pub fn start_or_env() -> Broker {
        init_logging();
        if let Ok(bootstrap) = std::env::var(BOOTSTRAP_ENV) {
            let description = format!("external cluster at {bootstrap} (${BOOTSTRAP_ENV})");
            println!("broker: {description}");
            return Broker { bootstrap, description, child: None, _dir: None };
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("bootstrap");
        let script = support_dir().join("kafka-mock.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg("1")
            .arg(&file)
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", script.display()));
        let deadline = Instant::now() + Duration::from_secs(30);
        let bootstrap = loop {
            match std::fs::read_to_string(&file) {
                Ok(s) if !s.trim().is_empty() => break s.trim().to_string(),
                _ => {}
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("kafka-mock.py exited early: {status}");
            }
            assert!(Instant::now() < deadline, "kafka-mock.py wrote no bootstrap");
            std::thread::sleep(Duration::from_millis(50));
        };
        let description = format!("librdkafka mock cluster (kafka-mock.py) at {bootstrap}");
        println!("broker: {description}");
        Broker { bootstrap, description, child: Some(child), _dir: Some(dir) }
    }

    /// True for the librdkafka mock, whose quirks some tests must allow for.
    pub fn is_mock(&self) -> bool {
        self.child.is_some()
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        // Stop our producer before its broker, or it retries forever.
        producers().lock().unwrap().remove(&self.bootstrap);
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// Log to the test's output, filtered by RUST_LOG (e.g. `spillway=debug`).
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("spillway=warn"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_test_writer().try_init();
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn producers() -> &'static Mutex<HashMap<String, FutureProducer>> {
    static PRODUCERS: OnceLock<Mutex<HashMap<String, FutureProducer>>> = OnceLock::new();
    PRODUCERS.get_or_init(Default::default)
}

/// One producer per bootstrap, kept until its `Broker` drops: on the mock,
/// closing any connection destroys every share session on the broker, so a
/// producer per call would knock consumers out mid-test.
fn producer(bootstrap: &str) -> FutureProducer {
    producers()
        .lock()
        .unwrap()
        .entry(bootstrap.to_string())
        .or_insert_with(|| {
            ClientConfig::new().set("bootstrap.servers", bootstrap).set("linger.ms", "5").create().expect("producer")
        })
        .clone()
}

/// Produce `n` records with keys unique in this process (`<topic>-<seq>`, the
/// value equal to the key) and return the keys in order.
pub async fn produce(bootstrap: &str, topic: &str, n: usize) -> Vec<String> {
    produce_to(bootstrap, topic, None, n).await
}

/// Like [`produce`], all into `partition` when given.
pub async fn produce_to(bootstrap: &str, topic: &str, partition: Option<i32>, n: usize) -> Vec<String> {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let producer = producer(bootstrap);
    let first = SEQ.fetch_add(n, Ordering::Relaxed);
    let keys: Vec<String> = (first..first + n).map(|i| format!("{topic}-{i}")).collect();
    let sends = keys.iter().map(|key| {
        let producer = producer.clone();
        async move {
            let mut record = FutureRecord::to(topic).key(key.as_str()).payload(key.as_str());
            record.partition = partition;
            producer
                .send(record, Duration::from_secs(30))
                .await
                .map_err(|(e, _)| e)
                .unwrap_or_else(|e| panic!("producing {key}: {e}"));
        }
    });
    futures::future::join_all(sends).await;
    keys
}

/// Checks that every expected key arrived exactly once and nothing else did;
/// the panic message lists what was missing, repeated or foreign.
pub fn assert_each_exactly_once(got: &[String], expected: &[String], what: &str) {
    let counts = count_keys(got);
    let want: std::collections::BTreeSet<&String> = expected.iter().collect();
    let missing: Vec<&&String> = want.iter().filter(|k| !counts.contains_key(**k)).collect();
    let repeated: Vec<(&String, usize)> = counts.iter().filter(|(_, n)| **n > 1).map(|(k, n)| (*k, *n)).collect();
    let foreign: Vec<&&String> = counts.keys().filter(|k| !want.contains(**k)).collect();
    assert!(
        missing.is_empty() && repeated.is_empty() && foreign.is_empty(),
        "{what}: {} records, {} arrived; {} missing (first {:?}), {} repeated (first {:?}), {} foreign",
        expected.len(),
        got.len(),
        missing.len(),
        missing.iter().take(3).collect::<Vec<_>>(),
        repeated.len(),
        repeated.iter().take(3).collect::<Vec<_>>(),
        foreign.len(),
    );
}

/// Checks that no expected key is missing and returns how many arrivals
/// were duplicates, for tests that inject a fault and report them.
pub fn assert_none_lost(got: &[String], expected: &[String], what: &str) -> usize {
    let counts = count_keys(got);
    let missing = expected.iter().filter(|k| !counts.contains_key(k)).count();
    assert_eq!(missing, 0, "{what}: {missing} of {} records lost", expected.len());
    let duplicates = counts.values().map(|n| n - 1).sum();
    println!("{what}: {} records, {} arrivals, {duplicates} duplicates", expected.len(), got.len());
    duplicates
}

fn count_keys(keys: &[String]) -> std::collections::BTreeMap<&String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for k in keys {
        *counts.entry(k).or_insert(0) += 1;
    }
    counts
}

/// Keys of the JSON lines file-sink wrote to the files in `dir` whose names
/// start with `prefix`.
pub fn file_sink_keys(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    let mut keys = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_str().unwrap().starts_with(prefix) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        // A line without its newline is still being written: not yet there.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for line in complete.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            keys.push(value["key"].as_str().unwrap().to_string());
        }
    }
    keys
}
