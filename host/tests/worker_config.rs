//! `spillway serve --config FILE`: the real binary reading a worker config
//! (a properties file), its flags over it, and the grant policy it sets,
//! driven through the REST API on the broker in `SPILLWAY_TEST_BOOTSTRAP`
//! or a librdkafka mock.

#[path = "support/fault_proxy.rs"]
mod fault_proxy;
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
        "listeners.https.ssl.certificate.location: an https:// listener needs its certificate and key",
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
    let elsewhere = dir.path().join("elsewhere");
    let (status, body) = worker
        .call(reqwest::Method::POST, "/connectors", json!({"name": "far", "config": config("1", &elsewhere)}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("policy.fs.dirs"), "{body}");
    // The directory that holds the worker's config is never granted.
    let (status, body) = worker
        .call(reqwest::Method::POST, "/connectors", json!({"name": "home", "config": config("1", dir.path())}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(body["message"].as_str().unwrap().contains("worker's config file"), "{body}");
    worker.send(reqwest::Method::POST, "/connectors", json!({"name": "fits", "config": config("1", &data)})).await;
    worker.wait_running("fits", 1).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rest_api_over_https_admits_only_known_users_and_tokens() {
    let broker = Broker::start_or_env();
    let pki = fault_proxy::secured::TestPki::new();
    let dir = tempfile::tempdir().unwrap();
    // The credentials in a directory of their own, apart from the worker
    // config (also never granted).
    let credentials = dir.path().join("credentials");
    std::fs::create_dir(&credentials).unwrap();
    let (users, tokens) = (credentials.join("users.properties"), credentials.join("tokens"));
    std::fs::write(&users, "ops=s3cret\n").unwrap();
    std::fs::write(&tokens, "t0ken\n").unwrap();
    let port = support::worker::free_port();
    let file = dir.path().join("worker.properties");
    let plugins = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins");
    let lines = [
        format!("listeners=https://127.0.0.1:{port}"),
        format!("listeners.https.ssl.certificate.location={}", pki.server_certificate.display()),
        format!("listeners.https.ssl.key.location={}", pki.server_key_file.display()),
        format!("rest.auth.basic.users.file={}", users.display()),
        format!("rest.auth.bearer.tokens.file={}", tokens.display()),
        format!("bootstrap.servers={}", broker.bootstrap),
        format!("plugin.path={}", plugins.display()),
        format!("config.storage.file={}", support::worker_state_file(dir.path()).display()),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_spillway"))
        .args(["--cache-dir", std::env::temp_dir().join("spillway-test-cache").to_str().unwrap()])
        .args(["serve", "--config", file.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("worker.log")).unwrap())
        .spawn()
        .unwrap();
    spillway::capabilities::tls::install_crypto_provider();
    let ca = reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap();
    let client = reqwest::Client::builder().add_root_certificate(ca).build().unwrap();
    let url = format!("https://127.0.0.1:{port}/connectors");
    let deadline = std::time::Instant::now() + support::worker::PATIENCE;
    let first = loop {
        match client.get(&url).send().await {
            Ok(response) => break response,
            Err(e) => assert!(std::time::Instant::now() < deadline, "the worker never answered over HTTPS: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    // No credentials: 401, Connect's error body, and the challenges.
    assert_eq!(first.status(), 401);
    let challenge = first.headers()["www-authenticate"].to_str().unwrap().to_string();
    assert!(challenge.contains("Basic") && challenge.contains("Bearer"), "{challenge}");
    let body: serde_json::Value = first.json().await.unwrap();
    assert_eq!(body["error_code"], 401, "{body}");

    let status = |request: reqwest::RequestBuilder| async move { request.send().await.unwrap().status().as_u16() };
    assert_eq!(status(client.get(&url).basic_auth("ops", Some("s3cret"))).await, 200);
    assert_eq!(status(client.get(&url).bearer_auth("t0ken")).await, 200);
    assert_eq!(status(client.get(&url).basic_auth("ops", Some("s3cre"))).await, 401);
    assert_eq!(status(client.get(&url).basic_auth("dev", Some("s3cret"))).await, 401);
    assert_eq!(status(client.get(&url).bearer_auth("t0ke")).await, 401);
    // Plain HTTP on the HTTPS port gets no answer.
    let plain = client.get(format!("http://127.0.0.1:{port}/connectors")).basic_auth("ops", Some("s3cret"));
    assert!(plain.send().await.is_err(), "plain HTTP was answered on the HTTPS listener");
    // A connector may not be granted the directory that holds the credentials.
    let create = client
        .post(format!("https://127.0.0.1:{port}/connectors"))
        .bearer_auth("t0ken")
        .json(&json!({"name": unique("creds"), "config": {
            "connector.class": "misbehave", "topics": unique("t"),
            "plugin.grant.fs.data.path": credentials.to_str().unwrap()}}))
        .send()
        .await
        .unwrap();
    let created = create.status().as_u16();
    let body = create.text().await.unwrap();
    assert_eq!(created, 400, "{body}");
    assert!(body.contains("a REST credentials or key file"), "{body}");
    child.kill().ok();
    child.wait().ok();
}
