//! Plugins as an operator installs them: several versions side by side,
//! pinned by version range and digest, reloaded, uploaded, and swapped under
//! a running connector without losing or repeating a record.
//!
//! The two builds are `misbehave` 0.1.0 (`target/plugins`) and 0.2.0
//! (`target/plugins-extra`, built with `MISBEHAVE_VERSION`). With
//! `record.version=true` each line it records names the version that wrote it.

mod support;

use spillway::herder::{ConfigMap, Herder, HerderError, State, SwapOutcome, TaskState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::herder::{
    example_plugin, extra_plugin, plugin_dir, start_herder_with_plugins, tasks, wait_running, wait_swaps_settled,
    worker_config,
};
use support::{Broker, assert_each_exactly_once, produce, unique};

/// A plugin directory in `dir` with misbehave 0.1.0, and 0.2.0 if `both`.
fn plugin_dir_with(dir: &Path, both: bool) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(plugin_dir().join("misbehave.wasm"), plugins.join("misbehave.wasm")).unwrap();
    if both {
        std::fs::copy(extra_plugin("misbehave-0.2.0.wasm"), plugins.join("misbehave-0.2.0.wasm")).unwrap();
    }
    plugins
}

/// A herder whose plugin directory (in the temporary directory it comes
/// with) holds misbehave 0.1.0 and 0.2.0.
async fn herder_with_both_builds(broker: &Broker) -> (tempfile::TempDir, Herder) {
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder_with_plugins(broker, dir.path(), &plugin_dir_with(dir.path(), true)).await;
    (dir, herder)
}

/// Where the connectors of a test in `dir` write: a directory of its own,
/// since a connector may not be granted the one that holds the worker's
/// plugins.
fn data_dir(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    data
}

