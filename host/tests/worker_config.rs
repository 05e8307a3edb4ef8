//! `spillway serve --config FILE`: the real binary reading a worker config
//! (a properties file), its flags over it, and the grant policy it sets,
//! driven through the REST API on the broker in `SPILLWAY_TEST_BOOTSTRAP`
//! or a librdkafka mock.

mod support;

use serde_json::json;
use std::process::Command;
use support::worker::Worker;
use support::{Broker, unique};

#[test]
fn a_bad_worker_config_stops_the_worker_with_every_problem_on_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("worker.properties");
    std::fs::write(&file, "policy.fs.dirs=relative/dir\npolicy.tasks.maxx=3\nlisteners=https://0.0.0.0:1\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["serve", "--config", file.to_str().unwrap()])
        .output()
        .expect("running spillway serve");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    for line in [
        "policy.fs.dirs: 'relative/dir' must be an absolute path",
        "policy.tasks.maxx: not a worker config key",
        "listeners: 'https://0.0.0.0:1' is not one http://IP:PORT listener",
    ] {
        assert!(stderr.contains(line), "missing '{line}' in: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_file_sets_the_policy_and_the_flags_override_it() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let file = dir.path().join("worker.properties");
    // The flag's port wins over this listener, which nothing may answer on.
    let file_port = support::worker::free_port();
    std::fs::write(
        &file,
        format!("listeners=http://127.0.0.1:{file_port}\npolicy.fs.dirs={}\npolicy.tasks.max=1\n", data.display()),
    )
    .unwrap();
    let worker =
        Worker::start_with(&broker.bootstrap, dir.path(), "text", "worker.log", &["--config", file.to_str().unwrap()])
            .await;
    assert!(reqwest::get(format!("http://127.0.0.1:{file_port}")).await.is_err(), "--port overrides listeners");

    let topic = unique("policy");
    let config = |tasks: &str, dir: &std::path::Path| {
        json!({
            "connector.class": "file-sink",
            "topics": topic,
            "tasks.max": tasks,
            "file": dir.join("out.jsonl"),
            "plugin.grant.fs.data.path": dir,
        })
    };
    let (status, body) =
        worker.call(reqwest::Method::POST, "/connectors", json!({"name": "wide", "config": config("2", &data)})).await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("above the worker's policy.tasks.max (1)"), "{body}");
    let (status, body) = worker
        .call(reqwest::Method::POST, "/connectors", json!({"name": "far", "config": config("1", dir.path())}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("policy.fs.dirs"), "{body}");
    worker.send(reqwest::Method::POST, "/connectors", json!({"name": "fits", "config": config("1", &data)})).await;
    worker.wait_running("fits", 1).await;
}
