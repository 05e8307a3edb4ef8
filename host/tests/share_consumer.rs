//! The KIP-932 share consumer against a real Kafka-protocol broker: the one in
//! SPILLWAY_TEST_BOOTSTRAP, or a librdkafka mock cluster started per test.

mod support;

use spillway::kafka::share::{ShareConsumer, ShareConsumerConfig, ShareError};
use spillway::kafka::{AckType, ConsumedRecord};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use support::{Broker, produce, support_dir, unique};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Upper bound for loops that wait for records; tests assert on what arrived,
/// never on how long it took.
const PATIENCE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(500);

async fn connect(broker: &Broker, group: &str, topic: &str, max_records: i32) -> ShareConsumer {
    let mut config = ShareConsumerConfig::new(&broker.bootstrap, group, &[topic]);
    config.client_id = "spillway-share-test".into();
    config.max_records = max_records;
    // Apache Kafka: the group starts at the earliest offset, whenever its
    // assignment comes. The mock serves no group configs: there a new group
    // starts at the log end from its first ShareFetch.
    config.auto_offset_reset = Some("earliest".into());
    ShareConsumer::connect(config).await.expect("connect")
}

/// Join and fetch once: on the mock a new share group starts at the log end
/// from its first ShareFetch.
async fn join(broker: &Broker, group: &str, topic: &str) -> ShareConsumer {
    join_with(broker, group, topic, 500).await
}

async fn join_with(broker: &Broker, group: &str, topic: &str, max_records: i32) -> ShareConsumer {
    let mut consumer = connect(broker, group, topic, max_records).await;
    // The mock's first heartbeat answer carries the assignment; Apache
    // Kafka's comes with a later heartbeat, once the topic exists.
    let deadline = Instant::now() + PATIENCE;
    loop {
        let early = consumer.poll(Duration::from_secs(1)).await.expect("poll");
        assert!(early.is_empty(), "nothing was produced yet");
        if !consumer.assignment().is_empty() {
            return consumer;
        }
        assert!(Instant::now() < deadline, "no assignment within {PATIENCE:?}");
    }
}

fn key(r: &ConsumedRecord) -> String {
    String::from_utf8(r.key.as_deref().expect("key").to_vec()).expect("utf-8 key")
}

/// Poll, acknowledge each record with `decide`, commit after every batch
/// (asserting success), until `done` says so or patience runs out.
async fn consume(
    consumer: &mut ShareConsumer,
    mut decide: impl FnMut(&ConsumedRecord) -> AckType,
    mut done: impl FnMut(&[ConsumedRecord]) -> bool,
) -> Vec<ConsumedRecord> {
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    while !done(&seen) && Instant::now() < deadline {
        let batch = consumer.poll(POLL).await.expect("poll");
        for r in &batch {
            let ack = decide(r);
            consumer.acknowledge(&r.topic, r.partition, r.offset, ack).expect("acknowledge a record we hold");
        }
        if !batch.is_empty() {
            let result = consumer.commit_sync().await.expect("commit_sync");
            assert!(result.is_ok(), "commit failed: {:?}", result.failures());
        }
        seen.extend(batch);
    }
    seen
}

