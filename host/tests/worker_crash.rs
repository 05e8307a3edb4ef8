//! A worker process killed with SIGKILL while its sink holds records, after
//! a rebalance: nothing may be lost. The worker is the real `spillway serve`
//! binary, driven through its REST API; the broker is the one in
//! `SPILLWAY_TEST_BOOTSTRAP` or a librdkafka mock.

mod support;

use serde_json::{Value, json};
use std::time::{Duration, Instant};
use support::worker::{PATIENCE, Worker};
use support::{Broker, assert_none_lost, file_sink_keys, produce, unique};

/// A holding sink in a classic group; a second task joins mid-stream (a
/// rebalance), then the worker is killed while records are held. Once a new
/// worker takes over, every record is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_killed_after_a_rebalance_while_holding_records_loses_none() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = unique("crash");
    let worker = Worker::start(&broker.bootstrap, dir.path(), "text", "worker-1.log").await;
    let config = |tasks: u32, flush_ms: u32| {
        json!({
            "connector.class": "file-sink",
            "topics": topic,
            "tasks.max": tasks.to_string(),
            "consumer.override.group.protocol": "classic",
            "file": dir.path().join("crash-{task}.jsonl"),
            "plugin.grant.fs.data.path": dir.path(),
            "flush.interval.ms": flush_ms.to_string(),
            // The killed worker's members leave the group when their
            // sessions time out; the broker's minimum keeps the test short.
            "consumer.override.session.timeout.ms": "6000",
        })
    };
    worker.send(reqwest::Method::POST, "/connectors", json!({"name": "crash", "config": config(1, 600_000)})).await;
    worker.wait_running("crash", 1).await;

    // A steady stream keeps every poll busy, so the sink holds what it has.
    // Once the second task runs and consumes, kill while records are held.
    let mut keys = Vec::new();
    let streaming = Instant::now();
    let mut scaled = false;
    let mut holding_since: Option<Instant> = None;
    loop {
        keys.extend(produce(&broker.bootstrap, &topic, 20).await);
        if !scaled && streaming.elapsed() > Duration::from_secs(3) {
            worker.send(reqwest::Method::PUT, "/connectors/crash/config", config(2, 600_000)).await;
            scaled = true;
        }
        if scaled {
            let polled = worker.metric("spillway_records_polled_total").await;
            let accepted = worker.metric("spillway_records_accepted_total").await;
            let held = polled.iter().sum::<u64>() > accepted.iter().sum::<u64>();
            if polled.len() == 2 && polled.iter().all(|p| *p > 0) && held {
                // Long enough for the tasks to commit (every second) while
                // holding: a commit past a held record would lose it now.
                let since = *holding_since.get_or_insert_with(Instant::now);
                if since.elapsed() > Duration::from_secs(3) {
                    println!("before the kill: {} produced, {polled:?} delivered, {accepted:?} accepted", keys.len());
                    break;
                }
            } else {
                holding_since = None;
            }
        }
        assert!(streaming.elapsed() < PATIENCE, "the two tasks never held records together");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    worker.kill();

    // A new worker with the same state file runs the connector again, now
    // flushing every half second (a classic group flushes on the timer).
    let worker = Worker::start(&broker.bootstrap, dir.path(), "json", "worker-2.log").await;
    worker.wait_running("crash", 2).await;
    worker.send(reqwest::Method::PUT, "/connectors/crash/config", config(2, 500)).await;
    let deadline = Instant::now() + PATIENCE;
    loop {
        let written = file_sink_keys(dir.path(), "crash-");
        let have: std::collections::BTreeSet<&String> = written.iter().collect();
        if keys.iter().all(|k| have.contains(k)) {
            break;
        }
        assert!(Instant::now() < deadline, "{} of {} records lost", keys.len() - have.len(), keys.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let duplicates =
        assert_none_lost(&file_sink_keys(dir.path(), "crash-"), &keys, "SIGKILL after a rebalance, classic group");
    println!("duplicates after the kill (expected: the records held at the kill, and more): {duplicates}");
    worker.send(reqwest::Method::DELETE, "/connectors/crash", Value::Null).await;

    // Logs written to a file carry no ANSI colour codes.
    let log = std::fs::read_to_string(dir.path().join("worker-1.log")).unwrap();
    assert!(log.contains("INFO"), "the worker logged nothing: {log}");
    assert!(!log.contains('\x1b'), "colour codes in a log file: {}", log.lines().next().unwrap_or_default());
    // `--log-format json`: one object per line; a task's lines name their
    // connector and task.
    let log = std::fs::read_to_string(dir.path().join("worker-2.log")).unwrap();
    let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).expect("a JSON object per line")).collect();
    assert!(!lines.is_empty(), "the worker logged nothing");
    let task_line = lines
        .iter()
        .find(|l| l["span"]["connector"] == "crash")
        .unwrap_or_else(|| panic!("no line from a task: {log}"));
    assert!(task_line["span"]["task"].is_u64() && task_line["level"].is_string(), "{task_line}");
}
