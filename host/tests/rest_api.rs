//! The REST API over real HTTP against a running host: a herder with the
//! built plugins (`target/plugins`, from `scripts/build-plugins.sh`) on the
//! embedded broker, served on 127.0.0.1:0.
//!
//! Waits are bounded loops over observable state; no test asserts on how
//! long anything took.

use reqwest::Method;
use serde_json::{Value, json};
use spillway::connector::WorkerDefaults;
use spillway::herder::{Herder, WorkerConfig};
use spillway::kafka::embedded::EmbeddedBroker;
use spillway::kafka::producer::Producer;
use spillway::policy::{AddrPattern, GrantPolicy};
use spillway::rest::{self, LogLevels};
use spillway::runtime::Runtime;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Registry, reload};

/// Upper bound on polling loops: generous, since the machine may be busy.
const ATTEMPTS: usize = 1200;
const POLL: Duration = Duration::from_millis(100);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn plugin_dir() -> PathBuf {
    let dir = repo().join("target/plugins");
    for plugin in ["noop-sink", "misbehave", "file-sink"] {
        let wasm = dir.join(format!("{plugin}.wasm"));
        assert!(wasm.exists(), "{} is missing: run scripts/build-plugins.sh", wasm.display());
    }
    dir
}

/// Shared by every test so that each plugin is compiled once.
fn cache_dir() -> PathBuf {
    repo().join("target/tmp/rest-api-cache")
}

type Subscriber = tracing_subscriber::layer::Layered<reload::Layer<EnvFilter, Registry>, Registry>;

/// A herder served over HTTP.
struct Host {
    url: String,
    herder: Herder,
    http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    log_handle: reload::Handle<EnvFilter, Registry>,
    /// The reload handle works only while its subscriber lives; it is not
    /// installed globally, so tests do not fight over it.
    _subscriber: Subscriber,
}

impl Host {
    async fn start(bootstrap: &str, state_file: &Path, plugin_dir: &Path) -> Host {
        Host::start_with(bootstrap, state_file, plugin_dir, WorkerDefaults::default()).await
    }

    async fn start_with(bootstrap: &str, state_file: &Path, plugin_dir: &Path, defaults: WorkerDefaults) -> Host {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().unwrap();
        let raw = BTreeMap::from([
            ("bootstrap.servers".to_string(), bootstrap.to_string()),
            ("config.storage.file".to_string(), state_file.display().to_string()),
            ("plugin.path".to_string(), plugin_dir.display().to_string()),
        ]);
        let mut config = WorkerConfig::parse(&raw).expect("a valid worker config");
        config.bind(addr);
        config.defaults = defaults;
        let runtime = Runtime::new(&cache_dir()).expect("runtime");
        let herder = Herder::start(config, runtime).await.expect("herder starts");
        let directives = "info,librdkafka=warn";
        let (layer, log_handle) = reload::Layer::new(EnvFilter::new(directives));
        let subscriber = tracing_subscriber::registry().with(layer);
        let loggers = LogLevels::new(log_handle.clone(), directives);
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(rest::serve_on(listener, herder.clone(), loggers, async {
            let _ = stopped.await;
        }));
        Host {
            url: format!("http://{addr}"),
            herder,
            http: {
                spillway::capabilities::tls::install_crypto_provider();
                reqwest::Client::new()
            },
            stop: Some(stop),
            server: Some(server),
            log_handle,
            _subscriber: subscriber,
        }
    }

    /// Stops serving and shuts the herder down (as the process would on exit).
    async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            server.await.expect("server task").expect("server");
        }
        self.herder.shutdown().await.expect("herder shutdown");
    }

    /// Sends a request; the status and the JSON body (`Null` when empty).
    async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.url));
        if let Some(body) = body {
            request = request.json(&body);
        }
        read(request.send().await.expect("request")).await
    }

    /// Sends `body` verbatim with an optional content type.
    async fn raw(&self, method: Method, path: &str, body: &str, content_type: Option<&str>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.url)).body(body.to_string());
        if let Some(ct) = content_type {
            request = request.header("content-type", ct);
        }
        read(request.send().await.expect("request")).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    async fn create(&self, name: &str, config: Value) -> Value {
        let (status, body) =
            self.call(Method::POST, "/connectors", Some(json!({"name": name, "config": config}))).await;
        assert_eq!(status, 201, "creating {name}: {body}");
        body
    }

    /// Polls the connector's status until `done` holds; panics with the last
    /// status if it never does.
    async fn wait_status(&self, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        for _ in 0..ATTEMPTS {
            let (status, body) = self.get(&format!("/connectors/{name}/status")).await;
            assert_eq!(status, 200, "status of {name}: {body}");
            if done(&body) {
                return body;
            }
            last = body;
            tokio::time::sleep(POLL).await;
        }
        panic!("{name} never became {what}; last status: {last:#}");
    }

    async fn wait_running(&self, name: &str, tasks: usize) -> Value {
        self.wait_status(name, "RUNNING", |s| {
            connector_state(s) == "RUNNING" && task_states(s) == vec!["RUNNING"; tasks]
        })
        .await
    }

    async fn metrics(&self) -> String {
        let response = self.http.get(format!("{}/metrics", self.url)).send().await.expect("metrics");
        assert_eq!(response.status(), 200);
        let ct = response.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
        response.text().await.unwrap()
    }
}

