//! The mirror end to end on fake clusters: topic names and routing, what
//! each output record carries, target topics created, deliveries mapped
//! to outcomes, and group offsets translated.

use super::*;
use spillway_sdk::kafka::{Delivered, GroupOffset, OffsetSync, TopicDescription, TopicEnsured};
use spillway_sdk::{Header as SinkHeader, TimestampType};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

type DeliverHook = Box<dyn FnMut(&OutputRecord) -> Delivery>;

/// Both clusters in memory. Every call is logged; the target knows its
/// topics' partition counts, the source its topics and groups.
#[derive(Default)]
struct Fake {
    /// Target topics and their partition counts.
    target_topics: BTreeMap<String, u32>,
    /// Source topics: partitions and configs.
    source_topics: BTreeMap<String, (u32, Vec<(String, String)>)>,
    /// What `ensure-topic` answers for a missing topic (default: created).
    ensure_answer: Option<TopicEnsured>,
    /// Every call: `partitions t`, `describe t`, `ensure t n [k=v ...]`,
    /// `send n`, `syncs`, `groups`, `offsets g`, `commit g t:p=o ...`.
    log: Vec<String>,
    /// Every record sent, in order.
    sent: Vec<OutputRecord>,
    /// The addresses of each sent record's key, value and headers buffers.
    buffers: Vec<(Option<usize>, Option<usize>, usize)>,
    /// Decides each record's delivery (default: delivered).
    deliver: Option<DeliverHook>,
    /// The next `send` fails as a whole.
    send_error: Option<TaskError>,
    /// Answers the next send with one delivery too few.
    short_send: bool,
    /// Fails the next `ensure-topic` / `partitions` call.
    admin_error: Option<TaskError>,
    groups: Vec<String>,
    group_offsets: BTreeMap<String, Vec<GroupOffset>>,
    syncs: Vec<OffsetSync>,
    /// Refuses commits of these groups with this error.
    refuse_commit: BTreeMap<String, TaskError>,
    list_groups_error: Option<TaskError>,
    /// Each commit: group, then `topic:partition=offset`.
    commits: Vec<(String, Vec<String>)>,
}

#[derive(Clone, Default)]
struct Fakes(Rc<RefCell<Fake>>);

impl Fakes {
    fn fake(&self) -> std::cell::RefMut<'_, Fake> {
        self.0.borrow_mut()
    }
    fn log(&self) -> Vec<String> {
        self.0.borrow().log.clone()
    }
    fn source_topic(self, name: &str, partitions: u32, configs: &[(&str, &str)]) -> Self {
        let configs = configs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        self.fake().source_topics.insert(name.into(), (partitions, configs));
        self
    }
    fn target_topic(self, name: &str, partitions: u32) -> Self {
        self.fake().target_topics.insert(name.into(), partitions);
        self
    }
    fn call(&self, call: String) {
        self.fake().log.push(call);
    }
    /// The topics of the records sent.
    fn sent_topics(&self) -> Vec<String> {
        self.0.borrow().sent.iter().map(|r| r.topic.clone()).collect()
    }
}

impl Target for Fakes {
    fn send(&mut self, records: &[OutputRecord]) -> Result<Vec<Delivery>, TaskError> {
        self.call(format!("send {}", records.len()));
        let mut fake = self.fake();
        if let Some(e) = fake.send_error.take() {
            return Err(e);
        }
        let mut deliveries = Vec::with_capacity(records.len());
        for (n, record) in records.iter().enumerate() {
            fake.buffers.push((
                record.key.as_ref().map(|k| k.as_ptr() as usize),
                record.value.as_ref().map(|v| v.as_ptr() as usize),
                record.headers.as_ptr() as usize,
            ));
            fake.sent.push(record.clone());
            let delivery = match fake.deliver.as_mut() {
                Some(hook) => hook(record),
                None => Delivery::Delivered(Delivered { partition: record.partition.unwrap_or(0), offset: n as i64 }),
            };
            deliveries.push(delivery);
        }
        if std::mem::take(&mut fake.short_send) {
            deliveries.pop();
        }
        Ok(deliveries)
    }

    fn partitions(&mut self, topic: &str) -> Result<Option<u32>, TaskError> {
        self.call(format!("partitions {topic}"));
        if let Some(e) = self.fake().admin_error.take() {
            return Err(e);
        }
        Ok(self.0.borrow().target_topics.get(topic).copied())
    }

    fn ensure_topic(
        &mut self,
        topic: &str,
        partitions: u32,
        configs: &[(String, String)],
    ) -> Result<TopicEnsured, TaskError> {
        let configs: Vec<String> = configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.call(format!("ensure {topic} {partitions} [{}]", configs.join(" ")));
        let mut fake = self.fake();
        if let Some(e) = fake.admin_error.take() {
            return Err(e);
        }
        if fake.target_topics.contains_key(topic) {
            return Ok(TopicEnsured::Existed);
        }
        match fake.ensure_answer {
            None | Some(TopicEnsured::Created) => {
                fake.target_topics.insert(topic.into(), partitions);
                Ok(TopicEnsured::Created)
            }
            Some(TopicEnsured::Existed) => {
                // Another task created it, with a count of its own.
                fake.target_topics.insert(topic.into(), 1);
                Ok(TopicEnsured::Existed)
            }
            Some(TopicEnsured::AutoCreated) => Ok(TopicEnsured::AutoCreated),
        }
    }

