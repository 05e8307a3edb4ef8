//! A connector's offsets through the herder (Connect's
//! `/connectors/{name}/offsets`) where they take the broker's group APIs:
//!
//! - a classic group reset with DeleteGroups, on test.sh's Apache Kafka
//!   (noida-db without it; librdkafka's mock has no DeleteGroups, and
//!   `rest_api` covers the rewind used there instead);
//! - a share group's start offsets through DescribeShareGroupOffsets,
//!   AlterShareGroupOffsets and DeleteShareGroupOffsets (API keys 90-92),
//!   against a scripted broker ([`ShareOffsetsBroker`]) that speaks just
//!   that exchange and keeps the group's start offsets, so that the test
//!   checks what was sent field by field (`share_sink` reads a share
//!   connector's offsets from Apache Kafka itself).

mod support;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use spillway::herder::{
    ConnectorLag, ConnectorOffsets, Herder, HerderError, OffsetPartition, OffsetValue, PartitionOffset, TargetState,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cluster::Cluster;
use support::herder::{plugin_dir, test_runtime, wait_running, worker_config, worker_config_with};
use support::{assert_each_exactly_once, assert_none_lost, count_keys, file_sink_keys, produce, unique};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PATIENCE: Duration = Duration::from_secs(60);

async fn herder_on(bootstrap: &str, dir: &Path) -> Herder {
    Herder::start(worker_config(bootstrap, dir, &plugin_dir()), test_runtime()).await.unwrap()
}

fn offsets(entries: &[(&str, i32, Option<i64>)]) -> ConnectorOffsets {
    ConnectorOffsets {
        offsets: entries
            .iter()
            .map(|(topic, partition, offset)| PartitionOffset {
                partition: OffsetPartition { kafka_topic: topic.to_string(), kafka_partition: *partition },
                offset: offset.map(|o| OffsetValue { kafka_offset: o }),
            })
            .collect(),
    }
}

async fn wait_offsets(herder: &Herder, name: &str, want: &ConnectorOffsets) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = herder.offsets(name.into()).await.unwrap();
        if &got == want {
            return;
        }
        assert!(Instant::now() < deadline, "offsets never became {want:?}; last {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// DELETE deletes the group, as Connect does, rather than rewinding it: the
/// offsets read back are gone (not 0), and the connector reads the topic
/// again from its `auto.offset.reset`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_classic_reset_deletes_the_group() {
    let broker = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("reset");
    broker.create_topic(&topic, 1).await;
    let herder = herder_on(&broker.bootstrap, dir.path()).await;
    let classic = [("consumer.override.group.protocol", "classic"), ("consumer.override.session.timeout.ms", "6000")];
    herder.create("c".into(), support::file_sink_config("c", &topic, dir.path(), "c", &classic), None).await.unwrap();
    wait_running(&herder, "c", 1).await;
    let keys = produce(&broker.bootstrap, &topic, 20).await;
    wait_offsets(&herder, "c", &offsets(&[(&topic, 0, Some(20))])).await;
    assert_each_exactly_once(&file_sink_keys(dir.path(), "c"), &keys, "before the reset");

    herder.stop("c".into()).await.unwrap();
    // Kafka refuses to delete a group with members: the stopped task's
    // LeaveGroup may still be on its way.
    let deadline = Instant::now() + PATIENCE;
    while let Err(e) = herder.alter_offsets("c".into(), None).await {
        assert!(matches!(e, HerderError::Conflict(_)) && Instant::now() < deadline, "{e:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Nothing committed any more, so nothing listed, as Connect lists it;
    // a rewind would read 0 here.
    assert_eq!(herder.offsets("c".into()).await.unwrap(), offsets(&[]));

    herder.resume("c".into()).await.unwrap();
    wait_offsets(&herder, "c", &offsets(&[(&topic, 0, Some(20))])).await;
    let deadline = Instant::now() + PATIENCE;
    while file_sink_keys(dir.path(), "c").len() < 40 {
        assert!(Instant::now() < deadline, "the records were not read again");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let written = file_sink_keys(dir.path(), "c");
    let counts = count_keys(&written);
    assert!(keys.iter().all(|k| counts.get(k) == Some(&2)) && counts.len() == keys.len(), "each twice: {counts:?}");
    herder.shutdown().await.unwrap();
}

/// A classic task holds every record of a topic when another member joins
/// its group and leaves again: two rebalances. The task forgets the records
/// of partitions taken away (their new owner starts from the last commit,
/// which the held records kept back), so that once it has them all again it
/// holds each record once; when it flushes, every record is written and the
/// duplicates are exactly the records forgotten (the sink held them too).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_classic_task_forgets_the_records_of_partitions_taken_away() {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use std::sync::atomic::Ordering::Relaxed;
    let broker = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("taken");
    broker.create_topic(&topic, 4).await;
    let herder = herder_on(&broker.bootstrap, dir.path()).await;
    let classic = [
        ("consumer.override.group.protocol", "classic"),
        ("consumer.override.session.timeout.ms", "6000"),
        ("flush.interval.ms", "600000"),
    ];
    let config = support::file_sink_config("taken", &topic, dir.path(), "taken", &classic);
    herder.create("taken".into(), config, None).await.unwrap();
    wait_running(&herder, "taken", 1).await;
    let keys = produce(&broker.bootstrap, &topic, 40).await;
    let metrics = herder.task_metrics().await.unwrap().into_iter().find(|m| m.connector == "taken").unwrap().metrics;
    let deadline = Instant::now() + PATIENCE;
    while metrics.in_flight.load(Relaxed) < 40 {
        assert!(Instant::now() < deadline, "the task never held the 40 records: {metrics:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A second member takes some partitions (and commits nothing), then leaves.
    let joiner: BaseConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", "connect-taken")
        .set("enable.auto.commit", "false")
        .set("auto.offset.reset", "earliest")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap();
    joiner.subscribe(&[&topic]).unwrap();
    let deadline = Instant::now() + PATIENCE;
    while joiner.assignment().unwrap().count() == 0 || metrics.forgotten_at_rebalance.load(Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the group never gave the joiner partitions: {metrics:?}");
        let _ = joiner.poll(Duration::from_millis(100));
    }
    joiner.unsubscribe();
    let _ = joiner.poll(Duration::from_millis(100));
    drop(joiner);

    // Every forgotten record comes again, once.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (polled, forgotten) = (metrics.polled.load(Relaxed), metrics.forgotten_at_rebalance.load(Relaxed));
        if polled == 40 + forgotten && metrics.in_flight.load(Relaxed) == 40 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "after the rebalances the task should hold each of the 40 records once: {polled} polled, {forgotten} \
             forgotten, {} in flight",
            metrics.in_flight.load(Relaxed)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    herder.stop("taken".into()).await.unwrap();
    let forgotten = metrics.forgotten_at_rebalance.load(Relaxed) as usize;
    let duplicates =
        assert_none_lost(&file_sink_keys(dir.path(), "taken"), &keys, "a classic task through two rebalances");
    assert_eq!(duplicates, forgotten, "the duplicates are the records forgotten, which the sink held as well");
    println!("{forgotten} records forgotten at the rebalances on {}", broker.description);
    herder.shutdown().await.unwrap();
}

/// Waits until the connector's status shows a lag of `records` in all.
async fn wait_lag(herder: &Herder, name: &str, records: i64) -> ConnectorLag {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let lag = herder.status(name.into()).await.unwrap().lag;
        if let Some(lag) = lag.as_ref().filter(|l| l.records == records) {
            return lag.clone();
        }
        assert!(Instant::now() < deadline, "{name}: the lag never became {records}; last {lag:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A share connector may not take the group id of a consumer group that has
/// committed offsets (KIP-1302: the ids are one namespace); a classic
/// connector may join that group.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_share_group_may_not_take_a_consumer_groups_id() {
    use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
    let broker = support::Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let herder = herder_on(&broker.bootstrap, dir.path()).await;
    let topic = unique("clash");
    produce(&broker.bootstrap, &topic, 5).await;
    let group = unique("group");
    // A classic consumer group that consumed and committed.
    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", &group)
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&topic]).unwrap();
    let message = tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await.unwrap().unwrap();
    consumer.commit_message(&message, CommitMode::Sync).unwrap();

    let clash = support::file_sink_config(
        "clash",
        &topic,
        dir.path(),
        "clash",
        &[("consumer.override.group.id", group.as_str())],
    );
    let err = herder.create("clash".into(), clash, None).await.unwrap_err();
    assert!(matches!(&err, HerderError::BadRequest(m) if m.contains("already used by a consumer group")), "{err:?}");
    // The same id is fine for a classic connector joining that group.
    let classic = [("consumer.override.group.id", group.as_str()), ("consumer.override.group.protocol", "classic")];
    herder
        .create("classic".into(), support::file_sink_config("classic", &topic, dir.path(), "classic", &classic), None)
        .await
        .unwrap();
    herder.shutdown().await.unwrap();
}

/// A classic connector's lag per partition, in its status (and
/// `/metrics`): created stopped over 30 records, every record is lag,
/// counted from each partition's start; resumed, none once all are written,
/// each partition's committed offset at its end; and a share connector's,
/// as its broker counts it. On test.sh's Apache Kafka.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_connectors_lag_is_measured_per_partition_in_classic_and_share_groups() {
    let broker = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("lag");
    broker.create_topic(&topic, 2).await;
    let keys = produce(&broker.bootstrap, &topic, 30).await;
    let state = support::worker_state_file(dir.path());
    let fast = [("metrics.lag.interval.ms", "300")];
    let herder = Herder::start(worker_config_with(&broker.bootstrap, &state, &plugin_dir(), &fast), test_runtime())
        .await
        .unwrap();
    let classic = [("consumer.override.group.protocol", "classic")];
    herder
        .create(
            "lag".into(),
            support::file_sink_config("lag", &topic, dir.path(), "lag", &classic),
            Some(TargetState::Stopped),
        )
        .await
        .unwrap();
    let lag = wait_lag(&herder, "lag", 30).await;
    assert_eq!(lag.partitions.len(), 2, "{lag:?}");
    assert!(lag.partitions.iter().all(|p| p.offset.is_none() && p.records == p.log_end), "{lag:?}");

    herder.resume("lag".into()).await.unwrap();
    let lag = wait_lag(&herder, "lag", 0).await;
    assert!(lag.partitions.iter().all(|p| p.offset == Some(p.log_end)), "{lag:?}");
    assert_each_exactly_once(&file_sink_keys(dir.path(), "lag"), &keys, "classic group");

    // A share connector (the worker's default) beside it, measured as the
    // broker counts (KIP-1226): none left once it wrote every record; 10
    // when 10 more come while it is stopped (its group exists: counted from
    // where the group is, not from each partition's start, which would be
    // 40); none again once resumed.
    herder
        .create("shared".into(), support::file_sink_config("shared", &topic, dir.path(), "shared", &[]), None)
        .await
        .unwrap();
    let lag = wait_lag(&herder, "shared", 0).await;
    assert_eq!(lag.partitions.len(), 2, "{lag:?}");
    assert_each_exactly_once(&file_sink_keys(dir.path(), "shared"), &keys, "share group");
    herder.stop("shared".into()).await.unwrap();
    let mut keys = keys;
    keys.extend(produce(&broker.bootstrap, &topic, 10).await);
    let lag = wait_lag(&herder, "shared", 10).await;
    println!("a stopped share connector's lag on {}: {lag:?}", broker.description);
    assert!(lag.partitions.iter().all(|p| p.log_end > 0 && p.records <= p.log_end), "{lag:?}");
    herder.resume("shared".into()).await.unwrap();
    wait_lag(&herder, "shared", 0).await;
    assert_each_exactly_once(&file_sink_keys(dir.path(), "shared"), &keys, "share group, resumed");
    herder.shutdown().await.unwrap();
}

/// GET, PATCH and DELETE of a share-group connector's offsets, through the
/// three share-group offset RPCs.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_group_offsets_go_through_the_share_group_offset_apis() {
    let dir = tempfile::tempdir().unwrap();
    let broker = ShareOffsetsBroker::start(&[("orders", 2), ("audit", 1)]).await;
    let herder = herder_on(&broker.bootstrap, dir.path()).await;
    let config = support::file_sink_config("s", "orders", dir.path(), "s", &[]);
    // Created stopped: its tasks never run against this broker.
    herder.create("s".into(), config, Some(TargetState::Stopped)).await.unwrap();
    let group = "connect-s";

    // A group that never read anything has no offsets.
    assert_eq!(herder.offsets("s".into()).await.unwrap(), offsets(&[]));
    // Start offsets of the group's, in the connector's topic and another.
    broker.set(group, &[("orders", 0, 7), ("orders", 1, 3), ("audit", 0, 11)]);
    assert_eq!(
        herder.offsets("s".into()).await.unwrap(),
        offsets(&[("orders", 0, Some(7)), ("orders", 1, Some(3))]),
        "only the connector's topics"
    );

    // PATCH moves a start offset.
    herder.alter_offsets("s".into(), Some(offsets(&[("orders", 1, Some(42))]))).await.unwrap();
    assert_eq!(broker.offsets(group), [(("audit", 0), 11), (("orders", 0), 7), (("orders", 1), 42)].into());
    let refused = herder.alter_offsets("s".into(), Some(offsets(&[("orders", 9, Some(1))]))).await.unwrap_err();
    assert!(matches!(&refused, HerderError::BadRequest(m) if m.contains("orders-9")), "{refused:?}");
    // A null offset deletes; Kafka deletes a whole topic at a time.
    let refused = herder.alter_offsets("s".into(), Some(offsets(&[("orders", 0, None)]))).await.unwrap_err();
    assert!(matches!(&refused, HerderError::BadRequest(m) if m.contains("whole topic")), "{refused:?}");
    herder.alter_offsets("s".into(), Some(offsets(&[("orders", 0, None), ("orders", 1, None)]))).await.unwrap();
    assert_eq!(broker.offsets(group), [(("audit", 0), 11)].into());

    // While a consumer is in the group, Kafka refuses: a conflict, as for a
    // classic group still rebalancing.
    broker.set(group, &[("orders", 0, 5)]);
    broker.set_members(true);
    let refused = herder.alter_offsets("s".into(), Some(offsets(&[("orders", 0, Some(1))]))).await.unwrap_err();
    assert!(matches!(&refused, HerderError::Conflict(m) if m.contains("members")), "{refused:?}");
    broker.set_members(false);

    // DELETE deletes the group's start offsets in every topic it has.
    herder.alter_offsets("s".into(), None).await.unwrap();
    assert_eq!(broker.offsets(group), BTreeMap::new());
    assert_eq!(herder.offsets("s".into()).await.unwrap(), offsets(&[]));

    // Each of the three was sent, to the coordinator, for this group.
    let sent = broker.sent();
    for api in [ApiKey::DescribeShareGroupOffsets, ApiKey::AlterShareGroupOffsets, ApiKey::DeleteShareGroupOffsets] {
        assert!(sent.iter().any(|(key, g)| *key == api && g == group), "{api:?} never sent for {group}: {sent:?}");
    }
    herder.shutdown().await.unwrap();
}

/// A scripted broker for the share-group offset exchange: ApiVersions
/// (listing keys 90-92), Metadata, FindCoordinator (itself), and the three
/// RPCs over start offsets it keeps per group, with Kafka's errors for an
/// unknown partition (UNKNOWN_TOPIC_OR_PARTITION) and a group with members
/// (NON_EMPTY_GROUP). It closes the connection on any other request.
struct ShareOffsetsBroker {
    bootstrap: String,
    state: Arc<Mutex<FakeState>>,
}

#[derive(Default)]
struct FakeState {
    topics: BTreeMap<String, (i32, uuid::Uuid)>,
    offsets: BTreeMap<String, BTreeMap<(String, i32), i64>>,
    members: bool,
    /// (API, group) of each group request received.
    sent: Vec<(ApiKey, String)>,
}

impl ShareOffsetsBroker {
    async fn start(topics: &[(&str, i32)]) -> ShareOffsetsBroker {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(FakeState {
            topics: topics.iter().map(|(t, n)| (t.to_string(), (*n, uuid::Uuid::new_v4()))).collect(),
            ..FakeState::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, addr.port(), shared.clone()));
            }
        });
        ShareOffsetsBroker { bootstrap: addr.to_string(), state }
    }

    fn set(&self, group: &str, offsets: &[(&str, i32, i64)]) {
        let mut state = self.state.lock().unwrap();
        let group = state.offsets.entry(group.into()).or_default();
        group.clear();
        group.extend(offsets.iter().map(|(t, p, o)| ((t.to_string(), *p), *o)));
    }

    fn set_members(&self, members: bool) {
        self.state.lock().unwrap().members = members;
    }

    fn offsets(&self, group: &str) -> BTreeMap<(&'static str, i32), i64> {
        let state = self.state.lock().unwrap();
        let leak = |t: &String| -> &'static str { Box::leak(t.clone().into_boxed_str()) };
        state.offsets.get(group).map(|o| o.iter().map(|((t, p), v)| ((leak(t), *p), *v)).collect()).unwrap_or_default()
    }

    fn sent(&self) -> Vec<(ApiKey, String)> {
        self.state.lock().unwrap().sent.clone()
    }
}