async fn read(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let is_json =
        response.headers().get("content-type").is_some_and(|ct| ct.as_bytes().starts_with(b"application/json"));
    let text = response.text().await.expect("body");
    let body = if text.is_empty() {
        Value::Null
    } else {
        assert!(is_json, "HTTP {status} answered with a non-JSON body: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("HTTP {status}: invalid JSON ({e}): {text}"))
    };
    (status, body)
}

/// Asserts Connect's error shape with this status, and returns the message.
fn assert_error(status: u16, body: &Value, expected: u16) -> String {
    assert_eq!(status, expected, "expected HTTP {expected}, got {status}: {body}");
    assert_eq!(body["error_code"], json!(expected), "error body: {body}");
    body["message"].as_str().unwrap_or_else(|| panic!("no message in {body}")).to_string()
}

fn connector_state(status: &Value) -> &str {
    status["connector"]["state"].as_str().unwrap_or("?")
}

fn task_states(status: &Value) -> Vec<&str> {
    status["tasks"]
        .as_array()
        .map(|t| t.iter().map(|t| t["state"].as_str().unwrap_or("?")).collect())
        .unwrap_or_default()
}

/// A connector config on the embedded broker (classic group: it has no share
/// groups).
fn config(plugin: &str, topic: &str, tasks: u32, extra: &[(&str, &str)]) -> Value {
    let mut config = json!({
        "connector.class": plugin,
        "tasks.max": tasks.to_string(),
        "topics": topic,
        "consumer.override.group.protocol": "classic",
        // librdkafka's mock keeps a group rebalancing for the session timeout
        // after its last member left; offsets can change only after that.
        "consumer.override.session.timeout.ms": "6000",
        "flush.interval.ms": "200",
    });
    for (k, v) in extra {
        config[*k] = json!(v);
    }
    config
}

struct Env {
    broker: EmbeddedBroker,
    bootstrap: String,
    dir: tempfile::TempDir,
}

fn env() -> Env {
    let broker = EmbeddedBroker::start(1).expect("embedded broker");
    let bootstrap = broker.bootstrap_servers();
    Env { broker, bootstrap, dir: tempfile::tempdir().unwrap() }
}

impl Env {
    async fn host(&self) -> Host {
        Host::start(&self.bootstrap, &self.dir.path().join("state.json"), &plugin_dir()).await
    }

    fn topic(&self, name: &str, partitions: i32) -> String {
        self.broker.create_topic(name, partitions).expect("topic");
        name.to_string()
    }

    async fn produce(&self, topic: &str, n: u64) {
        Producer::new(&self.bootstrap, &[]).expect("producer").send_samples(topic, 0, n).await.expect("produce");
    }
}

/// The sum of one metric's samples for a connector.
fn metric_sum(text: &str, metric: &str, connector: &str) -> f64 {
    let prefix = format!("{metric}{{connector=\"{connector}\",");
    text.lines().filter(|l| l.starts_with(&prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_info_plugins_and_validation() {
    let env = env();
    let host = env.host().await;

    let (status, info) = host.get("/").await;
    assert_eq!(status, 200);
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"));
    assert!(info["commit"].is_string());
    let cluster_id = info["kafka_cluster_id"].as_str().unwrap_or_default();
    assert!(!cluster_id.is_empty(), "the broker's cluster id: {info}");
    assert_eq!(
        host.get("/health").await,
        (200, json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}))
    );

    let (status, plugins) = host.get("/connector-plugins").await;
    assert_eq!(status, 200);
    let mut names: Vec<&str> = plugins.as_array().unwrap().iter().map(|p| p["class"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, vec!["file-sink", "mirror", "misbehave", "noop-sink", "object-sink", "s3-sink", "sql-sink"]);
    for p in plugins.as_array().unwrap() {
        assert_eq!(p["type"], "sink");
        assert!(p["digest"].as_str().unwrap().starts_with("sha256:"), "{p}");
    }
    // As Connect's `connectorsOnly=false`: the built-in transforms and
    // predicates too, each with its keys.
    let (status, all) = host.get("/connector-plugins?connectorsOnly=false").await;
    assert_eq!(status, 200);
    let kind_of = |class: &str| {
        let found = all.as_array().unwrap().iter().find(|p| p["class"] == class);
        found.map(|p| (p["type"].as_str().unwrap().to_string(), p.get("digest").is_some()))
    };
    assert_eq!(
        kind_of("org.apache.kafka.connect.transforms.InsertField$Value"),
        Some(("transformation".into(), false))
    );
    assert_eq!(kind_of("io.debezium.transforms.ExtractNewRecordState"), Some(("transformation".into(), false)));
    assert_eq!(
        kind_of("org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
        Some(("predicate".into(), false))
    );
    assert_eq!(kind_of("s3-sink"), Some(("sink".into(), true)));
    assert_eq!(
        all.as_array().unwrap().len(),
        plugins.as_array().unwrap().len() + 28,
        "7 sinks, 25 transforms, 3 predicates"
    );
    let (status, keys) = host.get("/connector-plugins/org.apache.kafka.connect.transforms.RegexRouter/config").await;
    assert_eq!(status, 200);
    let names: Vec<&str> = keys.as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["regex", "replacement"]);

    let (status, keys) = host.get("/connector-plugins/noop-sink/config").await;
    assert_eq!(status, 200);
    // As in Connect: one of topics and topics.regex, so neither is required.
    let topics = keys.as_array().unwrap().iter().find(|k| k["name"] == "topics").expect("a topics key");
    assert_eq!((&topics["required"], &topics["default_value"]), (&json!(false), &json!("")));
    let regex = keys.as_array().unwrap().iter().find(|k| k["name"] == "topics.regex").expect("a topics.regex key");
    assert_eq!((&regex["type"], &regex["required"]), (&json!("STRING"), &json!(false)));
    // A plugin's own keys, beside the host's: the S3 sink's, and the
    // secret of its grant.
    let (status, keys) = host.get("/connector-plugins/s3-sink/config").await;
    assert_eq!(status, 200);
    let key = |name: &str| keys.as_array().unwrap().iter().find(|k| k["name"] == name).cloned();
    let part_size = key("s3.part.size").expect("s3.part.size");
    assert_eq!(part_size["default_value"], "26214400", "{part_size}");
    assert!(key("rotate.schedule.interval.ms").is_some() && key("behavior.on.null.values").is_some());
    let secret = key("plugin.grant.object-store.<name>.secret.access.key").expect("the grant's secret");
    assert_eq!(secret["type"], "PASSWORD");
    // The SQL sink's, and its grant's password.
    let (status, keys) = host.get("/connector-plugins/sql-sink/config").await;
    assert_eq!(status, 200);
    let key = |name: &str| keys.as_array().unwrap().iter().find(|k| k["name"] == name).cloned();
    let mode = key("insert.mode").expect("insert.mode");
    assert_eq!(mode["default_value"], "insert", "{mode}");
    assert!(key("pk.mode").is_some() && key("auto.evolve").is_some() && key("table.name.format").is_some());
    let password = key("plugin.grant.sql.<name>.password").expect("the grant's password");
    assert_eq!(password["type"], "PASSWORD");
    let (status, body) = host.get("/connector-plugins/no-such-plugin/config").await;
    assert!(assert_error(status, &body, 404).contains("no-such-plugin"));

    // Valid: no errors. connector.class may be left out: the path names it.
    let valid = json!({"name": "v", "topics": "t", "consumer.override.group.protocol": "classic"});
    let (status, infos) = host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(valid)).await;
    assert_eq!(status, 200, "{infos}");
    assert_eq!(infos["error_count"], 0, "{infos:#}");
    assert!(infos.get("warnings").is_none(), "a classic group needs no warning: {infos:#}");
    let tolerance = infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == "errors.tolerance");
    let tolerance = tolerance.expect("errors.tolerance is listed");
    assert_eq!(tolerance["value"]["value"], "none", "an unset key shows its default, as Connect's do");
    assert!(tolerance["definition"]["order_in_group"].is_number(), "Connect's name for a key's place: {tolerance}");

    // A share group without a DLQ is valid, with a warning: the broker
    // archives a record that still fails on its last delivery.
    let share = json!({"name": "v", "topics": "t", "consumer.override.group.protocol": "share"});
    let (status, infos) = host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(share)).await;
    assert_eq!((status, infos["error_count"].as_u64()), (200, Some(0)), "{infos:#}");
    let warning = infos["warnings"][0].as_str().unwrap_or_default();
    assert!(warning.contains("archived by the broker"), "{infos:#}");

    // A key nothing reads changes nothing: validation says so, naming the
    // key it likely stands for (Confluent's spelling, which the sink reads).
    let typo = json!({"name": "v", "topics": "t", "consumer.override.group.protocol": "classic",
        "s3.compresion.type": "gzip", "errors.log.enable": "true"});
    let (status, infos) = host.call(Method::PUT, "/connector-plugins/s3-sink/config/validate", Some(typo)).await;
    assert_eq!(status, 200, "{infos}");
    let warnings: Vec<&str> = infos["warnings"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert!(
        warnings[0].starts_with("errors.log.enable: neither the host nor plugin s3-sink reads this key"),
        "{warnings:#?}"
    );
    assert!(warnings[1].ends_with("did you mean s3.compression.type?"), "{warnings:#?}");

    // Invalid is still a 200, with the problem listed against its key.
    let invalid = json!({"name": "v", "tasks.max": 0});
    let (status, infos) = host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(invalid)).await;
    assert_eq!(status, 200);
    assert!(infos["error_count"].as_u64().unwrap() >= 2, "{infos:#}");
    let errors_of = |key: &str| -> Vec<Value> {
        let config = infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == key);
        config.map(|c| c["value"]["errors"].as_array().unwrap().clone()).unwrap_or_default()
    };
    assert!(!errors_of("topics").is_empty(), "{infos:#}");
    assert!(!errors_of("tasks.max").is_empty(), "{infos:#}");

    let mismatch = json!({"connector.class": "file-sink", "topics": "t"});
    let (status, body) = host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(mismatch)).await;
    assert!(assert_error(status, &body, 400).contains("does not match"));

    // A plugin that is not installed is a bad request, as in Connect.
    let unknown = json!({"topics": "t"});
    let (status, body) =
        host.call(Method::PUT, "/connector-plugins/no-such-plugin/config/validate", Some(unknown)).await;
    assert!(assert_error(status, &body, 400).contains("no-such-plugin"));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connector_crud() {
    let env = env();
    let topic = env.topic("crud", 1);
    let host = env.host().await;

    let response = host
        .http
        .post(format!("{}/connectors", host.url))
        .json(&json!({"name": "crud-a", "config": config("noop-sink", &topic, 2, &[])}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["location"], "/connectors/crud-a");
    let created: Value = response.json().await.unwrap();
    assert_eq!(created["name"], "crud-a");
    assert_eq!(created["type"], "sink");
    assert_eq!(created["config"]["name"], "crud-a", "the name is put into the config");
    assert_eq!(created["config"]["tasks.max"], "2");

    let (status, body) = host
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "crud-a", "config": config("noop-sink", &topic, 1, &[])})),
        )
        .await;
    assert!(assert_error(status, &body, 409).contains("crud-a"));

    assert_eq!(host.get("/connectors").await, (200, json!(["crud-a"])));
    let (status, info) = host.get("/connectors/crud-a").await;
    assert_eq!(status, 200);
    // With a trailing slash, as Connect's routes match (and clients call).
    assert_eq!(host.get("/connectors/").await, (200, json!(["crud-a"])));
    assert_eq!(host.get("/connectors/crud-a/").await, (200, info.clone()));
    assert_eq!(host.get("/connectors/crud-a/status/").await.0, 200);
    assert_eq!(info["tasks"], json!([{"connector": "crud-a", "task": 0}, {"connector": "crud-a", "task": 1}]));
    let (status, cfg) = host.get("/connectors/crud-a/config").await;
    assert_eq!((status, &cfg["topics"]), (200, &json!(topic)));
    let (status, tasks) = host.get("/connectors/crud-a/tasks").await;
    assert_eq!(status, 200);
    assert_eq!(tasks[1]["id"], json!({"connector": "crud-a", "task": 1}));
    assert_eq!(tasks[1]["config"]["topics"], json!(topic));

    let status = host.wait_running("crud-a", 2).await;
    assert_eq!(status["type"], "sink");
    assert_eq!(status["connector"]["worker_id"], host.url.trim_start_matches("http://"));
    let (code, task) = host.get("/connectors/crud-a/tasks/1/status").await;
    assert_eq!((code, &task["id"], &task["state"]), (200, &json!(1), &json!("RUNNING")));
    let (code, body) = host.get("/connectors/crud-a/tasks/7/status").await;
    assert_error(code, &body, 404);

    // Expansions: Connect's map shape; unknown kinds are ignored.
    let (status, expanded) = host.get("/connectors?expand=status&expand=info&expand=bogus").await;
    assert_eq!(status, 200);
    let entry = expanded["crud-a"].as_object().expect("keyed by name");
    let mut kinds: Vec<&String> = entry.keys().collect();
    kinds.sort();
    assert_eq!(kinds, vec!["info", "status"]);
    assert_eq!(expanded["crud-a"]["info"]["config"]["connector.class"], "noop-sink");
    assert_eq!(expanded["crud-a"]["status"]["name"], "crud-a");
    let (_, only_status) = host.get("/connectors?expand=status").await;
    assert!(only_status["crud-a"].get("info").is_none() && only_status["crud-a"].get("status").is_some());

    // PUT: 201 when it creates, 200 when it replaces.
    let (status, body) =
        host.call(Method::PUT, "/connectors/crud-b/config", Some(config("noop-sink", &topic, 1, &[]))).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["name"], "crud-b");
    let (status, body) = host
        .call(
            Method::PUT,
            "/connectors/crud-b/config",
            Some(config("noop-sink", &topic, 1, &[("batch.max.records", "50")])),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config"]["batch.max.records"], "50");
    let mut other = config("noop-sink", &topic, 1, &[]);
    other["name"] = json!("someone-else");
    let (status, body) = host.call(Method::PUT, "/connectors/crud-b/config", Some(other)).await;
    assert!(assert_error(status, &body, 400).contains("doesn't match"));

    // PATCH merges; null removes.
    let patch = json!({"batch.max.records": null, "flush.interval.ms": "300"});
    let (status, body) = host.call(Method::PATCH, "/connectors/crud-b/config", Some(patch)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body["config"].get("batch.max.records").is_none(), "{body}");
    assert_eq!(body["config"]["flush.interval.ms"], "300");
    assert_eq!(body["config"]["topics"], json!(topic), "untouched keys stay");
    let (status, body) = host.call(Method::PATCH, "/connectors/nope/config", Some(json!({"a": "b"}))).await;
    assert_error(status, &body, 404);
    let (status, body) = host.call(Method::PATCH, "/connectors/crud-b/config", Some(json!({"tasks.max": "0"}))).await;
    assert_error(status, &body, 400);

    // DELETE: 204, then gone.
    let (status, body) = host.call(Method::DELETE, "/connectors/crud-b", None).await;
    assert_eq!((status, body), (204, Value::Null));
    let (status, body) = host.get("/connectors/crud-b").await;
    assert!(assert_error(status, &body, 404).contains("crud-b"));
    let (status, body) = host.call(Method::DELETE, "/connectors/crud-b", None).await;
    assert_error(status, &body, 404);
    assert_eq!(host.get("/connectors").await, (200, json!(["crud-a"])));
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_json_4xx() {
    let env = env();
    let host = env.host().await;
    let good = || config("noop-sink", "bad-input", 1, &[]);

    let (s, b) = host.raw(Method::POST, "/connectors", r#"{"name": "x", "config": {"#, Some("application/json")).await;
    assert!(assert_error(s, &b, 400).contains("Invalid JSON"));
    let (s, b) = host.raw(Method::POST, "/connectors", "", Some("application/json")).await;
    assert_error(s, &b, 400);
    let (s, b) = host.raw(Method::POST, "/connectors", "[1, 2]", Some("application/json")).await;
    assert_error(s, &b, 400);
    // The bodies a web page can make a browser send without asking first:
    // refused as Connect refuses them, before they are read.
    let json_body = json!({"name": "x", "config": good()}).to_string();
    for content_type in
        [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data"), None]
    {
        let (s, b) = host.raw(Method::POST, "/connectors", &json_body, content_type).await;
        assert!(assert_error(s, &b, 415).contains("application/json"), "{content_type:?}: {b}");
    }
    // DNS rebinding: a page's own name, resolved to the worker.
    let rebound = host.http.get(format!("{}/connectors", host.url)).header("host", "rebound.example:8083");
    let (s, b) = read(rebound.send().await.unwrap()).await;
    assert!(assert_error(s, &b, 421).contains("rest.host.names"), "{b}");
    let local = host.http.get(format!("{}/connectors", host.url)).header("host", "localhost:8083");
    assert_eq!(read(local.send().await.unwrap()).await.0, 200);
    let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"name": "x"}))).await;
    assert!(assert_error(s, &b, 400).contains("config"));
    let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"config": good()}))).await;
    assert!(assert_error(s, &b, 400).contains("name"));
    let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"name": "x", "config": {"k": [1]}}))).await;
    assert_error(s, &b, 400);
    let (s, b) = host
        .call(Method::POST, "/connectors", Some(json!({"name": "x", "config": good(), "initial_state": "DANCING"})))
        .await;
    assert!(assert_error(s, &b, 400).contains("initial_state"));
    let mut mismatch = good();
    mismatch["name"] = json!("y");
    let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"name": "x", "config": mismatch}))).await;
    assert!(assert_error(s, &b, 400).contains("doesn't match"));

    // Missing required config and an unknown plugin: 400 naming the problem.
    let mut no_topics = good();
    no_topics.as_object_mut().unwrap().remove("topics");
    let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"name": "x", "config": no_topics.clone()}))).await;
    let message = assert_error(s, &b, 400);
    for key in ["topics", "topics.regex"] {
        assert!(message.contains(&format!("\n{key}: Must configure one of topics or topics.regex")), "{message}");
    }
    // Both topics and topics.regex; a regex that is not one; one that
    // librdkafka's POSIX regex would read otherwise: each named under its key.
    for (regex, with_topics, expected) in [
        ("bad-input", true, "topics.regex: topics and topics.regex are mutually exclusive options, but both are set."),
        (
            "bad-(input",
            false,
            "topics.regex: Invalid value 'bad-(input' for configuration topics.regex: not a valid regular expression",
        ),
        ("bad-\\d+", false, "topics.regex: Invalid value 'bad-\\d+' for configuration topics.regex: \\d is not POSIX"),
    ] {
        let mut config = if with_topics { good() } else { no_topics.clone() };
        config["topics.regex"] = json!(regex);
        let (s, b) = host.call(Method::POST, "/connectors", Some(json!({"name": "x", "config": config}))).await;
        let message = assert_error(s, &b, 400);
        assert!(message.contains(expected), "{regex}: {message}");
    }
    let (s, b) = host
        .call(Method::POST, "/connectors", Some(json!({"name": "x", "config": config("no-such-plugin", "t", 1, &[])})))
        .await;
    assert!(assert_error(s, &b, 400).contains("no-such-plugin"));
    assert_eq!(host.get("/connectors").await, (200, json!([])), "nothing was created");

    // JSON with its charset is JSON.
    let body = json!({"name": "lenient", "config": good()}).to_string();
    let (s, b) = host.raw(Method::POST, "/connectors", &body, Some("application/json; charset=utf-8")).await;
    assert_eq!(s, 201, "{b}");

    // Routing errors are JSON too.
    let (s, b) = host.get("/no/such/path").await;
    assert_eq!(assert_error(s, &b, 404), "HTTP 404 Not Found");
    let (s, b) = host.call(Method::DELETE, "/connectors", None).await;
    assert_eq!(assert_error(s, &b, 405), "HTTP 405 Method Not Allowed");
    let (s, b) = host.call(Method::POST, "/connectors/lenient/pause", None).await;
    assert_error(s, &b, 405);
    let (s, b) = host.get("/connectors/lenient/tasks/abc/status").await;
    assert_error(s, &b, 404);
    let (s, b) = host.get("/connectors/lenient/tasks/-1/status").await;
    assert_error(s, &b, 404);
    let (s, b) = host.call(Method::POST, "/connectors/lenient/restart?includeTasks=maybe", None).await;
    assert!(assert_error(s, &b, 400).contains("includeTasks"));

    // Every connector sub-resource answers 404 for an unknown connector.
    let unknown: [(Method, &str, Option<Value>); 16] = [
        (Method::GET, "", None),
        (Method::DELETE, "", None),
        (Method::GET, "/config", None),
        (Method::PATCH, "/config", Some(json!({"a": "b"}))),
        (Method::GET, "/status", None),
        (Method::GET, "/tasks", None),
        (Method::GET, "/tasks/0/status", None),
        (Method::POST, "/tasks/0/restart", None),
        (Method::POST, "/restart", None),
        (Method::POST, "/restart?includeTasks=true", None),
        (Method::PUT, "/pause", None),
        (Method::PUT, "/resume", None),
        (Method::PUT, "/stop", None),
        (Method::GET, "/topics", None),
        (Method::PUT, "/topics/reset", None),
        (Method::GET, "/offsets", None),
    ];
    for (method, suffix, body) in unknown {
        let (s, b) = host.call(method.clone(), &format!("/connectors/ghost{suffix}"), body).await;
        let message = assert_error(s, &b, 404);
        assert!(message.contains("ghost"), "{method} {suffix}: {message}");
    }
    host.shutdown().await;
}

