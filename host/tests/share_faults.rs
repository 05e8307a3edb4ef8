//! How the share consumer recovers when a broker moves things under it: a
//! partition leader that is not the leader any more, a coordinator that
//! moved, a member fenced by its group, and connections that drop; and what
//! the consumer and the task loop do as acquisition locks run out. A real
//! broker (SPILLWAY_TEST_BOOTSTRAP, or the librdkafka mock) serves the
//! records; a fault proxy in front of it injects the error once, or
//! announces shorter locks than the broker keeps.

#[path = "support/fault_proxy.rs"]
mod fault_proxy;
mod support;

use fault_proxy::{Event, Fault, FaultProxy};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::ApiKey;
use spillway::connector::ConnectorConfig;
use spillway::kafka::share::{CommitResult, ShareConsumer, ShareConsumerConfig, ShareError};
use spillway::kafka::{AckType, ConsumedRecord};
use spillway::runtime::Runtime;
use spillway::task::{self, FlushCause, TaskMetrics, TaskSpec};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use support::{Broker, file_sink_keys, produce, unique};
use tokio_util::sync::CancellationToken;

/// Upper bound for waits; tests assert on what happened, never how fast.
const PATIENCE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(500);

struct Setup {
    broker: Broker,
    proxy: FaultProxy,
    topic: String,
    consumer: ShareConsumer,
}

/// A consumer that talks to the broker only through a fault proxy, with
/// `before_join` armed before its first request.
async fn setup(name: &str, before_join: Option<Fault>) -> Setup {
    let broker = Broker::start_or_env();
    let proxy = FaultProxy::start(&broker.bootstrap);
    if let Some(fault) = before_join {
        proxy.arm(fault);
    }
    let topic = unique(name);
    let mut config = ShareConsumerConfig::new(&proxy.bootstrap, &unique("group"), &[topic.as_str()]);
    config.client_id = "spillway-fault-test".into();
    // Apache Kafka: the group starts at the earliest offset. The mock
    // serves no group configs: there a new share group starts at the log
    // end from its first fetch.
    config.auto_offset_reset = Some("earliest".into());
    let mut consumer = ShareConsumer::connect(config).await.expect("connect through the proxy");
    // Be in the group, with partitions, before producing: the mock's first
    // heartbeat answer carries the assignment, Apache Kafka's a later one.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let early = consumer.poll(Duration::from_secs(1)).await.expect("poll");
        assert!(early.is_empty(), "nothing was produced yet");
        if !consumer.assignment().is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "no assignment within {PATIENCE:?}");
    }
    Setup { broker, proxy, topic, consumer }
}

/// Polls, accepts and commits until every key in `wanted` arrived (or
/// patience ran out); returns the keys seen and the failed commits.
async fn consume(consumer: &mut ShareConsumer, wanted: &BTreeSet<String>) -> (BTreeSet<String>, Vec<CommitResult>) {
    let deadline = Instant::now() + PATIENCE;
    let (mut seen, mut failed) = (BTreeSet::new(), Vec::new());
    while !wanted.is_subset(&seen) && Instant::now() < deadline {
        let batch = consumer.poll(POLL).await.expect("poll survives the fault");
        for r in &batch {
            // Refused only for a record no longer ours: the broker redelivers it.
            if consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).is_ok() {
                seen.insert(String::from_utf8(r.key.as_deref().unwrap().to_vec()).unwrap());
            }
        }
        let result = consumer.commit_sync().await.expect("commit_sync");
        if !result.is_ok() {
            failed.push(result);
        }
    }
    (seen, failed)
}

/// Keeps the consumer polling (its acks and heartbeats flowing) until `done`.
async fn poll_until(consumer: &mut ShareConsumer, what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        let batch = consumer.poll(POLL).await.expect("poll");
        assert!(batch.is_empty(), "nothing was produced since the last batch");
    }
}

/// The next non-empty batch, left unacknowledged.
async fn first_batch(consumer: &mut ShareConsumer) -> Vec<ConsumedRecord> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let batch = consumer.poll(POLL).await.expect("poll");
        if !batch.is_empty() {
            return batch;
        }
        assert!(Instant::now() < deadline, "no records arrived");
    }
}

async fn produce_keys(broker: &Broker, topic: &str, n: usize) -> BTreeSet<String> {
    produce(&broker.bootstrap, topic, n).await.into_iter().collect()
}

