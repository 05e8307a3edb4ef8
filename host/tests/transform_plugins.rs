//! Transform plugins: components of the `transform` world, written in Rust,
//! Python and JavaScript (the `*-redact` examples), chained before a real
//! sink on a real broker, checked by the host as a connector's plugin is,
//! and hot-swapped under load.

mod support;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::Value;
use spillway::herder::{ConfigMap, HerderError, SwapOutcome, TaskState};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::cluster::{create_topic, read_all};
use support::herder::{example_plugin, plugin_dir, start_herder_with_plugins, tasks, wait_running, wait_swaps_settled};
use support::{Broker, Produce, S3Server, assert_each_exactly_once, produce_records, s3_server, unique};

const REDACT_TYPES: [&str; 3] = ["rust-redact", "python-redact", "javascript-redact"];

/// A plugin directory with the S3 sink and the three redact transforms
/// (python-redact in 0.1.0 and 0.2.0).
fn plugins_in(dir: &Path) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(plugin_dir().join("s3-sink.wasm"), plugins.join("s3-sink.wasm")).unwrap();
    for file in ["rust-redact.wasm", "python-redact.wasm", "python-redact-0.2.0.wasm", "javascript-redact.wasm"] {
        std::fs::copy(example_plugin(file), plugins.join(file)).unwrap();
    }
    plugins
}

fn config_of(pairs: &[(&str, &str)]) -> ConfigMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// An S3 sink on `topic` behind three transforms, one per language, each
/// redacting a field of its own: Python's (pinned to `python_version`)
/// first, which also stamps each value with its build in `_by`.
fn connector(s3: &S3Server, name: &str, topic: &str, bucket: &str, dlq: &str, python_version: &str) -> ConfigMap {
    let mut config = config_of(&[
        ("name", name),
        ("connector.class", "s3-sink"),
        ("topics", topic),
        ("tasks.max", "2"),
        ("format.class", "json"),
        ("flush.size", "100"),
        ("flush.interval.ms", "1000"),
        ("insert.offset.field", "__offset"),
        ("insert.partition.field", "__partition"),
        ("transforms", "py,rs,js"),
        ("transforms.py.type", "python-redact"),
        ("transforms.py.version", python_version),
        ("transforms.py.fields", "email"),
        ("transforms.py.lineage.field", "_by"),
        ("transforms.rs.type", "rust-redact"),
        ("transforms.rs.fields", "ssn"),
        ("transforms.js.type", "javascript-redact"),
        ("transforms.js.fields", "phone"),
        ("transforms.js.replacement", "XXX"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ]);
    config.extend(s3.grant("s3", bucket, name));
    config
}

/// Record `i` of a stream: a JSON person, except every 500th, which is not
/// JSON (the transforms cannot read it).
fn record(topic: &str, i: usize) -> Produce {
    let key = format!("{topic}-{i}");
    let value = if i % 500 == 499 {
        format!("not json {i}").into_bytes()
    } else {
        serde_json::json!({"id": key, "email": format!("p{i}@example.com"), "ssn": "123-45-6789", "phone": "555"})
            .to_string()
            .into_bytes()
    };
    Produce { partition: Some((i % 2) as i32), key, value, timestamp: None }
}

/// Every row of every data object under `prefix` (JSON lines).
async fn rows(s3: &S3Server, bucket: &str, prefix: &str) -> Vec<Value> {
    let store = s3.bucket(bucket);
    let metas: Vec<_> = store.list(Some(&ObjectPath::from(prefix))).try_collect().await.unwrap();
    let mut rows = Vec::new();
    for meta in metas.iter().filter(|m| m.location.as_ref().ends_with(".json")) {
        let bytes = store.get(&meta.location).await.unwrap().bytes().await.unwrap();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        rows.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("{l}: {e}"))));
    }
    rows
}

async fn wait_for_rows(s3: &S3Server, bucket: &str, prefix: &str, at_least: usize) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let got = rows(s3, bucket, prefix).await;
        if got.len() >= at_least {
            return got;
        }
        assert!(Instant::now() < deadline, "{prefix}: {} of {at_least} rows written", got.len());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// The python-redact build each task runs, as its status says.
fn python_builds(tasks: &[TaskState]) -> Vec<String> {
    let build = |t: &TaskState| {
        let plugin = t.plugin.as_ref().expect("a running task names its builds");
        let py = plugin.transforms.iter().find(|b| b.alias == "py").expect("the py stage's build");
        assert_eq!(py.plugin, "python-redact");
        py.version.clone()
    };
    tasks.iter().map(build).collect()
}