/// KIP-745's matrix: `includeTasks` × `onlyFailed` against a healthy
/// connector (all RUNNING), one whose tasks FAILED (misbehave `mode=panic`),
/// and one whose Connector instance FAILED (its plugin is gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kip745_restart_matrix() {
    let env = env();
    let state_file = env.dir.path().join("state.json");

    // A connector whose plugin disappears across a host restart: its
    // Connector instance is FAILED afterwards.
    let only_noop = env.dir.path().join("plugins-a");
    let only_misbehave = env.dir.path().join("plugins-b");
    for (dir, plugin) in [(&only_noop, "noop-sink"), (&only_misbehave, "misbehave")] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::copy(plugin_dir().join(format!("{plugin}.wasm")), dir.join(format!("{plugin}.wasm"))).unwrap();
    }
    let orphan_topic = env.topic("orphan", 1);
    let host = Host::start(&env.bootstrap, &state_file, &only_noop).await;
    host.create("orphan", config("noop-sink", &orphan_topic, 1, &[])).await;
    host.shutdown().await;
    let host = Host::start(&env.bootstrap, &state_file, &only_misbehave).await;
    let orphan = host.wait_status("orphan", "FAILED", |s| connector_state(s) == "FAILED").await;
    assert!(orphan["connector"]["trace"].as_str().unwrap().contains("noop-sink"), "{orphan}");

    let healthy_topic = env.topic("healthy", 2);
    let failing_topic = env.topic("failing", 2);
    host.create("healthy", config("misbehave", &healthy_topic, 2, &[("mode", "accept")])).await;
    host.create("failing", config("misbehave", &failing_topic, 2, &[("mode", "panic")])).await;
    host.wait_running("healthy", 2).await;
    env.produce(&failing_topic, 20).await;
    let all_failed = |s: &Value| connector_state(s) == "RUNNING" && task_states(s) == vec!["FAILED"; 2];
    host.wait_status("failing", "tasks FAILED", all_failed).await;

    let h = &host;
    let restart = |name: &str, include_tasks: bool, only_failed: bool| {
        let path = format!("/connectors/{name}/restart?includeTasks={include_tasks}&onlyFailed={only_failed}");
        async move { h.call(Method::POST, &path, None).await }
    };
    // (connector state, task states) in a 202 body.
    let states = |body: &Value| (connector_state(body).to_string(), task_states(body).join(","));

    // Healthy: only the flags decide.
    assert_eq!(restart("healthy", false, false).await, (204, Value::Null));
    host.wait_running("healthy", 2).await;
    let (s, b) = restart("healthy", true, false).await;
    assert_eq!((s, states(&b)), (202, ("RESTARTING".into(), "RESTARTING,RESTARTING".into())), "{b}");
    assert_eq!(b["name"], "healthy");
    host.wait_running("healthy", 2).await;
    let (s, b) = restart("healthy", false, true).await;
    assert_eq!((s, states(&b)), (202, ("RUNNING".into(), "RUNNING,RUNNING".into())), "nothing failed: {b}");
    let (s, b) = restart("healthy", true, true).await;
    assert_eq!((s, states(&b)), (202, ("RUNNING".into(), "RUNNING,RUNNING".into())), "nothing failed: {b}");

    // Failed tasks: onlyFailed targets them and not the running connector.
    let (s, b) = restart("failing", true, true).await;
    assert_eq!((s, states(&b)), (202, ("RUNNING".into(), "RESTARTING,RESTARTING".into())), "{b}");
    // The records are still there: the restarted tasks fail again.
    host.wait_status("failing", "tasks FAILED again", all_failed).await;
    let (s, b) = restart("failing", false, true).await;
    assert_eq!((s, states(&b)), (202, ("RUNNING".into(), "FAILED,FAILED".into())), "tasks not included: {b}");
    let (s, b) = restart("failing", true, false).await;
    assert_eq!((s, states(&b)), (202, ("RESTARTING".into(), "RESTARTING,RESTARTING".into())), "{b}");
    host.wait_status("failing", "tasks FAILED again", all_failed).await;
    assert_eq!(restart("failing", false, false).await, (204, Value::Null));

    // A failed Connector instance: onlyFailed restarts it (and it fails
    // again: the plugin is still missing).
    let (s, b) = restart("orphan", false, true).await;
    assert_eq!((s, states(&b)), (202, ("RESTARTING".into(), String::new())), "{b}");
    host.wait_status("orphan", "FAILED again", |s| connector_state(s) == "FAILED").await;
    let (s, b) = restart("orphan", true, true).await;
    assert_eq!((s, states(&b)), (202, ("RESTARTING".into(), String::new())), "{b}");

    // One task at a time: 204, and unknown ones are 404.
    assert_eq!(host.call(Method::POST, "/connectors/healthy/tasks/1/restart", None).await, (204, Value::Null));
    let (s, b) = host.call(Method::POST, "/connectors/healthy/tasks/9/restart", None).await;
    assert_error(s, &b, 404);
    for (include_tasks, only_failed) in [(false, false), (true, false), (false, true), (true, true)] {
        let (s, b) = restart("ghost", include_tasks, only_failed).await;
        assert_error(s, &b, 404);
    }

    // Afterwards everything settles back where it belongs.
    host.wait_running("healthy", 2).await;
    host.wait_status("failing", "tasks FAILED", all_failed).await;
    host.wait_status("orphan", "FAILED", |s| connector_state(s) == "FAILED").await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_stop() {
    let env = env();
    let topic = env.topic("lifecycle", 2);
    let host = env.host().await;
    host.create("life", config("noop-sink", &topic, 2, &[])).await;
    host.wait_running("life", 2).await;

    assert_eq!(host.call(Method::PUT, "/connectors/life/pause", None).await, (202, Value::Null));
    host.wait_status("life", "PAUSED", |s| connector_state(s) == "PAUSED" && task_states(s) == vec!["PAUSED"; 2]).await;
    assert_eq!(host.call(Method::PUT, "/connectors/life/pause", None).await.0, 202, "idempotent");

    assert_eq!(host.call(Method::PUT, "/connectors/life/resume", None).await, (202, Value::Null));
    host.wait_running("life", 2).await;

    assert_eq!(host.call(Method::PUT, "/connectors/life/stop", None).await, (204, Value::Null));
    let stopped = host.wait_status("life", "STOPPED", |s| connector_state(s) == "STOPPED").await;
    assert_eq!(stopped["tasks"], json!([]), "a stopped connector runs no tasks");
    let (_, info) = host.get("/connectors/life").await;
    assert_eq!(info["tasks"], json!([]));

    assert_eq!(host.call(Method::PUT, "/connectors/life/resume", None).await, (202, Value::Null));
    host.wait_running("life", 2).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connectors_and_target_states_survive_a_host_restart() {
    let env = env();
    let topic = env.topic("persist", 1);
    let host = env.host().await;
    let running = config("noop-sink", &topic, 1, &[("batch.max.records", "77")]);
    host.create("p-running", running.clone()).await;
    let paused = json!({"name": "p-paused", "config": config("noop-sink", &topic, 2, &[]), "initial_state": "PAUSED"});
    assert_eq!(host.call(Method::POST, "/connectors", Some(paused)).await.0, 201);
    host.create("p-stopped", config("noop-sink", &topic, 1, &[])).await;
    assert_eq!(host.call(Method::PUT, "/connectors/p-stopped/stop", None).await.0, 204);
    host.wait_running("p-running", 1).await;
    host.shutdown().await;

    let host = env.host().await;
    assert_eq!(host.get("/connectors").await, (200, json!(["p-paused", "p-running", "p-stopped"])));
    let (_, cfg) = host.get("/connectors/p-running/config").await;
    assert_eq!(cfg["batch.max.records"], "77");
    assert_eq!(cfg["name"], "p-running");
    host.wait_running("p-running", 1).await;
    host.wait_status("p-paused", "PAUSED", |s| connector_state(s) == "PAUSED" && task_states(s) == vec!["PAUSED"; 2])
        .await;
    host.wait_status("p-stopped", "STOPPED", |s| connector_state(s) == "STOPPED" && task_states(s).is_empty()).await;
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_topics_after_records_flow() {
    let env = env();
    let topic = env.topic("metered", 1);
    let host = env.host().await;
    host.create("metered", config("noop-sink", &topic, 1, &[])).await;
    host.wait_running("metered", 1).await;
    env.produce(&topic, 50).await;

    let mut text = String::new();
    for _ in 0..ATTEMPTS {
        text = host.metrics().await;
        let accepted = metric_sum(&text, "spillway_records_accepted_total", "metered");
        if accepted >= 50.0 && metric_sum(&text, "spillway_task_records_in_flight", "metered") == 0.0 {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(metric_sum(&text, "spillway_records_accepted_total", "metered"), 50.0, "{text}");
    assert_eq!(metric_sum(&text, "spillway_records_polled_total", "metered"), 50.0);
    assert_eq!(metric_sum(&text, "spillway_records_put_total", "metered"), 50.0);
    assert_eq!(metric_sum(&text, "spillway_records_rejected_total", "metered"), 0.0);
    for family in
        ["spillway_records_released_total", "spillway_records_dead_lettered_total", "spillway_acks_refused_total"]
    {
        assert!(text.contains(&format!("# TYPE {family} counter\n")), "{family}");
        assert!(text.contains(&format!("{family}{{connector=\"metered\",task=\"0\"}} ")), "{family}");
    }
    assert!(text.contains("# TYPE spillway_plugin_memory_bytes gauge\n"));
    // All 50 accepted: none left in flight.
    assert_eq!(metric_sum(&text, "spillway_task_records_in_flight", "metered"), 0.0);
    assert!(text.contains("spillway_commit_failures_total{connector=\"metered\",task=\"0\"} "));
    let count = metric_sum(&text, "spillway_put_latency_seconds_count", "metered");
    assert!(count >= 1.0, "{text}");
    let inf = text
        .lines()
        .find(|l| l.starts_with("spillway_put_latency_seconds_bucket{connector=\"metered\",task=\"0\",le=\"+Inf\"}"))
        .expect("+Inf bucket");
    assert_eq!(inf.rsplit(' ').next().unwrap().parse::<f64>().unwrap(), count);
    assert!(metric_sum(&text, "spillway_put_latency_seconds_sum", "metered") >= 0.0);

    // Connect's worker metrics by state: one connector, its task running.
    for line in [
        "spillway_connector_count 1\n",
        "spillway_task_count 1\n",
        "spillway_connector_running_task_count{connector=\"metered\"} 1\n",
        "spillway_connector_paused_task_count{connector=\"metered\"} 0\n",
        "spillway_connector_status{connector=\"metered\",status=\"running\"} 1\n",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    // Active topics (KIP-558): what the connector has used, until reset.
    assert_eq!(host.get("/connectors/metered/topics").await, (200, json!({"metered": {"topics": [topic]}})));
    assert_eq!(host.call(Method::PUT, "/connectors/metered/topics/reset", None).await, (202, Value::Null));
    assert_eq!(host.get("/connectors/metered/topics").await, (200, json!({"metered": {"topics": []}})));

    // Paused, the state gauges move with it.
    assert_eq!(host.call(Method::PUT, "/connectors/metered/pause", None).await.0, 202);
    host.wait_status("metered", "PAUSED", |s| connector_state(s) == "PAUSED" && task_states(s) == vec!["PAUSED"]).await;
    let text = host.metrics().await;
    for line in [
        "spillway_connector_paused_task_count{connector=\"metered\"} 1\n",
        "spillway_connector_running_task_count{connector=\"metered\"} 0\n",
        "spillway_connector_status{connector=\"metered\",status=\"paused\"} 1\n",
        "spillway_connector_status{connector=\"metered\",status=\"running\"} 0\n",
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }

    host.shutdown().await;
}

/// A plugin on a host capability, through the whole API: granted, its
/// records land as objects, each once, and /metrics counts the operations;
/// not granted, its task fails naming the interface to grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_end_to_end_granted_and_not() {
    let env = env();
    let topic = env.topic("objects", 1);
    let bucket = env.dir.path().join("bucket");
    let url = format!("file://{}", bucket.display());
    let host = env.host().await;
    host.create("objects", config("object-sink", &topic, 1, &[("plugin.grant.object-store.out.url", &url)])).await;
    host.wait_running("objects", 1).await;
    env.produce(&topic, 40).await;

    // Every record in exactly one line of one object (no fault is injected).
    let offsets = || -> Vec<i64> {
        let dir = bucket.join(&topic).join("0");
        let mut offsets: Vec<i64> = std::fs::read_dir(&dir)
            .map(|entries| entries.flatten().map(|e| std::fs::read_to_string(e.path()).unwrap()).collect::<Vec<_>>())
            .unwrap_or_default()
            .iter()
            .flat_map(|text| {
                text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["offset"].as_i64().unwrap())
            })
            .collect();
        offsets.sort();
        offsets
    };
    for _ in 0..ATTEMPTS {
        if offsets().len() >= 40 {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(offsets(), (0..40).collect::<Vec<i64>>(), "each record exactly once");
    let text = host.metrics().await;
    let puts = text
        .lines()
        .find(|l| l.starts_with(r#"spillway_capability_calls_total{capability="object-store",op="put",outcome="ok"}"#))
        .unwrap_or_else(|| panic!("no object-store put counted: {text}"));
    assert!(puts.rsplit(' ').next().unwrap().parse::<f64>().unwrap() >= 1.0, "{puts}");

    // The same plugin without the grant: its task fails and says what to add.
    host.create("ungranted", config("object-sink", &topic, 1, &[])).await;
    let status = host.wait_status("ungranted", "task FAILED", |s| task_states(s) == vec!["FAILED"]).await;
    let trace = status["tasks"][0]["trace"].as_str().unwrap_or_default();
    assert!(trace.contains("imports 'spillway:object-store/buckets@0.1.1'"), "{status:#}");
    assert!(trace.contains("plugin.grant.object-store.<name>"), "{status:#}");

    // Old grant spellings validate, with a warning naming the new one.
    let old = config("noop-sink", &topic, 1, &[("name", "old"), ("plugin.grant.fs.dirs", "/srv/spillway")]);
    let (status, infos) = host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(old)).await;
    assert_eq!((status, infos["error_count"].as_u64()), (200, Some(0)), "{infos:#}");
    let warnings = infos["warnings"].to_string();
    assert!(
        warnings.contains("plugin.grant.fs.dirs is an old spelling")
            && warnings.contains("plugin.grant.fs.<name>.path")
    );
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_of_classic_and_share_connectors() {
    let env = env();
    let topic = env.topic("offsets", 1);
    let host = env.host().await;
    host.create("classic", config("noop-sink", &topic, 1, &[])).await;
    host.wait_running("classic", 1).await;
    env.produce(&topic, 30).await;

    let expected = |offset: Value| json!({"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": offset}]});
    let mut last = Value::Null;
    for _ in 0..ATTEMPTS {
        let (status, body) = host.get("/connectors/classic/offsets").await;
        assert_eq!(status, 200, "{body}");
        if body == expected(json!({"kafka_offset": 30})) {
            break;
        }
        last = body;
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(host.get("/connectors/classic/offsets").await.1, expected(json!({"kafka_offset": 30})), "last: {last}");

    let alter = json!({"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]});
    let (s, b) = host.call(Method::PATCH, "/connectors/classic/offsets", Some(alter.clone())).await;
    assert!(assert_error(s, &b, 400).contains("STOPPED"), "only a stopped connector's offsets change");
    assert_eq!(host.call(Method::PUT, "/connectors/classic/stop", None).await.0, 204);

    let (s, b) = host.call(Method::PATCH, "/connectors/classic/offsets", Some(json!({"offsets": []}))).await;
    assert_error(s, &b, 400);
    let wrong_topic = json!({"offsets": [{"partition": {"kafka_topic": "elsewhere", "kafka_partition": 0}, "offset": {"kafka_offset": 1}}]});
    let (s, b) = host.call(Method::PATCH, "/connectors/classic/offsets", Some(wrong_topic)).await;
    assert!(assert_error(s, &b, 400).contains("elsewhere"));
    let negative = json!({"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": -3}}]});
    let (s, b) = host.call(Method::PATCH, "/connectors/classic/offsets", Some(negative)).await;
    assert_error(s, &b, 400);

    let (s, b) = host.call(Method::PATCH, "/connectors/classic/offsets", Some(alter)).await;
    assert_eq!((s, b), (200, json!({"message": "The offsets for this connector have been altered successfully"})));
    assert_eq!(host.get("/connectors/classic/offsets").await, (200, expected(json!({"kafka_offset": 5}))));
    let (s, b) = host.call(Method::DELETE, "/connectors/classic/offsets", None).await;
    assert_eq!((s, b), (200, json!({"message": "The offsets for this connector have been reset successfully"})));
    // The mock has no DeleteGroups: reset falls back to moving the group to
    // the beginning of each partition (group_offsets.rs covers the deletion).
    assert_eq!(host.get("/connectors/classic/offsets").await, (200, expected(json!({"kafka_offset": 0}))));

    // A topic that does not exist yet has no partitions: nothing to reset.
    host.create("early", config("noop-sink", "not-yet-created", 1, &[])).await;
    assert_eq!(host.call(Method::PUT, "/connectors/early/stop", None).await.0, 204);
    let (s, b) = host.call(Method::DELETE, "/connectors/early/offsets", None).await;
    assert_eq!((s, b), (200, json!({"message": "The offsets for this connector have been reset successfully"})));
    assert_eq!(host.get("/connectors/early/offsets").await, (200, json!({"offsets": []})));

    // A share-group connector: the mock lacks the share-group offset APIs,
    // and the 400 names the one missing.
    let mut share = config("noop-sink", &topic, 1, &[]);
    share["consumer.override.group.protocol"] = json!("share");
    host.create("shared", share).await;
    let (s, b) = host.get("/connectors/shared/offsets").await;
    assert!(assert_error(s, &b, 400).contains("does not serve DescribeShareGroupOffsets"), "{b}");
    assert_eq!(host.call(Method::PUT, "/connectors/shared/stop", None).await.0, 204);
    let (s, b) = host.call(Method::DELETE, "/connectors/shared/offsets", None).await;
    assert!(assert_error(s, &b, 400).contains("does not serve"), "{b}");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loggers_change_the_live_filter() {
    let env = env();
    let host = env.host().await;

    let (s, all) = host.get("/admin/loggers").await;
    assert_eq!(s, 200);
    assert_eq!(all["root"], json!({"level": "INFO", "last_modified": null}));
    assert_eq!(all["librdkafka"], json!({"level": "WARN", "last_modified": null}));

    let (s, b) = host.call(Method::PUT, "/admin/loggers/spillway::herder", Some(json!({"level": "debug"}))).await;
    assert_eq!((s, b), (200, json!(["spillway::herder"])));
    let (s, one) = host.get("/admin/loggers/spillway::herder").await;
    assert_eq!((s, &one["level"]), (200, &json!("DEBUG")));
    assert!(one["last_modified"].as_u64().unwrap() > 0);
    let filter = host.log_handle.with_current(|f| f.to_string()).unwrap();
    assert!(filter.contains("spillway::herder=debug"), "{filter}");

    // A parent takes its children along.
    let (s, b) = host.call(Method::PUT, "/admin/loggers/spillway", Some(json!({"level": "TRACE"}))).await;
    assert_eq!((s, b), (200, json!(["spillway", "spillway::herder"])));
    let filter = host.log_handle.with_current(|f| f.to_string()).unwrap();
    assert!(filter.contains("spillway=trace") && filter.contains("spillway::herder=trace"), "{filter}");
    let (s, b) = host.call(Method::PUT, "/admin/loggers/root?scope=cluster", Some(json!({"level": "WARN"}))).await;
    assert_eq!((s, b), (204, Value::Null));
    assert_eq!(host.get("/admin/loggers/root").await.1["level"], "WARN");
    assert_eq!(host.get("/admin/loggers/spillway").await.1["level"], "WARN", "root sets every logger");

    // Connect's errors: unknown level 404, no level 400, unknown logger 404.
    let (s, b) = host.call(Method::PUT, "/admin/loggers/spillway", Some(json!({"level": "LOUD"}))).await;
    assert!(assert_error(s, &b, 404).contains("LOUD"));
    let (s, b) = host.call(Method::PUT, "/admin/loggers/spillway", Some(json!({}))).await;
    assert!(assert_error(s, &b, 400).contains("level"));
    let (s, b) = host.raw(Method::PUT, "/admin/loggers/spillway", "{level:", Some("application/json")).await;
    assert_error(s, &b, 400);
    let (s, b) = host.call(Method::PUT, "/admin/loggers/a%3Db", Some(json!({"level": "INFO"}))).await;
    assert_error(s, &b, 400);
    let (s, b) = host.get("/admin/loggers/never.set").await;
    assert!(assert_error(s, &b, 404).contains("never.set"));
    host.shutdown().await;
}

/// Every operation the OpenAPI document lists is routed (no generic 404 or
/// 405), and the document is OpenAPI 3.0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_document_matches_the_routes() {
    let env = env();
    let host = env.host().await;
    let (s, doc) = host.get("/openapi.json").await;
    assert_eq!(s, 200);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.0."));
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    let mut operations = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        let concrete = path
            .replace("{connector}", "ghost")
            .replace("{task}", "0")
            .replace("{plugin}", "noop-sink")
            .replace("{logger}", "root");
        for method in item.as_object().unwrap().keys() {
            let method: Method = method.to_uppercase().parse().unwrap();
            let body = matches!(method, Method::PUT | Method::PATCH | Method::POST).then(|| json!({}));
            let response = host.http.request(method.clone(), format!("{}{concrete}", host.url));
            let response = match &body {
                Some(b) => response.json(b),
                None => response,
            };
            let response = response.send().await.unwrap();
            let status = response.status().as_u16();
            let text = response.text().await.unwrap();
            assert!(
                !text.contains("HTTP 404 Not Found") && status != 405 && status < 500,
                "{method} {path}: HTTP {status} {text}"
            );
            operations += 1;
        }
    }
    assert!(operations >= 28, "{operations} operations documented");
    host.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_commands_against_a_live_server() {
    use spillway::cli::{
        ClientArgs, ConnectorsCommand as C, ErrorKind, Output, PluginsCommand as P, connectors, plugins,
    };
    let env = env();
    let topic = env.topic("cli", 1);
    let host = env.host().await;
    let url = host.url.clone();
    let args = ClientArgs::new(&url, Output::Table);

    let file = env.dir.path().join("connector.json");
    std::fs::write(&file, json!({"name": "cli-sink", "config": config("noop-sink", &topic, 2, &[])}).to_string())
        .unwrap();
    assert_eq!(
        connectors(&args, C::Create { file: file.clone() }).await.unwrap(),
        "created connector cli-sink (2 task(s))\n"
    );
    let again = connectors(&args, C::Create { file }).await.unwrap_err();
    assert_eq!(
        (again.kind, again.message.as_str()),
        (ErrorKind::Refused, "Connector cli-sink already exists (HTTP 409)")
    );
    let missing_file = connectors(&args, C::Create { file: env.dir.path().join("nowhere.json") }).await.unwrap_err();
    assert_eq!(missing_file.kind, ErrorKind::Local, "{missing_file}");
    host.wait_running("cli-sink", 2).await;

    let worker = url.trim_start_matches("http://");
    let list = connectors(&args, C::List).await.unwrap();
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 2, "{list}");
    assert!(lines[0].starts_with("CONNECTOR  PLUGIN     STATE    TASKS  WORKER"), "{list}");
    assert_eq!(lines[1], format!("cli-sink   noop-sink  RUNNING  2/2    {worker}"));

    let status = connectors(&args, C::Status { name: "cli-sink".into() }).await.unwrap();
    assert!(
        status.starts_with(&format!("connector cli-sink (sink): RUNNING on {worker}, tasks running 2/2\n")),
        "{status}"
    );
    assert!(status.contains(&format!("\n1     RUNNING  {worker}")), "{status}");

    let restarted = connectors(&args, C::Restart { name: "cli-sink".into(), include_tasks: false, only_failed: false });
    assert_eq!(restarted.await.unwrap(), "restarted connector cli-sink\n");
    let accepted = connectors(&args, C::Restart { name: "cli-sink".into(), include_tasks: true, only_failed: false });
    let accepted = accepted.await.unwrap();
    assert!(accepted.starts_with("restart of cli-sink accepted:\nconnector cli-sink (sink): RESTARTING"), "{accepted}");
    host.wait_running("cli-sink", 2).await;

    assert_eq!(
        connectors(&args, C::Pause { name: "cli-sink".into() }).await.unwrap(),
        "pause of connector cli-sink requested\n"
    );
    host.wait_status("cli-sink", "PAUSED", |s| connector_state(s) == "PAUSED").await;
    assert_eq!(
        connectors(&args, C::Stop { name: "cli-sink".into() }).await.unwrap(),
        "stop of connector cli-sink requested\n"
    );
    host.wait_status("cli-sink", "STOPPED", |s| connector_state(s) == "STOPPED").await;
    connectors(&args, C::Resume { name: "cli-sink".into() }).await.unwrap();
    host.wait_running("cli-sink", 2).await;

    let table = plugins(&args, P::List).await.unwrap();
    let rows: Vec<&str> = table.lines().collect();
    // Columns as wide as their longest value: "object-sink".
    assert!(rows[0].starts_with("PLUGIN       TYPE  VERSION  DIGEST"), "{table}");
    assert_eq!(rows.len(), 8, "{table}");
    assert!(rows[1].starts_with("file-sink    sink  ") && rows[1].contains("sha256:"), "{table}");

    assert_eq!(connectors(&args, C::Delete { name: "cli-sink".into() }).await.unwrap(), "deleted connector cli-sink\n");
    let missing = connectors(&args, C::Status { name: "cli-sink".into() }).await.unwrap_err();
    assert_eq!(
        (missing.kind, missing.message.as_str()),
        (ErrorKind::Refused, "Connector cli-sink not found (HTTP 404)")
    );
    assert_eq!(connectors(&args, C::List).await.unwrap(), "no connectors\n");
    host.shutdown().await;

    let unreachable = connectors(&args, C::List).await.unwrap_err();
    assert_eq!(unreachable.kind, ErrorKind::Unreachable, "{unreachable}");
    assert!(unreachable.message.contains("cannot reach"), "{unreachable}");
}

/// `connectors validate|config|offsets`, `loggers` and `plugins config`, in
/// tables and as JSON, with the kind of each failure (what the exit code says).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_config_validate_offsets_loggers_and_plugin_keys() {
    use spillway::cli::{
        ClientArgs, ConfigCommand as Config, ConnectorsCommand as C, ErrorKind, LoggersCommand as L,
        OffsetsCommand as O, Output, PluginsCommand as P, Scope, connectors, loggers, parse_partition_offset, plugins,
    };
    let env = env();
    let topic = env.topic("cli-offsets", 1);
    let host = env.host().await;
    let table = ClientArgs::new(&host.url, Output::Table);
    let json_output = ClientArgs::new(&host.url, Output::Json);
    let args = |output| if output == Output::Json { &json_output } else { &table };
    let write = |file: &str, body: Value| {
        let path = env.dir.path().join(file);
        std::fs::write(&path, body.to_string()).unwrap();
        path
    };
    // A line of a table as its words.
    let has_row = |text: &str, row: &[&str]| text.lines().any(|l| l.split_whitespace().eq(row.iter().copied()));
    let name = || "cli-conf".to_string();

    // validate: valid, invalid (exit kind Invalid, report all the same), refused, local.
    let valid = write("valid.json", json!({"name": "cli-conf", "config": config("noop-sink", &topic, 1, &[])}));
    let answer = connectors(&table, C::Validate { file: valid.clone() }).await.unwrap();
    assert_eq!(answer, "the config is valid for plugin noop-sink\n");
    let invalid = write("invalid.json", json!({"name": "bad", "connector.class": "noop-sink", "tasks.max": "0"}));
    let e = connectors(&table, C::Validate { file: invalid.clone() }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let report = e.output.unwrap_or_default();
    assert!(has_row(report.lines().next().unwrap_or_default(), &["KEY", "ERROR"]), "{report}");
    let row = |key: &str| report.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_default();
    assert!(row("tasks.max").contains("at least 1") && row("topics").contains("topics.regex"), "{report}");
    let e = connectors(&json_output, C::Validate { file: invalid }).await.unwrap_err();
    let infos: Value = serde_json::from_str(e.output.as_deref().unwrap_or_default()).expect("the server's JSON");
    assert_eq!((e.kind, e.message), (ErrorKind::Invalid, format!("the config has {} error(s)", infos["error_count"])));
    assert!(infos["error_count"].as_u64().unwrap() >= 2, "{infos:#}");
    let nested = write("nested.json", json!({"connector.class": "noop-sink", "topics": ["a"]}));
    let e = connectors(&table, C::Validate { file: nested }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert!(e.message.ends_with("(HTTP 400)"), "{e}");
    let classless = write("classless.json", json!({"topics": "t"}));
    let e = connectors(&table, C::Validate { file: classless }).await.unwrap_err();
    assert!(e.kind == ErrorKind::Local && e.message.contains("connector.class"), "{e}");

    // config set creates, then replaces; a name that differs is refused.
    let set = |file: &Path| connectors(&table, C::Config { command: Config::Set { name: name(), file: file.into() } });
    assert_eq!(set(&valid).await.unwrap(), "created connector cli-conf (1 task(s))\n");
    host.wait_running("cli-conf", 1).await;
    assert_eq!(set(&valid).await.unwrap(), "replaced the config of cli-conf (1 task(s))\n");
    let other = write("other.json", json!({"name": "other", "config": config("noop-sink", &topic, 1, &[])}));
    let e = set(&other).await.unwrap_err();
    assert!(e.kind == ErrorKind::Refused && e.message.contains("doesn't match"), "{e}");

    // config get, as a table and as the server's JSON.
    let get = |output| connectors(args(output), C::Config { command: Config::Get { name: name() } });
    let text = get(Output::Table).await.unwrap();
    assert!(text.starts_with("KEY "), "{text}");
    assert!(has_row(&text, &["tasks.max", "1"]) && has_row(&text, &["topics", &topic]), "{text}");
    assert!(has_row(&text, &["name", "cli-conf"]), "{text}");
    let (_, config_now) = host.get("/connectors/cli-conf/config").await;
    assert_eq!(serde_json::from_str::<Value>(&get(Output::Json).await.unwrap()).unwrap(), config_now);

    // config patch sets and removes keys.
    let patch = Config::Patch {
        name: name(),
        set: vec![("batch.max.records".into(), "100".into())],
        unset: vec!["flush.interval.ms".into()],
    };
    let answer = connectors(&table, C::Config { command: patch }).await.unwrap();
    assert_eq!(answer, "patched the config of cli-conf: 1 key(s) set, 1 removed\n");
    let (_, patched) = host.get("/connectors/cli-conf/config").await;
    assert_eq!((&patched["batch.max.records"], patched.get("flush.interval.ms")), (&json!("100"), None), "{patched}");
    let ghost = Config::Patch { name: "ghost".into(), set: vec![("a".into(), "1".into())], unset: vec![] };
    let e = connectors(&table, C::Config { command: ghost }).await.unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Refused, "Connector ghost not found (HTTP 404)"));
    host.wait_running("cli-conf", 1).await;

    // offsets: get as the connector commits, refused while it runs, then
    // altered (from flags and from a file) and reset once it is stopped.
    env.produce(&topic, 10).await;
    let offsets = |output| connectors(args(output), C::Offsets { command: O::Get { name: name() } });
    let mut last = String::new();
    for _ in 0..ATTEMPTS {
        last = offsets(Output::Table).await.unwrap();
        if has_row(&last, &["cli-offsets", "0", "10"]) {
            break;
        }
        tokio::time::sleep(POLL).await;
    }
    assert_eq!(last, "TOPIC        PARTITION  OFFSET\ncli-offsets  0          10\n");
    let e = connectors(&table, C::Offsets { command: O::Reset { name: name() } }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    assert!(e.message.contains("STOPPED") && e.message.ends_with("(HTTP 400)"), "{e}");
    connectors(&table, C::Stop { name: name() }).await.unwrap();
    host.wait_status("cli-conf", "STOPPED", |s| connector_state(s) == "STOPPED").await;

    let alter = |file: Option<PathBuf>, flags: &[&str]| {
        let partitions = flags.iter().map(|f| parse_partition_offset(f).unwrap()).collect();
        connectors(&table, C::Offsets { command: O::Alter { name: name(), file, partitions } })
    };
    let e = alter(None, &["elsewhere:0=1"]).await.unwrap_err();
    assert!(e.kind == ErrorKind::Refused && e.message.contains("elsewhere"), "{e}");
    let altered = "The offsets for this connector have been altered successfully\n";
    assert_eq!(alter(None, &["cli-offsets:0=4"]).await.unwrap(), altered);
    let expected = |offset: i64| json!({"offsets": [{"partition": {"kafka_topic": "cli-offsets", "kafka_partition": 0}, "offset": {"kafka_offset": offset}}]});
    assert_eq!(serde_json::from_str::<Value>(&offsets(Output::Json).await.unwrap()).unwrap(), expected(4));
    let file = write("offsets.json", expected(7));
    assert_eq!(alter(Some(file), &[]).await.unwrap(), altered);
    assert!(has_row(&offsets(Output::Table).await.unwrap(), &["cli-offsets", "0", "7"]));
    let reset = connectors(&table, C::Offsets { command: O::Reset { name: name() } }).await.unwrap();
    assert_eq!(reset, "The offsets for this connector have been reset successfully\n");
    assert!(has_row(&offsets(Output::Table).await.unwrap(), &["cli-offsets", "0", "0"]));
    let e = connectors(&table, C::Offsets { command: O::Get { name: "ghost".into() } }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");
    // JSON output of an answer without a body prints nothing.
    assert_eq!(connectors(&json_output, C::Delete { name: name() }).await.unwrap(), "");

    // loggers: the levels the worker started with, a change, one logger, the cluster scope.
    assert_eq!(
        loggers(&table, L::Get { name: None }).await.unwrap(),
        "LOGGER      LEVEL  LAST MODIFIED\nlibrdkafka  WARN   -\nroot        INFO   -\n"
    );
    let set_level =
        |logger: &str, level: &str, scope| loggers(&table, L::Set { name: logger.into(), level: level.into(), scope });
    assert_eq!(
        set_level("spillway::task", "debug", Scope::Worker).await.unwrap(),
        "set spillway::task to debug; changed spillway::task\n"
    );
    let one = loggers(&table, L::Get { name: Some("spillway::task".into()) }).await.unwrap();
    let row: Vec<&str> = one.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(row[..2], ["spillway::task", "DEBUG"], "{one}");
    assert!(row[2].len() == 20 && row[2].ends_with('Z'), "an RFC 3339 time: {one}");
    assert_eq!(set_level("root", "warn", Scope::Cluster).await.unwrap(), "set root to warn on every worker\n");
    let root = loggers(&json_output, L::Get { name: Some("root".into()) }).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&root).unwrap()["level"], "WARN", "{root}");
    let e = loggers(&table, L::Get { name: Some("never.set".into()) }).await.unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Refused, "Logger never.set not found. (HTTP 404)"));
    let e = set_level("root", "loud", Scope::Worker).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Refused, "{e}");

    // plugins config: one row per key, the same keys as the server's JSON.
    let (_, keys) = host.get("/connector-plugins/noop-sink/config").await;
    let keys = keys.as_array().unwrap().clone();
    let text = plugins(&table, P::Config { name: "noop-sink".into(), version: None }).await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("KEY ") && lines[0].ends_with("  IMPORTANCE  DOCUMENTATION"), "{text}");
    assert_eq!(lines.len(), keys.len() + 1, "{text}");
    for (line, key) in lines[1..].iter().zip(&keys) {
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            words[..3],
            [key["name"].as_str().unwrap(), key["type"].as_str().unwrap(), &key["required"].to_string()],
            "{line}"
        );
    }
    let topics = lines.iter().find(|l| l.starts_with("topics ")).expect("a topics row");
    assert!(topics.contains(" false ") && topics.contains(" \"\" "), "an empty default shows as \"\": {topics}");
    let json_keys = plugins(&json_output, P::Config { name: "noop-sink".into(), version: None }).await.unwrap();
    assert_eq!(serde_json::from_str::<Value>(&json_keys).unwrap(), Value::Array(keys));
    let e = plugins(&table, P::Config { name: "no-such-plugin".into(), version: None }).await.unwrap_err();
    assert!(e.kind == ErrorKind::Refused && e.message.contains("no-such-plugin"), "{e}");
    host.shutdown().await;
}

