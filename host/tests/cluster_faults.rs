//! The faults a real cluster has, on Apache Kafka, with exact counts: a Java
//! `KafkaShareConsumer` in a connector's share group beside its two tasks;
//! the worker SIGKILLed mid-stream; the only broker killed with -9 and
//! restarted under load; on three brokers, the partitions' leader killed.
//! The worker is the real `spillway serve` binary; the tasks write through
//! `file-sink`, one file per task. (A classic connector's two tasks through
//! a rebalance and a SIGKILL: `worker_crash.rs`.)
//!
//! Where no fault is injected each record must arrive exactly once; where
//! one is, none may be lost, and the duplicates are counted and printed.

mod support;

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cluster::{Cluster, KAFKA_ENV};
use support::java::JavaShareConsumer;
use support::worker::{PATIENCE, Worker};
use support::{assert_each_exactly_once, assert_none_lost, count_keys, file_sink_keys, unique};
use tokio_util::sync::CancellationToken;

/// The lock duration set on every connector's share group here (the
/// broker's minimum): records a dead member held come back after it.
const LOCK_MS: u64 = 15_000;
/// A dead member keeps its partitions until its session times out (the
/// broker's share session timeout, 45 s at least), then its held records'
/// locks run out: waits for what a killed member held allow for both.
const AFTER_A_DEATH: Duration = Duration::from_secs(180);

/// Apache Kafka: test.sh's shared cluster, or one of this test's own.
fn apache_kafka() -> Cluster {
    if std::env::var_os(KAFKA_ENV).is_some() { Cluster::start_or_env("SOURCE") } else { Cluster::kafka() }
}

/// A share-group `file-sink` connector writing `<name>-<task>.jsonl` in `dir`.
fn share_connector(name: &str, topic: &str, dir: &Path, flush_ms: u64) -> Value {
    json!({
        "connector.class": "file-sink",
        "topics": topic,
        "tasks.max": "2",
        "file": dir.join(format!("{name}-{{task}}.jsonl")),
        "plugin.grant.fs.data.path": dir,
        "flush.interval.ms": flush_ms.to_string(),
        "consumer.override.group.protocol": "share",
        "share.record.lock.duration.ms": LOCK_MS.to_string(),
    })
}

async fn create(worker: &Worker, name: &str, config: Value) {
    worker.send(reqwest::Method::POST, "/connectors", json!({"name": name, "config": config})).await;
    worker.wait_running(name, 2).await;
}

