//! Records per second mirrored from one Kafka cluster to another by the
//! mirror plugin in a `spillway serve` worker, beside a plain rdkafka
//! consume-and-produce loop over the same data, in the same run: without
//! transactions (at least once) and with them (exactly once).
//!
//!     cargo bench -p spillway --bench mirror
//!
//! Runs between `SPILLWAY_TEST_TXN_SOURCE` and `_TARGET` (scripts/bench.sh:
//! two Apache Kafka clusters), or two noida-db brokers it starts. Each round
//! mirrors a fresh topic of RECORDS records of about 100 bytes in 3 partitions, with one
//! task (one consumer); the clock runs from the start of consumption until
//! a `read_committed` reader of the target has every record. The baseline
//! is what a Rust program would write by hand: a `StreamConsumer` and a
//! `FutureProducer` (idempotent, linger 5 ms), every send awaited before
//! its offset is committed; with transactions, one transaction per second
//! that carries the source positions as records into the target, as the
//! host commits.

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use futures::StreamExt;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use scale::Scaled;
use serde_json::json;
use std::time::{Duration, Instant};
use support::cluster::Cluster;
use support::unique;
use support::worker::Worker;

static RECORDS: Scaled = Scaled::new(50_000, 5000);
static ROUNDS: Scaled = Scaled::new(3, 1);

fn main() {
    let executor = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    executor.block_on(bench());
}

async fn bench() {
    let source = Cluster::start_or_env("SOURCE");
    let target = Cluster::start_or_env("TARGET");
    let dir = tempfile::tempdir().unwrap();
    let worker = Worker::start(&source.bootstrap, dir.path(), "text", "worker.log").await;
    for exactly_once in [false, true] {
        let (mut through, mut plain) = (Vec::new(), Vec::new());
        for _ in 0..ROUNDS.get() {
            let topic = unique("bench");
            source.create_topic(&topic, 3).await;
            produce(&source.bootstrap, &topic).await;
            through.push(run_mirror(&worker, &topic, &target.bootstrap, exactly_once).await);
            plain.push(run_plain(&source.bootstrap, &topic, &target.bootstrap, exactly_once).await);
        }
        let (through, plain) = (median(through), median(plain));
        let mode = if exactly_once { "with transactions" } else { "without transactions" };
        println!("mirror {mode}: {RECORDS} records of ~100 bytes, 3 partitions, one task, medians of {ROUNDS}");
        println!("  spillway + mirror plugin: {:>8.1} ms  {:>9.0} records/s", ms(through), rate(through));
        println!("  plain rdkafka loop:       {:>8.1} ms  {:>9.0} records/s", ms(plain), rate(plain));
        println!(
            "  ratio (mirror rate / plain rate): {:.2}{}",
            plain.as_secs_f64() / through.as_secs_f64(),
            if exactly_once { "" } else { " (target >= 0.80)" }
        );
    }
}

async fn produce(bootstrap: &str, topic: &str) {
    let producer: FutureProducer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("linger.ms", "20").create().unwrap();
    let sends = (0..RECORDS.get()).map(|i| {
        let producer = producer.clone();
        async move {
            let key = format!("key-{i}");
            let value = format!(r#"{{"id":{i},"payload":"{}"}}"#, "x".repeat(70));
            producer
                .send(
                    FutureRecord::to(topic).key(&key).payload(&value).partition((i % 3) as i32),
                    Duration::from_secs(30),
                )
                .await
                .map_err(|(e, _)| e)
                .unwrap();
        }
    });
    futures::stream::iter(sends).buffer_unordered(5000).collect::<Vec<()>>().await;
}

/// Until the target has every record, read under read_committed.
async fn wait_for_all(target: &str, topic: &str, started: Instant) -> Duration {
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", target)
        .set("group.id", unique("bench-reader"))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut list = TopicPartitionList::new();
    for p in 0..3 {
        list.add_partition_offset(topic, p, Offset::Beginning).unwrap();
    }
    // The topic may not exist yet: wait for it.
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(5));
        if md.is_ok_and(|m| m.topics().iter().any(|t| t.name() == topic && t.partitions().len() == 3)) {
            break;
        }
        assert!(Instant::now() < deadline, "{topic} never appeared in the target");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    consumer.assign(&list).unwrap();
    let mut seen = 0;
    while seen < RECORDS.get() {
        match tokio::time::timeout_at(deadline.into(), consumer.recv()).await {
            Ok(Ok(_)) => seen += 1,
            Ok(Err(e)) => panic!("reading {topic}: {e}"),
            Err(_) => panic!("only {seen} of {RECORDS} records reached {topic}"),
        }
    }
    started.elapsed()
}