/// Fuzzes every operation in `/openapi.json` with schemathesis and fails on
/// any 5xx. Skipped (with a note) where schemathesis is not installed;
/// `tests/schemathesis/run.sh` installs it and runs this test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error() {
    let schemathesis = std::env::var("SPILLWAY_SCHEMATHESIS").unwrap_or_else(|_| "schemathesis".into());
    let installed =
        std::process::Command::new(&schemathesis).arg("--version").output().is_ok_and(|o| o.status.success());
    if !installed {
        println!("SKIPPED: schemathesis is not installed; run tests/schemathesis/run.sh");
        return;
    }
    let env = env();
    env.topic("schemathesis", 1);
    let host = env.host().await;
    let args = schemathesis_args(&host.url);
    println!("running {schemathesis} {}", args.join(" "));
    let mut child = tokio::process::Command::new(&schemathesis)
        .args(&args)
        .current_dir(env.dir.path())
        .kill_on_drop(true)
        .spawn()
        .expect("starting schemathesis");
    // Bounded: a hung run fails the test instead of hanging it.
    let status = tokio::time::timeout(Duration::from_secs(1500), child.wait()).await;
    let status = status.expect("schemathesis finished within its bound").expect("schemathesis ran");
    assert!(status.success(), "schemathesis found server errors (see its report above)");
    host.shutdown().await;
}