    fn offset_syncs(&mut self) -> Result<Vec<OffsetSync>, TaskError> {
        self.call("syncs".into());
        Ok(self.0.borrow().syncs.clone())
    }

    fn commit_group_offsets(&mut self, group: &str, offsets: &[GroupOffset]) -> Result<(), TaskError> {
        let offsets: Vec<String> =
            offsets.iter().map(|o| format!("{}:{}={}", o.topic, o.partition, o.offset)).collect();
        self.call(format!("commit {group} {}", offsets.join(" ")));
        let mut fake = self.fake();
        if let Some(e) = fake.refuse_commit.get(group) {
            return Err(e.clone());
        }
        fake.commits.push((group.into(), offsets));
        Ok(())
    }
}

impl Source for Fakes {
    fn describe_topic(&mut self, topic: &str) -> Result<Option<TopicDescription>, TaskError> {
        self.call(format!("describe {topic}"));
        Ok(self.0.borrow().source_topics.get(topic).map(|(partitions, configs)| TopicDescription {
            name: topic.into(),
            partitions: *partitions,
            configs: configs.clone(),
        }))
    }

    fn list_groups(&mut self) -> Result<Vec<String>, TaskError> {
        self.call("groups".into());
        if let Some(e) = self.fake().list_groups_error.take() {
            return Err(e);
        }
        Ok(self.0.borrow().groups.clone())
    }

    fn group_offsets(&mut self, group: &str) -> Result<Vec<GroupOffset>, TaskError> {
        self.call(format!("offsets {group}"));
        Ok(self.0.borrow().group_offsets.get(group).cloned().unwrap_or_default())
    }
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    let config = Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
    Settings::parse(&config).unwrap_or_else(|e| panic!("{e:?}"))
}

/// A mirror on the fakes, its clock at `clock` (milliseconds). Checkpoints
/// are off unless `pairs` turn them on.
fn mirror_at(fakes: &Fakes, pairs: &[(&str, &str)], clock: &Rc<Cell<u64>>) -> Mirror {
    let mut all = vec![("emit.checkpoints.enabled", "false")];
    all.extend_from_slice(pairs);
    let clock = Rc::clone(clock);
    Mirror::with_clusters(
        settings(&all),
        Box::new(fakes.clone()),
        Box::new(fakes.clone()),
        Box::new(move || clock.get()),
    )
}

fn mirror(fakes: &Fakes, pairs: &[(&str, &str)]) -> Mirror {
    mirror_at(fakes, pairs, &Rc::new(Cell::new(0)))
}

fn record(id: u64, topic: &str, partition: i32) -> SinkRecord {
    SinkRecord {
        id,
        topic: topic.into(),
        partition,
        offset: id as i64,
        timestamp: 1_700_000_000_000 + id as i64,
        timestamp_type: TimestampType::CreateTime,
        key: Some(format!("k{id}").into_bytes()),
        value: Some(format!("v{id}").into_bytes()),
        headers: vec![],
        delivery_count: 1,
        lock_deadline: None,
    }
}

/// Outcomes as text: `accept`, `hold`, `retry: why`, `reject: why`.
fn kinds(report: &PutReport) -> Vec<String> {
    report
        .outcomes
        .iter()
        .map(|o| match o {
            Outcome::Accept => "accept".to_string(),
            Outcome::Hold => "hold".to_string(),
            Outcome::Retry(why) => format!("retry: {why}"),
            Outcome::Reject(why) => format!("reject: {why}"),
        })
        .collect()
}

fn accepts(n: usize) -> Vec<String> {
    vec!["accept".to_string(); n]
}

/// A source and target with topic `orders` (4 partitions each, under the
/// default policy's `source.orders`).
fn orders() -> Fakes {
    Fakes::default().source_topic("orders", 4, &[]).target_topic("source.orders", 4)
}

#[test]
fn the_default_policy_prefixes_the_source_alias_and_separator() {
    let fakes = Fakes::default().source_topic("orders", 1, &[]).source_topic("pay.v1", 1, &[]);
    let mut m = mirror(&fakes, &[]);
    let report = m.put(vec![record(1, "orders", 0), record(2, "pay.v1", 0)]).unwrap();
    assert_eq!(kinds(&report), accepts(2));
    assert_eq!(fakes.sent_topics(), ["source.orders", "source.pay.v1"]);

    let fakes = Fakes::default().source_topic("orders", 1, &[]);
    let mut m = mirror(&fakes, &[("source.cluster.alias", "us-east"), ("replication.policy.separator", "__")]);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert_eq!(fakes.sent_topics(), ["us-east__orders"]);
}