async fn run_mirror(worker: &Worker, topic: &str, target: &str, exactly_once: bool) -> Duration {
    let name = unique("mirror");
    let config = json!({
        "connector.class": "mirror",
        "topics": topic,
        "tasks.max": "1",
        "consumer.override.group.protocol": "classic",
        "batch.max.records": "500",
        "source.cluster.alias": "src",
        "emit.checkpoints.enabled": "false",
        "plugin.grant.kafka.target.bootstrap.servers": target,
        "plugin.grant.kafka.target.exactly.once": exactly_once.to_string(),
    });
    let started = Instant::now();
    worker.send(reqwest::Method::PUT, &format!("/connectors/{name}/config"), config).await;
    let took = wait_for_all(target, &format!("src.{topic}"), started).await;
    worker.send(reqwest::Method::DELETE, &format!("/connectors/{name}"), serde_json::Value::Null).await;
    took
}

async fn run_plain(source: &str, topic: &str, target: &str, exactly_once: bool) -> Duration {
    let out = format!("plain.{topic}");
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", target).create().unwrap();
    admin
        .create_topics(
            [&rdkafka::admin::NewTopic::new(&out, 3, rdkafka::admin::TopicReplication::Fixed(-1))],
            &rdkafka::admin::AdminOptions::new(),
        )
        .await
        .unwrap();
    let started = Instant::now();
    let group = unique("plain");
    let reader = {
        let (target, out) = (target.to_string(), out.clone());
        tokio::spawn(async move { wait_for_all(&target, &out, started).await })
    };
    let consumer: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", source)
        .set("group.id", &group)
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut producer_config = ClientConfig::new();
    producer_config.set("bootstrap.servers", target).set("enable.idempotence", "true").set("linger.ms", "5");
    if exactly_once {
        producer_config.set("transactional.id", unique("plain-txn"));
    }
    let producer: FutureProducer = producer_config.create().unwrap();
    let positions_topic = format!("{out}-positions");
    if exactly_once {
        producer.init_transactions(Duration::from_secs(30)).unwrap();
        producer.begin_transaction().unwrap();
    }
    let mut pending = Vec::new();
    let mut positions = std::collections::BTreeMap::new();
    let mut last_commit = Instant::now();
    let mut copied = 0;
    while copied < RECORDS.get() {
        let message = consumer.recv().await.unwrap();
        let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&out).partition(message.partition());
        if let Some(key) = message.key() {
            record = record.key(key);
        }
        if let Some(value) = message.payload() {
            record = record.payload(value);
        }
        pending.push(producer.send_result(record).map_err(|(e, _)| e).unwrap());
        positions.insert(message.partition(), message.offset() + 1);
        copied += 1;
        if pending.len() >= 500 || copied == RECORDS.get() || last_commit.elapsed() >= Duration::from_secs(1) {
            // Every send is delivered before its offset is committed.
            for delivery in futures::future::join_all(pending.drain(..)).await {
                delivery.unwrap().map_err(|(e, _)| e).unwrap();
            }
            let mut offsets = TopicPartitionList::new();
            for (p, o) in &positions {
                offsets.add_partition_offset(topic, *p, Offset::Offset(*o)).unwrap();
            }
            if exactly_once && (last_commit.elapsed() >= Duration::from_secs(1) || copied == RECORDS.get()) {
                // The positions go into the target inside the transaction,
                // as records (what the host does): Apache Kafka refuses a
                // transactional offset commit for the source's partitions.
                for (p, o) in &positions {
                    let key = format!("{topic}-{p}");
                    let value = o.to_string();
                    let record = FutureRecord::to(&positions_topic).key(&key).payload(&value);
                    producer.send_result(record).map_err(|(e, _)| e).unwrap();
                }
                producer.commit_transaction(Duration::from_secs(30)).unwrap();
                if copied < RECORDS.get() {
                    producer.begin_transaction().unwrap();
                }
                last_commit = Instant::now();
            } else if !exactly_once {
                consumer.commit(&offsets, rdkafka::consumer::CommitMode::Async).unwrap();
                last_commit = Instant::now();
            }
        }
    }
    reader.await.unwrap()
}

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rate(d: Duration) -> f64 {
    RECORDS.get() as f64 / d.as_secs_f64()
}