fn missing(wanted: &BTreeSet<String>, seen: &BTreeSet<String>) -> usize {
    wanted.difference(seen).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_partition_whose_leader_moved_is_fetched_again_after_new_metadata() {
    let Setup { broker, proxy, topic, mut consumer } =
        setup("share-not-leader", Some(Fault::ShareFetchNotLeader)).await;
    let injected = Event::Injected(Fault::ShareFetchNotLeader);
    // The join ends as soon as the assignment is there, before or right
    // after the first fetch: poll until that fetch was refused and the
    // consumer fetched again.
    poll_until(&mut consumer, "the first fetch refused NOT_LEADER_OR_FOLLOWER, then a fetch again", || {
        proxy.events_after(|e| *e == injected).iter().any(|e| matches!(e, Event::Forwarded(ApiKey::ShareFetch, _)))
    })
    .await;
    assert!(proxy.events().contains(&injected), "the first fetch was answered NOT_LEADER_OR_FOLLOWER");
    let after = proxy.events_after(|e| *e == injected);
    let next = after.iter().find(|e| matches!(e, Event::Forwarded(ApiKey::Metadata | ApiKey::ShareFetch, _)));
    assert_eq!(
        next,
        Some(&Event::Forwarded(ApiKey::Metadata, None)),
        "NOT_LEADER_OR_FOLLOWER makes the consumer ask for metadata before it fetches again; then: {after:?}"
    );

    let produced = produce_keys(&broker, &topic, 300).await;
    let (seen, _) = consume(&mut consumer, &produced).await;
    assert_eq!(missing(&produced, &seen), 0, "every record arrives after the leader change");
    consumer.close().await.expect("close");
}

/// Arms a heartbeat error once the consumer is running, checks what it does
/// next with `recovered`, and that records still flow afterwards.
async fn heartbeat_fault_is_survived(name: &str, error: ResponseError, recovered: impl Fn(&[Event]) -> bool) {
    let Setup { broker, proxy, topic, mut consumer } = setup(name, None).await;
    let before = produce_keys(&broker, &topic, 100).await;
    let (seen, failed) = consume(&mut consumer, &before).await;
    assert_eq!((missing(&before, &seen), failed.len()), (0, 0), "records flow before the fault");

    let fault = Fault::Heartbeat(error);
    proxy.arm(fault);
    let injected = Event::Injected(fault);
    poll_until(&mut consumer, "the heartbeat fault and the recovery from it", || {
        recovered(&proxy.events_after(|e| *e == injected))
    })
    .await;

    let after = produce_keys(&broker, &topic, 100).await;
    let (seen, _) = consume(&mut consumer, &after).await;
    assert_eq!(missing(&after, &seen), 0, "every record produced after the fault arrives");
    consumer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_moved_coordinator_is_found_again() {
    heartbeat_fault_is_survived("share-not-coordinator", ResponseError::NotCoordinator, |after| {
        // FindCoordinator, then heartbeats to the coordinator it names.
        let found = after.iter().position(|e| *e == Event::Forwarded(ApiKey::FindCoordinator, None));
        found.is_some_and(|i| after[i..].iter().any(|e| matches!(e, Event::Forwarded(ApiKey::ShareGroupHeartbeat, _))))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_member_rejoins_with_epoch_zero() {
    heartbeat_fault_is_survived("share-fenced", ResponseError::FencedMemberEpoch, |after| {
        after.contains(&Event::Forwarded(ApiKey::ShareGroupHeartbeat, Some(0)))
    })
    .await;
}

/// A fenced member rejoins under its member id and keeps fetching the
/// partitions it holds records of: forgetting them would make the broker
/// release those records and deliver them again, once more to a sink that
/// may have written them already. (The mock fences every member that missed
/// two rebalances between its heartbeats, so eight tasks joining at once
/// fence each other.) The coordinator is unavailable for a while after the
/// fence, so that the rejoin spans several polls.
#[tokio::test(flavor = "multi_thread")]
async fn a_fenced_member_keeps_the_records_it_holds() {
    let Setup { broker, proxy, topic, mut consumer } = setup("share-fenced-holding", None).await;
    let produced = produce_keys(&broker, &topic, 50).await;
    let fence = Fault::Heartbeat(ResponseError::FencedMemberEpoch);
    proxy.arm(fence);
    for _ in 0..5 {
        proxy.arm(Fault::Heartbeat(ResponseError::CoordinatorNotAvailable));
    }
    let fenced = Event::Injected(fence);
    let key = |r: &ConsumedRecord| String::from_utf8(r.key.as_deref().unwrap().to_vec()).unwrap();
    // Everything delivered is held, none acknowledged, until the member is
    // back in the group and has fetched twice since.
    let mut held = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        assert!(Instant::now() < deadline, "no rejoin after the fence: {:?}", proxy.events_after(|e| *e == fenced));
        held.extend(consumer.poll(POLL).await.expect("poll through the fence"));
        let after = proxy.events_after(|e| *e == fenced);
        let rejoin = after.iter().position(|e| *e == Event::Forwarded(ApiKey::ShareGroupHeartbeat, Some(0)));
        let fetches_since =
            |i: usize| after[i..].iter().filter(|e| matches!(e, Event::Forwarded(ApiKey::ShareFetch, _))).count();
        if rejoin.is_some_and(|i| fetches_since(i) >= 2) {
            break;
        }
    }
    for r in &held {
        consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("still ours after the fence");
    }
    let result = consumer.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "the broker took the acks of records held across the fence: {result:?}");
    // Whatever had not arrived yet comes now, once.
    while held.len() < produced.len() && Instant::now() < deadline {
        let batch = consumer.poll(POLL).await.expect("poll");
        for r in &batch {
            consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("ours");
        }
        held.extend(batch);
        consumer.commit_sync().await.expect("commit_sync");
    }
    let keys: Vec<String> = held.iter().map(key).collect();
    support::assert_each_exactly_once(&keys, &produced.iter().cloned().collect::<Vec<_>>(), "held across a fence");
    consumer.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn acknowledgements_lost_with_a_dropped_connection_are_reported_not_assumed() {
    let Setup { broker, proxy, topic, mut consumer } = setup("share-dropped", None).await;
    produce_keys(&broker, &topic, 50).await;
    let batch = first_batch(&mut consumer).await;

    // The session the records were acquired in dies with its connection.
    proxy.drop_connections();
    for r in &batch {
        // Ours as far as the consumer knows until it next hears from the broker.
        let _ = consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept);
    }
    let result = consumer.commit_sync().await.expect("commit_sync");
    assert!(!result.is_ok(), "acks sent into a dropped connection are reported as failed: {:?}", result);
    let topics: BTreeSet<String> = result.failures().iter().map(|(tp, _)| tp.topic.clone()).collect();
    assert_eq!(topics, BTreeSet::from([topic.clone()]), "{:?}", result.failures());

    // The consumer reconnects and goes on with what comes next.
    let after = produce_keys(&broker, &topic, 100).await;
    let (seen, _) = consume(&mut consumer, &after).await;
    assert_eq!(missing(&after, &seen), 0, "every record produced after the drop arrives");
    let reconnected = proxy.events_after(|e| *e == Event::DroppedConnections);
    assert!(reconnected.contains(&Event::Connected), "{reconnected:?}");
    consumer.close().await.ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_record_whose_lock_ran_out_is_not_acknowledged_as_if_still_held() {
    let Setup { broker, proxy, topic, mut consumer } = setup("share-lock-expired", None).await;
    // The broker keeps its own, longer lock: only the consumer's clock runs out.
    proxy.announce_lock_timeout(1_000);
    produce_keys(&broker, &topic, 20).await;
    let batch = first_batch(&mut consumer).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    for r in &batch {
        match consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept) {
            Err(ShareError::LockExpired { offset, .. }) => assert_eq!(offset, r.offset),
            other => panic!("acknowledging {}@{} after its lock ran out: {other:?}", r.partition, r.offset),
        }
    }
    consumer.close().await.ok();
}

/// A sink that holds records until a flush (file-sink), a flush interval far
/// beyond the test and a steady stream of records (so fetches never come
/// back empty, which would flush at the broker's cap): only the acquisition
/// locks running out can make the task flush, and it must do so before they
/// do.
#[tokio::test(flavor = "multi_thread")]
async fn held_records_are_flushed_before_their_locks_run_out() {
    let broker = Broker::start_or_env();
    let proxy = FaultProxy::start(&broker.bootstrap);
    proxy.announce_lock_timeout(8_000);
    let (topic, name, dir) = (unique("share-held"), unique("held"), tempfile::tempdir().unwrap());
    let file = dir.path().join("out.jsonl");
    let raw = [
        ("name", name.as_str()),
        ("connector.class", "file-sink"),
        ("topics", &topic),
        ("file", file.to_str().unwrap()),
        ("plugin.grant.fs.data.path", dir.path().to_str().unwrap()),
        ("flush.interval.ms", "600000"),
    ];
    let (running, metrics, stop) = start_task_through(&proxy, "file-sink", &raw).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    // 8 s locks, flushed with 5 s left: a stream of 7 s outlives the first.
    let mut produced = BTreeSet::new();
    let streaming = Instant::now();
    while streaming.elapsed() < Duration::from_secs(7) {
        produced.extend(produce_keys(&broker, &topic, 5).await);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deadline = Instant::now() + PATIENCE;
    while metrics.accepted.load(Relaxed) < produced.len() as u64 {
        assert!(Instant::now() < deadline, "held records were never flushed: {:?}", metrics);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let written: BTreeSet<String> = file_sink_keys(dir.path(), "out").into_iter().collect();
    assert_eq!(written, produced, "the flush wrote every record before they were accepted");
    assert_eq!((metrics.released.load(Relaxed), metrics.ack_refused.load(Relaxed)), (0, 0));
    println!(
        "{} records; flushes: lock {}, cap {}, timer {}",
        produced.len(),
        metrics.flushes(FlushCause::Lock),
        metrics.flushes(FlushCause::Cap),
        metrics.flushes(FlushCause::Timer)
    );
    assert!(metrics.flushes(FlushCause::Lock) > 0, "never flushed for locks");
    stop.cancel();
    assert_eq!(running.await.unwrap(), task::TaskExit::Stopped);
}

/// A task of `plugin` with `raw` config, talking to the broker only through
/// `proxy`; returns once it fetched (a new share group starts at the log end).
async fn start_task_through(
    proxy: &FaultProxy,
    plugin: &str,
    raw: &[(&str, &str)],
) -> (tokio::task::JoinHandle<task::TaskExit>, Arc<TaskMetrics>, CancellationToken) {
    let raw = raw.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let config = Arc::new(ConnectorConfig::parse(&raw, &support::herder::share_worker()).unwrap());
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-test-cache")).unwrap();
    let plugins = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins");
    let plugin =
        runtime.load_file(&plugins.join(format!("{plugin}.wasm"))).await.expect("run scripts/build-plugins.sh first");
    let metrics = Arc::new(TaskMetrics::default());
    let spec = TaskSpec {
        task_id: 0,
        config,
        plugin,
        transforms: Vec::new(),
        bootstrap_servers: proxy.bootstrap.clone(),
        metrics: metrics.clone(),
    };
    let stop = CancellationToken::new();
    let running = tokio::spawn(task::start(&runtime, spec).await.expect("task starts").run(stop.clone()));
    let deadline = Instant::now() + PATIENCE;
    while metrics.polls.load(Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the task never fetched");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (running, metrics, stop)
}

/// Reads `n` records of a dead-letter topic, as (context headers by name).
async fn dead_letters(bootstrap: &str, topic: &str, n: usize) -> Vec<std::collections::BTreeMap<String, String>> {
    use rdkafka::Message;
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::Headers;
    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", unique("dlq-reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut out = Vec::new();
    while out.len() < n {
        let m = tokio::time::timeout(PATIENCE, consumer.recv()).await.expect("a dead letter").unwrap();
        let headers = m.headers().map(|hs| {
            hs.iter()
                .map(|h| (h.key.to_string(), String::from_utf8_lossy(h.value.unwrap_or_default()).into()))
                .collect()
        });
        out.push(headers.unwrap_or_default());
    }
    out
}

/// The delivery count limit comes from the broker (DescribeConfigs, the
/// group's config first), not from a copy in the connector config: with a
/// limit of 3, a record that keeps failing is handed back twice, and on its
/// third delivery goes to the dead-letter queue instead of being released
/// into the broker's archive. The proxy answers DescribeConfigs as a Kafka
/// 4.2 broker would (the mock has no DescribeConfigs), and announces 6 s
/// locks so that records are handed back within seconds.
#[tokio::test(flavor = "multi_thread")]
async fn the_delivery_limit_comes_from_the_broker_and_the_last_delivery_goes_to_the_dlq() {
    let broker = Broker::start_or_env();
    let proxy = FaultProxy::start(&broker.bootstrap);
    proxy.serve_delivery_limits(Some(3), Some(7));
    proxy.announce_lock_timeout(6_000);
    let (topic, dlq, name) = (unique("share-limit"), unique("share-limit-dlq"), unique("limit"));
    let raw = [
        ("name", name.as_str()),
        ("connector.class", "misbehave"),
        ("topics", topic.as_str()),
        ("mode", "fail-batch"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq.as_str()),
    ];
    let (running, metrics, stop) = start_task_through(&proxy, "misbehave", &raw).await;
    let delivery = metrics.share_delivery.get().expect("a share task knows its delivery rules");
    assert_eq!(delivery.delivery_count_limit, 3, "{delivery:?}");
    assert_eq!(delivery.limit_source, "group config share.delivery.count.limit");

    produce_keys(&broker, &topic, 10).await;
    let deadline = Instant::now() + PATIENCE;
    while metrics.dead_lettered.load(Relaxed) < 10 {
        assert!(Instant::now() < deadline, "never dead-lettered: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for headers in dead_letters(&broker.bootstrap, &dlq, 10).await {
        let message = &headers["__connect.errors.exception.message"];
        assert!(message.contains("still failing on delivery 3 of at most 3"), "{message}");
    }
    // Handed back on deliveries 1 and 2, to the DLQ on 3; none archived.
    assert_eq!(metrics.released.load(Relaxed), 20);
    assert_eq!(metrics.archived.load(Relaxed), 0);
    stop.cancel();
    assert_eq!(running.await.unwrap(), task::TaskExit::Stopped);
}

/// A record batch that arrives whole but cannot be decoded (its CRC does not
/// match) goes to the dead-letter queue with its offsets and the reason,
/// instead of being released until the broker archives it; the rest of the
/// records are accepted.
#[tokio::test(flavor = "multi_thread")]
async fn an_undecodable_record_batch_goes_to_the_dlq_with_its_offsets() {
    let broker = Broker::start_or_env();
    let proxy = FaultProxy::start(&broker.bootstrap);
    let (topic, dlq, name, dir) =
        (unique("share-corrupt"), unique("share-corrupt-dlq"), unique("corrupt"), tempfile::tempdir().unwrap());
    let record_file = dir.path().join("keys.txt");
    let raw = [
        ("name", name.as_str()),
        ("connector.class", "misbehave"),
        ("topics", topic.as_str()),
        ("mode", "accept"),
        ("record.file", record_file.to_str().unwrap()),
        ("plugin.grant.fs.data.path", dir.path().to_str().unwrap()),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq.as_str()),
    ];
    let (running, metrics, stop) = start_task_through(&proxy, "misbehave", &raw).await;
    proxy.arm(Fault::CorruptRecordBatch);
    let produced = produce_keys(&broker, &topic, 40).await;
    let deadline = Instant::now() + PATIENCE;
    while metrics.accepted.load(Relaxed) + metrics.dead_lettered.load(Relaxed) < 40 {
        assert!(Instant::now() < deadline, "records unaccounted for: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(proxy.events().contains(&Event::Injected(Fault::CorruptRecordBatch)));
    let dead = metrics.dead_lettered.load(Relaxed) as usize;
    assert!(dead > 0, "the damaged batch was not dead-lettered");
    let accepted: Vec<String> = std::fs::read_to_string(&record_file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    let unique_accepted: BTreeSet<String> = accepted.iter().cloned().collect();
    assert_eq!(unique_accepted.len(), accepted.len(), "accepted twice");
    assert!(unique_accepted.is_subset(&produced));
    assert_eq!(accepted.len() + dead, produced.len(), "every record accepted or dead-lettered, once");
    let letters = dead_letters(&broker.bootstrap, &dlq, dead).await;
    for headers in &letters {
        assert_eq!(headers["__connect.errors.stage"], "KAFKA_CONSUME");
        assert!(headers["__connect.errors.exception.message"].contains("could not be decoded"), "{headers:?}");
        assert!(headers["__connect.errors.offset"].parse::<i64>().is_ok());
    }
    println!("{dead} records of the damaged batch dead-lettered, {} accepted", accepted.len());
    stop.cancel();
    assert_eq!(running.await.unwrap(), task::TaskExit::Stopped);
}
