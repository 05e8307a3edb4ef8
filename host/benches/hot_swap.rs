//! The pause of a hot swap per task, beside a restart of the same tasks (what
//! a config change that cannot swap costs), in the same run, under load:
//!
//!     cargo bench -p spillway --bench hot_swap
//!
//! Two share-group tasks of `misbehave` (`mode=hold`, so the old build holds
//! records when the swap comes) swap between 0.1.0 and 0.2.0 while records
//! stream in. The pause is the task's own measure: from the start of the old
//! build's drain until the new build took over. The restart is timed from
//! the config change until every task runs again. The target: a pause under
//! 100 ms, against a 30 s acquisition lock.
//!
//! Uses `SPILLWAY_TEST_BOOTSTRAP` or starts the librdkafka mock.

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use scale::Scaled;
use spillway::herder::{Herder, State, SwapOutcome};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

static SWAPS: Scaled = Scaled::new(6, 2);
static RESTARTS: Scaled = Scaled::new(3, 1);

#[tokio::main]
async fn main() {
    let broker = support::Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(support::herder::plugin_dir().join("misbehave.wasm"), plugins.join("misbehave.wasm")).unwrap();
    std::fs::copy(support::herder::extra_plugin("misbehave-0.2.0.wasm"), plugins.join("misbehave-0.2.0.wasm")).unwrap();
    support::produce(&broker.bootstrap, &support::unique("warm-up"), 1).await;
    let herder = support::herder::start_herder_with_plugins(&broker, dir.path(), &plugins).await;
    let topic = support::unique("bench-swap");
    let config = connector_config(&topic, dir.path());
    herder.create("swap".into(), config, None).await.unwrap();
    support::herder::wait_running(&herder, "swap", 2).await;

    let (bootstrap, producing) = (broker.bootstrap.clone(), topic.clone());
    let load = tokio::spawn(async move {
        loop {
            support::produce(&bootstrap, &producing, 200).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut pauses = Vec::new();
    for i in 0..SWAPS.get() {
        let version = if i % 2 == 0 { "=0.2.0" } else { "=0.1.0" };
        herder.patch_config("swap".into(), one("connector.plugin.version", version)).await.unwrap();
        pauses.extend(swap_pauses(&herder).await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let mut restarts = Vec::new();
    for i in 0..RESTARTS.get() {
        // A key the plugin reads: the tasks restart.
        let started = Instant::now();
        herder.patch_config("swap".into(), one("delay.ms", &i.to_string())).await.unwrap();
        wait_all_running(&herder).await;
        restarts.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    load.abort();
    herder.shutdown().await.unwrap();

    pauses.sort();
    restarts.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = |v: &[Duration]| v[v.len() / 2];
    println!("hot swap, 2 tasks under load, {SWAPS} swaps ({} task pauses):", pauses.len());
    println!(
        "  pause per task: median {:.2} ms, max {:.2} ms   target < 100 ms",
        ms(median(&pauses)),
        ms(*pauses.last().unwrap())
    );
    println!(
        "  restart of both tasks: median {:.0} ms, max {:.0} ms",
        ms(median(&restarts)),
        ms(*restarts.last().unwrap())
    );
    println!("ratio restart/swap pause (median): {:.0}", ms(median(&restarts)) / ms(median(&pauses)).max(0.001));
}

fn connector_config(topic: &str, dir: &Path) -> BTreeMap<String, String> {
    // Beside the plugin directory: no grant may reach that.
    let data = dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    let record_file = data.join("keys-{task}.txt");
    [
        ("name", "swap"),
        ("connector.class", "misbehave"),
        ("topics", topic),
        ("tasks.max", "2"),
        ("mode", "hold"),
        ("flush.interval.ms", "300"),
        ("connector.plugin.version", "=0.1.0"),
        ("plugin.grant.fs.data.path", data.to_str().unwrap()),
        ("record.file", record_file.to_str().unwrap()),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

fn one(key: &str, value: &str) -> BTreeMap<String, Option<String>> {
    BTreeMap::from([(key.to_string(), Some(value.to_string()))])
}

async fn swap_pauses(herder: &Herder) -> Vec<Duration> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = herder.status("swap".into()).await.unwrap().tasks;
        if tasks.iter().all(|t| t.swap.as_ref().is_some_and(|s| s.outcome != SwapOutcome::Preparing)) {
            return tasks
                .iter()
                .map(|t| {
                    let swap = t.swap.as_ref().unwrap();
                    assert_eq!(swap.outcome, SwapOutcome::Swapped, "{swap:?}");
                    Duration::from_micros(swap.pause_micros.unwrap())
                })
                .collect();
        }
        assert!(Instant::now() < deadline, "swaps never settled: {tasks:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn wait_all_running(herder: &Herder) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = herder.status("swap".into()).await.unwrap().tasks;
        if tasks.len() == 2 && tasks.iter().all(|t| t.state == State::Running) {
            return;
        }
        assert!(Instant::now() < deadline, "tasks never ran again: {tasks:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