#[test]
fn the_identity_policy_keeps_topic_names() {
    for class in ["identity", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"] {
        let fakes = Fakes::default().source_topic("orders", 1, &[]);
        let mut m = mirror(&fakes, &[("replication.policy.class", class)]);
        m.put(vec![record(1, "orders", 0), record(2, "orders", 0)]).unwrap();
        assert_eq!(fakes.sent_topics(), ["orders", "orders"], "{class}");
    }
}

#[test]
fn excluded_topics_are_accepted_counted_and_not_copied() {
    let fakes = orders().source_topic("app-internal", 1, &[]).source_topic("audit", 1, &[]);
    let mut m = mirror(&fakes, &[]);
    let batch = vec![
        record(1, "orders", 0),
        record(2, "app-internal", 0),
        record(3, "__consumer_offsets", 0),
        record(4, "app-internal", 0),
        record(5, "orders.replica", 0),
        record(6, "orders", 1),
    ];
    let report = m.put(batch).unwrap();
    assert_eq!(kinds(&report), accepts(6));
    assert_eq!(fakes.sent_topics(), ["source.orders", "source.orders"]);
    assert_eq!(m.skipped(), [("app-internal", 2), ("__consumer_offsets", 1), ("orders.replica", 1)]);
    // Neither looked up in a cluster nor sent.
    assert!(fakes.log().iter().all(|c| !c.contains("internal") && !c.contains("replica") && !c.contains("__")));

    // A list of one's own replaces MM2's.
    let fakes = Fakes::default().source_topic("app-internal", 1, &[]);
    let mut m = mirror(&fakes, &[("topics.exclude", "audit.*")]);
    m.put(vec![record(1, "audit-log", 0), record(2, "app-internal", 0)]).unwrap();
    assert_eq!(fakes.sent_topics(), ["source.app-internal"]);
    assert_eq!(m.skipped(), [("audit-log", 1)]);
}

#[test]
fn topics_from_the_target_are_not_copied_back() {
    let fakes = orders().source_topic("eu.orders", 1, &[]);
    let mut m = mirror(&fakes, &[("target.cluster.alias", "eu"), ("source.cluster.alias", "us")]);
    let batch = vec![
        record(1, "target.orders", 0),
        record(2, "eu.orders", 0),
        record(3, "ap.eu.orders", 0),
        record(4, "eu.orders", 1),
        record(5, "ap.orders", 0),
    ];
    let report = m.put(batch).unwrap();
    assert_eq!(kinds(&report), accepts(5));
    assert_eq!(fakes.sent_topics(), ["us.target.orders", "us.ap.orders"]);
    assert_eq!(m.skipped(), [("eu.orders", 2), ("ap.eu.orders", 1)]);

    // Under identity no name says where a topic came from.
    let fakes = Fakes::default().source_topic("eu.orders", 1, &[]);
    let mut m = mirror(&fakes, &[("target.cluster.alias", "eu"), ("replication.policy.class", "identity")]);
    m.put(vec![record(1, "eu.orders", 0)]).unwrap();
    assert_eq!(fakes.sent_topics(), ["eu.orders"]);
}

#[test]
fn the_source_partition_is_kept_when_the_target_has_it_else_the_key_is_hashed() {
    let fakes = Fakes::default().target_topic("source.orders", 3);
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "orders", 0), record(2, "orders", 2), record(3, "orders", 3), record(4, "orders", 7)])
        .unwrap();
    let partitions: Vec<Option<i32>> = fakes.fake().sent.iter().map(|r| r.partition).collect();
    assert_eq!(partitions, [Some(0), Some(2), None, None]);
}

#[test]
fn key_value_headers_and_timestamp_are_copied_byte_for_byte() {
    let fakes = orders();
    let mut m = mirror(&fakes, &[]);
    let headers = vec![
        SinkHeader { key: "trace".into(), value: Some(vec![0xff, 0x00, 0xfe]) },
        SinkHeader { key: "null".into(), value: None },
        SinkHeader { key: "trace".into(), value: Some(b"second".to_vec()) },
        SinkHeader { key: "".into(), value: Some(vec![]) },
    ];
    let mut with_headers = record(42, "orders", 1);
    with_headers.key = Some(vec![0, 159, 146, 150]);
    with_headers.value = Some(vec![0xc3, 0x28, 0]);
    with_headers.headers = headers.clone();
    let mut bare = record(43, "orders", 2);
    bare.key = None;
    bare.value = None;
    bare.timestamp = -1;
    bare.timestamp_type = TimestampType::NoTimestampType;
    let mut zero = record(44, "orders", 3);
    zero.timestamp = 0;
    zero.key = Some(vec![]);
    // Where the buffers are: the output records must own these very ones.
    let buffers = (
        with_headers.key.as_ref().unwrap().as_ptr() as usize,
        with_headers.value.as_ref().unwrap().as_ptr() as usize,
        with_headers.headers.as_ptr() as usize,
    );

    m.put(vec![with_headers, bare, zero]).unwrap();
    let fake = fakes.fake();
    let [a, b, c] = &fake.sent[..] else { panic!("three records sent: {:?}", fake.sent.len()) };
    assert_eq!((a.source, a.topic.as_str(), a.partition), (Some(42), "source.orders", Some(1)));
    assert_eq!(a.key.as_deref(), Some(&[0, 159, 146, 150][..]));
    assert_eq!(a.value.as_deref(), Some(&[0xc3, 0x28, 0][..]));
    let copied: Vec<(String, Option<Vec<u8>>)> = a.headers.iter().map(|h| (h.key.clone(), h.value.clone())).collect();
    let given: Vec<(String, Option<Vec<u8>>)> = headers.into_iter().map(|h| (h.key, h.value)).collect();
    assert_eq!(copied, given, "order, duplicates and null values kept");
    assert_eq!(a.timestamp, Some(1_700_000_000_042));
    assert_eq!((b.source, b.key.as_deref(), b.value.as_deref(), b.timestamp), (Some(43), None, None, None));
    assert!(b.headers.is_empty());
    assert_eq!((c.key.as_deref(), c.timestamp), (Some(&[][..]), Some(0)));
    let (key, value, header_list) = fake.buffers[0];
    assert_eq!((key, value, header_list), (Some(buffers.0), Some(buffers.1), buffers.2), "moved, not copied");
}

