//! `config.storage.topic`: the worker keeps connector configs, target states
//! and restart requests in a Kafka topic, keyed and encoded as Kafka
//! Connect's config topic, and a worker started anywhere else with the same
//! topic brings every connector back. On the test broker (librdkafka's mock,
//! which cannot create topics: partition 0 of the auto-created topic is
//! used) and on noida-db, which can: the topic is created with one partition,
//! and a topic with several is refused. And `status.storage.topic`, where
//! statuses are written as Connect's status topic has them. A config read
//! back from the topic is checked as a REST write is.

mod support;

use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use spillway::herder::{ConfigMap, ConfigTopic, Herder, HerderError, State, StatusTopic, TargetState};
use std::path::Path;
use std::time::{Duration, Instant};
use support::cluster::Cluster;
use support::herder::{plugin_dir, test_runtime, wait_running, worker_config};
use support::{Broker, unique};

async fn start_worker(bootstrap: &str, dir: &Path, topic: &str) -> anyhow::Result<Herder> {
    let mut config = worker_config(bootstrap, dir, &plugin_dir());
    config.config_topic = Some(ConfigTopic { name: topic.to_string(), replication_factor: -1 });
    Herder::start(config, test_runtime()).await
}

fn noop_config(name: &str) -> ConfigMap {
    let topic = format!("records-of-{name}");
    [("name", name), ("connector.class", "noop-sink"), ("topics", &topic), ("tasks.max", "1")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

type Records = Vec<(String, Option<serde_json::Value>)>;

/// Partition 0 of `topic`, every record as key and JSON value (`None`: a tombstone).
fn read_topic(bootstrap: &str, topic: &str) -> Records {
    read_partition(bootstrap, topic, 0)
}

fn read_partition(bootstrap: &str, topic: &str, partition: i32) -> Records {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("reader"))
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let (low, high) = consumer.fetch_watermarks(topic, partition, Duration::from_secs(10)).unwrap();
    let mut list = TopicPartitionList::new();
    list.add_partition_offset(topic, partition, Offset::Offset(low)).unwrap();
    consumer.assign(&list).unwrap();
    let (mut records, mut next) = (Vec::new(), low);
    let deadline = Instant::now() + Duration::from_secs(30);
    while next < high {
        assert!(Instant::now() < deadline, "read {next} of {high}");
        if let Some(message) = consumer.poll(Duration::from_millis(500)) {
            let message = message.unwrap();
            next = message.offset() + 1;
            let key = String::from_utf8(message.key().unwrap().to_vec()).unwrap();
            records.push((key, message.payload().map(|v| serde_json::from_slice(v).unwrap())));
        }
    }
    records
}

async fn state_of(herder: &Herder, name: &str) -> State {
    herder.status(name.into()).await.unwrap().connector.state
}

async fn wait_for_state(herder: &Herder, name: &str, want: State) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while state_of(herder, name).await != want {
        assert!(Instant::now() < deadline, "{name} never {want:?}: {:?}", herder.status(name.into()).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connectors_kept_in_the_config_topic_come_back_on_another_worker() {
    let broker = Broker::start_or_env();
    let topic = unique("spillway-configs");
    let first_dir = tempfile::tempdir().unwrap();
    let first = start_worker(&broker.bootstrap, first_dir.path(), &topic).await.expect("first worker");
    first.create("kept".into(), noop_config("kept"), None).await.unwrap();
    first.create("paused".into(), noop_config("paused"), Some(TargetState::Paused)).await.unwrap();
    first.create("gone".into(), noop_config("gone"), None).await.unwrap();
    first.delete("gone".into()).await.unwrap();
    wait_running(&first, "kept", 1).await;
    first.shutdown().await.unwrap();
    assert!(!support::worker_state_file(first_dir.path()).exists(), "the state went to the topic, not the file");

    // Each change is one record, keyed and encoded as Connect's, after
    // Spillway's own record of the state's format, written at the start.
    let records = read_topic(&broker.bootstrap, &topic);
    let keys: Vec<(&str, bool)> = records.iter().map(|(k, v)| (k.as_str(), v.is_some())).collect();
    assert_eq!(
        keys,
        [
            ("spillway-format", true),
            ("target-state-kept", true),
            ("connector-kept", true),
            ("target-state-paused", true),
            ("connector-paused", true),
            ("target-state-gone", true),
            ("connector-gone", true),
            ("connector-gone", false),
            ("target-state-gone", false),
        ]
    );
    assert_eq!(records[0].1, Some(serde_json::json!({"format": 1})));
    assert_eq!(records[3].1, Some(serde_json::json!({"state": "PAUSED", "state.v2": "PAUSED"})));
    let kept: ConfigMap = serde_json::from_value(records[2].1.as_ref().unwrap()["properties"].clone()).unwrap();
    assert_eq!(kept, noop_config("kept"));

    // A record another writer put there (Kafka Connect writes this form).
    let producer: FutureProducer = ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    let value = serde_json::to_vec(&serde_json::json!({"properties": noop_config("written-by-connect")})).unwrap();
    let record = FutureRecord::to(&topic).partition(0).key("connector-written-by-connect").payload(&value);
    producer.send(record, Duration::from_secs(10)).await.unwrap();
    // And one no REST write would pass: a dead-letter queue into the config
    // topic itself, whose rejected records every worker would then run.
    let mut planted = noop_config("planted");
    planted.insert("errors.tolerance".into(), "all".into());
    planted.insert("errors.deadletterqueue.topic.name".into(), topic.clone());
    let value = serde_json::to_vec(&serde_json::json!({"properties": planted})).unwrap();
    let record = FutureRecord::to(&topic).partition(0).key("connector-planted").payload(&value);
    producer.send(record, Duration::from_secs(10)).await.unwrap();

    // Another worker, with nothing on its disk, reads it all back.
    let second_dir = tempfile::tempdir().unwrap();
    let second = start_worker(&broker.bootstrap, second_dir.path(), &topic).await.expect("second worker");
    let mut names = second.connectors().await.unwrap();
    names.sort();
    assert_eq!(names, ["kept", "paused", "planted", "written-by-connect"]);
    // Read back, checked as a REST write is: failed, naming the rule, with
    // no task started.
    wait_for_state(&second, "planted", State::Failed).await;
    let status = second.status("planted".into()).await.unwrap();
    let trace = status.connector.trace.clone().unwrap_or_default();
    assert!(trace.contains("errors.deadletterqueue.topic.name") && trace.contains("the worker's own topic"), "{trace}");
    assert!(status.tasks.is_empty(), "{status:?}");
    assert_eq!(second.info("kept".into()).await.unwrap().config, noop_config("kept"));
    wait_running(&second, "kept", 1).await;
    wait_running(&second, "written-by-connect", 1).await;
    wait_for_state(&second, "paused", State::Paused).await;
    assert!(matches!(second.info("gone".into()).await, Err(HerderError::NotFound(_))));
    second.stop("kept".into()).await.unwrap();
    second.shutdown().await.unwrap();

    let third_dir = tempfile::tempdir().unwrap();
    let third = start_worker(&broker.bootstrap, third_dir.path(), &topic).await.expect("third worker");
    wait_for_state(&third, "kept", State::Stopped).await;
    let (last_key, last_value) = read_topic(&broker.bootstrap, &topic).pop().unwrap();
    assert_eq!(last_key, "target-state-kept");
    assert_eq!(last_value, Some(serde_json::json!({"state": "PAUSED", "state.v2": "STOPPED"})));
    third.shutdown().await.unwrap();
}

/// Where the cluster can create topics, the worker creates the config topic
/// with one partition, and refuses a topic of several, whose records no
/// reader could put back in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_config_topic_is_created_with_one_partition_and_one_of_several_is_refused() {
    let cluster = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("spillway-configs");
    let worker = start_worker(&cluster.bootstrap, dir.path(), &topic).await.expect("worker");
    // Stopped: its tasks would need share groups, which noida-db lacks.
    worker.create("kept".into(), noop_config("kept"), Some(TargetState::Stopped)).await.unwrap();
    worker.shutdown().await.unwrap();
    let admin: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &cluster.bootstrap).create().unwrap();
    let metadata = admin.fetch_metadata(Some(&topic), Duration::from_secs(10)).unwrap();
    assert_eq!(metadata.topics()[0].partitions().len(), 1, "created with one partition");
    let again = start_worker(&cluster.bootstrap, tempfile::tempdir().unwrap().path(), &topic).await.expect("again");
    assert_eq!(again.connectors().await.unwrap(), ["kept"]);
    again.shutdown().await.unwrap();

    let admin: AdminClient<DefaultClientContext> =
        ClientConfig::new().set("bootstrap.servers", &cluster.bootstrap).create().unwrap();
    let described =
        admin.describe_configs([&ResourceSpecifier::Topic(&topic)], &AdminOptions::new()).await.unwrap().remove(0);
    let policy = described.unwrap().get("cleanup.policy").and_then(|e| e.value.clone());
    assert_eq!(policy.as_deref(), Some("compact"), "created compacted");

    let several = unique("spillway-configs");
    cluster.create_topic(&several, 3).await;
    let refused = start_worker(&cluster.bootstrap, dir.path(), &several).await.err().expect("refused");
    let message = format!("{refused:#}");
    assert!(message.contains(&format!("the config topic {several} has 3 partitions")), "{message}");
    // One partition, but records deleted with age.
    let deleting = unique("spillway-configs");
    cluster.create_topic(&deleting, 1).await;
    let refused = start_worker(&cluster.bootstrap, dir.path(), &deleting).await.err().expect("refused");
    let message = format!("{refused:#}");
    assert!(message.contains("cleanup.policy=delete; it must be compacted"), "{message}");
}

/// Each status change is a record, keyed and encoded as Connect's status
/// topic has them (each key in order within its partition), and a deleted
/// connector's statuses end in tombstones.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statuses_are_written_to_the_status_topic_as_they_change() {
    let broker = Broker::start_or_env();
    let topic = unique("spillway-status");
    let dir = tempfile::tempdir().unwrap();
    let mut config = worker_config(&broker.bootstrap, dir.path(), &plugin_dir());
    config.status_topic = Some(StatusTopic { name: topic.clone(), partitions: 5, replication_factor: -1 });
    let worker_id = config.worker_id();
    let worker = Herder::start(config, test_runtime()).await.expect("worker");
    worker.create("watched".into(), noop_config("watched"), None).await.unwrap();
    wait_running(&worker, "watched", 1).await;
    worker.pause("watched".into()).await.unwrap();
    wait_for_state(&worker, "watched", State::Paused).await;
    worker.delete("watched".into()).await.unwrap();
    worker.shutdown().await.unwrap();

    let admin: BaseConsumer = ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().unwrap();
    let metadata = admin.fetch_metadata(Some(&topic), Duration::from_secs(10)).unwrap();
    let mut by_key: std::collections::BTreeMap<String, Vec<Option<serde_json::Value>>> = Default::default();
    for partition in 0..metadata.topics()[0].partitions().len() as i32 {
        for (key, value) in read_partition(&broker.bootstrap, &topic, partition) {
            by_key.entry(key).or_default().push(value);
        }
    }
    let keys: Vec<&String> = by_key.keys().collect();
    assert_eq!(keys, ["status-connector-watched", "status-task-watched-0"]);
    for (key, values) in &by_key {
        assert_eq!(values.last(), Some(&None), "{key} ends in a tombstone: {values:?}");
        let states: Vec<&str> = values.iter().flatten().map(|v| v["state"].as_str().unwrap()).collect();
        let running = states.iter().position(|s| *s == "RUNNING").unwrap_or_else(|| panic!("{key}: {states:?}"));
        assert!(states[running..].contains(&"PAUSED"), "{key}: RUNNING, then PAUSED: {states:?}");
        assert!(states.windows(2).all(|w| w[0] != w[1]), "{key}: only changes are written: {states:?}");
        for value in values.iter().flatten() {
            assert_eq!(value["worker_id"], worker_id.as_str());
            assert!(value["generation"].is_u64() && value.get("trace").is_some(), "{value}");
        }
    }
}