/// A misbehave connector recording `<key>\t<delivery>\t<version>` lines into
/// `dir/data/<name>-keys-<task>.txt`.
fn connector(name: &str, topic: &str, dir: &Path, tasks: u32, extra: &[(&str, &str)]) -> ConfigMap {
    let dir = &data_dir(dir);
    let record_file = dir.join(format!("{name}-keys-{{task}}.txt"));
    let tasks = tasks.to_string();
    let base = [
        ("name", name),
        ("connector.class", "misbehave"),
        ("topics", topic),
        ("tasks.max", &tasks),
        ("plugin.grant.fs.data.path", dir.to_str().unwrap()),
        ("record.file", record_file.to_str().unwrap()),
        ("record.version", "true"),
    ];
    base.iter().chain(extra).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A recorded record: which task wrote it, and in which version.
#[derive(Debug)]
struct Line {
    task: u32,
    key: String,
    delivery: u16,
    version: String,
}

/// Every line the connector's tasks recorded so far, each task's in order.
fn lines(dir: &Path, name: &str) -> Vec<Line> {
    let mut lines = Vec::new();
    for task in 0..8 {
        let Ok(text) = std::fs::read_to_string(data_dir(dir).join(format!("{name}-keys-{task}.txt"))) else { continue };
        // A line still being appended (no newline yet) is read next time.
        for line in text.split_inclusive('\n').filter_map(|l| l.strip_suffix('\n')) {
            let fields: Vec<&str> = line.split('\t').collect();
            assert_eq!(fields.len(), 3, "key<TAB>delivery<TAB>version: {line:?}");
            lines.push(Line {
                task,
                key: fields[0].into(),
                delivery: fields[1].parse().unwrap(),
                version: fields[2].into(),
            });
        }
    }
    lines
}

async fn wait_for_lines(dir: &Path, name: &str, at_least: usize) -> Vec<Line> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = lines(dir, name);
        if got.len() >= at_least {
            return got;
        }
        assert!(Instant::now() < deadline, "{name}: {} of {at_least} records recorded", got.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn versions_of(tasks: &[TaskState]) -> Vec<String> {
    tasks.iter().map(|t| t.plugin.as_ref().expect("a running task names its plugin").version.clone()).collect()
}

fn digest_of(herder_plugins: &[spillway::herder::PluginInfo], version: &str) -> String {
    herder_plugins
        .iter()
        .find(|p| p.class == "misbehave" && p.version == version)
        .expect(version)
        .digest
        .clone()
        .expect("an installed build has a digest")
}

/// The test's producer connects before the tasks join: librdkafka drops its
/// bootstrap connection once it knows the brokers, and librdkafka's mock ends
/// every share session on a broker when any connection to it closes.
async fn warm_up_producer(broker: &Broker) {
    produce(&broker.bootstrap, &unique("warm-up"), 1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
}

fn one(key: &str, value: &str) -> BTreeMap<String, Option<String>> {
    BTreeMap::from([(key.to_string(), Some(value.to_string()))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_live_side_by_side_and_a_connector_picks_one_by_range_and_digest() {
    let broker = Broker::start_or_env();
    let (dir, herder) = herder_with_both_builds(&broker).await;

    let plugins = herder.plugins().await.unwrap();
    let versions: Vec<&str> = plugins.iter().filter(|p| p.class == "misbehave").map(|p| p.version.as_str()).collect();
    assert_eq!(versions, ["0.1.0", "0.2.0"], "both versions are listed, oldest first");
    let (v1, v2) = (digest_of(&plugins, "0.1.0"), digest_of(&plugins, "0.2.0"));
    assert_ne!(v1, v2);

    // Validation blames the key that picks nothing, and says what there is.
    // (Its own name: validation checks the group id on the shared broker,
    // where other tests leave groups such as connect-c behind.)
    let (name, topic) = (unique("pick"), unique("pick"));
    let validate =
        |extra: &[(&str, &str)]| herder.validate("misbehave".into(), connector(&name, &topic, dir.path(), 1, extra));
    let errors_of = |infos: spillway::herder::ConfigInfos, key: &str| -> Vec<String> {
        infos.configs.into_iter().find(|c| c.value.name == key).map(|c| c.value.errors).unwrap_or_default()
    };
    let infos = validate(&[("connector.plugin.version", "^0.3")]).await.unwrap();
    let errors = errors_of(infos, "connector.plugin.version");
    assert!(errors.iter().any(|e| e.contains("matches '^0.3'") && e.contains("installed: 0.1.0, 0.2.0")), "{errors:?}");
    let infos = validate(&[("connector.plugin.version", "banana")]).await.unwrap();
    assert!(errors_of(infos, "connector.plugin.version").iter().any(|e| e.contains("not a semver range")));
    let other = format!("sha256:{}", "0".repeat(64));
    let infos = validate(&[("connector.plugin.digest", &other)]).await.unwrap();
    let errors = errors_of(infos, "connector.plugin.digest");
    assert!(errors.iter().any(|e| e.contains(&other) && e.contains(&v1) && e.contains(&v2)), "{errors:?}");
    let infos = validate(&[("connector.plugin.version", "=0.1.0"), ("connector.plugin.digest", &v1)]).await.unwrap();
    assert_eq!(infos.error_count, 0, "{:?}", infos.configs);

    // KIP-891's ?version= on the config keys.
    assert!(herder.plugin_config("misbehave".into(), Some("=0.1.0".into())).await.is_ok());
    assert!(matches!(herder.plugin_config("misbehave".into(), Some("^7".into())).await, Err(HerderError::NotFound(_))));
    assert!(matches!(
        herder.plugin_config("misbehave".into(), Some("!".into())).await,
        Err(HerderError::BadRequest(_))
    ));

    // Unpinned: the newest. Pinned: the one asked for.
    for (name, extra, expected) in [
        ("newest", vec![], "0.2.0"),
        ("pinned", vec![("connector.plugin.version", "=0.1.0")], "0.1.0"),
        ("by-digest", vec![("connector.plugin.digest", v1.as_str())], "0.1.0"),
    ] {
        herder.create(name.into(), connector(name, &topic, dir.path(), 1, &extra), None).await.unwrap();
        wait_running(&herder, name, 1).await;
        assert_eq!(versions_of(&tasks(&herder, name).await), [expected], "{name}");
    }
    let refused = herder.create(
        "none".into(),
        connector("none", &topic, dir.path(), 1, &[("connector.plugin.digest", &other)]),
        None,
    );
    match refused.await {
        Err(HerderError::BadRequest(message)) => assert!(message.contains("connector.plugin.digest"), "{message}"),
        other => panic!("a digest no file has must be refused: {other:?}"),
    }
    herder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swap_under_load_hands_every_record_to_exactly_one_version_once() {
    let broker = Broker::start_or_env();
    let (dir, herder) = herder_with_both_builds(&broker).await;
    warm_up_producer(&broker).await;
    let topic = unique("swap");
    // Held records, flushed often: a swap must flush what the old build holds.
    let extra = [("mode", "hold"), ("flush.interval.ms", "300"), ("connector.plugin.version", "=0.1.0")];
    herder.create("swap".into(), connector("swap", &topic, dir.path(), 2, &extra), None).await.unwrap();
    wait_running(&herder, "swap", 2).await;
    assert_eq!(versions_of(&tasks(&herder, "swap").await), ["0.1.0", "0.1.0"]);

    // Records flow in before, during and after the swap.
    let bootstrap = broker.bootstrap.clone();
    let producing_topic = topic.clone();
    let producer = tokio::spawn(async move {
        let mut keys = Vec::new();
        for _ in 0..40 {
            keys.extend(produce(&bootstrap, &producing_topic, 100).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        keys
    });
    wait_for_lines(dir.path(), "swap", 600).await;
    herder.patch_config("swap".into(), one("connector.plugin.version", "=0.2.0")).await.unwrap();
    let swapped = wait_swaps_settled(&herder, "swap", Duration::from_secs(60)).await;
    for task in &swapped {
        let swap = task.swap.as_ref().unwrap();
        assert_eq!(swap.outcome, SwapOutcome::Swapped, "task {}: {swap:?}", task.id);
        assert_eq!((swap.from.version.as_str(), swap.to.version.as_str()), ("0.1.0", "0.2.0"));
        assert_eq!(swap.records_put_again, Some(0), "no fault: the old build flushed all it held");
        println!("task {} swapped 0.1.0 -> 0.2.0, pause {} µs", task.id, swap.pause_micros.unwrap());
    }
    let mut keys = producer.await.unwrap();
    // And after it: on a loaded machine a task may swap only once the
    // stream above has ended, and each version must be seen writing.
    for _ in 0..10 {
        keys.extend(produce(&broker.bootstrap, &topic, 100).await);
    }
    assert_eq!(keys.len(), 5000);
    wait_for_lines(dir.path(), "swap", keys.len()).await;
    tokio::time::sleep(Duration::from_secs(2)).await; // late duplicates would show now

    let got = lines(dir.path(), "swap");
    let recorded: Vec<String> = got.iter().map(|l| l.key.clone()).collect();
    // No fault injected: each record is written once, by one version.
    assert_each_exactly_once(&recorded, &keys, "hot swap under load");
    let redelivered: Vec<&Line> = got.iter().filter(|l| l.delivery != 1).collect();
    assert!(redelivered.is_empty(), "the consumer kept its records through the swap: {redelivered:?}");
    for task in 0..2 {
        let versions: Vec<&str> = got.iter().filter(|l| l.task == task).map(|l| l.version.as_str()).collect();
        let first_new = versions.iter().position(|v| *v == "0.2.0").expect("0.2.0 wrote records");
        assert!(first_new > 0, "task {task}: 0.1.0 wrote records before the swap");
        assert!(versions[first_new..].iter().all(|v| *v == "0.2.0"), "task {task}: after the swap, only 0.2.0 writes");
        println!("task {task}: {first_new} records by 0.1.0, {} by 0.2.0", versions.len() - first_new);
    }
    let status = tasks(&herder, "swap").await;
    assert!(status.iter().all(|t| t.state == State::Running), "{status:?}");
    assert_eq!(versions_of(&status), ["0.2.0", "0.2.0"]);
    herder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_swap_to_a_build_that_fails_to_start_rolls_back_and_says_so() {
    let broker = Broker::start_or_env();
    let (dir, herder) = herder_with_both_builds(&broker).await;
    warm_up_producer(&broker).await;
    let topic = unique("rollback");
    let extra = [("fail.start.version", "0.2.0"), ("connector.plugin.version", "=0.1.0")];
    herder.create("rb".into(), connector("rb", &topic, dir.path(), 1, &extra), None).await.unwrap();
    wait_running(&herder, "rb", 1).await;
    let mut keys = produce(&broker.bootstrap, &topic, 100).await;
    wait_for_lines(dir.path(), "rb", 100).await;

    herder.patch_config("rb".into(), one("connector.plugin.version", "=0.2.0")).await.unwrap();
    let settled = wait_swaps_settled(&herder, "rb", Duration::from_secs(60)).await;
    let swap = settled[0].swap.as_ref().unwrap();
    assert_eq!(swap.outcome, SwapOutcome::RolledBack, "{swap:?}");
    assert!(swap.error.as_deref().unwrap().contains("version 0.2.0 refuses to start"), "{swap:?}");
    assert_eq!(settled[0].state, State::Running);
    assert_eq!(versions_of(&settled), ["0.1.0"], "the task runs its old build");

    // And it goes on writing, with the old build.
    keys.extend(produce(&broker.bootstrap, &topic, 100).await);
    wait_for_lines(dir.path(), "rb", 200).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = lines(dir.path(), "rb");
    assert_each_exactly_once(&got.iter().map(|l| l.key.clone()).collect::<Vec<_>>(), &keys, "rolled-back swap");
    assert!(got.iter().all(|l| l.version == "0.1.0"));
    herder.shutdown().await.unwrap();
}

/// A custom section at the end: the component still loads, with the same
/// name and version, but its bytes (and digest) are not the pinned ones.
fn tamper(bytes: &mut Vec<u8>) {
    bytes.extend_from_slice(&[0x00, 0x07, 0x06]);
    bytes.extend_from_slice(b"tamper");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_changed_under_a_digest_pin_is_refused() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugin_dir_with(dir.path(), false);
    let herder = start_herder_with_plugins(&broker, dir.path(), &plugins).await;
    let pinned = digest_of(&herder.plugins().await.unwrap(), "0.1.0");
    let topic = unique("tamper");
    let config = connector("pinned", &topic, dir.path(), 1, &[("connector.plugin.digest", &pinned)]);
    herder.create("pinned".into(), config.clone(), None).await.unwrap();
    wait_running(&herder, "pinned", 1).await;

    let file = plugins.join("misbehave.wasm");
    let mut bytes = std::fs::read(&file).unwrap();
    tamper(&mut bytes);
    std::fs::write(&file, &bytes).unwrap();
    let report = herder.reload_plugins().await.unwrap();
    // The plugin directory's watcher (every 2 s) may have installed it first.
    let by_watcher = report.installed.is_empty() && report.refused.is_empty();
    assert!(report.installed == ["misbehave@0.1.0"] || by_watcher, "{report:?}");
    let now = digest_of(&herder.plugins().await.unwrap(), "0.1.0");
    assert_ne!(now, pinned, "the changed file is installed");

    // A restart resolves the plugin again: the pin no longer matches.
    herder.restart("pinned".into(), true, false).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = herder.status("pinned".into()).await.unwrap();
        if status.connector.state == State::Failed {
            break status;
        }
        assert!(Instant::now() < deadline, "the connector must fail: {status:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let trace = status.connector.trace.unwrap();
    assert!(trace.contains("connector.plugin.digest") && trace.contains(&pinned) && trace.contains(&now), "{trace}");
    match herder
        .create(
            "again".into(),
            connector("again", &topic, dir.path(), 1, &[("connector.plugin.digest", &pinned)]),
            None,
        )
        .await
    {
        Err(HerderError::BadRequest(message)) => assert!(message.contains(&pinned), "{message}"),
        other => panic!("must be refused: {other:?}"),
    }
    herder.shutdown().await.unwrap();
}

/// A component that exports the sink contract at `version`, and nothing else.
fn contract_component(version: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(component (instance $task) (export "spillway:connector/sink-task@{version}" (instance $task)))"#
    ))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_upload_is_checked_then_installed_beside_the_other_versions() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugin_dir_with(dir.path(), false);
    // A cache of its own, to see what refusals leave in it.
    let cache = dir.path().join("cache");
    let runtime = spillway::runtime::Runtime::new(&cache).unwrap();
    let herder = Herder::start(worker_config(&broker.bootstrap, dir.path(), &plugins), runtime).await.unwrap();
    let v2 = std::fs::read(extra_plugin("misbehave-0.2.0.wasm")).unwrap();

    let (created, info) = herder.install_plugin("misbehave".into(), v2.clone()).await.unwrap();
    assert!(created);
    assert_eq!(info.version, "0.2.0");
    assert!(plugins.join("misbehave-0.2.0.wasm").exists(), "installed into the plugin directory");
    let versions: Vec<String> = herder.plugins().await.unwrap().into_iter().map(|p| p.version).collect();
    assert_eq!(versions, ["0.1.0", "0.2.0"]);
    let (created, again) = herder.install_plugin("misbehave".into(), v2.clone()).await.unwrap();
    assert!(!created, "the same build again changes nothing");
    assert_eq!(again.digest, info.digest);

    let refused = |name: &str, bytes: Vec<u8>| {
        let herder = herder.clone();
        let name = name.to_string();
        async move { herder.install_plugin(name, bytes).await.expect_err("must be refused") }
    };
    let message = |e: HerderError| (e.status_code(), e.to_string());
    let (code, text) = message(refused("noop-sink", v2.clone()).await);
    assert_eq!(code, 400);
    assert!(text.contains("is the plugin 'misbehave', not 'noop-sink'"), "{text}");
    let (code, text) = message(refused("misbehave", b"not a component".to_vec()).await);
    assert_eq!(code, 400);
    assert!(text.contains("refused"), "{text}");
    let (code, text) = message(refused("misbehave", contract_component("0.1.0")).await);
    assert_eq!(code, 400);
    assert!(text.contains("built against contract spillway:connector@0.1.0"), "{text}");
    let mut rebuilt = v2.clone();
    tamper(&mut rebuilt);
    let (code, text) = message(refused("misbehave", rebuilt).await);
    assert_eq!(code, 409, "another build under an installed version: {text}");
    let (code, text) = message(refused("misbehave", vec![0; spillway::herder::PLUGIN_UPLOAD_MAX_BYTES + 1]).await);
    assert_eq!(code, 400);
    assert!(text.contains("largest upload"), "{text}");
    // Nothing refused stays compiled: the cache holds the installed builds.
    let installed: BTreeSet<String> = herder.plugins().await.unwrap().into_iter().filter_map(|p| p.digest).collect();
    let cached: BTreeSet<String> = std::fs::read_dir(&cache)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|f| f.ends_with(".cwasm"))
        .map(|f| format!("sha256:{}", f.split('-').next().unwrap()))
        .collect();
    assert_eq!(cached, installed, "compiled code of refused uploads was left in the cache");
    herder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_plugin_directory_is_watched() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let plugins = plugin_dir_with(dir.path(), false);
    let herder = start_herder_with_plugins(&broker, dir.path(), &plugins).await;
    let versions = |herder: Herder| async move {
        herder.plugins().await.unwrap().into_iter().map(|p| p.version).collect::<Vec<_>>()
    };
    let wait_for = |expected: Vec<&'static str>| {
        let herder = herder.clone();
        async move {
            // Patient: a reload compiles (or checks the cached build of)
            // every file, and on a fresh machine the other tests of this
            // binary compile the Python and JavaScript components meanwhile,
            // on wasmtime's one shared pool of compile threads, which takes
            // minutes on 2 cores.
            let deadline = Instant::now() + Duration::from_secs(300);
            loop {
                let now = versions(herder.clone()).await;
                if now == expected {
                    return;
                }
                assert!(Instant::now() < deadline, "plugins {now:?}, expected {expected:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert_eq!(versions(herder.clone()).await, ["0.1.0"]);
    std::fs::copy(extra_plugin("misbehave-0.2.0.wasm"), plugins.join("misbehave-0.2.0.wasm")).unwrap();
    wait_for(vec!["0.1.0", "0.2.0"]).await;
    std::fs::remove_file(plugins.join("misbehave.wasm")).unwrap();
    wait_for(vec!["0.2.0"]).await;
    herder.shutdown().await.unwrap();
}

/// The same check as the Rust file-sink's: a share group of two tasks, and
/// every record written exactly once, as a JSON line with its key.
async fn a_sink_in_another_language_writes_each_record_once(plugin: &str) {
    let broker = Broker::start_or_env();
    warm_up_producer(&broker).await;
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let file = format!("{plugin}.wasm");
    std::fs::copy(example_plugin(&file), plugins.join(&file)).unwrap();
    let herder = start_herder_with_plugins(&broker, dir.path(), &plugins).await;
    let topic = unique(plugin);
    let data = data_dir(dir.path());
    let out = data.join(format!("{plugin}-{{task}}.jsonl"));
    let config: ConfigMap = [
        ("name", plugin),
        ("connector.class", plugin),
        ("topics", &topic),
        ("tasks.max", "2"),
        ("plugin.grant.fs.out.path", data.to_str().unwrap()),
        ("file", out.to_str().unwrap()),
        ("fields", "topic,partition,offset,key,value"),
        ("flush.interval.ms", "500"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    herder.create(plugin.into(), config, None).await.unwrap();
    wait_running(&herder, plugin, 2).await;

    let keys = produce(&broker.bootstrap, &topic, 2000).await;
    let prefix = format!("{plugin}-");
    let deadline = Instant::now() + Duration::from_secs(90);
    while support::file_sink_keys(&data, &prefix).len() < keys.len() {
        assert!(Instant::now() < deadline, "{plugin}: not every record was written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await; // late duplicates would show now
    assert_each_exactly_once(&support::file_sink_keys(&data, &prefix), &keys, plugin);
    herder.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_python_sink_writes_each_record_once() {
    a_sink_in_another_language_writes_each_record_once("python-sink").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_javascript_sink_writes_each_record_once() {
    a_sink_in_another_language_writes_each_record_once("javascript-sink").await;
}

/// One record for the format check, with a value and headers of its own.
fn format_record(
    id: u64,
    topic: &str,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &[(&str, Option<&[u8]>)],
) -> spillway::runtime::batch::SinkRecord {
    use spillway::runtime::batch::{Header, SinkRecord, TimestampType};
    SinkRecord {
        id,
        topic: topic.into(),
        partition: (id % 3) as i32,
        offset: 1_000 + id as i64,
        timestamp: if id % 4 == 3 { -1 } else { 1_700_000_000_000 + id as i64 },
        timestamp_type: if id % 4 == 3 { TimestampType::NoTimestampType } else { TimestampType::CreateTime },
        key: key.map(<[u8]>::to_vec),
        value: value.map(<[u8]>::to_vec),
        headers: headers.iter().map(|(k, v)| Header { key: k.to_string(), value: v.map(<[u8]>::to_vec) }).collect(),
        delivery_count: 1,
        lock_deadline: None,
    }
}

/// The Python and JavaScript sinks write what the Rust file-sink writes,
/// field for field, through every path of their batch-level encoding: a
/// batch of plain ASCII (quoted as it is), one of UTF-8 text (escaped),
/// and one of everything else: bytes that are not UTF-8, null and empty
/// keys and values, quotes, backslashes and control characters, headers
/// with a repeated key and a null value, two topics, no timestamp. Twice:
/// with every field, and with fields that begin and end with quoted text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_and_javascript_sinks_write_what_file_sink_writes() {
    use spillway::capabilities::Grants;
    use spillway::runtime::batch::{FlushScope, Outcome, Settlement};
    use spillway::runtime::{Limits, Runtime};
    let batches = vec![
        (0..20)
            .map(|i| format_record(i, "plain", Some(format!("k{i}").as_bytes()), Some(b"v"), &[]))
            .collect::<Vec<_>>(),
        (20..30)
            .map(|i| {
                let value = format!("caf\u{e9} \u{20ac}{i} \u{1F600} \"q\" \\ \n\t\u{1}");
                format_record(i, "utf8", Some("\u{43a}\u{43b}\u{44e}\u{447}".as_bytes()), Some(value.as_bytes()), &[])
            })
            .collect(),
        vec![
            format_record(
                30,
                "mixed",
                None,
                Some(&[0xff, 0x00, b'A']),
                &[("h", Some(b"1")), ("h", Some(b"2")), ("n", None)],
            ),
            format_record(31, "mixed", Some(b""), Some(b""), &[("k", Some(&[0xc3, 0x28]))]),
            format_record(32, "other", Some(b"tomb"), None, &[]),
            format_record(33, "mixed", Some(b"plain"), Some(b"plain value"), &[]),
        ],
    ];
    let runtime = Runtime::new(&std::env::temp_dir().join("spillway-test-cache")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let grants = Grants::from_config([("plugin.grant.fs.out.path", dir.path().to_str().unwrap())]).unwrap();
    for fields in ["topic,partition,offset,timestamp,key,value,headers", "value,key"] {
        let mut written = Vec::new();
        for (name, wasm) in [
            ("file-sink", plugin_dir().join("file-sink.wasm")),
            ("python-sink", example_plugin("python-sink.wasm")),
            ("javascript-sink", example_plugin("javascript-sink.wasm")),
        ] {
            let plugin = runtime.load_file(&wasm).await.unwrap();
            let mut sink = runtime.instantiate(&plugin, name, &grants, &Limits::default()).await.unwrap();
            let file = dir.path().join(format!("{name}-{fields}.jsonl"));
            // (file-sink has no `fields`, and ignores it.)
            let config = [("file", file.to_str().unwrap()), ("task.id", "0"), ("fields", fields)];
            sink.start(&config.map(|(k, v)| (k.into(), v.into()))).await.unwrap();
            for batch in &batches {
                let report = sink.put(batch).await.unwrap();
                assert_eq!(report.outcomes, vec![Outcome::Hold; batch.len()], "{name}");
            }
            let settled = sink.flush(&FlushScope::All).await.unwrap();
            let ids: Vec<u64> = batches.iter().flatten().map(|r| r.id).collect();
            let expected: Vec<Settlement> = ids.iter().map(|&id| Settlement { id, outcome: Outcome::Accept }).collect();
            assert_eq!(settled, expected, "{name} settles every held record once flushed");
            sink.stop().await.unwrap();
            let lines: Vec<serde_json::Value> = std::fs::read_to_string(&file)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: {e}: {l}")))
                .collect();
            assert_eq!(lines.len(), ids.len(), "{name}");
            written.push((name, lines));
        }
        let (_, rust) = &written[0];
        assert_eq!(
            rust[30]["value"],
            serde_json::json!([255, 0, 65]),
            "bytes that are not UTF-8 are a list of byte values"
        );
        if fields.contains("headers") {
            assert_eq!(rust[30]["headers"], serde_json::json!({"h": "2", "n": null}));
        }
        for (name, lines) in &written[1..] {
            for (i, (theirs, ours)) in lines.iter().zip(rust).enumerate() {
                // file-sink writes every field: the ones asked for, of it.
                let ours: serde_json::Map<_, _> = fields.split(',').map(|f| (f.to_string(), ours[f].clone())).collect();
                assert_eq!(theirs, &serde_json::Value::Object(ours), "{name}, fields {fields}, line {i}");
            }
        }
    }
}