fn schemathesis_args(url: &str) -> Vec<String> {
    let max_examples = std::env::var("SPILLWAY_SCHEMATHESIS_EXAMPLES").unwrap_or_else(|_| "30".into());
    [
        "run",
        &format!("{url}/openapi.json"),
        "--checks",
        "not_a_server_error",
        "--max-examples",
        &max_examples,
        "--phases",
        "examples,coverage,fuzzing",
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--generation-database",
        "none",
        "--no-color",
    ]
    .map(String::from)
    .to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugins_are_uploaded_reloaded_and_listed_by_version() {
    let env = env();
    let plugins = env.dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(plugin_dir().join("misbehave.wasm"), plugins.join("misbehave.wasm")).unwrap();
    let host = Host::start(&env.bootstrap, &env.dir.path().join("state.json"), &plugins).await;
    let v2 =
        std::fs::read(repo().join("target/plugins-extra/misbehave-0.2.0.wasm")).expect("run scripts/build-plugins.sh");
    let upload = |body: Vec<u8>| {
        let request = host.http.put(format!("{}/connector-plugins/misbehave", host.url)).body(body);
        async move { read(request.header("content-type", "application/octet-stream").send().await.unwrap()).await }
    };

    let (status, info) = upload(v2.clone()).await;
    assert_eq!(status, 201, "{info}");
    assert_eq!((&info["class"], &info["version"]), (&json!("misbehave"), &json!("0.2.0")));
    assert_eq!(upload(v2).await.0, 200, "the same build again");
    let (status, error) = upload(b"not a component".to_vec()).await;
    assert_eq!(status, 400);
    assert_eq!(error["error_code"], 400);
    assert!(error["message"].as_str().unwrap().contains("refused"), "{error}");

    let (status, listed) = host.get("/connector-plugins").await;
    assert_eq!(status, 200);
    let versions: Vec<&str> = listed.as_array().unwrap().iter().map(|p| p["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["0.1.0", "0.2.0"]);
    assert_eq!(host.get("/connector-plugins/misbehave/config?version==0.2.0").await.0, 200);
    assert_eq!(host.get("/connector-plugins/misbehave/config?version=%5E9").await.0, 404);
    assert_eq!(host.get("/connector-plugins/misbehave/config?version=!!").await.0, 400);

    // The CLI's words for the same calls.
    use spillway::cli::{ClientArgs, Output, PluginsCommand as P, plugins as cli};
    let args = ClientArgs::new(&host.url, Output::Table);
    let file = repo().join("target/plugins-extra/misbehave-0.2.0.wasm");
    let installed = cli(&args, P::Install { file, name: None }).await.unwrap();
    assert!(installed.starts_with("already installed: misbehave 0.2.0 (sha256:"), "{installed}");
    let keys = cli(&args, P::Config { name: "misbehave".into(), version: Some("=0.1.0".into()) }).await.unwrap();
    assert!(keys.contains("connector.plugin.version"), "{keys}");
    assert_eq!(cli(&args, P::Reload).await.unwrap(), "no change\n");

    std::fs::remove_file(plugins.join("misbehave.wasm")).unwrap();
    let (status, report) = host.call(Method::POST, "/connector-plugins/reload", None).await;
    assert_eq!(status, 200);
    // The directory's watcher may have seen the removal first.
    let removed = if report["removed"] == json!([]) { json!([]) } else { json!(["misbehave@0.1.0"]) };
    assert_eq!(report, json!({"installed": [], "removed": removed, "refused": []}));
    let (_, listed) = host.get("/connector-plugins").await;
    let versions: Vec<&str> = listed.as_array().unwrap().iter().map(|p| p["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["0.2.0"]);
    host.shutdown().await;
}

/// The worker's policy caps what a connector config may grant: each ask
/// beyond it is a 400 on create and an error on its key at validation,
/// naming the ceiling; and the worker's own files are never granted, even
/// under a directory the policy allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_policy_caps_what_a_connector_may_be_granted() {
    let env = env();
    let topic = env.topic("policed", 1);
    let allowed = env.dir.path().join("allowed");
    std::fs::create_dir_all(allowed.join("data")).unwrap();
    let mut policy = GrantPolicy::default();
    policy.fs_dirs = vec![allowed.clone()];
    policy.net_connect = vec![AddrPattern::parse("127.0.0.1:*").unwrap()];
    policy.memory_max_bytes = Some(32 << 20);
    policy.tasks_max = Some(2);
    let state_file = allowed.join("worker/state.json");
    let defaults = WorkerDefaults { policy, ..Default::default() };
    let host = Host::start_with(&env.bootstrap, &state_file, &plugin_dir(), defaults).await;
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let (elsewhere, worker_dir, data) =
        (path(&env.dir.path().join("elsewhere")), path(&allowed.join("worker")), path(&allowed.join("data")));
    let asks: [(&str, &str, &str); 5] = [
        ("plugin.grant.fs.out.path", &elsewhere, "outside what the worker's policy.fs.dirs allows"),
        ("plugin.grant.fs.state.path", &worker_dir, "holds the worker's state file"),
        (
            "plugin.grant.net.db.connect",
            "10.0.0.1:5432",
            "outside what the worker's policy.net.connect allows (127.0.0.1/32:*)",
        ),
        ("tasks.max", "3", "above the worker's policy.tasks.max (2)"),
        ("plugin.memory.max.bytes", "67108864", "above the worker's policy.plugin.memory.max.bytes (33554432)"),
    ];
    for (key, value, reason) in asks {
        let (status, body) = host
            .call(
                Method::POST,
                "/connectors",
                Some(json!({"name": "greedy", "config": config("noop-sink", &topic, 1, &[(key, value)])})),
            )
            .await;
        let message = assert_error(status, &body, 400);
        assert!(message.contains(key) && message.contains(reason), "{key}={value}: {message}");
    }
    let mut all: Vec<(&str, &str)> = asks.iter().map(|(k, v, _)| (*k, *v)).collect();
    all.push(("name", "greedy"));
    let (status, infos) = host
        .call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(config("noop-sink", &topic, 1, &all)))
        .await;
    assert_eq!((status, infos["error_count"].as_u64()), (200, Some(5)), "{infos:#}");
    for (key, _, reason) in asks {
        let errors = infos["configs"].as_array().unwrap().iter().find(|c| c["value"]["name"] == key);
        let errors = errors.map(|c| c["value"]["errors"].to_string()).unwrap_or_default();
        assert!(errors.contains(reason), "{key}: {errors}");
    }
    let (status, connectors) = host.get("/connectors").await;
    assert_eq!((status, connectors), (200, json!([])), "nothing refused was created");

    // Within every ceiling.
    let modest = [
        ("plugin.grant.fs.out.path", data.as_str()),
        ("plugin.grant.net.db.connect", "127.0.0.1:5432"),
        ("tasks.max", "2"),
    ];
    host.create("modest", config("noop-sink", &topic, 2, &modest)).await;
    host.wait_status("modest", "2 tasks RUNNING", |s| task_states(s) == vec!["RUNNING", "RUNNING"]).await;
    host.shutdown().await;
}

/// A grant's credential shows as [hidden] in every answer that shows a
/// config, and one sent back as [hidden] keeps its value. A config
/// provider's placeholder shows as written and is resolved in the host; one
/// that cannot be resolved is a 400 on its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_are_hidden_and_config_providers_resolve_them_in_the_host() {
    let env = env();
    let topic = env.topic("secrets", 1);
    let secrets = env.dir.path().join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    let file = secrets.join("s3.properties");
    std::fs::write(&file, "secret=from-the-file\n").unwrap();
    let worker: std::collections::BTreeMap<String, String> = [
        ("config.providers", "file".to_string()),
        ("config.providers.file.param.allowed.paths", secrets.display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let defaults =
        WorkerDefaults { providers: WorkerConfig::parse(&worker).unwrap().defaults.providers, ..Default::default() };
    let state_file = env.dir.path().join("state.json");
    let host = Host::start_with(&env.bootstrap, &state_file, &plugin_dir(), defaults).await;

    let placeholder = format!("${{file:{}:secret}}", file.display());
    let bucket = format!("file://{}", env.dir.path().join("bucket").display());
    let grants = [
        ("plugin.grant.object-store.a.url", bucket.as_str()),
        ("plugin.grant.object-store.a.access.key.id", "AKIAEXAMPLE"),
        ("plugin.grant.object-store.a.secret.access.key", placeholder.as_str()),
        ("plugin.grant.object-store.b.url", bucket.as_str()),
        ("plugin.grant.object-store.b.access.key.id", "AKIAOTHER"),
        ("plugin.grant.object-store.b.secret.access.key", "literal-secret"),
    ];
    let (status, body) = host
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "keeper", "config": config("object-sink", &topic, 1, &grants), "initial_state": "STOPPED"})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let shown = |config: &Value| {
        (
            config["plugin.grant.object-store.a.secret.access.key"].clone(),
            config["plugin.grant.object-store.b.secret.access.key"].clone(),
            config["plugin.grant.object-store.b.access.key.id"].clone(),
        )
    };
    let expected = (json!(placeholder), json!("[hidden]"), json!("AKIAOTHER"));
    assert_eq!(shown(&body["config"]), expected, "the create's answer");
    let (_, read) = host.get("/connectors/keeper/config").await;
    assert_eq!(shown(&read), expected, "GET config");
    let (_, info) = host.get("/connectors/keeper").await;
    assert_eq!(shown(&info["config"]), expected, "GET connector");
    let (_, listed) = host.get("/connectors?expand=info").await;
    assert_eq!(shown(&listed["keeper"]["info"]["config"]), expected, "GET connectors?expand=info");

    // Read, changed and written back: the hidden secret keeps its value.
    let mut changed = read.clone();
    changed["errors.retry.timeout"] = json!("1000");
    let (status, body) = host.call(Method::PUT, "/connectors/keeper/config", Some(changed)).await;
    assert_eq!(status, 200, "{body}");
    let stored = std::fs::read_to_string(&state_file).unwrap();
    assert!(stored.contains("literal-secret") && !stored.contains("from-the-file"), "{stored}");
    assert!(stored.contains(&placeholder.replace('\\', "\\\\")), "the placeholder is stored as written: {stored}");

    // Resolved for validation: a key the file lacks is refused on its key.
    let missing = format!("${{file:{}:nokey}}", file.display());
    let bad = [
        ("plugin.grant.object-store.a.url", bucket.as_str()),
        ("plugin.grant.object-store.a.secret.access.key", missing.as_str()),
    ];
    let (status, body) = host
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "bad", "config": config("object-sink", &topic, 1, &bad)})),
        )
        .await;
    let message = assert_error(status, &body, 400);
    assert!(
        message.contains("plugin.grant.object-store.a.secret.access.key") && message.contains("has no key nokey"),
        "{message}"
    );
    assert!(!message.contains("from-the-file"), "{message}");
    host.shutdown().await;
}