fn keys_of(records: &[ConsumedRecord]) -> BTreeSet<String> {
    records.iter().map(key).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn accepted_records_are_not_delivered_again() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-accept"), unique("group"));
    let mut first = join_with(&broker, &group, &topic, 20).await;
    assert!(!first.member_id().is_empty());
    assert!(!first.assignment().is_empty(), "joined without an assignment");

    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 200).await.into_iter().collect();
    // Each round commits half a batch with ShareAcknowledge and leaves the
    // other half to ride on the next ShareFetch, so records stay held across
    // both kinds of request and both ack paths are used.
    let mut got: Vec<ConsumedRecord> = Vec::new();
    let mut rounds = 0;
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&got).len() < produced.len() && Instant::now() < deadline {
        let batch = first.poll(POLL).await.expect("poll");
        let (now, later) = batch.split_at(batch.len() / 2);
        for r in now {
            first.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("ack");
        }
        let result = first.commit_sync().await.expect("commit_sync");
        assert!(result.is_ok(), "commit failed: {:?}", result.failures());
        for r in later {
            first.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("ack");
        }
        rounds += usize::from(!batch.is_empty());
        got.extend(batch);
    }
    let result = first.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "commit failed: {:?}", result.failures());
    assert!(!result.partitions.is_empty(), "the last acks were not reported");
    println!("200 records in {rounds} batches");
    assert_eq!(keys_of(&got), produced);
    assert_eq!(got.len(), produced.len(), "a record was delivered twice");
    for r in &got {
        assert_eq!(r.delivery_count, 1, "{} redelivered", key(r));
    }
    // Not ours (any more): refused, and nothing is sent for it.
    let r = &got[0];
    let again = first.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept);
    assert!(matches!(again, Err(ShareError::NotAcquired { .. })), "{again:?}");
    first.close().await.expect("close");

    // A later member of the group gets only what was produced after.
    let mut second = join(&broker, &group, &topic).await;
    let fresh: BTreeSet<String> = produce(&broker.bootstrap, &topic, 10).await.into_iter().collect();
    let later = consume(&mut second, |_| AckType::Accept, |seen| keys_of(seen).len() >= fresh.len()).await;
    assert_eq!(keys_of(&later), fresh, "only the later records, once each");
    assert_eq!(later.len(), fresh.len());
    assert!(later.iter().all(|r| r.delivery_count == 1));
    second.close().await.expect("close");
}

#[tokio::test(flavor = "multi_thread")]
async fn released_records_come_back_and_rejected_ones_do_not() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-release"), unique("group"));
    let mut consumer = join(&broker, &group, &topic).await;
    let produced = produce(&broker.bootstrap, &topic, 30).await;
    let index = |r: &ConsumedRecord| -> usize { key(r).rsplit('-').next().unwrap().parse().unwrap() };
    let plan = |i: usize| match i % 3 {
        0 => AckType::Release,
        1 => AckType::Reject,
        _ => AckType::Accept,
    };
    // A released record comes back at once on Apache Kafka (in the same
    // run of fetches), later on the mock: each first delivery follows the
    // plan, each later one is accepted.
    let released: BTreeSet<String> = produced
        .iter()
        .filter(|k| plan(k.rsplit('-').next().unwrap().parse().unwrap()) == AckType::Release)
        .cloned()
        .collect();
    let decide = |r: &ConsumedRecord| if r.delivery_count == 1 { plan(index(r)) } else { AckType::Accept };
    let redelivered =
        |seen: &[ConsumedRecord]| seen.iter().filter(|r| r.delivery_count > 1).map(key).collect::<BTreeSet<_>>();
    let all = consume(&mut consumer, decide, |seen| {
        seen.iter().filter(|r| r.delivery_count == 1).count() >= produced.len() && redelivered(seen) == released
    })
    .await;
    let (first, again): (Vec<ConsumedRecord>, Vec<ConsumedRecord>) =
        all.into_iter().partition(|r| r.delivery_count == 1);
    assert_eq!(first.len(), produced.len(), "each record delivered once at first");
    assert_eq!(keys_of(&first), produced.iter().cloned().collect());
    assert_eq!(keys_of(&again), released, "exactly the released records return");
    assert_eq!(again.len(), released.len(), "a released record came back more than once");
    for r in &again {
        assert_eq!(r.delivery_count, 2, "{} delivery count", key(r));
    }
    // Nothing else is pending: a last round of polls brings nothing back.
    for _ in 0..3 {
        let extra = consumer.poll(POLL).await.expect("poll");
        assert!(extra.is_empty(), "redelivered: {:?}", keys_of(&extra));
    }
    consumer.close().await.expect("close");
}

/// Wait until `consumers` hold disjoint, non-empty assignments (the
/// coordinator tells each member on its next heartbeat).
async fn await_split(consumers: &mut [&mut ShareConsumer]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let assignments: Vec<_> = consumers.iter().map(|c| c.assignment()).collect();
        let total: usize = assignments.iter().map(Vec::len).sum();
        let union: BTreeSet<_> = assignments.iter().flatten().collect();
        if assignments.iter().all(|a| !a.is_empty()) && union.len() == total {
            return;
        }
        assert!(Instant::now() < deadline, "no split: {assignments:?}");
        for c in consumers.iter_mut() {
            assert!(c.poll(Duration::from_millis(200)).await.unwrap().is_empty());
        }
    }
}