#[test]
fn a_missing_target_topic_is_created_once_with_the_sources_partitions_and_configs() {
    let configs = [
        ("retention.ms", "604800000"),
        ("min.insync.replicas", "2"),
        ("cleanup.policy", "compact"),
        ("message.timestamp.type", "LogAppendTime"),
        ("leader.replication.throttled.replicas", "*"),
    ];
    let fakes = Fakes::default().source_topic("orders", 6, &configs);
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "orders", 5), record(2, "orders", 1)]).unwrap();
    m.put(vec![record(3, "orders", 2)]).unwrap();
    assert_eq!(
        fakes.log(),
        [
            "partitions source.orders",
            "describe orders",
            "ensure source.orders 6 [retention.ms=604800000 cleanup.policy=compact]",
            "send 2",
            "send 1",
        ]
    );
    let partitions: Vec<Option<i32>> = fakes.fake().sent.iter().map(|r| r.partition).collect();
    assert_eq!(partitions, [Some(5), Some(1), Some(2)], "the created topic's count is known");

    // Configs not synced: the broker's defaults.
    let fakes = Fakes::default().source_topic("orders", 2, &configs);
    let mut m = mirror(&fakes, &[("sync.topic.configs.enabled", "false")]);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert_eq!(fakes.log()[2], "ensure source.orders 2 []");

    // An exclusion list of one's own.
    let fakes = Fakes::default().source_topic("orders", 2, &configs);
    let mut m = mirror(&fakes, &[("config.properties.exclude", "retention\\..*")]);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert!(fakes.log()[2].starts_with("ensure source.orders 2 [min.insync.replicas=2 cleanup.policy=compact"));

    // An existing target is only asked for its partitions.
    let fakes = orders();
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    m.put(vec![record(2, "orders", 0)]).unwrap();
    assert_eq!(fakes.log(), ["partitions source.orders", "send 1", "send 1"]);
}

#[test]
fn a_topic_another_task_created_is_read_again_at_once() {
    let fakes = Fakes::default().source_topic("orders", 6, &[]);
    fakes.fake().ensure_answer = Some(TopicEnsured::Existed);
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "orders", 0), record(2, "orders", 3)]).unwrap();
    assert_eq!(
        fakes.log(),
        [
            "partitions source.orders",
            "describe orders",
            "ensure source.orders 6 []",
            "partitions source.orders",
            "send 2"
        ]
    );
    let partitions: Vec<Option<i32>> = fakes.fake().sent.iter().map(|r| r.partition).collect();
    assert_eq!(partitions, [Some(0), None], "its one partition, as the other task made it");
}

#[test]
fn an_auto_created_topic_is_hashed_until_its_partitions_are_known() {
    let fakes = Fakes::default().source_topic("orders", 6, &[]);
    fakes.fake().ensure_answer = Some(TopicEnsured::AutoCreated);
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "orders", 0), record(2, "orders", 1)]).unwrap();
    m.put(vec![record(3, "orders", 0)]).unwrap();
    // The broker made it with its default of 2 partitions.
    fakes.fake().target_topics.insert("source.orders".into(), 2);
    m.put(vec![record(4, "orders", 1), record(5, "orders", 4)]).unwrap();
    m.put(vec![record(6, "orders", 0)]).unwrap();
    assert_eq!(
        fakes.log(),
        [
            "partitions source.orders",
            "describe orders",
            "ensure source.orders 6 []",
            "send 2",
            "partitions source.orders",
            "send 1",
            "partitions source.orders",
            "send 2",
            "send 1",
        ]
    );
    let partitions: Vec<Option<i32>> = fakes.fake().sent.iter().map(|r| r.partition).collect();
    assert_eq!(partitions, [None, None, None, Some(1), None, Some(0)]);
}

