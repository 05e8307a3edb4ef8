//! The runtime against real plugin components: loading, batches, the sandbox,
//! and failures that must fail only their own instance.
//!
//! Needs the plugins built by `scripts/build-plugins.sh`.

use spillway::capabilities::Grants;
use spillway::runtime::bindings::{FlushScope, Header, Outcome, SinkRecord, TimestampType};
use spillway::runtime::{Limits, Plugin, PluginError, PluginInstance, Runtime};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

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

fn load(name: &str) -> Plugin {
    runtime().load_file(&plugin_path(name)).unwrap()
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

fn started(plugin: &Plugin, config: &[(&str, &str)], grants: &Grants, limits: &Limits) -> PluginInstance {
    let mut instance = runtime().instantiate(plugin, "test", grants, limits).unwrap();
    let config: Vec<(String, String)> = config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    instance.start(&config).unwrap();
    instance
}

fn misbehave(mode: &str, extra: &[(&str, &str)], grants: &Grants) -> PluginInstance {
    let mut config = vec![("mode", mode)];
    config.extend_from_slice(extra);
    started(&load("misbehave"), &config, grants, &Limits::default())
}

/// What a probing mode of the misbehave plugin saw.
fn probe(mode: &str, extra: &[(&str, &str)], grants: &Grants) -> String {
    let report = misbehave(mode, extra, grants).put(&[record(0)]).unwrap();
    match &report.outcomes[..] {
        [Outcome::Reject(seen)] => seen.clone(),
        other => panic!("probe {mode} gave {other:?}"),
    }
}

#[test]
fn a_component_loads_and_receives_a_batch() {
    let plugin = load("misbehave");
    assert_eq!(plugin.metadata.name, "misbehave");
    assert!(plugin.digest.starts_with("sha256:"));
    let mut instance = started(&plugin, &[("mode", "reject-odd")], &Grants::default(), &Limits::default());
    let batch: Vec<SinkRecord> = (0..6).map(record).collect();
    let report = instance.put(&batch).unwrap();
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

#[test]
fn the_file_sink_holds_records_until_flush_and_writes_only_its_granted_dir() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out-{task}.jsonl");
    let grants = Grants { dirs: vec![dir.path().to_path_buf()], ..Grants::default() };
    let mut sink =
        started(&load("file-sink"), &[("file", file.to_str().unwrap()), ("task.id", "3")], &grants, &Limits::default());
    let report = sink.put(&[record(0), record(1)]).unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Hold)), "{report:?}");
    let written = dir.path().join("out-3.jsonl");
    assert_eq!(std::fs::read_to_string(&written).unwrap(), "", "nothing is written before flush");
    let settled = sink.flush(&FlushScope::All).unwrap();
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
        runtime().instantiate(&load("file-sink"), "test", &Grants::default(), &Limits::default()).unwrap();
    let err = ungranted.start(&[("file".into(), file.to_str().unwrap().into())]).unwrap_err();
    assert!(err.to_string().contains("cannot open"), "{err}");
}

#[test]
fn files_outside_the_grants_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, "do not read").unwrap();
    let path = secret.to_str().unwrap();
    let seen = probe("read-file", &[("path", path)], &Grants::default());
    assert!(seen.starts_with("refused"), "{seen}");
    let target = dir.path().join("escape");
    let seen = probe("write-file", &[("path", target.to_str().unwrap())], &Grants::default());
    assert!(seen.starts_with("refused"), "{seen}");
    assert!(!target.exists());

    // Granting the directory makes the same probe succeed: the test can fail.
    let grants = Grants { dirs: vec![dir.path().to_path_buf()], ..Grants::default() };
    assert_eq!(probe("read-file", &[("path", path)], &grants), "read 11 bytes");
}

#[test]
fn sockets_outside_the_grants_are_refused() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let target = addr.to_string();
    let seen = probe("connect", &[("addr", &target)], &Grants::default());
    assert!(seen.starts_with("refused"), "{seen}");

    let grants = Grants { connect: vec![addr], ..Grants::default() };
    assert_eq!(probe("connect", &[("addr", &target)], &grants), "connected");
    // Granting one address grants no other.
    let other = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
    assert!(probe("connect", &[("addr", &other)], &grants).starts_with("refused"));
}