/// A plugin whose `validate` never returns holds up its own request only:
/// `/health`, asked every 100 ms meanwhile, answers every time within 1 s
/// (before, validation ran on the herder's loop and `/health` waited for
/// the call's 30 s timeout); each validation ends at the worker's
/// `policy.plugin.validate.timeout.ms` (3 s here), as an error on
/// `connector.class`, and a create with that config is refused. With
/// `policy.plugin.validations.max=3`, of four such validations asked at
/// once three run together (on 2 cores: `/health` still answers) and the
/// fourth only after they have ended (with the default of 2, or no bound,
/// three never end while one still runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_spinning_in_validate_holds_up_no_other_request() {
    let env = env();
    let mut defaults = WorkerDefaults::default();
    defaults.policy.requests.validate_timeout = Duration::from_secs(3);
    defaults.policy.requests.validations = 3;
    let host = Host::start_with(&env.bootstrap, &env.dir.path().join("state.json"), &plugin_dir(), defaults).await;
    let topic = env.topic("spin", 1);
    let spinning = config("misbehave", &topic, 1, &[("name", "spin"), ("validate.mode", "loop")]);
    let validate = || {
        let request =
            host.http.put(format!("{}/connector-plugins/misbehave/config/validate", host.url)).json(&spinning);
        tokio::spawn(async move { read(request.send().await.expect("request")).await })
    };
    let validations = [validate(), validate(), validate(), validate()];
    let mut answers = 0;
    let mut slowest = Duration::ZERO;
    let mut three_ended_one_ran = false;
    while !validations.iter().all(|v| v.is_finished()) {
        three_ended_one_ran |= validations.iter().filter(|v| v.is_finished()).count() == 3;
        let asked = std::time::Instant::now();
        let (status, body) = host.get("/health").await;
        assert_eq!(status, 200, "{body}");
        slowest = slowest.max(asked.elapsed());
        answers += 1;
        tokio::time::sleep(POLL).await;
    }
    assert!(slowest < Duration::from_secs(1), "the slowest of {answers} /health answers took {slowest:?}");
    assert!(answers > 10, "/health was asked only {answers} times while validate ran");
    assert!(three_ended_one_ran, "never three validations ended while the fourth ran: validations.max=3 not kept");
    for validation in validations {
        let (status, infos) = validation.await.unwrap();
        assert_eq!(status, 200, "{infos}");
        assert_eq!(infos["error_count"], 1, "{infos:#}");
        let configs = infos["configs"].as_array().unwrap();
        let class = configs.iter().find(|c| c["value"]["name"] == "connector.class").unwrap();
        let errors = class["value"]["errors"].to_string();
        assert!(errors.contains("validate did not return within 3000 ms"), "{errors}");
    }

    let (status, body) =
        host.call(Method::POST, "/connectors", Some(json!({"name": "spin", "config": spinning}))).await;
    let message = assert_error(status, &body, 400);
    assert!(message.contains("validate did not return"), "{message}");
    assert_eq!(host.get("/connectors").await, (200, json!([])));
    host.shutdown().await;
}