/// The whole path: a stream of 4000 records through Python, Rust and
/// JavaScript transforms into S3 objects, with the Python stage moved from
/// 0.1.0 to 0.2.0 while records flow. No fault is injected: each JSON record
/// lands exactly once, redacted by all three stages, stamped by one Python
/// build (0.1.0 before the swap, 0.2.0 after, in each partition's order);
/// each of the 8 unreadable records is dead-lettered once, naming the
/// Python stage.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_python_transform_before_the_s3_sink_swaps_under_load_and_loses_nothing() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder_with_plugins(&broker, dir.path(), &plugins_in(dir.path())).await;
    let topic = unique("redact");
    create_topic(&broker.bootstrap, &topic, 2).await;
    let (bucket, dlq) = (s3.new_bucket("redact"), unique("redact-dlq"));
    let name = "redact";
    herder.create(name.into(), connector(s3, name, &topic, &bucket, &dlq, "=0.1.0"), None).await.unwrap();
    wait_running(&herder, name, 2).await;
    assert_eq!(python_builds(&tasks(&herder, name).await), ["0.1.0", "0.1.0"]);

    let total = 4000;
    let bootstrap = broker.bootstrap.clone();
    let producing = topic.clone();
    let producer = tokio::spawn(async move {
        for chunk in 0..30 {
            let records: Vec<Produce> = (chunk * 100..(chunk + 1) * 100).map(|i| record(&producing, i)).collect();
            produce_records(&bootstrap, &producing, &records).await;
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
    });
    wait_for_rows(s3, &bucket, name, 600).await;
    let pin = [("transforms.py.version".to_string(), Some("=0.2.0".to_string()))].into();
    herder.patch_config(name.into(), pin).await.unwrap();
    for task in wait_swaps_settled(&herder, name, Duration::from_secs(120)).await {
        let swap = task.swap.as_ref().unwrap();
        assert_eq!(swap.outcome, SwapOutcome::Swapped, "task {}: {swap:?}", task.id);
        assert_eq!(swap.from.version, swap.to.version, "the sink's build stays");
        assert_eq!(swap.records_put_again, Some(0), "a transform swap drains nothing");
        println!("task {} swapped python-redact 0.1.0 -> 0.2.0, pause {} µs", task.id, swap.pause_micros.unwrap());
    }
    assert_eq!(python_builds(&tasks(&herder, name).await), ["0.2.0", "0.2.0"]);
    producer.await.unwrap();
    // And after it: on a loaded machine the swap may take effect only once
    // the stream above has ended, and each build must be seen at work.
    let after: Vec<Produce> = (3000..total).map(|i| record(&topic, i)).collect();
    produce_records(&broker.bootstrap, &topic, &after).await;

    let unreadable: Vec<String> = (0..total).filter(|i| i % 500 == 499).map(|i| format!("{topic}-{i}")).collect();
    let expected: Vec<String> =
        (0..total).map(|i| format!("{topic}-{i}")).filter(|k| !unreadable.contains(k)).collect();
    wait_for_rows(s3, &bucket, name, expected.len()).await;
    tokio::time::sleep(Duration::from_secs(3)).await; // a late duplicate would show now
    let rows = rows(s3, &bucket, name).await;
    let ids: Vec<String> = rows.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect();
    assert_each_exactly_once(&ids, &expected, "through three transforms and a swap");
    for row in &rows {
        assert_eq!((&row["email"], &row["ssn"], &row["phone"]), (&"****".into(), &"****".into(), &"XXX".into()));
    }
    // Per partition, in offset order: 0.1.0's stamps, then only 0.2.0's.
    let mut by_partition: BTreeMap<i64, Vec<(i64, String)>> = BTreeMap::new();
    for row in &rows {
        let stamp = row["_by"].as_str().unwrap().to_string();
        by_partition
            .entry(row["__partition"].as_i64().unwrap())
            .or_default()
            .push((row["__offset"].as_i64().unwrap(), stamp));
    }
    for (partition, mut stamps) in by_partition {
        stamps.sort();
        let builds: Vec<&str> = stamps.iter().map(|(_, s)| s.as_str()).collect();
        let first_new = builds.iter().position(|b| *b == "python-redact/0.2.0").expect("0.2.0 transformed records");
        assert!(first_new > 0, "partition {partition}: 0.1.0 transformed records before the swap");
        assert!(builds[..first_new].iter().all(|b| *b == "python-redact/0.1.0"), "partition {partition}");
        assert!(builds[first_new..].iter().all(|b| *b == "python-redact/0.2.0"), "partition {partition}");
        println!("partition {partition}: {first_new} by 0.1.0, {} by 0.2.0", builds.len() - first_new);
    }

    let dead = read_all(&broker.bootstrap, &dlq, "read_uncommitted");
    let dead_keys: Vec<String> = dead.iter().map(|r| r.key.clone()).collect();
    assert_each_exactly_once(&dead_keys, &unreadable, "dead-lettered");
    for record in &dead {
        let header = |name: &str| {
            let value = record.headers.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.clone());
            String::from_utf8(value.unwrap_or_default()).unwrap()
        };
        assert_eq!(header("__connect.errors.stage"), "TRANSFORMATION");
        assert_eq!(header("__connect.errors.class.name"), "python-redact");
        assert_eq!(header("__connect.errors.exception.message"), "the value is not a JSON object");
        assert!(record.value.as_deref().unwrap().starts_with(b"not json"), "the record as consumed");
    }
    herder.shutdown().await.unwrap();
}