async fn serve(mut stream: tokio::net::TcpStream, port: u16, state: Arc<Mutex<FakeState>>) {
    loop {
        let Ok(len) = stream.read_i32().await else { return };
        let mut frame = vec![0; len as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut frame = Bytes::from(frame);
        let (key, version) = (frame.clone().get_i16(), frame.clone().slice(2..).get_i16());
        let Ok(api) = ApiKey::try_from(key) else { return };
        let header = RequestHeader::decode(&mut frame, api.request_header_version(version)).unwrap();
        let Some(body) = answer(api, version, &mut frame, port, &state) else { return };
        let mut out = BytesMut::new();
        let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
        response_header.encode(&mut out, api.response_header_version(version)).unwrap();
        out.put_slice(&body);
        let mut framed = BytesMut::new();
        framed.put_i32(out.len() as i32);
        framed.put_slice(&out);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
    }
}

fn encode(message: &impl Encodable, version: i16) -> Bytes {
    let mut out = BytesMut::new();
    message.encode(&mut out, version).unwrap();
    out.freeze()
}

fn name(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The reply to one request, or `None` to hang up.
fn answer(api: ApiKey, version: i16, body: &mut Bytes, port: u16, state: &Mutex<FakeState>) -> Option<Bytes> {
    let mut state = state.lock().unwrap();
    let state = &mut *state;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let busy = ResponseError::NonEmptyGroup.code();
    Some(match api {
        ApiKey::ApiVersions => {
            // A client asking for a version above ours gets v0's body, as
            // Kafka does; v3 is all either client here asks for.
            let served = [(18, 0, 3), (3, 0, 12), (10, 0, 4), (77, 1, 1), (90, 0, 0), (91, 0, 0), (92, 0, 0)];
            let keys = served
                .iter()
                .map(|(k, min, max)| {
                    api_versions_response::ApiVersion::default()
                        .with_api_key(*k)
                        .with_min_version(*min)
                        .with_max_version(*max)
                })
                .collect();
            encode(&ApiVersionsResponse::default().with_api_keys(keys), version.min(3))
        }
        ApiKey::Metadata => {
            let request = MetadataRequest::decode(body, version).ok()?;
            let wanted: Option<Vec<String>> =
                request.topics.map(|ts| ts.iter().filter_map(|t| Some(t.name.as_ref()?.0.to_string())).collect());
            let topics = state
                .topics
                .iter()
                .filter(|(t, _)| wanted.as_ref().is_none_or(|w| w.contains(t)))
                .map(|(t, (partitions, id))| {
                    let partitions = (0..*partitions)
                        .map(|p| {
                            metadata_response::MetadataResponsePartition::default()
                                .with_partition_index(p)
                                .with_leader_id(BrokerId(1))
                                .with_replica_nodes(vec![BrokerId(1)])
                                .with_isr_nodes(vec![BrokerId(1)])
                        })
                        .collect();
                    metadata_response::MetadataResponseTopic::default()
                        .with_name(Some(TopicName(name(t))))
                        .with_topic_id(*id)
                        .with_partitions(partitions)
                })
                .collect();
            let brokers = vec![
                metadata_response::MetadataResponseBroker::default()
                    .with_node_id(BrokerId(1))
                    .with_host(name("127.0.0.1"))
                    .with_port(port as i32),
            ];
            let reply = MetadataResponse::default()
                .with_brokers(brokers)
                .with_controller_id(BrokerId(1))
                .with_cluster_id(Some(name("share-offsets")))
                .with_topics(topics);
            encode(&reply, version)
        }
        // Every group here is a share group (the connector's check of its
        // group id asks).
        ApiKey::ShareGroupDescribe => {
            let request = ShareGroupDescribeRequest::decode(body, version).ok()?;
            let described = |id: &GroupId| {
                share_group_describe_response::DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_group_state(name("Empty"))
            };
            encode(
                &ShareGroupDescribeResponse::default().with_groups(request.group_ids.iter().map(described).collect()),
                version,
            )
        }
        ApiKey::FindCoordinator => {
            let request = FindCoordinatorRequest::decode(body, version).ok()?;
            let mut reply = FindCoordinatorResponse::default();
            if version >= 4 {
                reply.coordinators = request
                    .coordinator_keys
                    .iter()
                    .map(|key| {
                        find_coordinator_response::Coordinator::default()
                            .with_key(key.clone())
                            .with_node_id(BrokerId(1))
                            .with_host(name("127.0.0.1"))
                            .with_port(port as i32)
                    })
                    .collect();
            } else {
                reply = reply.with_node_id(BrokerId(1)).with_host(name("127.0.0.1")).with_port(port as i32);
            }
            encode(&reply, version)
        }
        ApiKey::DescribeShareGroupOffsets => {
            let request = DescribeShareGroupOffsetsRequest::decode(body, version).ok()?;
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    let group = g.group_id.0.to_string();
                    state.sent.push((api, group.clone()));
                    let reply =
                        describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup::default()
                            .with_group_id(g.group_id.clone());
                    let Some(offsets) = state.offsets.get(&group) else {
                        return reply.with_error_code(ResponseError::GroupIdNotFound.code());
                    };
                    // Null topics: all of the group's.
                    assert!(g.topics.is_none(), "asked for some topics only: {:?}", g.topics);
                    let mut by_topic: BTreeMap<&String, Vec<_>> = BTreeMap::new();
                    for ((topic, partition), offset) in offsets {
                        by_topic.entry(topic).or_default().push(
                            describe_share_group_offsets_response::DescribeShareGroupOffsetsResponsePartition::default(
                            )
                            .with_partition_index(*partition)
                            .with_start_offset(*offset),
                        );
                    }
                    let topics = by_topic
                        .into_iter()
                        .map(|(topic, partitions)| {
                            describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseTopic::default()
                                .with_topic_name(TopicName(name(topic)))
                                .with_topic_id(state.topics[topic].1)
                                .with_partitions(partitions)
                        })
                        .collect();
                    reply.with_topics(topics)
                })
                .collect();
            encode(&DescribeShareGroupOffsetsResponse::default().with_groups(groups), version)
        }
        ApiKey::AlterShareGroupOffsets => {
            let request = AlterShareGroupOffsetsRequest::decode(body, version).ok()?;
            let group = request.group_id.0.to_string();
            state.sent.push((api, group.clone()));
            if state.members {
                return Some(encode(&AlterShareGroupOffsetsResponse::default().with_error_code(busy), version));
            }
            let mut responses = Vec::new();
            for topic in &request.topics {
                let t = topic.topic_name.0.to_string();
                let count = state.topics.get(&t).map(|(n, _)| *n);
                let partitions = topic
                    .partitions
                    .iter()
                    .map(|p| {
                        let known = count.is_some_and(|n| (0..n).contains(&p.partition_index));
                        if known {
                            state
                                .offsets
                                .entry(group.clone())
                                .or_default()
                                .insert((t.clone(), p.partition_index), p.start_offset);
                        }
                        alter_share_group_offsets_response::AlterShareGroupOffsetsResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(if known { 0 } else { unknown })
                    })
                    .collect();
                responses.push(
                    alter_share_group_offsets_response::AlterShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(topic.topic_name.clone())
                        .with_partitions(partitions),
                );
            }
            encode(&AlterShareGroupOffsetsResponse::default().with_responses(responses), version)
        }
        ApiKey::DeleteShareGroupOffsets => {
            let request = DeleteShareGroupOffsetsRequest::decode(body, version).ok()?;
            let group = request.group_id.0.to_string();
            state.sent.push((api, group.clone()));
            if state.members {
                return Some(encode(&DeleteShareGroupOffsetsResponse::default().with_error_code(busy), version));
            }
            let responses = request
                .topics
                .iter()
                .map(|topic| {
                    let t = topic.topic_name.0.to_string();
                    let known = state.topics.contains_key(&t);
                    if let Some(offsets) = state.offsets.get_mut(&group) {
                        offsets.retain(|(topic, _), _| topic != &t);
                    }
                    delete_share_group_offsets_response::DeleteShareGroupOffsetsResponseTopic::default()
                        .with_topic_name(topic.topic_name.clone())
                        .with_error_code(if known { 0 } else { unknown })
                })
                .collect();
            encode(&DeleteShareGroupOffsetsResponse::default().with_responses(responses), version)
        }
        _ => return None,
    })
}
