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
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    let producer = producer(bootstrap);
    let first = SEQ.fetch_add(n, Ordering::Relaxed);
    let keys: Vec<String> = (first..first + n).map(|i| format!("{topic}-{i}")).collect();
    let sends = keys.iter().map(|key| {
        let producer = producer.clone();
        async move {
            let record = FutureRecord::to(topic).key(key.as_str()).payload(key.as_str());
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
