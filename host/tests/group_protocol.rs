//! KIP-1302 to the letter, on test.sh's Apache Kafka: share groups are
//! opt-in (a connector that names no protocol runs on a consumer group
//! unless its worker says share), removing a connector's override rolls it
//! back to its consumer group, an upgrade keeps a connector stored when
//! share groups were the default on its share group, and a share group and
//! a consumer group never get one id, in validation as in a create.

mod support;

use spillway::herder::{
    ConnectorOffsets, Herder, HerderError, OffsetPartition, OffsetValue, PartitionOffset, WorkerConfig,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};
use support::cluster::Cluster;
use support::herder::{plugin_dir, test_runtime, wait_running, worker_config_with};
use support::{assert_each_exactly_once, file_sink_keys, produce, unique, worker_state_file};

const PATIENCE: Duration = Duration::from_secs(90);

/// A worker config as an operator who never heard of share groups writes
/// one: no `consumer.group.protocol`.
fn worker_without_protocol(bootstrap: &str, dir: &Path) -> WorkerConfig {
    let raw = BTreeMap::from([
        ("bootstrap.servers".to_string(), bootstrap.to_string()),
        ("config.storage.file".to_string(), worker_state_file(dir).display().to_string()),
        ("plugin.path".to_string(), plugin_dir().display().to_string()),
    ]);
    WorkerConfig::parse(&raw).unwrap()
}

