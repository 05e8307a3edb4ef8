//! Helpers shared by integration tests: a Kafka-protocol broker to talk to, and
//! a producer.
#![allow(dead_code)]

pub mod cluster;
pub mod databases;
pub mod herder;
pub mod java;
pub mod registry;
pub mod worker;

/// Where a test worker whose data is in `dir` keeps its state file: beside
/// `dir`, not in it, because the grant policy refuses a connector a
/// directory that holds the worker's state.
pub fn worker_state_file(dir: &std::path::Path) -> std::path::PathBuf {
    let name = dir.file_name().expect("a directory with a name").to_string_lossy();
    dir.with_file_name(format!("{name}.worker-state.json"))
}

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

/// Names the cluster of `SPILLWAY_TEST_BOOTSTRAP` in the tests' output
/// (test.sh sets it to the Apache Kafka version it started).
pub const BROKER_NAME_ENV: &str = "SPILLWAY_TEST_BROKER_NAME";

/// A broker to run against: the one in `SPILLWAY_TEST_BOOTSTRAP` (in CI, an
/// Apache Kafka that test.sh started), or a librdkafka mock cluster started
/// for this test and killed on drop.
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
            let name = std::env::var(BROKER_NAME_ENV).unwrap_or_else(|_| "external cluster".into());
            let description = format!("{name} at {bootstrap} (${BOOTSTRAP_ENV})");
            println!("broker: {description}");
            return Broker { bootstrap, description, child: None, _dir: None };
        }
        Broker::mock()
    }

    /// librdkafka's mock cluster, whatever the environment names: for the
    /// tests that need what only it can do (say so where it is called).
    pub fn mock() -> Broker {
        init_logging();
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
        producers().lock().unwrap().retain(|key, _| !key.starts_with(&self.bootstrap));
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
    producer_with(bootstrap, "none")
}

