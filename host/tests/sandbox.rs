//! The runtime against real plugin components: loading, batches, the sandbox,
//! and failures that must fail only their own instance.
//!
//! Needs the plugins built by `scripts/build-plugins.sh`.

use spillway::capabilities::Grants;
use spillway::runtime::batch::{FlushScope, Header, Outcome, SinkRecord, TaskError, TimestampType};
use spillway::runtime::{Limits, Plugin, PluginError, PluginInstance, Runtime};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

fn plugin_path(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins").join(format!("{name}.wasm"));
    assert!(path.exists(), "{} is missing: run scripts/build-plugins.sh", path.display());
    path
}

/// One runtime for the whole file: compiling a component takes a while.
fn runtime() -> &'static Runtime {
    static RUNTIME: OnceLock<Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap().keep();
        Runtime::new(&dir).unwrap()
    })
}

async fn load(name: &str) -> Plugin {
    runtime().load_file(&plugin_path(name)).await.unwrap()
}

/// Grants as a connector config spells them.
fn grants(pairs: &[(&str, &str)]) -> Grants {
    Grants::from_config(pairs.iter().copied()).unwrap()
}

fn dir_grant(dir: &Path) -> Grants {
    grants(&[("plugin.grant.fs.test.path", dir.to_str().unwrap())])
}

fn record(offset: i64) -> SinkRecord {
    SinkRecord {
        id: offset as u64,
        topic: "t".into(),
        partition: 0,
        offset,
        timestamp: 1_700_000_000_000,
        timestamp_type: TimestampType::CreateTime,
        key: Some(format!("k{offset}").into_bytes()),
        value: Some(vec![b'v'; 100]),
        headers: vec![Header { key: "h".into(), value: None }],
        delivery_count: 1,
        lock_deadline: None,
    }
}

fn pairs(config: &[(&str, &str)]) -> Vec<(String, String)> {
    config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn started(plugin: &Plugin, config: &[(&str, &str)], grants: &Grants, limits: &Limits) -> PluginInstance {
    let mut instance = runtime().instantiate(plugin, "test", grants, limits).await.unwrap();
    instance.start(&pairs(config)).await.unwrap();
    instance
}

async fn misbehave_with(mode: &str, extra: &[(&str, &str)], grants: &Grants, limits: &Limits) -> PluginInstance {
    let mut config = vec![("mode", mode)];
    config.extend_from_slice(extra);
    started(&load("misbehave").await, &config, grants, limits).await
}

async fn misbehave(mode: &str, extra: &[(&str, &str)], grants: &Grants) -> PluginInstance {
    misbehave_with(mode, extra, grants, &Limits::default()).await
}

/// What a probing mode of the misbehave plugin saw.
async fn probe(mode: &str, extra: &[(&str, &str)], grants: &Grants) -> String {
    let report = misbehave(mode, extra, grants).await.put(&[record(0)]).await.unwrap();
    match &report.outcomes[..] {
        [Outcome::Reject(seen)] => seen.clone(),
        other => panic!("probe {mode} gave {other:?}"),
    }
}

#[tokio::test]
async fn a_component_loads_and_receives_a_batch() {
    let plugin = load("misbehave").await;
    assert_eq!(plugin.metadata.name, "misbehave");
    assert!(plugin.digest.starts_with("sha256:"));
    let mut instance = started(&plugin, &[("mode", "reject-odd")], &Grants::default(), &Limits::default()).await;
    let batch: Vec<SinkRecord> = (0..6).map(record).collect();
    let report = instance.put(&batch).await.unwrap();
    // The outcome depends on each record's offset: the batch arrived intact.
    assert_eq!(report.outcomes.len(), 6);
    for (r, outcome) in batch.iter().zip(&report.outcomes) {
        match outcome {
            Outcome::Accept => assert_eq!(r.offset % 2, 0),
            Outcome::Reject(reason) => assert_eq!(reason, &format!("odd offset {}", r.offset)),
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_file_sink_holds_records_until_flush_and_writes_only_its_granted_dir() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out-{task}.jsonl");
    let config = [("file", file.to_str().unwrap()), ("task.id", "3")];
    let mut sink = started(&load("file-sink").await, &config, &dir_grant(dir.path()), &Limits::default()).await;
    let report = sink.put(&[record(0), record(1)]).await.unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Hold)), "{report:?}");
    let written = dir.path().join("out-3.jsonl");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "", "nothing is written before flush");
    let settled = sink.flush(&FlushScope::All).await.unwrap();
    let ids: Vec<u64> = settled.iter().map(|s| s.id).collect();
    assert_eq!(ids, vec![0, 1]);
    assert!(settled.iter().all(|s| matches!(s.outcome, Outcome::Accept)));
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&written).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1]["key"], "k1");
    assert_eq!(lines[1]["offset"], 1);

    // The same plugin without the grant cannot open the file.
    let mut ungranted =
        runtime().instantiate(&load("file-sink").await, "test", &Grants::default(), &Limits::default()).await.unwrap();
    let err = ungranted.start(&pairs(&[("file", file.to_str().unwrap())])).await.unwrap_err();
    assert!(err.to_string().contains("cannot open"), "{err}");
}