#[test]
fn an_unknown_partition_count_is_read_once_a_batch() {
    let fakes = orders().source_topic("pay", 2, &[]);
    fakes.fake().ensure_answer = Some(TopicEnsured::AutoCreated);
    let mut m = mirror(&fakes, &[]);
    m.put(vec![record(1, "pay", 0), record(2, "orders", 0), record(3, "pay", 1)]).unwrap();
    m.put(vec![record(4, "pay", 0), record(5, "orders", 0), record(6, "pay", 1), record(7, "orders", 1)]).unwrap();
    assert_eq!(
        fakes.log(),
        [
            "partitions source.pay",
            "describe pay",
            "ensure source.pay 2 []",
            "partitions source.orders",
            "send 3",
            "partitions source.pay",
            "send 4",
        ]
    );
}

#[test]
fn a_source_topic_that_cannot_be_described_is_looked_up_again_next_batch() {
    let fakes = Fakes::default();
    let mut m = mirror(&fakes, &[]);
    assert_eq!(kinds(&m.put(vec![record(1, "gone", 0)]).unwrap()), accepts(1));
    fakes.fake().source_topics.insert("gone".into(), (3, vec![]));
    m.put(vec![record(2, "gone", 2)]).unwrap();
    m.put(vec![record(3, "gone", 2)]).unwrap();
    assert_eq!(
        fakes.log(),
        [
            "partitions source.gone",
            "describe gone",
            "send 1",
            "partitions source.gone",
            "describe gone",
            "ensure source.gone 3 []",
            "send 1",
            "send 1",
        ]
    );
    let partitions: Vec<Option<i32>> = fakes.fake().sent.iter().map(|r| r.partition).collect();
    assert_eq!(partitions, [None, Some(2), Some(2)]);
}

#[test]
fn deliveries_become_outcomes_in_input_order() {
    let fakes = orders().source_topic("other", 4, &[]).target_topic("source.other", 4);
    fakes.fake().deliver = Some(Box::new(|r: &OutputRecord| match r.value.as_deref() {
        Some(b"v2") => Delivery::Failed(TaskError::Retriable("not enough replicas".into())),
        Some(b"v4") => Delivery::Failed(TaskError::Fatal("record too large".into())),
        Some(b"v6") => Delivery::Failed(TaskError::Retriable("leader moved".into())),
        _ => Delivery::Delivered(Delivered { partition: 0, offset: 0 }),
    }));
    let mut m = mirror(&fakes, &[]);
    let batch = vec![
        record(1, "orders", 0),
        record(2, "orders", 0),
        record(3, "app-internal", 0),
        record(4, "other", 1),
        record(5, "orders", 1),
        record(6, "other", 0),
        record(7, "target.orders", 0),
        record(8, "orders", 2),
    ];
    let report = m.put(batch).unwrap();
    assert_eq!(
        kinds(&report),
        [
            "accept",
            "retry: not enough replicas",
            "accept",
            "reject: record too large",
            "accept",
            "retry: leader moved",
            "accept",
            "accept",
        ]
    );
    assert!(report.settled.is_empty());
    let sources: Vec<Option<u64>> = fakes.fake().sent.iter().map(|r| r.source).collect();
    assert_eq!(sources, [Some(1), Some(2), Some(4), Some(5), Some(6), Some(8)], "one send, skipped left out");
    assert_eq!(fakes.log().iter().filter(|c| c.starts_with("send")).count(), 1);
}

#[test]
fn an_error_of_the_whole_send_is_the_calls() {
    for error in [TaskError::Retriable("timed out".into()), TaskError::Fatal("producer fenced".into())] {
        let fakes = orders();
        fakes.fake().send_error = Some(error.clone());
        let mut m = mirror(&fakes, &[]);
        let got = m.put(vec![record(1, "orders", 0), record(2, "orders", 1)]).unwrap_err();
        assert_eq!(format!("{got:?}"), format!("{error:?}"));
        // The next batch goes on as usual.
        assert_eq!(kinds(&m.put(vec![record(3, "orders", 0)]).unwrap()), accepts(1));
    }

    // So is an error of the admin calls, and nothing is sent.
    let fakes = Fakes::default().source_topic("orders", 2, &[]);
    fakes.fake().admin_error = Some(TaskError::Retriable("no controller".into()));
    let mut m = mirror(&fakes, &[]);
    assert!(matches!(m.put(vec![record(1, "orders", 0)]), Err(TaskError::Retriable(_))));
    assert!(fakes.fake().sent.is_empty());
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert_eq!(fakes.sent_topics(), ["source.orders"]);

    // And deliveries that do not match the records.
    let fakes = orders();
    fakes.fake().short_send = true;
    let mut m = mirror(&fakes, &[]);
    let got = m.put(vec![record(1, "orders", 0), record(2, "orders", 1)]).unwrap_err();
    assert!(matches!(&got, TaskError::Fatal(why) if why.contains("1 deliveries for 2")), "{got:?}");
}

