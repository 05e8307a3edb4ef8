//! Clusters a test owns or names: Apache Kafka (through `scripts/kafka.sh`)
//! or noida-db's Kafka (PyPI), whose transactions are correct too (aborted
//! records hidden under read_committed, offsets sent to a transaction
//! applied), which librdkafka's mock's are not. Each private cluster has its
//! own ports and data directory, so that a test can run a source and a
//! target cluster apart and kill, freeze and restart one.
//!
//! `SPILLWAY_TEST_TXN_SOURCE` and `SPILLWAY_TEST_TXN_TARGET` name two shared
//! clusters (test.sh: the shared Apache Kafka and a second one); a test that
//! must stop its cluster asks for a [`Cluster::private`] one instead, which
//! is Apache Kafka where test.sh fetched it (`SPILLWAY_TEST_KAFKA_ENV` is
//! set), noida-db otherwise.

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Cluster {
    pub bootstrap: String,
    /// Which server this is, for the test's output.
    pub description: String,
    kind: Kind,
}

enum Kind {
    /// Named by the environment: not ours to stop.
    Shared,
    Noida {
        port: u16,
        child: Option<Child>,
        dir: tempfile::TempDir,
    },
    /// Started by `scripts/kafka.sh` in `dir`.
    Kafka {
        dir: tempfile::TempDir,
    },
}

impl Cluster {
    /// `which` is `SOURCE` or `TARGET`: the env override it honours;
    /// without one, a private cluster.
    pub fn start_or_env(which: &str) -> Cluster {
        super::init_logging();
        if let Ok(bootstrap) = std::env::var(format!("SPILLWAY_TEST_TXN_{which}")) {
            let name = std::env::var(super::BROKER_NAME_ENV).unwrap_or_else(|_| "external cluster".into());
            let description = format!("{name} at {bootstrap}");
            println!("{which}: {description}");
            return Cluster { bootstrap, description, kind: Kind::Shared };
        }
        Cluster::private(which)
    }

    /// A cluster of this test's own, which it may kill, freeze and restart:
    /// Apache Kafka where test.sh made it available, noida-db otherwise.
    pub fn private(which: &str) -> Cluster {
        super::init_logging();
        let cluster = if std::env::var_os(KAFKA_ENV).is_some() { Cluster::kafka() } else { Cluster::noida() };
        println!("{which}: {} (private)", cluster.description);
        cluster
    }

    /// Apache Kafka of this test's own, through `scripts/kafka.sh`.
    pub fn kafka() -> Cluster {
        Cluster::kafka_brokers(1)
    }

    /// Apache Kafka of `brokers` nodes of this test's own: node 1 is the
    /// only controller; internal topics are replicated min(brokers, 3) times.
    pub fn kafka_brokers(brokers: usize) -> Cluster {
        super::init_logging();
        let dir = tempfile::tempdir().unwrap();
        let bootstrap = kafka_sh(&["start", "--brokers", &brokers.to_string(), "--dir"], dir.path());
        let description = format!("Apache Kafka (scripts/kafka.sh), {brokers} broker(s) at {bootstrap}");
        Cluster { bootstrap, description, kind: Kind::Kafka { dir } }
    }

    fn kafka_dir(&self) -> &Path {
        match &self.kind {
            Kind::Kafka { dir } => dir.path(),
            _ => panic!("not an Apache Kafka of ours"),
        }
    }

    /// SIGKILLs broker `node` alone (its data stays), as a crash would. Node
    /// 1 is the only controller: kill another to keep the cluster up.
    pub fn kill_broker(&self, node: i32) {
        kafka_sh(&["kill", "--node", &node.to_string(), "--dir"], self.kafka_dir());
    }

    /// Starts broker `node` again, and waits until every broker is back.
    pub fn restart_broker(&self, node: i32) {
        kafka_sh(&["restart", "--node", &node.to_string(), "--dir"], self.kafka_dir());
    }

    /// The broker that leads `partition` of `topic` now.
    pub fn leader(&self, topic: &str, partition: i32) -> i32 {
        let client: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create().unwrap();
        let metadata = client.fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
        let topic = metadata.topics().iter().find(|t| t.name() == topic).expect("the topic in metadata");
        topic.partitions().iter().find(|p| p.id() == partition).expect("the partition").leader()
    }