#[tokio::test]
async fn files_outside_the_grants_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "do not read").unwrap();
    let path = secret.to_str().unwrap();
    let seen = probe("read-file", &[("path", path)], &Grants::default()).await;
    assert!(seen.starts_with("refused"), "{seen}");
    let target = dir.path().join("escape");
    let seen = probe("write-file", &[("path", target.to_str().unwrap())], &Grants::default()).await;
    assert!(seen.starts_with("refused"), "{seen}");
    assert!(!target.exists());

    // Granting the directory makes the same probe succeed: the test can fail.
    assert_eq!(probe("read-file", &[("path", path)], &dir_grant(dir.path())).await, "read 11 bytes");
    // A read-only grant reads but does not write.
    let read_only = grants(&[
        ("plugin.grant.fs.test.path", dir.path().to_str().unwrap()),
        ("plugin.grant.fs.test.read-only", "true"),
    ]);
    assert_eq!(probe("read-file", &[("path", path)], &read_only).await, "read 11 bytes");
    let seen = probe("write-file", &[("path", target.to_str().unwrap())], &read_only).await;
    assert!(seen.starts_with("refused"), "{seen}");
    assert!(!target.exists());
    assert_eq!(probe("write-file", &[("path", target.to_str().unwrap())], &dir_grant(dir.path())).await, "wrote");
}

#[tokio::test]
async fn sockets_outside_the_grants_are_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let target = addr.to_string();
    let seen = probe("connect", &[("addr", &target)], &Grants::default()).await;
    assert!(seen.starts_with("refused"), "{seen}");

    let granted = grants(&[("plugin.grant.net.test.connect", &target)]);
    assert_eq!(probe("connect", &[("addr", &target)], &granted).await, "connected");
    // Granting one address grants no other.
    let other = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    assert!(probe("connect", &[("addr", &other)], &granted).await.starts_with("refused"));
}

#[tokio::test]
async fn the_environment_needs_a_grant() {
    // SAFETY: set once, before any thread of this test reads it.
    unsafe { std::env::set_var("SPILLWAY_TEST_SECRET", "x") };
    assert_eq!(probe("env", &[], &Grants::default()).await, "env vars: 0");
    let with_env = grants(&[("plugin.grant.env.api-url.value", "http://x")]);
    assert_eq!(probe("env", &[], &with_env).await, "env vars: 1");
}

#[tokio::test]
async fn clocks_and_randomness_are_real_unless_the_connector_asks_for_determinism() {
    let clock = probe("clock", &[], &Grants::default()).await;
    let secs: u64 = clock.strip_prefix("clock secs: ").unwrap().parse().unwrap();
    assert!(secs > 1_600_000_000, "{clock}");
    // Two tasks that name objects by random bytes must not collide.
    assert_ne!(probe("random", &[], &Grants::default()).await, probe("random", &[], &Grants::default()).await);

    let deterministic = grants(&[("plugin.deterministic", "true")]);
    assert_eq!(probe("clock", &[], &deterministic).await, "clock secs: 0");
    let fixed = probe("random", &[], &deterministic).await;
    assert_eq!(fixed, probe("random", &[], &deterministic).await, "reproducible: a fixed stream");
}

/// After a failing instance, a fresh one of the same plugin still works: the
/// failure stayed inside its own store.
async fn assert_runtime_still_serves() {
    let mut healthy = misbehave("accept", &[], &Grants::default()).await;
    let report = healthy.put(&[record(0), record(1)]).await.unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Accept)));
}