/// One short poll; each record is accepted and committed (asserting
/// success) and added to `got`.
async fn accept_a_round(consumer: &mut ShareConsumer, got: &mut Vec<ConsumedRecord>) {
    let batch = consumer.poll(Duration::from_millis(200)).await.expect("poll");
    for r in &batch {
        consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("acknowledge");
    }
    let result = consumer.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "commit failed: {:?}", result.failures());
    got.extend(batch);
}

#[tokio::test(flavor = "multi_thread")]
async fn two_members_split_the_records() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-split"), unique("group"));
    let mut a = join(&broker, &group, &topic).await;
    let mut b = join(&broker, &group, &topic).await;
    assert_ne!(a.member_id(), b.member_id());
    await_split(&mut [&mut a, &mut b]).await;

    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 200).await.into_iter().collect();
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + PATIENCE;
    while Instant::now() < deadline {
        let union: BTreeSet<String> = keys_of(&got_a).union(&keys_of(&got_b)).cloned().collect();
        if union.len() >= produced.len() {
            break;
        }
        accept_a_round(&mut a, &mut got_a).await;
        accept_a_round(&mut b, &mut got_b).await;
    }
    let union: BTreeSet<String> = keys_of(&got_a).union(&keys_of(&got_b)).cloned().collect();
    println!(
        "member a got {}, member b got {}, {} seen by both",
        got_a.len(),
        got_b.len(),
        keys_of(&got_a).intersection(&keys_of(&got_b)).count()
    );
    assert_eq!(union, produced, "records lost");
    assert!(!got_a.is_empty() && !got_b.is_empty(), "one member got nothing");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

#[tokio::test(flavor = "multi_thread")]
async fn shares_a_group_with_confluent_kafka() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-interop"), unique("group"));
    let mut ours = join(&broker, &group, &topic).await;
    let partitions_alone = ours.assignment().len();

    let script = support_dir().join("share_consume.py");
    let mut python = tokio::process::Command::new("python3")
        .arg(&script)
        .args([&broker.bootstrap, &group, &topic, "45", "5"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start share_consume.py");
    let mut lines = BufReader::new(python.stdout.take().unwrap()).lines();
    let ready = lines.next_line().await.expect("read").expect("python output");
    assert_eq!(ready, "READY");
    // Produce only once the coordinator split the partitions, so both sides
    // own some of them.
    let deadline = Instant::now() + PATIENCE;
    while ours.assignment().len() >= partitions_alone {
        assert!(Instant::now() < deadline, "python member never got partitions");
        ours.poll(Duration::from_millis(200)).await.expect("poll");
    }

    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 200).await.into_iter().collect();
    let reader = tokio::spawn(async move {
        let mut keys = Vec::new();
        while let Some(line) = lines.next_line().await.expect("read") {
            if let Some(k) = line.strip_prefix("KEY ") {
                keys.push(k.to_string());
            }
        }
        keys
    });
    // Consume alongside python until it is done, then pick up anything its
    // departure released.
    let mut ours_got: Vec<ConsumedRecord> = Vec::new();
    let mut commit_failures = 0;
    let deadline = Instant::now() + PATIENCE;
    let mut quiet_after_exit = 0;
    while Instant::now() < deadline && quiet_after_exit < 4 {
        let batch = ours.poll(POLL).await.expect("poll");
        for r in &batch {
            // The python member leaving can end our share session (the mock
            // drops all sessions on any disconnect): those locks are gone.
            match ours.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept) {
                Ok(()) | Err(ShareError::LockExpired { .. }) => {}
                Err(e) => panic!("acknowledge: {e}"),
            }
        }
        let result = ours.commit_sync().await.expect("commit_sync");
        commit_failures += result.failures().len();
        let exited = python.try_wait().expect("python status").is_some();
        if exited && batch.is_empty() {
            quiet_after_exit += 1;
        }
        ours_got.extend(batch);
    }
    let status = python.wait().await.expect("python exit");
    assert!(status.success(), "share_consume.py failed: {status}");
    let theirs: BTreeSet<String> = reader.await.unwrap().into_iter().collect();
    let mine = keys_of(&ours_got);
    println!(
        "spillway got {} records, confluent-kafka got {}, {} on both sides, {} failed commits",
        mine.len(),
        theirs.len(),
        mine.intersection(&theirs).count(),
        commit_failures
    );
    let union: BTreeSet<String> = mine.union(&theirs).cloned().collect();
    let lost: Vec<_> = produced.difference(&union).collect();
    assert!(lost.is_empty(), "{} records lost: {lost:?}", lost.len());
    assert!(!mine.is_empty() && !theirs.is_empty(), "records were not split");
    ours.close().await.expect("close");
}