#[test]
fn batches_with_nothing_to_copy_send_nothing() {
    let fakes = orders();
    let mut m = mirror(&fakes, &[]);
    assert!(m.put(vec![]).unwrap().outcomes.is_empty());
    assert_eq!(kinds(&m.put(vec![record(1, "__x", 0), record(2, "a.internal", 0)]).unwrap()), accepts(2));
    assert!(fakes.log().is_empty());
}

// Group offsets.

fn sync(topic: &str, partition: i32, source: i64, target: i64) -> OffsetSync {
    OffsetSync {
        source_topic: topic.into(),
        source_partition: partition,
        source_offset: source,
        target_topic: format!("source.{topic}"),
        target_partition: partition,
        target_offset: target,
    }
}

fn offset(topic: &str, partition: i32, offset: i64) -> GroupOffset {
    GroupOffset { topic: topic.into(), partition, offset }
}

/// Fakes with groups and their offsets, and syncs of `orders`.
fn with_groups(groups: &[(&str, Vec<GroupOffset>)], syncs: Vec<OffsetSync>) -> Fakes {
    let fakes = orders();
    {
        let mut fake = fakes.fake();
        for (group, offsets) in groups {
            fake.groups.push(group.to_string());
            fake.group_offsets.insert(group.to_string(), offsets.clone());
        }
        fake.syncs = syncs;
    }
    fakes
}

const CHECKPOINTS: &[(&str, &str)] =
    &[("emit.checkpoints.enabled", "true"), ("emit.checkpoints.interval.seconds", "1"), ("task.id", "0")];

fn commits(fakes: &Fakes) -> Vec<(String, Vec<String>)> {
    fakes.fake().commits.clone()
}

#[test]
fn group_offsets_are_translated_exactly_or_one_past_the_sync_below() {
    let syncs = vec![
        sync("orders", 0, 100, 40),
        sync("orders", 0, 10, 5),
        sync("orders", 1, 50, 20),
        sync("orders", 2, 30, 30),
        sync("orders", 3, 60, 12),
    ];
    let offsets = vec![
        offset("orders", 0, 100), // exactly a sync: 40
        offset("orders", 1, 75),  // past one: 21
        offset("orders", 2, 29),  // below every sync: none
        offset("orders", 0, 12),  // a later entry of partition 0 (the sync at 10): 6
        offset("orders", 3, -1),  // no offset: none
        offset("unsynced", 0, 5), // no sync at all: none
    ];
    let fakes = with_groups(&[("billing", offsets)], syncs);
    let mut m = mirror(&fakes, CHECKPOINTS);
    m.put(vec![]).unwrap();
    assert_eq!(
        commits(&fakes),
        [(
            "billing".to_string(),
            vec!["source.orders:0=40".into(), "source.orders:1=21".into(), "source.orders:0=6".into()]
        )]
    );
    assert_eq!(
        fakes.log(),
        [
            "groups",
            "syncs",
            "offsets billing",
            "commit billing source.orders:0=40 source.orders:1=21 source.orders:0=6"
        ]
    );
}

#[test]
fn the_syncs_target_topic_is_used_and_the_policys_name_when_it_has_none() {
    let mut renamed = sync("orders", 0, 10, 5);
    renamed.target_topic = "elsewhere".into();
    let mut unnamed = sync("orders", 1, 10, 5);
    unnamed.target_topic = String::new();
    let fakes =
        with_groups(&[("billing", vec![offset("orders", 0, 10), offset("orders", 1, 10)])], vec![renamed, unnamed]);
    let mut m = mirror(&fakes, &[CHECKPOINTS, &[("source.cluster.alias", "us")]].concat());
    m.put(vec![]).unwrap();
    assert_eq!(commits(&fakes), [("billing".to_string(), vec!["elsewhere:0=5".into(), "us.orders:1=5".into()])]);
}

#[test]
fn groups_are_filtered_by_groups_and_groups_exclude() {
    let o = || vec![offset("orders", 0, 10)];
    let fakes = with_groups(
        &[("billing", o()), ("connect-mirror", o()), ("console-consumer-1", o()), ("app-1", o()), ("__x", o())],
        vec![sync("orders", 0, 10, 5)],
    );
    let mut m = mirror(&fakes, CHECKPOINTS);
    m.put(vec![]).unwrap();
    let groups: Vec<String> = commits(&fakes).into_iter().map(|(g, _)| g).collect();
    assert_eq!(groups, ["billing", "app-1"]);

    let fakes = with_groups(&[("billing", o()), ("app-1", o()), ("app-2", o())], vec![sync("orders", 0, 10, 5)]);
    let mut m = mirror(&fakes, &[CHECKPOINTS, &[("groups", "app-.*"), ("groups.exclude", "app-2")]].concat());
    m.put(vec![]).unwrap();
    let groups: Vec<String> = commits(&fakes).into_iter().map(|(g, _)| g).collect();
    assert_eq!(groups, ["app-1"]);
    assert!(!fakes.log().contains(&"offsets billing".to_string()), "unwanted groups are not read");
}