/// Waits until the files named `file-*` hold `n` records, then a flush
/// interval and more, so that a record written twice would show.
async fn wait_written(dir: &Path, file: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    while file_sink_keys(dir, file).len() < n {
        assert!(Instant::now() < deadline, "{file}: {} of {n} records written", file_sink_keys(dir, file).len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    file_sink_keys(dir, file)
}

fn committed(topic: &str, offset: i64) -> ConnectorOffsets {
    ConnectorOffsets {
        offsets: vec![PartitionOffset {
            partition: OffsetPartition { kafka_topic: topic.to_string(), kafka_partition: 0 },
            offset: Some(OffsetValue { kafka_offset: offset }),
        }],
    }
}

fn bad_request(result: Result<impl std::fmt::Debug, HerderError>) -> String {
    match result {
        Err(HerderError::BadRequest(message)) => message,
        other => panic!("expected 400, got {other:?}"),
    }
}

/// The migration and rollback of KIP-1302's section 4, with each record's
/// count: a connector with no protocol key consumes on its consumer group
/// (20 records, once each, its offsets committed); moved to a share group
/// (which may not take the consumer group's id, validation says so too)
/// it reads from its share group's start (those 20 and 10 more, once
/// each); with the override removed it is back on its consumer group,
/// which is behind the share group's position by those 10: they, and only
/// they, come once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn share_groups_are_opt_in_and_removing_the_override_rolls_back_to_the_consumer_group() {
    let broker = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("rollback"), unique("rollback"));
    broker.create_topic(&topic, 1).await;
    let herder = Herder::start(worker_without_protocol(&broker.bootstrap, dir.path()), test_runtime()).await.unwrap();

    let first = produce(&broker.bootstrap, &topic, 20).await;
    let classic = support::file_sink_config(&name, &topic, dir.path(), "classic", &[]);
    herder.create(name.clone(), classic.clone(), None).await.unwrap();
    assert_each_exactly_once(&wait_written(dir.path(), "classic", 20).await, &first, "no protocol named");
    // Committed offsets: a consumer group's, not a share group's start offsets.
    let deadline = Instant::now() + PATIENCE;
    while herder.offsets(name.clone()).await.unwrap() != committed(&topic, 20) {
        assert!(Instant::now() < deadline, "never committed: {:?}", herder.offsets(name.clone()).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Share, on the consumer group's id: refused, by validation as by PUT.
    let share = [("consumer.override.group.protocol", "share"), ("share.auto.offset.reset", "earliest")];
    let clash = support::file_sink_config(&name, &topic, dir.path(), "share", &share);
    let infos = herder.validate("file-sink".into(), clash.clone()).await.unwrap();
    let errors: Vec<(&str, &String)> =
        infos.configs.iter().flat_map(|c| c.value.errors.iter().map(move |e| (c.value.name.as_str(), e))).collect();
    assert_eq!(infos.error_count, 1, "{errors:?}");
    assert_eq!(errors[0].0, "consumer.override.group.id");
    assert!(errors[0].1.contains("already used by a consumer group"), "{errors:?}");
    let refused = bad_request(herder.put_config(name.clone(), clash).await);
    assert!(refused.contains("already used by a consumer group"), "{refused}");

    let share_group = format!("{name}-share");
    let migrated = [share[0], share[1], ("consumer.override.group.id", share_group.as_str())];
    herder
        .put_config(name.clone(), support::file_sink_config(&name, &topic, dir.path(), "share", &migrated))
        .await
        .unwrap();
    wait_running(&herder, &name, 1).await;
    let second = produce(&broker.bootstrap, &topic, 10).await;
    let both: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_each_exactly_once(&wait_written(dir.path(), "share", 30).await, &both, "migrated to a share group");

    // The override gone but the share group's id kept: a consumer group
    // may not take it.
    let kept_id = [("consumer.override.group.id", share_group.as_str())];
    let refused = bad_request(
        herder.put_config(name.clone(), support::file_sink_config(&name, &topic, dir.path(), "back", &kept_id)).await,
    );
    assert!(refused.contains("is a share group's"), "{refused}");

    // Rolled back: the consumer group resumes at its committed offset, 20.
    herder.put_config(name.clone(), support::file_sink_config(&name, &topic, dir.path(), "back", &[])).await.unwrap();
    assert_each_exactly_once(&wait_written(dir.path(), "back", 10).await, &second, "rolled back");
    assert_eq!(herder.offsets(name.clone()).await.unwrap(), committed(&topic, 30));
    assert_each_exactly_once(&file_sink_keys(dir.path(), "share"), &both, "the share group's, after the rollback");
    println!("migration and rollback on {}: 20 + 10 records, each count exact", broker.description);
    herder.shutdown().await.unwrap();
}

/// A connector stored when share groups were the default (a state file
/// with no format, its config naming no protocol) is pinned to its share
/// group on the first start of this version, on a worker that names no
/// protocol: its config shows the pin, and it goes on from its share
/// group's position (without the pin, a consumer group would read the
/// first records again).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upgrade_keeps_a_stored_share_connector_on_its_share_group_and_position() {
    let broker = Cluster::start_or_env("SOURCE");
    let dir = tempfile::tempdir().unwrap();
    let (name, topic) = (unique("upgrade"), unique("upgrade"));
    broker.create_topic(&topic, 1).await;
    let state = worker_state_file(dir.path());

    // The previous version, as far as this connector can tell: share by
    // default (here the worker's opt-in), nothing named in its config.
    let before =
        Herder::start(worker_config_with(&broker.bootstrap, &state, &plugin_dir(), &[]), test_runtime()).await.unwrap();
    let config =
        support::file_sink_config(&name, &topic, dir.path(), &name, &[("share.auto.offset.reset", "earliest")]);
    before.create(name.clone(), config.clone(), None).await.unwrap();
    let first = produce(&broker.bootstrap, &topic, 20).await;
    assert_each_exactly_once(&wait_written(dir.path(), &name, 20).await, &first, "before the upgrade");
    before.shutdown().await.unwrap();
    // Its state file, as the previous version wrote it: no format.
    let mut written: serde_json::Value = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    assert_eq!(written["format"], 1);
    written.as_object_mut().unwrap().remove("format");
    std::fs::write(&state, serde_json::to_vec(&written).unwrap()).unwrap();

    let after = Herder::start(worker_without_protocol(&broker.bootstrap, dir.path()), test_runtime()).await.unwrap();
    let shown = after.info(name.clone()).await.unwrap().config;
    assert_eq!(shown.get("consumer.override.group.protocol").map(String::as_str), Some("share"), "{shown:?}");
    let mut pinned = config.clone();
    pinned.insert("consumer.override.group.protocol".into(), "share".into());
    assert_eq!(shown, pinned, "nothing else changed");
    wait_running(&after, &name, 1).await;
    let second = produce(&broker.bootstrap, &topic, 10).await;
    let both: Vec<String> = first.iter().chain(&second).cloned().collect();
    assert_each_exactly_once(&wait_written(dir.path(), &name, 30).await, &both, "after the upgrade");
    after.shutdown().await.unwrap();

    // Pinned once: a restart leaves the state as it is.
    let stored = std::fs::read(&state).unwrap();
    let again = Herder::start(worker_without_protocol(&broker.bootstrap, dir.path()), test_runtime()).await.unwrap();
    again.shutdown().await.unwrap();
    assert_eq!(std::fs::read(&state).unwrap(), stored);
}

/// The group id check asks the broker; one that cannot answer refuses the
/// config, saying why, rather than let a clash through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_broker_that_cannot_answer_the_group_id_check_refuses_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let nobody = format!("127.0.0.1:{}", support::worker::free_port());
    let herder = Herder::start(worker_without_protocol(&nobody, dir.path()), test_runtime()).await.unwrap();
    let config = support::file_sink_config("unchecked", "t", dir.path(), "unchecked", &[]);
    let infos = herder.validate("file-sink".into(), config.clone()).await.unwrap();
    let group_id = infos.configs.iter().find(|c| c.value.name == "consumer.override.group.id").unwrap();
    assert_eq!(infos.error_count, 1, "{:?}", group_id.value);
    assert!(
        group_id.value.errors[0].contains("could not check that group id 'connect-unchecked'"),
        "{:?}",
        group_id.value
    );
    let refused = bad_request(herder.create("unchecked".into(), config, None).await);
    assert!(refused.contains("could not check"), "{refused}");
    herder.shutdown().await.unwrap();
}
