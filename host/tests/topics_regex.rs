//! Connect's `topics.regex` through the whole host, in both group modes:
//! the connector reads the topics whose whole names match, each record once,
//! nothing of the others, and a matching topic created after it started.
//!
//! Runs against `SPILLWAY_TEST_BOOTSTRAP` or a librdkafka mock it starts.

mod support;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, Producer};
use spillway::herder::{ConfigMap, Herder, HerderError};
use spillway::herder::{ConnectorOffsets, OffsetPartition, OffsetValue, PartitionOffset};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};
use support::herder::{start_herder, wait_running};
use support::{
    Broker, assert_each_exactly_once, file_sink_keys, probe_until_every_task_holds_partitions, produce, produce_to,
};

/// How often the connectors under test look for new matching topics.
const REFRESH_MS: &str = "500";
/// Once everything arrived, a little longer, so that a late duplicate shows.
const LATE_DUPLICATES: Duration = Duration::from_secs(3);
const PATIENCE: Duration = Duration::from_secs(90);

/// Topics of one test: `a` and `b` match the pattern from the start, `late`
/// matches and is created later; `other` and `a_longer` never match (the
/// second only would, were the pattern not anchored at the end).
struct Topics {
    regex: String,
    a: String,
    b: String,
    late: String,
    other: String,
    a_longer: String,
}

impl Topics {
    fn new() -> Topics {
        let run = uuid::Uuid::new_v4().simple().to_string();
        let topic = |suffix: &str| format!("rx-{run}-{suffix}");
        Topics {
            regex: format!("rx-{run}-(a|b|late)"),
            a: topic("a"),
            b: topic("b"),
            late: topic("late"),
            other: topic("c"),
            a_longer: topic("ax"),
        }
    }
}