    /// Creates `topic` with one partition per entry of `replicas`, each on
    /// those brokers (the first its preferred leader), at least two of them
    /// in sync for a write.
    pub async fn create_replicated_topic(&self, topic: &str, replicas: &[&[i32]]) {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create().unwrap();
        let new = NewTopic::new(topic, replicas.len() as i32, TopicReplication::Variable(replicas))
            .set("min.insync.replicas", "2");
        let results = admin.create_topics([&new], &AdminOptions::new()).await.expect("CreateTopics");
        for result in results {
            result.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
    }

    fn noida() -> Cluster {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut cluster = Cluster {
            bootstrap: format!("127.0.0.1:{port}"),
            description: format!("noida-db kafka at 127.0.0.1:{port}"),
            kind: Kind::Noida { port, child: None, dir: tempfile::tempdir().unwrap() },
        };
        cluster.start_noida();
        cluster
    }

    /// Whether this cluster can be stopped and restarted by the test.
    pub fn is_ours(&self) -> bool {
        !matches!(self.kind, Kind::Shared)
    }

    /// Whether this is noida-db, whose quirks some tests allow for.
    pub fn is_noida(&self) -> bool {
        matches!(self.kind, Kind::Noida { .. })
    }

    fn start_noida(&mut self) {
        let Kind::Noida { port, child, dir } = &mut self.kind else { unreachable!("a noida") };
        let started = Command::new(noida_db())
            .args(["start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", &port.to_string()])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting noida-db (pip install noida-db)");
        *child = Some(started);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", *port)).is_err() {
            assert!(Instant::now() < deadline, "noida-db never listened on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the broker (its data stays), as a crash would.
    pub fn stop(&mut self) {
        match &mut self.kind {
            Kind::Shared => panic!("not a cluster of ours"),
            Kind::Noida { child, .. } => {
                if let Some(mut child) = child.take() {
                    child.kill().ok();
                    child.wait().ok();
                }
            }
            Kind::Kafka { dir } => {
                kafka_sh(&["kill", "--dir"], dir.path());
            }
        }
    }

    /// SIGSTOP (`frozen = true`) or SIGCONT: the broker keeps its sockets
    /// and its data but answers nothing, as a broker in a long pause or
    /// behind a partition does; nothing it acknowledged is lost.
    pub fn freeze(&self, frozen: bool) {
        let pids: Vec<String> = match &self.kind {
            Kind::Shared => panic!("not a cluster of ours"),
            Kind::Noida { child, .. } => vec![child.as_ref().expect("running").id().to_string()],
            Kind::Kafka { dir } => std::fs::read_dir(dir.path())
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("pid")).ok())
                .map(|pid| pid.trim().to_string())
                .collect(),
        };
        assert!(!pids.is_empty(), "no broker process to signal");
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").arg(signal).args(&pids).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// Starts it again on the same ports, with the same data.
    pub fn restart(&mut self) {
        self.stop();
        match &self.kind {
            Kind::Shared => unreachable!("refused by stop"),
            Kind::Noida { .. } => self.start_noida(),
            Kind::Kafka { dir } => {
                kafka_sh(&["restart", "--dir"], dir.path());
            }
        }
    }

    /// How many brokers the cluster's metadata lists.
    pub fn broker_count(&self) -> usize {
        let client: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create().unwrap();
        client.fetch_metadata(None, Duration::from_secs(10)).expect("metadata").brokers().len()
    }

    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        create_topic(&self.bootstrap, topic, partitions).await
    }

    /// Every record of `topic` as (partition, key, value, headers,
    /// timestamp), read to the end under `isolation` (read_committed or
    /// read_uncommitted), in offset order per partition.
    pub fn read_all(&self, topic: &str, isolation: &str) -> Vec<ReadRecord> {
        read_all(&self.bootstrap, topic, isolation)
    }
}

/// One record read back.
#[derive(Clone, Debug, PartialEq)]
pub struct ReadRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    pub timestamp: Option<i64>,
}

pub fn read_all(bootstrap: &str, topic: &str, isolation: &str) -> Vec<ReadRecord> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", super::unique("reader"))
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let metadata = consumer.fetch_metadata(Some(topic), Duration::from_secs(10)).unwrap();
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic && t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        return Vec::new();
    }
    let mut list = TopicPartitionList::new();
    for p in &partitions {
        list.add_partition_offset(topic, *p, Offset::Beginning).unwrap();
    }
    consumer.assign(&list).unwrap();
    let mut records = Vec::new();
    let mut at_end = std::collections::BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while at_end.len() < partitions.len() && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(500)) {
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(p))) => {
                at_end.insert(p);
            }
            Some(Err(e)) => panic!("reading {topic}: {e}"),
            Some(Ok(m)) => {
                use rdkafka::message::Headers;
                let headers = m
                    .headers()
                    .map(|hs| hs.iter().map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec))).collect())
                    .unwrap_or_default();
                records.push(ReadRecord {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned(),
                    value: m.payload().map(<[u8]>::to_vec),
                    headers,
                    timestamp: m.timestamp().to_millis(),
                });
                at_end.remove(&m.partition());
            }
            None => {}
        }
    }
    records
}