/// Waits (up to PATIENCE) until `done` holds; fails saying `never`.
async fn wait_until(never: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "{never}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every key of `produced` has arrived through `arrived`.
async fn wait_for_all(produced: &[String], limit: Duration, what: &str, arrived: impl Fn() -> Vec<String>) {
    let deadline = Instant::now() + limit;
    loop {
        let got = arrived();
        let have: BTreeSet<&String> = got.iter().collect();
        let missing = produced.iter().filter(|k| !have.contains(k)).count();
        if missing == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {missing} of {} records never arrived", produced.len());
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A producer that rides out a broker's absence: it retries a record for
/// up to two minutes, so a record it reports sent is one the cluster has.
fn patient_producer(bootstrap: &str) -> FutureProducer {
    ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "5")
        .set("message.timeout.ms", "120000")
        // A retried batch is not written twice: a duplicate counted is the sink's.
        .set("enable.idempotence", "true")
        .create()
        .expect("producer")
}

/// Records produced in the background, `batch` every 100 ms, until cancelled;
/// answers the keys the cluster acknowledged.
struct Stream {
    keys: Arc<Mutex<Vec<String>>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Stream {
    fn start(bootstrap: &str, topic: &str, batch: usize) -> Stream {
        let (producer, topic) = (patient_producer(bootstrap), topic.to_string());
        let keys = Arc::new(Mutex::new(Vec::new()));
        let stop = CancellationToken::new();
        let task = tokio::spawn({
            let (keys, stop) = (keys.clone(), stop.clone());
            async move {
                let mut seq = 0;
                while !stop.is_cancelled() {
                    let batch: Vec<String> = (seq..seq + batch).map(|i| format!("{topic}-{i}")).collect();
                    seq += batch.len();
                    let sends = batch.iter().map(|key| {
                        producer.send(FutureRecord::to(&topic).key(key).payload(key), Duration::from_secs(120))
                    });
                    for (key, sent) in batch.iter().zip(futures::future::join_all(sends).await) {
                        sent.map_err(|(e, _)| e).unwrap_or_else(|e| panic!("producing {key}: {e}"));
                    }
                    keys.lock().unwrap().extend(batch);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        Stream { keys, stop, task }
    }

    fn produced(&self) -> usize {
        self.keys.lock().unwrap().len()
    }

    async fn finish(self) -> Vec<String> {
        self.stop.cancel();
        self.task.await.expect("the producer");
        self.keys.lock().unwrap().clone()
    }
}

/// Two Spillway tasks and Kafka's own Java share consumer in one share
/// group: the stream is split between all three, and with no fault each
/// record is accepted exactly once, by one of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_spillway_tasks_and_a_java_share_consumer_split_a_stream_each_record_once() {
    let cluster = apache_kafka();
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("beside-java"), unique("beside-java"));
    cluster.create_topic(&topic, 4).await;
    let worker = Worker::start(&cluster.bootstrap, dir.path(), "text", "worker.log").await;
    create(&worker, &name, share_connector(&name, &topic, dir.path(), 200)).await;

    // The Java consumer joins the connector's group (Connect's name for it)
    // while the stream runs; it leaves once it has had nothing for 15 s.
    let java = JavaShareConsumer::start(
        &cluster.bootstrap,
        &topic,
        &format!("connect-{name}"),
        Duration::from_secs(15),
        dir.path(),
    );
    let stream = Stream::start(&cluster.bootstrap, &topic, 40);
    let deadline = Instant::now() + PATIENCE;
    while java.keys().is_empty() || stream.produced() < 2000 {
        assert!(Instant::now() < deadline, "the Java consumer got nothing of {} records", stream.produced());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let produced = stream.finish().await;
    let by_java = java.finish(PATIENCE);
    let spillway = || file_sink_keys(dir.path(), &format!("{name}-"));
    wait_for_all(&produced, PATIENCE, "Spillway and Java", || [spillway(), by_java.clone()].concat()).await;
    // A record whose acknowledgement was lost would come again once its
    // lock ran out: wait that long before counting.
    tokio::time::sleep(Duration::from_millis(LOCK_MS + 3000)).await;

    let task = |t: u32| file_sink_keys(dir.path(), &format!("{name}-{t}.")).len();
    println!(
        "on {}: {} records; task 0 accepted {}, task 1 {}, the Java consumer {}",
        cluster.description,
        produced.len(),
        task(0),
        task(1),
        by_java.len()
    );
    assert!(task(0) > 0 && task(1) > 0, "a Spillway task got no record: the group did not split the stream");
    let all = [spillway(), by_java].concat();
    assert_each_exactly_once(&all, &produced, "two Spillway tasks and a Java share consumer, no fault");
    worker.send(reqwest::Method::DELETE, &format!("/connectors/{name}"), Value::Null).await;
}

/// The worker SIGKILLed mid-stream while its tasks hold records: a new
/// worker gets them again once the dead members' locks run out; none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_mid_stream_loses_no_share_record() {
    let cluster = apache_kafka();
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("share-crash"), unique("share-crash"));
    cluster.create_topic(&topic, 4).await;
    let worker = Worker::start(&cluster.bootstrap, dir.path(), "text", "worker-1.log").await;
    // A flush every ten minutes: the tasks hold what they are given (until
    // their locks near expiry, when they flush).
    create(&worker, &name, share_connector(&name, &topic, dir.path(), 600_000)).await;

    let stream = Stream::start(&cluster.bootstrap, &topic, 20);
    let deadline = Instant::now() + PATIENCE;
    loop {
        let polled = worker.metric("spillway_records_polled_total").await;
        let accepted = worker.metric("spillway_records_accepted_total").await;
        if polled.len() == 2 && polled.iter().all(|p| *p > 0) && polled.iter().sum::<u64>() > accepted.iter().sum() {
            println!("before the kill: {} produced, {polled:?} delivered, {accepted:?} accepted", stream.produced());
            break;
        }
        assert!(Instant::now() < deadline, "the two tasks never held records together");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    worker.kill();
    // The stream goes on while no worker runs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let produced = stream.finish().await;

    let worker = Worker::start(&cluster.bootstrap, dir.path(), "text", "worker-2.log").await;
    worker.wait_running(&name, 2).await;
    worker
        .send(
            reqwest::Method::PUT,
            &format!("/connectors/{name}/config"),
            share_connector(&name, &topic, dir.path(), 200),
        )
        .await;
    let written = || file_sink_keys(dir.path(), &format!("{name}-"));
    wait_for_all(&produced, AFTER_A_DEATH, "after a worker's SIGKILL", written).await;
    let duplicates = assert_none_lost(&written(), &produced, "worker SIGKILLed mid-stream, share group");
    println!(
        "on {}: duplicates after the kill (the records written but not yet acknowledged): {duplicates}",
        cluster.description
    );
}

/// The only broker killed with -9 while a share connector consumes a
/// stream, and restarted: the acquisitions it forgot are handed out again,
/// none lost; the duplicates counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_killed_and_restarted_under_load_loses_no_share_record() {
    let mut cluster = Cluster::kafka();
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("broker-crash"), unique("broker-crash"));
    cluster.create_topic(&topic, 4).await;
    let worker = Worker::start(&cluster.bootstrap, dir.path(), "text", "worker.log").await;
    create(&worker, &name, share_connector(&name, &topic, dir.path(), 200)).await;

    let written = || file_sink_keys(dir.path(), &format!("{name}-"));
    let stream = Stream::start(&cluster.bootstrap, &topic, 50);
    wait_until("the connector never wrote 1000 records", || written().len() >= 1000).await;
    let before = (stream.produced(), written().len());
    cluster.stop();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.restart();
    println!("killed with {} produced and {} written; restarted", before.0, before.1);
    // Some records after the restart, through the same producer.
    let resumed = stream.produced();
    wait_until("producing never resumed", || stream.produced() >= resumed + 500).await;
    let produced = stream.finish().await;

    wait_for_all(&produced, AFTER_A_DEATH, "after the broker's restart", written).await;
    let duplicates = assert_none_lost(&written(), &produced, "the broker killed with -9 and restarted, share group");
    let status = worker.send(reqwest::Method::GET, &format!("/connectors/{name}/status"), Value::Null).await;
    assert!(status["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "RUNNING"), "{status}");
    println!("on {}: duplicates after the broker's restart: {duplicates}", cluster.description);
}

/// On three brokers, the leader of every partition of the topic killed
/// while a share connector consumes: the partitions move to the other
/// replicas and the share group's state with them; none lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partition_leader_killed_on_three_brokers_loses_no_share_record() {
    let cluster = Cluster::kafka_brokers(3);
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("leader-crash"), unique("leader-crash"));
    // Node 1 is the only controller; node 2 leads both partitions.
    cluster.create_replicated_topic(&topic, &[&[2, 3, 1], &[2, 1, 3]]).await;
    let worker = Worker::start(&cluster.bootstrap, dir.path(), "text", "worker.log").await;
    create(&worker, &name, share_connector(&name, &topic, dir.path(), 200)).await;

    let written = || file_sink_keys(dir.path(), &format!("{name}-"));
    let stream = Stream::start(&cluster.bootstrap, &topic, 50);
    wait_until("the connector never wrote 1000 records", || written().len() >= 1000).await;
    assert_eq!((cluster.leader(&topic, 0), cluster.leader(&topic, 1)), (2, 2), "node 2 leads both partitions");
    cluster.kill_broker(2);
    wait_until("no other replica took over", || cluster.leader(&topic, 0) != 2 && cluster.leader(&topic, 1) != 2).await;
    let moved = stream.produced();
    println!(
        "node 2 killed at {moved} produced; leaders now {} and {}",
        cluster.leader(&topic, 0),
        cluster.leader(&topic, 1)
    );
    wait_until("producing never resumed on the new leaders", || stream.produced() >= moved + 500).await;
    let produced = stream.finish().await;

    wait_for_all(&produced, AFTER_A_DEATH, "after the leader's death", written).await;
    let duplicates = assert_none_lost(&written(), &produced, "the partitions' leader killed, 3 brokers, share group");
    let twice = count_keys(&written()).values().filter(|n| **n > 1).count();
    println!("on {}: {duplicates} duplicates ({twice} records more than once)", cluster.description);
}