/// Counts the events of the plugins' log target.
struct PluginLines(Arc<AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for PluginLines {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.metadata().target() == "spillway::plugin" {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A plugin that writes 10,000 lines in one call gets no more than the log
/// budget's rate (`policy.plugin.log.lines.per.second`, 20 here) to the
/// worker's log (its stderr and its log capability share one budget), and
/// its call still succeeds.
#[tokio::test]
async fn a_plugin_flooding_its_log_is_held_to_the_rate() {
    use tracing_subscriber::layer::SubscriberExt;
    let lines = Arc::new(AtomicUsize::new(0));
    let _counting = tracing::subscriber::set_default(tracing_subscriber::registry().with(PluginLines(lines.clone())));
    let mut grants = Grants::default();
    grants.bounds.log_lines_per_second = 20;
    let mut instance = misbehave("log-flood", &[], &grants).await;
    let began = std::time::Instant::now();
    let report = instance.put(&[record(0)]).await.unwrap();
    let seconds = began.elapsed().as_secs_f64();
    assert!(matches!(report.outcomes[..], [Outcome::Accept]), "{report:?}");
    // A full bucket, what refilled while the call ran, and a line a second
    // that says how many were dropped.
    let rate = f64::from(grants.bounds.log_lines_per_second);
    let most = (rate + (seconds * rate).ceil() + seconds.ceil()) as usize + 1;
    let written = lines.load(Ordering::Relaxed);
    assert!(written <= most, "{written} of 10,000 lines reached the log in {seconds:.2} s; the budget allows {most}");
    assert!(written >= grants.bounds.log_lines_per_second as usize, "{written} lines: the first ones belong");
}

#[tokio::test]
async fn a_panic_fails_its_instance_with_the_plugins_message() {
    let mut instance = misbehave("panic", &[], &Grants::default()).await;
    let err = instance.put(&[record(0)]).await.unwrap_err();
    assert!(matches!(err, PluginError::Trap(_)), "{err:?}");
    assert!(err.to_string().contains("misbehave panicked on purpose"), "{err}");
    assert!(matches!(instance.put(&[record(0)]).await.unwrap_err(), PluginError::Poisoned));
    assert_runtime_still_serves().await;
}

#[tokio::test]
async fn a_trap_fails_its_instance() {
    let err = misbehave("trap", &[], &Grants::default()).await.put(&[record(0)]).await.unwrap_err();
    assert!(matches!(err, PluginError::Trap(_)), "{err:?}");
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert_runtime_still_serves().await;
}

#[tokio::test]
async fn a_memory_bomb_hits_its_limit() {
    let limits = Limits { memory_bytes: 64 << 20, ..Limits::default() };
    let mut instance = misbehave_with("oom", &[], &Grants::default(), &limits).await;
    let err = instance.put(&[record(0)]).await.unwrap_err();
    assert!(matches!(err, PluginError::OutOfMemory { limit_bytes } if limit_bytes == 64 << 20), "{err:?}");
    assert!(instance.memory_bytes() <= 64 << 20);
    assert_runtime_still_serves().await;
}

/// A misbehave mode, its config, and its grants.
type Stuck<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a Grants);

/// A plugin stuck three ways: spinning in wasm, asleep in a WASI call, and
/// blocked reading a granted socket whose peer never answers. Each is ended
/// by its call timeout, and each by a task stop long before that timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_call_ends_at_its_timeout_and_at_a_stop_wherever_it_is_stuck() {
    // Accepts and then says nothing: a read from it blocks forever.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let net = grants(&[("plugin.grant.net.peer.connect", &addr)]);
    let stuck: [Stuck; 3] = [
        ("loop", vec![], &Grants::default()),
        ("accept-slowly", vec![("delay.ms", "600000")], &Grants::default()),
        ("read-socket", vec![("addr", &addr)], &net),
    ];
    for (mode, extra, grants) in &stuck {
        // The call timeout ends it.
        let limits = Limits { call_timeout: Duration::from_millis(300), ..Limits::default() };
        let mut instance = misbehave_with(mode, extra, grants, &limits).await;
        let started = Instant::now();
        let err = instance.put(&[record(0)]).await.unwrap_err();
        assert!(matches!(err, PluginError::Timeout { limit_ms: 300 }), "{mode}: {err:?}");
        assert!(started.elapsed() < Duration::from_secs(20), "{mode}: the timeout took {:?}", started.elapsed());
        assert!(matches!(instance.put(&[record(0)]).await.unwrap_err(), PluginError::Poisoned));

        // A stop ends it, with a call timeout far away.
        let mut instance = misbehave_with(mode, extra, grants, &Limits::default()).await;
        let stop = CancellationToken::new();
        instance.interrupt_on(Some(stop.clone()));
        let stopper = tokio::spawn({
            let stop = stop.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                stop.cancel();
            }
        });
        let started = Instant::now();
        let err = instance.put(&[record(0)]).await.unwrap_err();
        assert!(matches!(err, PluginError::Interrupted), "{mode}: {err:?}");
        assert!(
            started.elapsed() < Limits::default().call_timeout / 2,
            "{mode}: the stop took {:?}",
            started.elapsed()
        );
        stopper.await.unwrap();
        assert_runtime_still_serves().await;
    }
}

