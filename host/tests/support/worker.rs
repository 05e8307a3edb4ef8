//! The real `spillway serve` binary, started on a free port and driven
//! through its REST API, for tests that kill and restart workers.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const PATIENCE: Duration = Duration::from_secs(90);

/// The worker config of one member of `group` (a config topic and a status
/// topic named after it, quick failure detection), written into `dir`.
pub fn group_member_config(dir: &Path, group: &str) -> PathBuf {
    let path = dir.join("worker.properties");
    let text = format!(
        "group.id={group}\n\
         config.storage.topic={group}-configs\n\
         status.storage.topic={group}-status\n\
         session.timeout.ms=6000\n\
         heartbeat.interval.ms=1000\n\
         scheduled.rebalance.max.delay.ms=0\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `spillway serve` on a free port, with its state in `dir`.
pub struct Worker {
    child: Child,
    pub url: String,
}

impl Worker {
    /// A worker logging to `dir/<log>` in `log_format` (text or json).
    pub async fn start(bootstrap: &str, dir: &Path, log_format: &str, log: &str) -> Worker {
        Worker::start_with(bootstrap, dir, log_format, log, &[]).await
    }

    /// Like [`Worker::start`], with more arguments for `serve`.
    pub async fn start_with(bootstrap: &str, dir: &Path, log_format: &str, log: &str, serve: &[&str]) -> Worker {
        let port = free_port();
        let plugins = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/plugins");
        let child = Command::new(env!("CARGO_BIN_EXE_spillway"))
            .args(["--cache-dir", std::env::temp_dir().join("spillway-test-cache").to_str().unwrap()])
            .args(["serve", "--port", &port.to_string(), "--bootstrap-servers", bootstrap])
            .args(["--plugin-dir", plugins.to_str().unwrap()])
            .args(["--state-file", super::worker_state_file(dir).to_str().unwrap()])
            .args(["--log-format", log_format])
            .args(serve)
            .env("RUST_LOG", std::env::var("SPILLWAY_TEST_WORKER_LOG").unwrap_or_else(|_| "info".into()))
            .stdout(Stdio::null())
            // A file, not a terminal: the log must come without colour codes.
            .stderr(std::fs::File::create(dir.join(log)).unwrap())
            .spawn()
            .expect("starting spillway serve");
        let worker = Worker { child, url: format!("http://127.0.0.1:{port}") };
        // reqwest builds its clients with TLS, which needs the provider.
        spillway::capabilities::tls::install_crypto_provider();
        // Healthy (KIP-1017) once it answers and, in a group, has joined:
        // before that it answers a write 409, as Connect does.
        let deadline = Instant::now() + PATIENCE;
        let healthy =
            || async { reqwest::get(format!("{}/health", worker.url)).await.is_ok_and(|r| r.status().is_success()) };
        while !healthy().await {
            assert!(Instant::now() < deadline, "the worker never became healthy");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        worker
    }

    /// The status and JSON body of a request.
    #[allow(dead_code)]
    pub async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> (u16, Value) {
        let response =
            reqwest::Client::new().request(method, format!("{}{path}", self.url)).json(&body).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    pub async fn send(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let response =
            reqwest::Client::new().request(method, format!("{}{path}", self.url)).json(&body).send().await.unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{path}: {status} {body}");
        body
    }

    pub async fn wait_running(&self, name: &str, tasks: usize) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let status: Value =
                reqwest::get(format!("{}/connectors/{name}/status", self.url)).await.unwrap().json().await.unwrap();
            let running = status["tasks"].as_array().map(|t| t.iter().filter(|t| t["state"] == "RUNNING").count());
            if running == Some(tasks) {
                return;
            }
            assert!(Instant::now() < deadline, "{tasks} tasks never ran: {status}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A counter of `/metrics`, per task.
    pub async fn metric(&self, name: &str) -> Vec<u64> {
        let text = reqwest::get(format!("{}/metrics", self.url)).await.unwrap().text().await.unwrap();
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .collect()
    }

    /// SIGSTOP (`frozen = true`) or SIGCONT: the process keeps its sockets
    /// and state but does nothing, so a test can look at a moment that
    /// stays put and then decide to kill.
    #[allow(dead_code)]
    pub fn freeze(&self, frozen: bool) {
        let signal = if frozen { "-STOP" } else { "-CONT" };
        let status = Command::new("kill").arg(signal).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill {signal} failed");
    }

    /// SIGKILL: no flush, no commit, no goodbye.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