/// A transform plugin's settings are checked as a connector's are, under
/// `transforms.<alias>.`; its version pin must match a build; it is no
/// connector; `GET /connector-plugins` lists it only when asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transform_plugin_is_checked_pinned_and_listed_as_connect_does() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder_with_plugins(&broker, dir.path(), &plugins_in(dir.path())).await;
    let s3 = s3_server();
    let base = connector(s3, "checked", &unique("checked"), "nowhere", &unique("dlq"), "0.1");
    let refused = |changes: &[(&str, Option<&str>)]| {
        let mut config = base.clone();
        for (key, value) in changes {
            match value {
                Some(v) => config.insert(key.to_string(), v.to_string()),
                None => config.remove(*key),
            };
        }
        let herder = &herder;
        async move {
            match herder.create("checked".into(), config, None).await {
                Err(HerderError::BadRequest(message)) => message,
                other => panic!("not refused: {other:?}"),
            }
        }
    };
    let missing = refused(&[("transforms.rs.fields", None)]).await;
    assert!(missing.contains("transforms.rs.fields: Missing required configuration"), "{missing}");
    let stray = refused(&[("transforms.js.fieldz", Some("x"))]).await;
    assert!(stray.contains("transforms.js.fieldz: javascript-redact has no key fieldz"), "{stray}");
    let own = refused(&[("transforms.py.fields", Some(" , "))]).await;
    assert!(own.contains("transforms.py.fields: name at least one field to redact"), "{own}");
    let pinned = refused(&[("transforms.py.version", Some("=0.3.0"))]).await;
    assert!(
        pinned.contains("transforms.py.version: no installed version of plugin 'python-redact' matches '=0.3.0'"),
        "{pinned}"
    );
    let not_a_sink = refused(&[("connector.class", Some("rust-redact"))]).await;
    assert!(not_a_sink.contains("'rust-redact' is a transform plugin"), "{not_a_sink}");
    let not_a_transform = refused(&[("transforms.rs.type", Some("s3-sink"))]).await;
    assert!(not_a_transform.contains("transforms.rs.type"), "{not_a_transform}");
    // Each plugin stage is an instance per task: the worker's policy caps
    // them (4 by default); built-ins do not count.
    let mut five = vec![("transforms", Some("py,rs,js,rs2,rs3"))];
    for alias in ["rs2", "rs3"] {
        five.push((if alias == "rs2" { "transforms.rs2.type" } else { "transforms.rs3.type" }, Some("rust-redact")));
        five.push((if alias == "rs2" { "transforms.rs2.fields" } else { "transforms.rs3.fields" }, Some("id")));
    }
    let too_many = refused(&five).await;
    assert!(
        too_many
            .contains("transforms: 5 transform plugin stages, and the worker's policy.transform.plugins.max allows 4"),
        "{too_many}"
    );

    let listed = herder.plugins().await.unwrap();
    let mut kinds: Vec<(String, String)> = listed.iter().map(|p| (p.class.clone(), p.kind.clone())).collect();
    kinds.sort();
    kinds.dedup();
    let mut expected: Vec<(String, String)> =
        REDACT_TYPES.iter().map(|t| (t.to_string(), "transformation".to_string())).collect();
    expected.push(("s3-sink".into(), "sink".into()));
    expected.sort();
    assert_eq!(kinds, expected);
    let keys = herder.plugin_config("python-redact".into(), None).await.unwrap();
    let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["fields", "replacement", "lineage.field"], "a transform's own keys only");
    herder.shutdown().await.unwrap();
}