/// On the mock any closed connection destroys every share session on the
/// broker (and releases its locks), which lets us test what a real broker does
/// when a session is lost.
#[tokio::test(flavor = "multi_thread")]
async fn a_lost_session_fails_its_acks_and_the_records_return() {
    // On the mock, whatever the environment names: the fault it injects is
    // its own (Apache Kafka keeps a share session when another connection
    // closes); the fault-proxy tests lose sessions on Kafka.
    let broker = Broker::mock();
    let (topic, group) = (unique("share-lost"), unique("group"));
    let mut consumer = join(&broker, &group, &topic).await;
    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 20).await.into_iter().collect();
    let mut held = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&held).len() < produced.len() && Instant::now() < deadline {
        held.extend(consumer.poll(POLL).await.expect("poll"));
    }
    assert_eq!(keys_of(&held), produced);

    // Any connection closing ends our session; the records go back.
    drop(std::net::TcpStream::connect(&broker.bootstrap).expect("connect"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    for r in &held {
        // We cannot know yet: the acks are accepted locally...
        consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("acknowledge");
    }
    // ...and their failure is reported, not dropped.
    let result = consumer.commit_sync().await.expect("commit_sync");
    assert!(!result.is_ok(), "acks on a lost session reported as applied");
    let failed: BTreeSet<_> = result.failures().into_iter().map(|(tp, _)| tp).collect();
    let held_partitions: BTreeSet<_> =
        held.iter().map(|r| spillway::kafka::share::TopicPartition::new(&r.topic, r.partition)).collect();
    assert_eq!(failed, held_partitions);

    // The next fetch reopens the session and gets them all again.
    let again = consume(&mut consumer, |_| AckType::Accept, |seen| keys_of(seen).len() >= produced.len()).await;
    assert_eq!(keys_of(&again), produced);
    assert!(again.iter().all(|r| r.delivery_count == 2));
    consumer.close().await.expect("close");
}

/// Held records are handed to the application once per acquisition: a
/// broker that sends them again while they are held (librdkafka's mock does,
/// on every fetch) must not make them arrive twice, but once released they
/// come back, with a delivery count one higher.
#[tokio::test(flavor = "multi_thread")]
async fn held_records_arrive_once_per_acquisition() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-held-once"), unique("group"));
    let mut consumer = join(&broker, &group, &topic).await;
    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 40).await.into_iter().collect();

    let mut held = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&held).len() < produced.len() {
        assert!(Instant::now() < deadline, "only {} of 40 arrived", held.len());
        held.extend(consumer.poll(POLL).await.expect("poll"));
    }
    // More fetches while holding all 40, acknowledging nothing.
    for _ in 0..5 {
        let again = consumer.poll(POLL).await.expect("poll");
        assert!(again.is_empty(), "handed on again while held: {:?}", keys_of(&again));
    }
    assert_eq!(held.len(), produced.len(), "each record arrived once: {:?}", keys_of(&held));
    println!("records sent again while held, not handed on: {}", consumer.resent_while_held());

    for r in &held {
        consumer.acknowledge(&r.topic, r.partition, r.offset, AckType::Release).unwrap();
    }
    let result = consumer.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "release failed: {:?}", result.failures());
    let back = consume(&mut consumer, |_| AckType::Accept, |seen| keys_of(seen).len() >= produced.len()).await;
    assert_eq!(keys_of(&back), produced, "every released record came back");
    assert_eq!(back.len(), produced.len(), "once each");
    assert!(
        back.iter().all(|r| r.delivery_count == 2),
        "{:?}",
        back.iter().map(|r| r.delivery_count).collect::<Vec<_>>()
    );
    consumer.close().await.unwrap();
}