/// Apache Kafka with a SCRAM user on a SASL_SSL listener: test.sh's shared
/// cluster (from its `cluster.env`), or one of the test's own.
pub struct SecuredKafka {
    pub sasl_bootstrap: String,
    pub user: String,
    pub password: String,
    /// The CA that signed the brokers' certificates (PEM file).
    pub ca: String,
    _own: Option<tempfile::TempDir>,
}

impl SecuredKafka {
    pub fn shared_or_start() -> SecuredKafka {
        super::init_logging();
        let (env_file, own) = match std::env::var(KAFKA_ENV) {
            Ok(file) => (PathBuf::from(file), None),
            Err(_) => {
                let dir = tempfile::tempdir().unwrap();
                kafka_sh(&["start", "--scram", "spillway:spillway-test-secret", "--tls", "--dir"], dir.path());
                (dir.path().join("cluster.env"), Some(dir))
            }
        };
        let text = std::fs::read_to_string(&env_file).unwrap_or_else(|e| panic!("{}: {e}", env_file.display()));
        let env: std::collections::HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
        let get = |key: &str| {
            let value = env.get(key).copied().unwrap_or_default();
            assert!(
                !value.is_empty(),
                "{} has no {key}: was the cluster started with --scram --tls?",
                env_file.display()
            );
            value.to_string()
        };
        assert_eq!(get("SASL_PROTOCOL"), "SASL_SSL", "{}", env_file.display());
        SecuredKafka {
            sasl_bootstrap: get("SASL_BOOTSTRAP"),
            user: get("SCRAM_USER"),
            password: get("SCRAM_PASSWORD"),
            ca: get("CA"),
            _own: own,
        }
    }
}

impl Drop for SecuredKafka {
    fn drop(&mut self) {
        if let Some(dir) = &self._own {
            kafka_sh(&["stop", "--dir"], dir.path());
        }
    }
}

/// Creates `topic` with `partitions` partitions, replicated once, on the
/// cluster at `bootstrap`.
pub async fn create_topic(bootstrap: &str, topic: &str, partitions: i32) {
    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", bootstrap).create().unwrap();
    let results = admin
        .create_topics([&NewTopic::new(topic, partitions, TopicReplication::Fixed(1))], &AdminOptions::new())
        .await
        .expect("CreateTopics");
    for result in results {
        result.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
    }
}

/// Set by test.sh: the shared Apache Kafka's `cluster.env`, and the sign
/// that `scripts/kafka.sh` has its jars here.
pub const KAFKA_ENV: &str = "SPILLWAY_TEST_KAFKA_ENV";

/// Runs `scripts/kafka.sh ARGS DIR` and answers the bootstrap it printed last.
pub fn kafka_sh(args: &[&str], dir: &Path) -> String {
    let script = super::support_dir().join("../../scripts/kafka.sh");
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .arg(dir)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(out.status.success(), "kafka.sh {args:?} {} failed", dir.display());
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string()
}

/// The server binary itself: the `noida-db` script on PATH runs it as a
/// child, which a kill of the script would leave running.
fn noida_db() -> String {
    if let Ok(path) = std::env::var("SPILLWAY_NOIDA_DB") {
        return path;
    }
    let found = Command::new("python3")
        .args(["-c", "from importlib.resources import files; print(files('noida_db').joinpath('noida-db'))"])
        .output()
        .expect("python3 (pip install noida-db)");
    let path = String::from_utf8_lossy(&found.stdout).trim().to_string();
    assert!(!path.is_empty(), "noida-db is not installed (pip install noida-db)");
    path
}

impl Drop for Cluster {
    fn drop(&mut self) {
        match &self.kind {
            Kind::Shared => {}
            Kind::Noida { .. } => self.stop(),
            Kind::Kafka { dir } => {
                kafka_sh(&["stop", "--dir"], dir.path());
            }
        }
    }
}
