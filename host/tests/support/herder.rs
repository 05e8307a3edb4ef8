//! A herder (the standalone worker's core) for integration tests, on the
//! plugins `scripts/build-plugins.sh` built.

use super::Broker;
use spillway::herder::{Herder, State, SwapOutcome, TaskState, WorkerConfig};
use spillway::runtime::Runtime;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `target/plugins`, where the plugins were built.
pub fn plugin_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins");
    assert!(dir.join("misbehave.wasm").exists(), "run scripts/build-plugins.sh first");
    dir
}

/// A runtime whose compiled-plugin cache all tests share.
pub fn test_runtime() -> Runtime {
    Runtime::new(&std::env::temp_dir().join("spillway-test-cache")).unwrap()
}

/// A herder on `broker`, keeping its state in `dir`.
pub async fn start_herder(broker: &Broker, dir: &Path) -> Herder {
    start_herder_with_plugins(broker, dir, &plugin_dir()).await
}

/// A herder on `broker`, keeping its state in `dir`, with the plugins in `plugins`.
pub async fn start_herder_with_plugins(broker: &Broker, dir: &Path, plugins: &Path) -> Herder {
    Herder::start(worker_config(&broker.bootstrap, dir, plugins), test_runtime()).await.unwrap()
}

/// A worker on `bootstrap`, keeping its state in `dir` (unless the test
/// names a config topic), with the plugins in `plugins`.
pub fn worker_config(bootstrap: &str, dir: &Path, plugins: &Path) -> WorkerConfig {
    worker_config_with(bootstrap, &super::worker_state_file(dir), plugins, &[])
}

/// A worker config as `spillway serve` reads one: the keys given, over
/// the bootstrap servers, state file and plugin directory, and over
/// `consumer.group.protocol=share`: most tests here are of share groups,
/// which the worker opts in to (KIP-1302); a test of the default gives
/// `consumer.group.protocol=classic`.
pub fn worker_config_with(bootstrap: &str, state_file: &Path, plugins: &Path, extra: &[(&str, &str)]) -> WorkerConfig {
    let mut raw = std::collections::BTreeMap::from([
        ("bootstrap.servers".to_string(), bootstrap.to_string()),
        ("config.storage.file".to_string(), state_file.display().to_string()),
        ("plugin.path".to_string(), plugins.display().to_string()),
        ("consumer.group.protocol".to_string(), "share".to_string()),
    ]);
    raw.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    WorkerConfig::parse(&raw).unwrap_or_else(|problems| panic!("a bad worker config: {problems:?}"))
}

/// `target/plugins-extra`, where builds for tests to install on purpose are.
pub fn extra_plugin(file: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins-extra").join(file);
    assert!(path.exists(), "{} is missing: run scripts/build-plugins.sh", path.display());
    path
}

/// `target/example-plugins/<file>`: the examples in other languages
/// (`scripts/build-examples.sh`) and the Rust ones (`scripts/build-plugins.sh`).
pub fn example_plugin(file: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/example-plugins").join(file);
    assert!(path.exists(), "{} is missing: run scripts/build-examples.sh", path.display());
    path
}

/// The connector's tasks, as its status shows them.
pub async fn tasks(herder: &Herder, name: &str) -> Vec<TaskState> {
    herder.status(name.into()).await.unwrap().tasks
}

/// Waits up to `limit` until no task's swap is still preparing, and
/// returns the tasks.
pub async fn wait_swaps_settled(herder: &Herder, name: &str, limit: Duration) -> Vec<TaskState> {
    let deadline = Instant::now() + limit;
    loop {
        let tasks = tasks(herder, name).await;
        if tasks.iter().all(|t| t.swap.as_ref().is_some_and(|s| s.outcome != SwapOutcome::Preparing)) {
            return tasks;
        }
        assert!(Instant::now() < deadline, "swaps never settled: {tasks:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the connector has `tasks` tasks, all RUNNING, then a little
/// longer: a new share group starts at the latest offset, so each member must
/// have fetched once before the test produces.
pub async fn wait_running(herder: &Herder, name: &str, tasks: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = herder.status(name.into()).await.unwrap();
        if status.tasks.len() == tasks && status.tasks.iter().all(|t| t.state == State::Running) {
            break;
        }
        if let Some(failed) = status.tasks.iter().find(|t| t.state == State::Failed) {
            panic!("{name}: task {} failed: {:?}", failed.id, failed.trace);
        }
        assert!(Instant::now() < deadline, "tasks never all ran: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
}

/// A worker's defaults that opt in to share groups (KIP-1302), for tests that
/// run tasks without a herder.
pub fn share_worker() -> spillway::connector::WorkerDefaults {
    spillway::connector::WorkerDefaults {
        group_protocol: spillway::connector::GroupProtocol::Share,
        ..Default::default()
    }
}