/// A member holding records (not acknowledged yet, as a buffering sink holds
/// them) of partitions that the coordinator moves to a newcomer keeps those
/// partitions in its share session until it acknowledged the records:
/// forgetting a partition releases what was acquired from it, and the
/// newcomer would be handed records that their holder then writes too. The
/// holder's acknowledgements all take effect, it lets the partitions go
/// afterwards, and every record arrives exactly once across the two members.
#[tokio::test(flavor = "multi_thread")]
async fn records_held_on_a_partition_that_moves_are_acknowledged_by_their_holder() {
    let broker = Broker::start_or_env();
    let (topic, group) = (unique("share-moved"), unique("group"));
    let mut a = join(&broker, &group, &topic).await;
    let alone: BTreeSet<(String, i32)> = a.assignment().into_iter().collect();
    assert!(alone.len() >= 2, "needs a topic of several partitions (auto-created), got {alone:?}");
    let first: BTreeSet<String> = produce(&broker.bootstrap, &topic, 200).await.into_iter().collect();
    let mut held = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&held).len() < first.len() {
        assert!(Instant::now() < deadline, "a got {} of {}", held.len(), first.len());
        held.extend(a.poll(POLL).await.expect("poll"));
    }

    // A newcomer: the coordinator moves some partitions to it, and each
    // member hears of that on its next heartbeat.
    let mut b = connect(&broker, &group, &topic, 500).await;
    let mut got_b = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while a.assignment().len() == alone.len() || b.assignment().is_empty() {
        assert!(Instant::now() < deadline, "nothing moved: a {:?}, b {:?}", a.assignment(), b.assignment());
        assert!(a.poll(Duration::from_millis(200)).await.expect("poll a").is_empty(), "a holds every record");
        got_b.extend(b.poll(Duration::from_millis(200)).await.expect("poll b"));
    }
    // A few more rounds with the partitions moved: a must not let go yet.
    for _ in 0..3 {
        assert!(a.poll(Duration::from_millis(200)).await.expect("poll a").is_empty());
        got_b.extend(b.poll(Duration::from_millis(200)).await.expect("poll b"));
    }
    let kept: BTreeSet<(String, i32)> = a.assignment().into_iter().collect();
    let moved: BTreeSet<(String, i32)> = alone.difference(&kept).cloned().collect();
    let revoked: BTreeSet<(String, i32)> =
        a.revoked_with_records().into_iter().map(|tp| (tp.topic, tp.partition)).collect();
    assert_eq!(revoked, moved, "a should hold on to every moved partition it has records of");
    assert!(got_b.is_empty(), "b was handed {} records that a holds: {:?}", got_b.len(), keys_of(&got_b));

    for r in &held {
        a.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("still a's");
    }
    let result = a.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "a's acknowledgements of moved partitions failed: {:?}", result.failures());
    assert!(a.poll(POLL).await.expect("poll a").is_empty());
    assert!(a.revoked_with_records().is_empty(), "nothing is held any more");

    // Later records of the moved partitions go to b only.
    let second: BTreeSet<String> = produce(&broker.bootstrap, &topic, 200).await.into_iter().collect();
    let (mut got_a, mut got_b) = (Vec::new(), got_b);
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&got_a).len() + keys_of(&got_b).len() < second.len() && Instant::now() < deadline {
        accept_a_round(&mut a, &mut got_a).await;
        accept_a_round(&mut b, &mut got_b).await;
    }
    let on_moved = |r: &&ConsumedRecord| moved.contains(&(r.topic.clone(), r.partition));
    assert_eq!(got_a.iter().filter(on_moved).count(), 0, "a still fetched partitions it gave up");
    assert!(got_b.iter().any(|r| on_moved(&r)), "b got nothing of its partitions");
    let expected: Vec<String> = first.iter().chain(&second).cloned().collect();
    let arrived: Vec<String> = held.iter().chain(&got_a).chain(&got_b).map(key).collect();
    support::assert_each_exactly_once(&arrived, &expected, "records of a partition that moved while held");
    a.close().await.expect("close a");
    b.close().await.expect("close b");
}