/// A config is checked off the herder's loop, so what it was checked
/// against may change before it is stored: the plugin (a new build
/// installed) or the connector (created by another request). Either way the
/// request is refused with 409, saying so, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_whose_plugin_or_connector_changed_while_checked_is_refused() {
    let env = env();
    let plugins = env.dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(plugin_dir().join("misbehave.wasm"), plugins.join("misbehave.wasm")).unwrap();
    let host = Host::start(&env.bootstrap, &env.dir.path().join("state.json"), &plugins).await;
    let topic = env.topic("raced", 1);
    let slow = |name: &str| config("misbehave", &topic, 1, &[("name", name), ("validate.sleep.ms", "6000")]);
    let send = |method: Method, path: String, body: Value| {
        let request = host.http.request(method, format!("{}{path}", host.url)).json(&body);
        tokio::spawn(async move { read(request.send().await.expect("request")).await })
    };

    // A new build of the plugin, installed while the create's config is
    // checked (compiled beforehand, so that installing it is quick).
    let v2 =
        std::fs::read(repo().join("target/plugins-extra/misbehave-0.2.0.wasm")).expect("run scripts/build-plugins.sh");
    Runtime::new(&cache_dir()).unwrap().load(v2.clone()).await.unwrap();
    let create = send(Method::POST, "/connectors".into(), json!({"name": "raced", "config": slow("raced")}));
    // The spawned request must reach the worker (its check sleeps 6 s)
    // before the one it races: not a timing assertion, an ordering.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let upload = host.http.put(format!("{}/connector-plugins/misbehave", host.url)).body(v2);
    let (status, info) = read(upload.header("content-type", "application/octet-stream").send().await.unwrap()).await;
    assert_eq!(status, 201, "{info}");
    assert!(!create.is_finished(), "the create's check ended before the upload: the race was not run");
    let (status, body) = create.await.unwrap();
    let message = assert_error(status, &body, 409);
    assert!(message.contains("Plugin misbehave changed while this config was checked"), "{message}");
    assert_eq!(host.get("/connectors").await, (200, json!([])));

    // The connector, created by another request while a put's config is checked.
    let put = send(Method::PUT, "/connectors/raced/config".into(), slow("raced"));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (status, body) = host
        .call(
            Method::POST,
            "/connectors",
            Some(json!({"name": "raced", "config": config("misbehave", &topic, 1, &[])})),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert!(!put.is_finished(), "the put's check ended before the create: the race was not run");
    let (status, body) = put.await.unwrap();
    let message = assert_error(status, &body, 409);
    assert!(message.contains("Connector raced changed while this config for it was checked"), "{message}");
    let (_, stored) = host.get("/connectors/raced/config").await;
    assert_eq!(stored.get("validate.sleep.ms"), None, "the raced put was stored: {stored}");
    host.shutdown().await;
}

