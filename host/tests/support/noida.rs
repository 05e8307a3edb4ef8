//! A second kind of test broker: noida-db's Kafka (PyPI), whose
//! transactions are correct (aborted records hidden under read_committed,
//! offsets sent to a transaction applied), which librdkafka's mock's are
//! not. Each instance has its own port and data directory, so that a test
//! can run a source and a target cluster apart and stop and restart one.
//!
//! `SPILLWAY_TEST_TXN_SOURCE` and `SPILLWAY_TEST_TXN_TARGET` name two real
//! clusters instead (say, Apache Kafka 4.2+); tests that stop a broker skip
//! that step then.

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Noida {
    pub bootstrap: String,
    port: u16,
    child: Option<Child>,
    dir: Option<tempfile::TempDir>,
}

impl Noida {
    /// `which` is `SOURCE` or `TARGET`: the env override it honours.
    pub fn start_or_env(which: &str) -> Noida {
        super::init_logging();
        if let Ok(bootstrap) = std::env::var(format!("SPILLWAY_TEST_TXN_{which}")) {
            println!("{which}: external cluster at {bootstrap}");
            return Noida { bootstrap, port: 0, child: None, dir: None };
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut noida = Noida {
            bootstrap: format!("127.0.0.1:{port}"),
            port,
            child: None,
            dir: Some(tempfile::tempdir().unwrap()),
        };
        noida.start();
        println!("{which}: noida-db kafka at {}", noida.bootstrap);
        noida
    }

    /// Whether this broker can be stopped and restarted by the test.
    pub fn is_ours(&self) -> bool {
        self.dir.is_some()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.as_ref().expect("a noida of ours").path().join("data")
    }

    fn start(&mut self) {
        let child = Command::new(noida_db())
            .args(["start", "--only", "kafka", "--host", "127.0.0.1", "--kafka-port", &self.port.to_string()])
            .arg("--data-dir")
            .arg(self.data_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting noida-db (pip install noida-db)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "noida-db never listened on {}", self.port);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the broker (its data stays).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().ok();
            child.wait().ok();
        }
    }

    /// SIGSTOP (`frozen = true`) or SIGCONT: the broker keeps its sockets
    /// and its data but answers nothing, as a broker in a long pause or
    /// behind a partition does; nothing it acknowledged is lost.
    pub fn freeze(&self, frozen: bool) {
        let child = self.child.as_ref().expect("a noida of ours, running");
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").arg(signal).arg(child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// Starts it again on the same port, with the same data.
    pub fn restart(&mut self) {
        self.stop();
        self.start();
    }

    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &self.bootstrap).create().unwrap();
        let results = admin
            .create_topics([&NewTopic::new(topic, partitions, TopicReplication::Fixed(1))], &AdminOptions::new())
            .await
            .expect("CreateTopics");
        for result in results {
            result.unwrap_or_else(|(t, e)| panic!("creating {t}: {e}"));
        }
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

impl Drop for Noida {
    fn drop(&mut self) {
        self.stop();
    }
}