/// KIP-1222 on Apache Kafka 4.2+: records held three times as long as their
/// lock (15 s, set on the group) and renewed meanwhile stay this member's.
/// A second member of the group, fetching the same partition all along,
/// gets none of them; the holder's acknowledgements take effect; each
/// record arrived once, on its first delivery.
#[tokio::test(flavor = "multi_thread")]
async fn renewed_locks_keep_held_records_past_their_lock_duration() {
    let broker = Broker::start_or_env();
    if broker.is_mock() {
        eprintln!("skipped on librdkafka's mock, which serves no ShareAcknowledge v2");
        return;
    }
    const LOCK: Duration = Duration::from_secs(15);
    let (topic, group) = (unique("share-renew"), unique("group"));
    let mut config = ShareConsumerConfig::new(&broker.bootstrap, &group, &[topic.as_str()]);
    config.auto_offset_reset = Some("earliest".into());
    config.group_configs.insert("share.record.lock.duration.ms".into(), LOCK.as_millis().to_string());
    let mut holder = ShareConsumer::connect(config).await.expect("connect");
    assert!(holder.renews_locks(), "{} serves ShareAcknowledge v2", broker.description);
    let produced: BTreeSet<String> = produce(&broker.bootstrap, &topic, 40).await.into_iter().collect();
    let mut held = Vec::new();
    let deadline = Instant::now() + PATIENCE;
    while keys_of(&held).len() < produced.len() {
        assert!(Instant::now() < deadline, "only {} of 40 arrived", held.len());
        held.extend(holder.poll(POLL).await.expect("poll"));
    }
    let mut other = join(&broker, &group, &topic).await;

    let wanted: Vec<_> = held
        .iter()
        .map(|r| (spillway::kafka::share::TopicPartition::new(&r.topic, r.partition), r.offset, r.delivery_count))
        .collect();
    let (started, mut renewals, mut stolen) = (Instant::now(), 0, Vec::new());
    while started.elapsed() < LOCK * 3 {
        let before: Vec<_> = held.iter().map(|r| lock_expiry(&holder, r)).collect();
        assert_eq!(holder.renew(&wanted).await, held.len(), "every held record renewed");
        for (r, before) in held.iter().zip(before) {
            assert!(lock_expiry(&holder, r) > before, "{}'s lock was not moved on", key(r));
        }
        renewals += 1;
        let until = Instant::now() + LOCK / 3;
        while Instant::now() < until {
            stolen.extend(other.poll(POLL).await.expect("poll"));
            assert!(holder.poll(POLL).await.expect("poll").is_empty(), "nothing else was produced");
        }
    }
    assert!(stolen.is_empty(), "handed to another member while renewed: {:?}", keys_of(&stolen));
    for r in &held {
        holder.acknowledge(&r.topic, r.partition, r.offset, AckType::Accept).expect("still ours after 45 s");
    }
    let result = holder.commit_sync().await.expect("commit_sync");
    assert!(result.is_ok(), "accepting after renewals failed: {:?}", result.failures());
    assert_eq!(held.len(), produced.len(), "each record arrived once");
    assert!(
        held.iter().all(|r| r.delivery_count == 1),
        "{:?}",
        held.iter().map(|r| r.delivery_count).collect::<Vec<_>>()
    );
    let after = Instant::now() + LOCK;
    while Instant::now() < after {
        stolen.extend(other.poll(POLL).await.expect("poll"));
    }
    assert!(stolen.is_empty(), "accepted records came back: {:?}", keys_of(&stolen));
    println!(
        "{} records held {:?} on {:?} locks, renewed {renewals} times, on {}",
        held.len(),
        started.elapsed(),
        LOCK,
        broker.description
    );
    holder.close().await.unwrap();
    other.close().await.unwrap();
}

fn lock_expiry(consumer: &ShareConsumer, r: &ConsumedRecord) -> Option<Instant> {
    consumer.lock_expiry(&r.topic, r.partition, r.offset, r.delivery_count)
}