#[test]
fn offsets_of_topics_not_copied_or_hashed_are_not_translated() {
    let mut hashed = sync("wide", 5, 10, 10);
    hashed.target_partition = 1;
    let fakes = with_groups(
        &[(
            "billing",
            vec![
                offset("orders", 0, 10),
                offset("app-internal", 0, 10),
                offset("target.orders", 0, 10),
                offset("wide", 0, 10),
                offset("wide", 5, 10),
            ],
        )],
        vec![
            sync("orders", 0, 10, 5),
            sync("app-internal", 0, 10, 5),
            sync("target.orders", 0, 10, 5),
            sync("wide", 0, 10, 7),
            hashed,
        ],
    );
    let mut m = mirror(&fakes, CHECKPOINTS);
    m.put(vec![]).unwrap();
    assert_eq!(commits(&fakes), [("billing".to_string(), vec!["source.orders:0=5".into()])]);
}

#[test]
fn a_group_is_never_moved_backwards_nor_committed_unchanged() {
    let clock = Rc::new(Cell::new(0));
    let fakes = with_groups(
        &[("billing", vec![offset("orders", 0, 100), offset("orders", 1, 50)])],
        vec![sync("orders", 0, 100, 40), sync("orders", 1, 50, 20)],
    );
    let mut m = mirror_at(&fakes, CHECKPOINTS, &clock);
    m.put(vec![]).unwrap();
    assert_eq!(m.committed("billing"), [("source.orders".into(), 0, 40), ("source.orders".into(), 1, 20)]);

    // The group was reset on the source: partition 0 would go back; partition 1 moved on.
    fakes.fake().group_offsets.insert("billing".into(), vec![offset("orders", 0, 60), offset("orders", 1, 51)]);
    fakes.fake().syncs.push(sync("orders", 0, 50, 25));
    clock.set(1000);
    m.put(vec![]).unwrap();
    // Nothing new at all: no commit.
    clock.set(2000);
    m.put(vec![]).unwrap();
    assert_eq!(
        commits(&fakes),
        [
            ("billing".to_string(), vec!["source.orders:0=40".into(), "source.orders:1=20".into()]),
            ("billing".to_string(), vec!["source.orders:1=21".into()]),
        ]
    );
    assert_eq!(m.committed("billing"), [("source.orders".into(), 0, 40), ("source.orders".into(), 1, 21)]);
}

#[test]
fn a_group_active_on_the_target_is_tried_again_next_interval() {
    let clock = Rc::new(Cell::new(0));
    let fakes = with_groups(
        &[("billing", vec![offset("orders", 0, 10)]), ("audit", vec![offset("orders", 0, 10)])],
        vec![sync("orders", 0, 10, 5)],
    );
    fakes.fake().refuse_commit.insert("billing".into(), TaskError::Retriable("group has active members".into()));
    let mut m = mirror_at(&fakes, CHECKPOINTS, &clock);
    assert_eq!(kinds(&m.put(vec![record(1, "orders", 0)]).unwrap()), accepts(1), "the put goes on");
    assert_eq!(commits(&fakes), [("audit".to_string(), vec!["source.orders:0=5".into()])]);
    assert!(m.committed("billing").is_empty());

    fakes.fake().refuse_commit.clear();
    clock.set(1000);
    m.put(vec![]).unwrap();
    assert_eq!(commits(&fakes)[1], ("billing".to_string(), vec!["source.orders:0=5".into()]));
    assert_eq!(commits(&fakes).len(), 2, "audit's offsets did not move: not committed again");
}

#[test]
fn retriable_reads_wait_for_the_next_interval_and_fatal_errors_fail_the_task() {
    let clock = Rc::new(Cell::new(0));
    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    fakes.fake().list_groups_error = Some(TaskError::Retriable("coordinator loading".into()));
    let mut m = mirror_at(&fakes, CHECKPOINTS, &clock);
    m.put(vec![]).unwrap();
    assert!(commits(&fakes).is_empty());
    clock.set(500);
    m.put(vec![]).unwrap();
    assert!(commits(&fakes).is_empty(), "not before the interval");
    clock.set(1000);
    m.put(vec![]).unwrap();
    assert_eq!(commits(&fakes).len(), 1);

    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    fakes.fake().list_groups_error = Some(TaskError::Fatal("CLUSTER_AUTHORIZATION_FAILED".into()));
    let mut m = mirror(&fakes, CHECKPOINTS);
    let got = m.put(vec![record(1, "orders", 0)]).unwrap_err();
    assert!(matches!(&got, TaskError::Fatal(why) if why.contains("CLUSTER_AUTH")), "{got:?}");
    assert!(fakes.fake().sent.is_empty());

    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    fakes.fake().refuse_commit.insert("billing".into(), TaskError::Fatal("GROUP_AUTHORIZATION_FAILED".into()));
    let mut m = mirror(&fakes, CHECKPOINTS);
    let got = m.put(vec![]).unwrap_err();
    assert!(
        matches!(&got, TaskError::Fatal(why) if why.contains("emit.checkpoints.enabled") && why.contains("GROUP_AUTH")),
        "{got:?}"
    );
}