#[tokio::test]
async fn compiled_plugins_are_cached_on_disk_by_digest() {
    let dir = tempfile::tempdir().unwrap();
    let first = Runtime::new(dir.path()).unwrap();
    let plugin = first.load_file(&plugin_path("noop-sink")).await.unwrap();
    assert_eq!(first.compilations(), 1);
    first.load_file(&plugin_path("noop-sink")).await.unwrap();
    assert_eq!(first.compilations(), 1, "the second load is served from memory");
    let hex = plugin.digest.strip_prefix("sha256:").unwrap();
    let cached: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(cached.iter().any(|f| f.starts_with(hex) && f.ends_with(".cwasm")), "{cached:?}");

    // A restarted host (a new engine) loads it without compiling.
    let restarted = Runtime::new(dir.path()).unwrap();
    let again = restarted.load_file(&plugin_path("noop-sink")).await.unwrap();
    assert_eq!(restarted.compilations(), 0);
    assert_eq!(again.digest, plugin.digest);

    // Deserializing runs native code unchecked: an entry changed behind the
    // host's back (here one byte) is never loaded, but compiled again.
    let entry = dir.path().join(cached.iter().find(|f| f.ends_with(".cwasm")).unwrap());
    let mut bytes = std::fs::read(&entry).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let after_tampering = Runtime::new(dir.path()).unwrap();
    after_tampering.load_file(&plugin_path("noop-sink")).await.unwrap();
    assert_eq!(after_tampering.compilations(), 1, "a changed entry is compiled again, not deserialized");
    assert_ne!(std::fs::read(&entry).unwrap(), bytes, "and replaced");
}

/// A component that exports the sink-task instance at `version` and imports
/// `imports` (instances with no functions): enough for the checks.
fn component(version: &str, imports: &[&str]) -> Vec<u8> {
    let imports: String = imports.iter().map(|i| format!("(import \"{i}\" (instance))\n")).collect();
    let wat = format!(
        r#"(component
        {imports}
        (instance $task)
        (export "spillway:connector/sink-task@{version}" (instance $task))
    )"#
    );
    wat::parse_str(wat).unwrap()
}

#[tokio::test]
async fn a_component_importing_an_unknown_capability_is_refused_by_name() {
    let bytes = component(spillway::runtime::CONTRACT_VERSION, &["spillway:teleport/beam@0.1.0"]);
    let err = runtime().load(bytes).await.err().expect("must be refused");
    let chain = format!("{err:#}");
    assert!(
        chain.contains("imports 'spillway:teleport/beam@0.1.0', a capability this host does not provide"),
        "{chain}"
    );
}

#[tokio::test]
async fn a_plugin_built_against_another_contract_version_is_refused_naming_both() {
    // 0.3.0 is the contract before columnar batches: its plugins take a
    // list of records, which this host no longer gives.
    for old in ["0.1.0", "0.3.0"] {
        let err = runtime().load(component(old, &[])).await.err().expect("must be refused");
        let chain = format!("{err:#}");
        assert!(chain.contains(&format!("built against contract spillway:connector@{old}")), "{chain}");
        assert!(
            chain.contains(&format!("speaks spillway:connector@{}", spillway::runtime::CONTRACT_VERSION)),
            "{chain}"
        );
    }

    // The same rule for each capability package: a newer one is refused.
    let err = runtime()
        .load(component(spillway::runtime::CONTRACT_VERSION, &["spillway:log/log@0.1.9"]))
        .await
        .err()
        .expect("must be refused");
    let chain = format!("{err:#}");
    assert!(chain.contains("imports spillway:log/log@0.1.9, but this host speaks spillway:log/log@0.1.0"), "{chain}");
}