#[test]
fn environment_clock_and_randomness_need_grants() {
    // SAFETY: set once, before any thread of this test reads it.
    unsafe { std::env::set_var("SPILLWAY_TEST_SECRET", "x") };
    assert_eq!(probe("env", &[], &Grants::default()), "env vars: 0");
    let with_env = Grants { env: [("A".to_string(), "1".to_string())].into(), ..Grants::default() };
    assert_eq!(probe("env", &[], &with_env), "env vars: 1");

    assert_eq!(probe("clock", &[], &Grants::default()), "clock secs: 0");
    let clock = probe("clock", &[], &Grants { clock: true, ..Grants::default() });
    let secs: u64 = clock.strip_prefix("clock secs: ").unwrap().parse().unwrap();
    assert!(secs > 1_600_000_000, "{clock}");

    let fixed = probe("random", &[], &Grants::default());
    assert_eq!(fixed, probe("random", &[], &Grants::default()), "ungranted randomness is a fixed stream");
    let granted = Grants { random: true, ..Grants::default() };
    assert_ne!(probe("random", &[], &granted), probe("random", &[], &granted));
}

/// After a failing instance, a fresh one of the same plugin still works: the
/// failure stayed inside its own store.
fn assert_runtime_still_serves() {
    let mut healthy = misbehave("accept", &[], &Grants::default());
    let report = healthy.put(&[record(0), record(1)]).unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Accept)));
}

#[test]
fn a_panic_fails_its_instance_with_the_plugins_message() {
    let mut instance = misbehave("panic", &[], &Grants::default());
    let err = instance.put(&[record(0)]).unwrap_err();
    assert!(matches!(err, PluginError::Trap(_)), "{err:?}");
    assert!(err.to_string().contains("misbehave panicked on purpose"), "{err}");
    assert!(matches!(instance.put(&[record(0)]).unwrap_err(), PluginError::Poisoned));
    assert_runtime_still_serves();
}

#[test]
fn a_trap_fails_its_instance() {
    let err = misbehave("trap", &[], &Grants::default()).put(&[record(0)]).unwrap_err();
    assert!(matches!(err, PluginError::Trap(_)), "{err:?}");
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert_runtime_still_serves();
}

#[test]
fn an_endless_loop_is_interrupted() {
    let limits = Limits { call_timeout: Duration::from_millis(300), ..Limits::default() };
    let mut instance = started(&load("misbehave"), &[("mode", "loop")], &Grants::default(), &limits);
    let err = instance.put(&[record(0)]).unwrap_err();
    assert!(matches!(err, PluginError::Timeout { limit_ms: 300 }), "{err:?}");
    assert_runtime_still_serves();
}

#[test]
fn a_memory_bomb_hits_its_limit() {
    let limits = Limits { memory_bytes: 64 << 20, ..Limits::default() };
    let mut instance = started(&load("misbehave"), &[("mode", "oom")], &Grants::default(), &limits);
    let err = instance.put(&[record(0)]).unwrap_err();
    assert!(matches!(err, PluginError::OutOfMemory { limit_bytes } if limit_bytes == 64 << 20), "{err:?}");
    assert!(instance.memory_bytes() <= 64 << 20);
    assert_runtime_still_serves();
}

#[test]
fn compiled_plugins_are_cached_on_disk_by_digest() {
    let dir = tempfile::tempdir().unwrap();
    let first = Runtime::new(dir.path()).unwrap();
    let plugin = first.load_file(&plugin_path("noop-sink")).unwrap();
    assert_eq!(first.compilations(), 1);
    first.load_file(&plugin_path("noop-sink")).unwrap();
    assert_eq!(first.compilations(), 1, "the second load is served from memory");
    let hex = plugin.digest.strip_prefix("sha256:").unwrap();
    let cached: Vec<_> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(cached.iter().any(|f| f.starts_with(hex) && f.ends_with(".cwasm")), "{cached:?}");

    // A restarted host (a new engine) loads it without compiling.
    let restarted = Runtime::new(dir.path()).unwrap();
    let again = restarted.load_file(&plugin_path("noop-sink")).unwrap();
    assert_eq!(restarted.compilations(), 0);
    assert_eq!(again.digest, plugin.digest);
}

#[test]
fn a_component_importing_an_unknown_capability_is_refused_by_name() {
    // A component whose world imports an interface this host does not provide.
    let wat = r#"(component
        (import "spillway:connector/teleport@0.2.0" (instance))
    )"#;
    let bytes = wat::parse_str(wat).unwrap();
    let err = runtime().load(&bytes).err().expect("must be refused");
    let chain = format!("{err:#}");
    assert!(chain.contains("imports 'spillway:connector/teleport@0.2.0'"), "{chain}");
}

#[test]
fn a_plugin_built_against_another_contract_version_is_refused_naming_both() {
    let wat = r#"(component
        (instance $task)
        (export "spillway:connector/sink-task@0.1.0" (instance $task))
    )"#;
    let bytes = wat::parse_str(wat).unwrap();
    let err = runtime().load(&bytes).err().expect("must be refused");
    let chain = format!("{err:#}");
    assert!(chain.contains("built against contract spillway:connector@0.1.0"), "{chain}");
    assert!(chain.contains(&format!("speaks spillway:connector@{}", spillway::runtime::CONTRACT_VERSION)), "{chain}");
}