fn producer_with(bootstrap: &str, compression: &str) -> FutureProducer {
    producers()
        .lock()
        .unwrap()
        .entry(format!("{bootstrap}#{compression}"))
        .or_insert_with(|| {
            ClientConfig::new()
                .set("bootstrap.servers", bootstrap)
                .set("linger.ms", "5")
                .set("compression.type", compression)
                .create()
                .expect("producer")
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

/// Probes until every task of a classic group holds partitions: a record
/// into each of `topics` every 500 ms until `written_by(task)` shows a probe
/// for each of `tasks` tasks; answers the probes, to leave out of a count.
///
/// Counted records come after, because a join rebalances the group and
/// librdkafka's mock refuses every commit while it does
/// (REBALANCE_IN_PROGRESS; Kafka accepts a commit of the current generation
/// then): what a task wrote meanwhile comes again.
pub async fn probe_until_every_task_holds_partitions(
    bootstrap: &str,
    topics: &[&str],
    tasks: u32,
    written_by: impl Fn(u32) -> Vec<String>,
) -> std::collections::BTreeSet<String> {
    let mut probes = std::collections::BTreeSet::new();
    // Patient: each rebalance of the mock's may wait out a session timeout.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let waiting: Vec<u32> =
            (0..tasks).filter(|task| !written_by(*task).iter().any(|k| probes.contains(k))).collect();
        if waiting.is_empty() {
            return probes;
        }
        assert!(Instant::now() < deadline, "tasks {waiting:?} never held a partition of {topics:?}");
        for topic in topics {
            // Keyed by sequence, so spread over the partitions.
            probes.extend(produce(bootstrap, topic, 4).await);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// One record to produce, as a test spells it.
pub struct Produce {
    pub partition: Option<i32>,
    pub key: String,
    /// Empty: a null value (a tombstone).
    pub value: Vec<u8>,
    /// Milliseconds since the epoch; none for the producer's clock.
    pub timestamp: Option<i64>,
}

/// Produces `records` and waits until the broker has each.
pub async fn produce_records(bootstrap: &str, topic: &str, records: &[Produce]) {
    produce_with(producer(bootstrap), topic, records).await
}

/// Like [`produce_records`], compressed (lz4): the mock broker keeps about
/// 5 MB of each partition's log, counted compressed, so tests that need more
/// data in one partition send records that compress well.
pub async fn produce_compressed(bootstrap: &str, topic: &str, records: &[Produce]) {
    produce_with(producer_with(bootstrap, "lz4"), topic, records).await
}

async fn produce_with(producer: FutureProducer, topic: &str, records: &[Produce]) {
    let sends = records.iter().map(|r| {
        let producer = producer.clone();
        async move {
            let mut record = FutureRecord::to(topic).key(r.key.as_str());
            if !r.value.is_empty() {
                record = record.payload(r.value.as_slice());
            }
            record.partition = r.partition;
            record.timestamp = r.timestamp;
            producer
                .send(record, Duration::from_secs(30))
                .await
                .map_err(|(e, _)| e)
                .unwrap_or_else(|e| panic!("producing {}: {e}", r.key));
        }
    });
    futures::future::join_all(sends).await;
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

pub fn count_keys(keys: &[String]) -> std::collections::BTreeMap<&String, usize> {
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

/// Environment variable naming an external S3-compatible server's endpoint
/// (its keys in `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`).
pub const S3_ENDPOINT_ENV: &str = "SPILLWAY_TEST_S3_ENDPOINT";

/// An S3-compatible server to run against: the one in
/// `SPILLWAY_TEST_S3_ENDPOINT`, or moto (`tests/support/s3-server.py`),
/// started once per test binary and shared by its tests (each uses buckets
/// of its own). moto ends with the test binary: it exits when its stdin,
/// held here, closes.
pub struct S3Server {
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    _moto: Option<Mutex<Child>>,
}

pub fn s3_server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(|| {
        let key = |name: &str| std::env::var(name).unwrap_or_else(|_| "test".to_string());
        let (access_key, secret_key) = (key("AWS_ACCESS_KEY_ID"), key("AWS_SECRET_ACCESS_KEY"));
        if let Ok(endpoint) = std::env::var(S3_ENDPOINT_ENV) {
            println!("s3: external server at {endpoint} (${S3_ENDPOINT_ENV})");
            return S3Server { endpoint, access_key, secret_key, _moto: None };
        }
        let mut moto = S3Server::start_moto("serve");
        (moto.access_key, moto.secret_key) = (access_key, secret_key);
        moto
    })
}

impl S3Server {
    /// A moto of its own that refuses every key but the one it answers
    /// (`access_key`, `secret_key`); it stops when dropped.
    pub fn with_credentials_checked() -> S3Server {
        S3Server::start_moto("serve-with-auth")
    }

    fn start_moto(mode: &str) -> S3Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("endpoint");
        let script = support_dir().join("s3-server.py");
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(mode)
            .arg(&file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", script.display()));
        let deadline = Instant::now() + Duration::from_secs(60);
        let written = loop {
            if let Ok(s) = std::fs::read_to_string(&file) {
                break s;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("s3-server.py exited early ({status}): is moto installed? pip install 'moto[server]'");
            }
            assert!(Instant::now() < deadline, "s3-server.py wrote no endpoint");
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut lines = written.lines().map(str::to_string);
        let endpoint = lines.next().expect("an endpoint");
        let access_key = lines.next().unwrap_or_else(|| "test".into());
        let secret_key = lines.next().unwrap_or_else(|| "test".into());
        println!("s3: moto ({mode}) at {endpoint}");
        S3Server { endpoint, access_key, secret_key, _moto: Some(Mutex::new(child)) }
    }

    /// Creates a bucket no other test uses, and answers its name.
    pub fn new_bucket(&self, prefix: &str) -> String {
        let name = format!("{prefix}-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        self.script(&["create-bucket", &self.endpoint, &name]);
        name
    }

    /// The keys of the bucket's multipart uploads in progress.
    pub fn uploads_in_progress(&self, bucket: &str) -> Vec<String> {
        self.script(&["list-uploads", &self.endpoint, bucket]).lines().map(str::to_string).collect()
    }

    fn script(&self, args: &[&str]) -> String {
        let out = Command::new("python3")
            .arg(support_dir().join("s3-server.py"))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.secret_key)
            .output()
            .expect("running s3-server.py");
        assert!(out.status.success(), "s3-server.py {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    /// A connector's grant `plugin.grant.object-store.<grant>.*` of
    /// `s3://<bucket>/<prefix>` on this server.
    pub fn grant(&self, grant: &str, bucket: &str, prefix: &str) -> Vec<(String, String)> {
        let key = |setting: &str| format!("plugin.grant.object-store.{grant}.{setting}");
        vec![
            (key("url"), format!("s3://{bucket}/{prefix}")),
            (key("endpoint"), self.endpoint.clone()),
            (key("access.key.id"), self.access_key.clone()),
            (key("secret.access.key"), self.secret_key.clone()),
        ]
    }

    /// The bucket as the test reads it back, bypassing Spillway.
    pub fn bucket(&self, bucket: &str) -> object_store::aws::AmazonS3 {
        spillway::capabilities::tls::install_crypto_provider();
        object_store::aws::AmazonS3Builder::new()
            .with_endpoint(&self.endpoint)
            .with_allow_http(true)
            .with_bucket_name(bucket)
            .with_region("us-east-1")
            .with_access_key_id(&self.access_key)
            .with_secret_access_key(&self.secret_key)
            .build()
            .expect("an S3 client")
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(moto) = self._moto.take() {
            let mut child = moto.into_inner().unwrap();
            child.kill().ok();
            child.wait().ok();
        }
    }
}

/// A file-sink connector on `topic` writing `dir/<file>-<task>.jsonl` (the
/// directory granted), flushing every 200 ms: its keys, then `extra` over them.
pub fn file_sink_config(
    name: &str,
    topic: &str,
    dir: &std::path::Path,
    file: &str,
    extra: &[(&str, &str)],
) -> spillway::herder::ConfigMap {
    let file = dir.join(format!("{file}-{{task}}.jsonl"));
    let base = [
        ("name", name),
        ("connector.class", "file-sink"),
        ("topics", topic),
        ("tasks.max", "1"),
        ("file", file.to_str().unwrap()),
        ("flush.interval.ms", "200"),
        ("plugin.grant.fs.data.path", dir.to_str().unwrap()),
    ];
    base.iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}