#[tokio::test]
async fn a_plugin_importing_an_ungranted_capability_fails_to_start_naming_it() {
    // It loads (metadata and validation need no grants)...
    let plugin = load("object-sink").await;
    assert_eq!(plugin.metadata.name, "object-sink");
    // ...but no task starts without the grant.
    let err = runtime().instantiate(&plugin, "test", &Grants::default(), &Limits::default()).await.err().unwrap();
    let message = format!("{err:#}");
    assert!(message.contains("imports 'spillway:object-store/buckets@0.1.1'"), "{message}");
    assert!(message.contains("grants no object-store"), "{message}");
}

fn bucket_grant(dir: &Path) -> Grants {
    grants(&[("plugin.grant.object-store.out.url", &format!("file://{}/bucket", dir.display()))])
}

#[tokio::test]
async fn the_object_sink_writes_through_its_grant_and_nowhere_else() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = load("object-sink").await;
    let mut sink = started(&plugin, &[("bucket", "out")], &bucket_grant(dir.path()), &Limits::default()).await;
    let report = sink.put(&(0..3).map(record).collect::<Vec<_>>()).await.unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Accept)), "{report:?}");
    let object = dir.path().join("bucket/t/0/0-2.jsonl");
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&object).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let offsets: Vec<i64> = lines.iter().map(|l| l["offset"].as_i64().unwrap()).collect();
    assert_eq!(offsets, vec![0, 1, 2]);

    // A path reaching past the granted prefix is a fatal error, not a write.
    let mut escaping =
        started(&plugin, &[("path.prefix", "../escape/")], &bucket_grant(dir.path()), &Limits::default()).await;
    let err = escaping.put(&[record(0)]).await.unwrap_err();
    assert!(matches!(&err, PluginError::Task(TaskError::Fatal(m)) if m.contains("not an object path")), "{err:?}");
    assert!(!dir.path().join("escape").exists());

    // A grant name the connector did not grant fails the start, naming what was granted.
    let mut other =
        runtime().instantiate(&plugin, "test", &bucket_grant(dir.path()), &Limits::default()).await.unwrap();
    let err = other.start(&pairs(&[("bucket", "archive")])).await.unwrap_err();
    assert!(err.to_string().contains("no object-store grant named 'archive' (granted: out)"), "{err}");

    // Every operation was counted.
    let ops = runtime().capability_metrics().snapshot();
    let put = ops.iter().find(|(k, _)| k.capability == "object-store" && k.op == "put").expect("put counted");
    assert!(put.1.ok >= 1 && put.1.bytes > 0, "{put:?}");
}

/// The host's secrets (a grant's credentials, and keys whose names say they
/// are secrets and the plugin does not declare) stay in the host: the config
/// a task's plugin is given lacks them, and keeps every other key.
#[tokio::test]
async fn a_tasks_plugin_is_not_given_the_hosts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("file://{}", dir.path().display());
    let raw: std::collections::BTreeMap<String, String> = [
        ("name", "secretive"),
        ("connector.class", "misbehave"),
        ("topics", "t"),
        ("mode", "config-keys"),
        ("plugin.grant.object-store.a.url", url.as_str()),
        ("plugin.grant.object-store.a.access.key.id", "AKIAEXAMPLE"),
        ("plugin.grant.object-store.a.secret.access.key", "s3cret"),
        // A key no table declares whose name says it is a secret (a Connect
        // config's, say): the plugin does not declare it, so it is not given.
        ("connection.password", "pw"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let config = spillway::connector::ConnectorConfig::parse(&raw, &Default::default()).unwrap();
    let (runtime, plugin) = (runtime(), load("misbehave").await);
    let (mut instance, _) = spillway::task::start_instance(runtime, &plugin, &config, 0, "127.0.0.1:9").await.unwrap();
    let report = instance.put(&[record(0)]).await.unwrap();
    let [Outcome::Reject(seen)] = &report.outcomes[..] else { panic!("{:?}", report.outcomes) };
    let keys: Vec<&str> = seen.strip_prefix("config keys: ").unwrap().split(',').collect();
    assert!(keys.contains(&"plugin.grant.object-store.a.access.key.id") && keys.contains(&"mode"), "{keys:?}");
    assert!(keys.contains(&"task.id"), "{keys:?}");
    assert!(!keys.contains(&"plugin.grant.object-store.a.secret.access.key"), "{keys:?}");
    assert!(!keys.contains(&"connection.password"), "{keys:?}");
}