#[test]
fn only_task_0_translates_and_once_an_interval() {
    let clock = Rc::new(Cell::new(0));
    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    let mut m = mirror_at(&fakes, &[CHECKPOINTS, &[("task.id", "1")]].concat(), &clock);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert_eq!(fakes.log(), ["partitions source.orders", "send 1"]);

    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    let mut m = mirror_at(&fakes, &[("emit.checkpoints.enabled", "false"), ("task.id", "0")], &clock);
    m.put(vec![]).unwrap();
    assert!(fakes.log().is_empty(), "turned off");

    let fakes = with_groups(&[("billing", vec![offset("orders", 0, 10)])], vec![sync("orders", 0, 10, 5)]);
    let mut m = mirror_at(&fakes, &[("emit.checkpoints.enabled", "true")], &clock);
    let runs = |f: &Fakes| f.log().iter().filter(|c| *c == "groups").count();
    m.put(vec![]).unwrap();
    clock.set(59_999);
    m.put(vec![record(1, "orders", 0)]).unwrap();
    assert_eq!(runs(&fakes), 1, "the default interval is 60 s");
    clock.set(60_000);
    m.put(vec![record(2, "orders", 0)]).unwrap();
    assert_eq!(runs(&fakes), 2, "on a put with records too");
    clock.set(60_500);
    m.put(vec![]).unwrap();
    assert_eq!(runs(&fakes), 2);
}

#[test]
fn metadata_and_validation() {
    let meta = Mirror::metadata();
    assert_eq!((meta.name.as_str(), meta.version.as_str()), ("mirror", env!("CARGO_PKG_VERSION")));
    assert_eq!(meta.config.len(), config::keys().len());
    let config = Config::from(vec![
        ("topics.exclude".to_string(), "(".to_string()),
        ("replication.policy.class".to_string(), "org.example.Custom".to_string()),
        ("emit.checkpoints.interval.seconds".to_string(), "0".to_string()),
    ]);
    let errors: Vec<String> = Mirror::validate(&config).into_iter().map(|e| e.key).collect();
    assert_eq!(errors, ["replication.policy.class", "topics.exclude", "emit.checkpoints.interval.seconds"]);
    assert!(Mirror::validate(&Config::default()).is_empty());
}

#[test]
fn readme_lists_every_config_key_as_metadata_declares_it() {
    let table =
        spillway_sdk::readme_key_table(include_str!("../README.md")).expect("README has the config-keys markers");
    let expected = spillway_sdk::markdown_key_table(&Mirror::metadata().config);
    assert!(
        table == expected,
        "plugins/mirror/README.md's key table differs from Mirror::metadata(); put this between the markers:\n\n{expected}"
    );
}

/// A target that delivers everything at once: what the mirror itself costs.
struct NullTarget;

impl Target for NullTarget {
    fn send(&mut self, records: &[OutputRecord]) -> Result<Vec<Delivery>, TaskError> {
        Ok(records.iter().map(|_| Delivery::Delivered(Delivered { partition: 0, offset: 0 })).collect())
    }
    fn partitions(&mut self, _topic: &str) -> Result<Option<u32>, TaskError> {
        Ok(Some(8))
    }
    fn ensure_topic(&mut self, _: &str, _: u32, _: &[(String, String)]) -> Result<TopicEnsured, TaskError> {
        Ok(TopicEnsured::Existed)
    }
    fn offset_syncs(&mut self) -> Result<Vec<OffsetSync>, TaskError> {
        Ok(Vec::new())
    }
    fn commit_group_offsets(&mut self, _: &str, _: &[GroupOffset]) -> Result<(), TaskError> {
        Ok(())
    }
}

/// `cargo test --release -p mirror -- --ignored --nocapture cost`: the
/// mirror's own time per record, natively (the batch's clone included).
#[test]
#[ignore]
fn cost_per_record() {
    let batch: Vec<SinkRecord> = (0..500)
        .map(|i| {
            let mut r = record(i, "bench", (i % 8) as i32);
            r.value = Some(vec![b'x'; 200]);
            r.headers = vec![SinkHeader { key: "trace".into(), value: Some(b"abc".to_vec()) }];
            r
        })
        .collect();
    let mut m = Mirror::with_clusters(
        settings(&[("emit.checkpoints.enabled", "false")]),
        Box::new(NullTarget),
        Box::new(Fakes::default()),
        Box::new(|| 0),
    );
    let rounds = 200;
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        m.put(batch.clone()).unwrap();
    }
    let all = started.elapsed();
    let started = std::time::Instant::now();
    for _ in 0..rounds {
        drop(std::hint::black_box(batch.clone()));
    }
    let clones = started.elapsed();
    let n = (rounds * batch.len()) as f64;
    println!(
        "{:.3} µs per record ({:.3} µs of it the batch's clone and drop)",
        all.as_secs_f64() * 1e6 / n,
        clones.as_secs_f64() * 1e6 / n
    );
}
