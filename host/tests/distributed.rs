//! Distributed mode: three real `spillway serve` workers of one group, on
//! one machine, against the broker in `SPILLWAY_TEST_BOOTSTRAP` or a
//! librdkafka mock. They share a config topic and a status topic, and the
//! group coordinator carries the leader's assignment of tasks.

mod support;

use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};
use support::worker::{PATIENCE, Worker, group_member_config};
use support::{Broker, assert_none_lost, count_keys, file_sink_keys, produce, unique};

async fn start_member(broker: &Broker, group: &str, log: &str) -> (Worker, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let config = group_member_config(dir.path(), group);
    let worker =
        Worker::start_with(&broker.bootstrap, dir.path(), "text", log, &["--config", config.to_str().unwrap()]).await;
    (worker, dir)
}

async fn status(worker: &Worker, name: &str) -> Value {
    reqwest::get(format!("{}/connectors/{name}/status", worker.url)).await.unwrap().json().await.unwrap()
}

/// Waits until `worker` reports `tasks` tasks RUNNING, on workers that
/// `placed` accepts (given their worker ids); returns the status.
async fn wait_placed(worker: &Worker, name: &str, tasks: usize, placed: impl Fn(&[&str]) -> bool) -> Value {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let status = status(worker, name).await;
        let running: Vec<&str> = status["tasks"]
            .as_array()
            .map(|tasks| {
                tasks.iter().filter(|t| t["state"] == "RUNNING").filter_map(|t| t["worker_id"].as_str()).collect()
            })
            .unwrap_or_default();
        if running.len() == tasks && placed(&running) {
            return status;
        }
        assert!(Instant::now() < deadline, "never placed as wanted: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Each task's id, state and worker.
fn placement(status: &Value) -> Vec<(u64, String, String)> {
    let tasks = status["tasks"].as_array().unwrap();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    tasks.iter().map(|t| (t["id"].as_u64().unwrap(), text(&t["state"]), text(&t["worker_id"]))).collect()
}

fn worker_id(worker: &Worker) -> String {
    worker.url.trim_start_matches("http://").to_string()
}

/// Waits until every key in `keys` was written; returns what was written.
async fn wait_written(dir: &Path, keys: &[String]) -> Vec<String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let written = file_sink_keys(dir, "out-");
        let have: BTreeSet<&String> = written.iter().collect();
        let missing = keys.iter().filter(|k| !have.contains(k)).count();
        if missing == 0 {
            return written;
        }
        assert!(Instant::now() < deadline, "{missing} of {} records never written", keys.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn log_count(dir: &Path, log: &str, needle: &str) -> usize {
    std::fs::read_to_string(dir.join(log)).unwrap_or_default().matches(needle).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_workers_run_one_connector_and_survive_a_kill_a_restart_and_a_late_joiner() {
    let broker = Broker::start_or_env();
    let group = unique("cluster");
    let data = tempfile::tempdir().unwrap();
    let topic = unique("spread");
    let (w1, d1) = start_member(&broker, &group, "w1.log").await;
    let (w2, d2) = start_member(&broker, &group, "w2.log").await;
    let (w3, _d3) = start_member(&broker, &group, "w3.log").await;
    let ids = [worker_id(&w1), worker_id(&w2), worker_id(&w3)];

    // Created on one worker, its three tasks run one on each.
    let config = |tasks: u32| {
        json!({
            "connector.class": "file-sink",
            "topics": topic,
            "tasks.max": tasks.to_string(),
            "file": data.path().join("out-{task}.jsonl"),
            "plugin.grant.fs.data.path": data.path(),
            "flush.interval.ms": "200",
            "consumer.override.group.protocol": "share",
        })
    };
    w1.send(reqwest::Method::POST, "/connectors", json!({"name": "spread", "config": config(3)})).await;
    let spread = |running: &[&str]| running.iter().collect::<BTreeSet<_>>().len() == 3;
    let placed = wait_placed(&w3, "spread", 3, spread).await;
    println!("placed: {placed}");
    for w in [&w1, &w2] {
        let seen = wait_placed(w, "spread", 3, spread).await;
        assert_eq!(placement(&seen), placement(&placed), "every worker reports the same placement");
    }
    let (_, listed) = w2.call(reqwest::Method::GET, "/connectors", Value::Null).await;
    assert_eq!(listed, json!(["spread"]), "the connector is known on every worker");

    // No fault: each record exactly once.
    let mut keys = produce(&broker.bootstrap, &topic, 300).await;
    let written = wait_written(data.path(), &keys).await;
    let duplicated: Vec<_> = count_keys(&written).into_iter().filter(|(_, n)| *n != 1).collect();
    assert!(duplicated.is_empty(), "written other than once with no fault: {duplicated:?}");

    // A KIP-745 restart issued on one worker restarts the instances on the others.
    let joins = |dir: &Path, log: &str| log_count(dir, log, "joined share group");
    let before = [joins(d1.path(), "w1.log"), joins(d2.path(), "w2.log")];
    let (code, body) =
        w1.call(reqwest::Method::POST, "/connectors/spread/restart?includeTasks=true", Value::Null).await;
    assert_eq!(code, 202, "{body}");
    let restarting = body["tasks"].as_array().unwrap().iter().filter(|t| t["state"] == "RESTARTING").count();
    assert_eq!(restarting, 3, "the answer shows every task restarting: {body}");
    let deadline = Instant::now() + PATIENCE;
    while joins(d2.path(), "w2.log") <= before[1] || joins(d1.path(), "w1.log") <= before[0] {
        assert!(Instant::now() < deadline, "the tasks on w1 and w2 did not restart");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(log_count(d2.path(), "w2.log", "restart requested on another worker") >= 1);
    wait_placed(&w1, "spread", 3, spread).await;

    // SIGKILL w3 while records flow: its task moves and nothing is lost.
    let killed = Instant::now();
    w3.kill();
    let survivors = [ids[0].clone(), ids[1].clone()];
    let on_survivors = |running: &[&str]| running.iter().all(|w| survivors.iter().any(|s| s == w));
    let streaming = async {
        let mut sent = Vec::new();
        for _ in 0..20 {
            sent.extend(produce(&broker.bootstrap, &topic, 20).await);
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        sent
    };
    let (sent, moved) = tokio::join!(streaming, wait_placed(&w1, "spread", 3, on_survivors));
    println!("a killed worker's task ran elsewhere {:?} after the kill: {moved}", killed.elapsed());
    keys.extend(sent);
    keys.extend(produce(&broker.bootstrap, &topic, 100).await);
    let written = wait_written(data.path(), &keys).await;
    let duplicates = assert_none_lost(&written, &keys, "three workers, one killed");
    println!("duplicates after SIGKILL of a worker (records it held when killed): {duplicates}");

    // A worker that starts later reads the connector from the topic and
    // takes work; a config change made while the group rebalances for it
    // is not lost.
    let (w4, _d4) = start_member(&broker, &group, "w4.log").await;
    let (code, body) = w4.call(reqwest::Method::GET, "/connectors/spread/config", Value::Null).await;
    assert_eq!((code, body["tasks.max"].as_str()), (200, Some("3")), "caught up from the config topic: {body}");
    w2.send(reqwest::Method::PUT, "/connectors/spread/config", config(4)).await;
    let id4 = worker_id(&w4);
    let all_over = |running: &[&str]| {
        let used: BTreeSet<&&str> = running.iter().collect();
        used.len() == 3 && running.contains(&id4.as_str())
    };
    let placed = wait_placed(&w4, "spread", 4, all_over).await;
    println!("after w4 joined and tasks.max went to 4: {placed}");
    let more = produce(&broker.bootstrap, &topic, 200).await;
    keys.extend(more.iter().cloned());
    let written = wait_written(data.path(), &keys).await;
    let later: Vec<String> = written.into_iter().filter(|k| more.contains(k)).collect();
    let duplicated: Vec<_> = count_keys(&later).into_iter().filter(|(_, n)| *n != 1).collect();
    assert!(duplicated.is_empty(), "records after the cluster settled, written other than once: {duplicated:?}");

    // Writes went through w1, w2 and w4: those that did not reach the
    // leader were forwarded to it.
    let forwarded: usize = [(d1.path(), "w1.log"), (d2.path(), "w2.log"), (_d4.path(), "w4.log")]
        .iter()
        .map(|(dir, log)| log_count(dir, log, "forwarded to the leader"))
        .sum();
    assert!(forwarded >= 1, "no write was forwarded to the leader");
    println!("writes forwarded to the leader: {forwarded}");

    // Deleted on one worker: gone from all, and its tasks stop everywhere.
    w4.send(reqwest::Method::DELETE, "/connectors/spread", Value::Null).await;
    let deadline = Instant::now() + PATIENCE;
    for w in [&w1, &w2] {
        loop {
            let (code, _) = w.call(reqwest::Method::GET, "/connectors/spread", Value::Null).await;
            if code == 404 {
                break;
            }
            assert!(Instant::now() < deadline, "the delete never reached {}", w.url);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn uploads_are_refused_in_a_group_and_a_worker_without_the_topics_is_refused() {
    let broker = Broker::start_or_env();
    let group = unique("upload");
    let (worker, _dir) = start_member(&broker, &group, "w.log").await;
    let wasm = std::fs::read(support::herder::plugin_dir().join("file-sink.wasm")).unwrap();
    let response = reqwest::Client::new()
        .put(format!("{}/connector-plugins/file-sink", worker.url))
        .header("content-type", "application/wasm")
        .body(wasm)
        .send()
        .await
        .unwrap();
    let code = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(code, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("plugin.path of every worker"), "{body}");

    // group.id without the topics: a clear start-up error.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["serve", "--bootstrap-servers", &broker.bootstrap])
        .args(["--config", write_bare_group().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(stderr.contains("group.id: a worker of a group needs config.storage.topic"), "{stderr}");
}

fn write_bare_group() -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let path = dir.join("worker.properties");
    std::fs::write(&path, "group.id=lonely\n").unwrap();
    path
}