/// A config of more keys than the worker's
/// `policy.connector.config.keys.max` (20 here) is refused whole, by create,
/// update and validate alike, before any key is read; one of 20 is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_of_too_many_keys_is_refused() {
    const MAX: usize = 20;
    let env = env();
    let mut defaults = WorkerDefaults::default();
    defaults.policy.requests.config_keys = MAX;
    let host = Host::start_with(&env.bootstrap, &env.dir.path().join("state.json"), &plugin_dir(), defaults).await;
    let topic = env.topic("keys", 1);
    let mut huge = config("noop-sink", &topic, 1, &[("name", "huge")]);
    for i in 0.. {
        if huge.as_object().unwrap().len() == MAX {
            break;
        }
        huge[format!("extra.{i}")] = json!("x");
    }
    let (status, infos) =
        host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(huge.clone())).await;
    assert_eq!(status, 200, "a config of {MAX} keys: {infos}");
    huge["extra.last"] = json!("x");
    let expected = format!("the config has {} keys; a connector config may have at most {MAX}", MAX + 1);
    let (status, body) =
        host.call(Method::PUT, "/connector-plugins/noop-sink/config/validate", Some(huge.clone())).await;
    assert_eq!(assert_error(status, &body, 400), expected);
    let (status, body) = host.call(Method::PUT, "/connectors/huge/config", Some(huge.clone())).await;
    assert_eq!(assert_error(status, &body, 400), expected);
    huge.as_object_mut().unwrap().remove("name");
    let (status, body) = host.call(Method::POST, "/connectors", Some(json!({"name": "huge", "config": huge}))).await;
    assert_eq!(assert_error(status, &body, 400), expected);
    assert_eq!(host.get("/connectors").await, (200, json!([])));
    host.shutdown().await;
}