/// A file-sink connector on `regex` writing JSON lines to `dir/<name>-<task>.jsonl`.
fn regex_connector(name: &str, regex: &str, dir: &Path, extra: &[(&str, &str)]) -> ConfigMap {
    let file = dir.join(format!("{name}-{{task}}.jsonl"));
    let base = [
        ("name", name),
        ("connector.class", "file-sink"),
        ("topics.regex", regex),
        ("tasks.max", "2"),
        ("file", file.to_str().unwrap()),
        ("flush.interval.ms", "200"),
        ("plugin.grant.fs.data.path", dir.to_str().unwrap()),
        ("consumer.override.topic.metadata.refresh.interval.ms", REFRESH_MS),
    ];
    base.iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Waits until file-sink wrote every one of `expected`; answers all it wrote.
async fn wait_for_written(dir: &Path, name: &str, expected: &[String]) -> Vec<String> {
    let want: BTreeSet<&String> = expected.iter().collect();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let got = file_sink_keys(dir, name);
        let seen: BTreeSet<&String> = got.iter().collect();
        let missing = want.iter().filter(|k| !seen.contains(**k)).count();
        if missing == 0 {
            return got;
        }
        assert!(Instant::now() < deadline, "{missing} of {} records never arrived at {name}", expected.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A client that creates topics by asking for their metadata (the mock has
/// no CreateTopics, and a metadata request of librdkafka's producer allows
/// auto-creation). Kept for the whole test: on the mock, a closed connection
/// ends every share session on the broker.
struct TopicMaker(BaseProducer);

impl TopicMaker {
    fn new(broker: &Broker) -> TopicMaker {
        TopicMaker(ClientConfig::new().set("bootstrap.servers", &broker.bootstrap).create().expect("a client"))
    }

    /// Creates `topic` (with no records) and answers its partition count.
    fn create(&self, topic: &str) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let metadata = self.0.client().fetch_metadata(Some(topic), Duration::from_secs(10)).expect("metadata");
            let found = metadata.topics().iter().find(|t| t.name() == topic && t.error().is_none());
            if let Some(t) = found.filter(|t| !t.partitions().is_empty()) {
                return t.partitions().len() as i32;
            }
            assert!(Instant::now() < deadline, "{topic} was never created");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn committed_sum(offsets: &ConnectorOffsets) -> i64 {
    offsets.offsets.iter().filter_map(|p| Some(p.offset.as_ref()?.kafka_offset)).sum()
}

/// Waits until the committed offsets of `name`'s partitions add up to `total`.
async fn wait_committed(herder: &Herder, name: &str, total: i64) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let offsets = herder.offsets(name.into()).await.unwrap();
        if committed_sum(&offsets) == total {
            return;
        }
        assert!(Instant::now() < deadline, "committed never reached {total}: {offsets:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn active_topics(herder: &Herder, name: &str) -> BTreeSet<String> {
    herder.topics(name.into()).await.unwrap().into_iter().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn classic_group_reads_the_matching_topics_and_one_created_later() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let t = Topics::new();
    let topics = TopicMaker::new(&broker);
    for topic in [&t.a, &t.b, &t.other, &t.a_longer] {
        topics.create(topic);
    }

    let herder = start_herder(&broker, dir.path()).await;
    let classic = [("consumer.override.group.protocol", "classic"), ("consumer.override.session.timeout.ms", "6000")];
    let config = regex_connector("classic", &t.regex, dir.path(), &classic);
    herder.create("classic".into(), config, None).await.unwrap();
    wait_running(&herder, "classic", 2).await;

    // The counted records come once both tasks hold partitions.
    let probes = probe_until_every_task_holds_partitions(&broker.bootstrap, &[&t.a, &t.b], 2, |task| {
        file_sink_keys(dir.path(), &format!("classic-{task}"))
    })
    .await;
    let mut expected = produce(&broker.bootstrap, &t.a, 300).await;
    expected.extend(produce(&broker.bootstrap, &t.b, 300).await);
    produce(&broker.bootstrap, &t.other, 100).await;
    produce(&broker.bootstrap, &t.a_longer, 100).await;
    wait_for_written(dir.path(), "classic", &expected).await;
    // Committed before the late topic rebalances the group again, for the
    // same reason.
    wait_committed(&herder, "classic", 600 + probes.len() as i64).await;

    // Created (by producing) after the group joined: found on librdkafka's
    // metadata refresh, and read from its beginning.
    expected.extend(produce(&broker.bootstrap, &t.late, 300).await);
    wait_for_written(dir.path(), "classic", &expected).await;
    tokio::time::sleep(LATE_DUPLICATES).await;
    let written: Vec<String> =
        file_sink_keys(dir.path(), "classic").into_iter().filter(|k| !probes.contains(k)).collect();
    assert_each_exactly_once(&written, &expected, "classic group, topics.regex");
    assert_eq!(active_topics(&herder, "classic").await, [&t.a, &t.b, &t.late].map(String::clone).into());

    // Its offsets are those of the topics the pattern matches, and only
    // those can be altered.
    herder.stop("classic".into()).await.unwrap();
    let offsets = herder.offsets("classic".into()).await.unwrap();
    let topics: BTreeSet<String> = offsets.offsets.iter().map(|p| p.partition.kafka_topic.clone()).collect();
    assert_eq!(topics, [&t.a, &t.b, &t.late].map(String::clone).into(), "{offsets:?}");
    assert_eq!(committed_sum(&offsets), 900 + probes.len() as i64, "{offsets:?}");
    let at = |topic: &str| ConnectorOffsets {
        offsets: vec![PartitionOffset {
            partition: OffsetPartition { kafka_topic: topic.into(), kafka_partition: 0 },
            offset: Some(OffsetValue { kafka_offset: 0 }),
        }],
    };
    let refused = herder.alter_offsets("classic".into(), Some(at(&t.a_longer))).await.unwrap_err();
    assert!(
        matches!(&refused, HerderError::BadRequest(m) if m.contains("not one of the connector's topics")),
        "{refused:?}"
    );
    // The mock keeps the group rebalancing for a session timeout after its
    // members left; the broker answers a conflict until then.
    let deadline = Instant::now() + PATIENCE;
    while let Err(e) = herder.alter_offsets("classic".into(), Some(at(&t.late))).await {
        assert!(matches!(e, HerderError::Conflict(_)) && Instant::now() < deadline, "{e:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    herder.shutdown().await.unwrap();
    drop(topics);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_group_reads_the_matching_topics_and_one_created_later() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let t = Topics::new();
    let topics = TopicMaker::new(&broker);
    for topic in [&t.a, &t.b, &t.other, &t.a_longer] {
        topics.create(topic);
    }

    let herder = start_herder(&broker, dir.path()).await;
    herder.create("share".into(), regex_connector("share", &t.regex, dir.path(), &[]), None).await.unwrap();
    // A new share group starts at the latest offset: produce once joined.
    wait_running(&herder, "share", 2).await;
    let mut expected = produce(&broker.bootstrap, &t.a, 300).await;
    expected.extend(produce(&broker.bootstrap, &t.b, 300).await);
    produce(&broker.bootstrap, &t.other, 100).await;
    produce(&broker.bootstrap, &t.a_longer, 100).await;
    wait_for_written(dir.path(), "share", &expected).await;

    // A matching topic created now: picked up on the next match, sent with
    // the next heartbeat. Its partitions start at their latest offset once
    // the group first fetches them, so probe each partition until a probe
    // from every one has arrived; only then are its counted records sent.
    let partitions = topics.create(&t.late);
    let mut probes: Vec<(i32, String)> = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let written: BTreeSet<String> = file_sink_keys(dir.path(), "share").into_iter().collect();
        let reached: BTreeSet<i32> = probes.iter().filter(|(_, k)| written.contains(k)).map(|(p, _)| *p).collect();
        if reached.len() == partitions as usize {
            break;
        }
        assert!(Instant::now() < deadline, "no probe of {} arrived from partitions other than {reached:?}", t.late);
        for partition in (0..partitions).filter(|p| !reached.contains(p)) {
            let key = produce_to(&broker.bootstrap, &t.late, Some(partition), 1).await.remove(0);
            probes.push((partition, key));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    expected.extend(produce(&broker.bootstrap, &t.late, 300).await);
    wait_for_written(dir.path(), "share", &expected).await;
    tokio::time::sleep(LATE_DUPLICATES).await;

    // Probes sent before the group read their partition are skipped: each
    // arrives at most once, and is left out of the exact count.
    let probe_keys: BTreeSet<&String> = probes.iter().map(|(_, k)| k).collect();
    let (probed, written): (Vec<String>, Vec<String>) =
        file_sink_keys(dir.path(), "share").into_iter().partition(|k| probe_keys.contains(k));
    assert_eq!(probed.len(), probed.iter().collect::<BTreeSet<_>>().len(), "a probe arrived twice: {probed:?}");
    assert_each_exactly_once(&written, &expected, "share group, topics.regex");
    assert_eq!(active_topics(&herder, "share").await, [&t.a, &t.b, &t.late].map(String::clone).into());
    herder.shutdown().await.unwrap();
    drop(topics);
}
