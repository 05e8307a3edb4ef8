//! One connector's throughput spread over one, two and three workers of a
//! group, in the same run, the one-worker group being the baseline:
//!
//!     cargo bench -p spillway -p spillway-sdk -p s3-sink -p sql-sink -p mirror --bench distributed
//!
//! A `file-sink` connector with three tasks in a share group; the workers
//! are herders in this process (so they share its cores: the figure shows
//! what distributing costs, not what more machines would give), each in
//! distributed mode with the config and status topics. The time runs from
//! the first record produced until every record is written. The target: a
//! ratio of at least 0.8 against one worker, that is, spreading the tasks
//! costs at most a fifth on the same cores.
//!
//! Uses `SPILLWAY_TEST_BOOTSTRAP` or starts the librdkafka mock.

mod scale;
#[path = "../tests/support/mod.rs"]
mod support;

use scale::Scaled;
use spillway::herder::{Herder, State};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

static RECORDS: Scaled = Scaled::new(30_000, 3000);
const TASKS: u32 = 3;

#[tokio::main]
async fn main() {
    let broker = support::Broker::start_or_env();
    support::produce(&broker.bootstrap, &support::unique("warm-up"), 1).await;
    let mut rates = Vec::new();
    for workers in 1..=3 {
        let rate = run(&broker, workers).await;
        println!("{workers} worker(s): {rate:.0} records/s");
        rates.push(rate);
    }
    for (i, rate) in rates.iter().enumerate().skip(1) {
        println!("ratio {} workers / 1 worker: {:.2} (target >= 0.80)", i + 1, rate / rates[0]);
    }
}

/// Records per second of one connector over `workers` workers.
async fn run(broker: &support::Broker, workers: usize) -> f64 {
    let group = support::unique("bench-group");
    let data = tempfile::tempdir().unwrap();
    let mut herders = Vec::new();
    let mut dirs = Vec::new();
    for i in 0..workers {
        let dir = tempfile::tempdir().unwrap();
        // Workers told apart by their listeners, which nothing binds here.
        let (configs, statuses) = (format!("{group}-configs"), format!("{group}-status"));
        let listener = format!("http://127.0.0.1:{}", 18300 + i);
        let config = support::herder::worker_config_with(
            &broker.bootstrap,
            &support::worker_state_file(dir.path()),
            &support::herder::plugin_dir(),
            &[
                ("listeners", &listener),
                ("group.id", &group),
                ("config.storage.topic", &configs),
                ("status.storage.topic", &statuses),
                ("status.storage.partitions", "5"),
                ("session.timeout.ms", "6000"),
                ("heartbeat.interval.ms", "1000"),
                ("rebalance.timeout.ms", "30000"),
                ("scheduled.rebalance.max.delay.ms", "0"),
            ],
        );
        herders.push(Herder::start(config, support::herder::test_runtime()).await.unwrap());
        dirs.push(dir);
    }
    let topic = support::unique("bench-spread");
    herders[0].create("spread".into(), connector_config(&topic, data.path()), None).await.unwrap();
    wait_spread(&herders, workers).await;
    let started = Instant::now();
    let mut keys = Vec::with_capacity(RECORDS.get());
    while keys.len() < RECORDS.get() {
        keys.extend(support::produce(&broker.bootstrap, &topic, 1000).await);
    }
    let expected: BTreeSet<String> = keys.into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let written = support::file_sink_keys(data.path(), "out-");
        if written.iter().filter(|k| expected.contains(*k)).collect::<BTreeSet<_>>().len() == expected.len() {
            break;
        }
        assert!(Instant::now() < deadline, "not every record was written");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rate = RECORDS.get() as f64 / started.elapsed().as_secs_f64();
    for herder in &herders {
        herder.shutdown().await.unwrap();
    }
    rate
}

/// Waits until the connector's tasks all run, on `workers` different
/// workers as far as there are, and a little longer (a new share group
/// starts at the latest offset: each member fetches once first).
async fn wait_spread(herders: &[Herder], workers: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let status = herders[0].status("spread".into()).await.unwrap();
        let running: Vec<&str> =
            status.tasks.iter().filter(|t| t.state == State::Running).map(|t| t.worker_id.as_str()).collect();
        let used: BTreeSet<&str> = running.iter().copied().collect();
        if running.len() == TASKS as usize && used.len() == workers.min(TASKS as usize) {
            break;
        }
        assert!(Instant::now() < deadline, "the tasks were never spread: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
}

fn connector_config(topic: &str, data: &Path) -> BTreeMap<String, String> {
    [
        ("connector.class", "file-sink".to_string()),
        ("topics", topic.to_string()),
        ("tasks.max", TASKS.to_string()),
        ("file", data.join("out-{task}.jsonl").display().to_string()),
        ("plugin.grant.fs.data.path", data.display().to_string()),
        ("flush.interval.ms", "200".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
