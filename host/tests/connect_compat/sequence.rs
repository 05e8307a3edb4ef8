//! The scripted sequence of calls, the same for every target: each step one
//! request (placeholders filled with the target's own values), some polled
//! until the server reaches a state, since Connect and Spillway get there
//! at their own pace. What each step answers is kept for the comparison.

use crate::targets::Target;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// How long a step may poll for its state before the last answer stands.
const PATIENCE: Duration = Duration::from_secs(90);

/// The records produced before the connector starts: its offsets reach this.
pub const RECORDS: i64 = 3;

enum Body {
    None,
    Json(Value),
    /// A body sent as is, with this Content-Type (or none).
    Raw(Option<&'static str>, &'static str),
}

/// What a polling step waits for.
#[derive(Clone, Copy)]
enum Until {
    /// The connector and its `tasks` tasks all in `state`.
    State(&'static str, usize),
    /// The committed offset of partition 0.
    Offset(i64),
    /// This status code.
    Status(u16),
    /// KIP-558: this many active topics (recorded once a record came).
    Topics(usize),
}

struct Step {
    name: &'static str,
    method: Method,
    path: &'static str,
    body: Body,
    until: Option<Until>,
}

/// One step's answer.
pub struct Answer {
    pub step: &'static str,
    pub status: u16,
    pub body: Value,
    /// Set when a polling step never saw its state.
    pub timed_out: Option<String>,
}

fn step(name: &'static str, method: Method, path: &'static str) -> Step {
    Step { name, method, path, body: Body::None, until: None }
}

impl Step {
    fn json(mut self, body: Value) -> Step {
        self.body = Body::Json(body);
        self
    }
    fn raw(mut self, content_type: Option<&'static str>, body: &'static str) -> Step {
        self.body = Body::Raw(content_type, body);
        self
    }
    fn until(mut self, until: Until) -> Step {
        self.until = Some(until);
        self
    }
}

/// The calls, in order. `{config}` bodies are the target's connector config.
fn steps(target: &Target) -> Vec<Step> {
    use Method as M;
    let config = target.connector_config();
    let named = |name: &str| {
        let mut config = config.clone();
        config["name"] = json!(name);
        config
    };
    let mut bad = named("{name}");
    bad["tasks.max"] = json!("many");
    let offsets = |partition: Value| json!({"offsets": [{"partition": partition, "offset": {"kafka_offset": 1}}]});
    vec![
        step("root", M::GET, "/"),
        step("health", M::GET, "/health"),
        step("connectors.none", M::GET, "/connectors"),
        step("plugins", M::GET, "/connector-plugins"),
        step("plugins.all", M::GET, "/connector-plugins?connectorsOnly=false"),
        step("plugin.config", M::GET, "/connector-plugins/{plugin}/config"),
        step("plugin.unknown", M::GET, "/connector-plugins/NoSuchConnector/config"),
        step("validate.good", M::PUT, "/connector-plugins/{plugin}/config/validate").json(named("{name}")),
        step("validate.bad-value", M::PUT, "/connector-plugins/{plugin}/config/validate").json(bad),
        step("validate.unknown-plugin", M::PUT, "/connector-plugins/NoSuchConnector/config/validate")
            .json(json!({"connector.class": "NoSuchConnector", "topics": "{topic}"})),
        step("connector.unknown", M::GET, "/connectors/no-such-connector"),
        step("create.text-plain", M::POST, "/connectors").raw(Some("text/plain"), r#"{"name":"{name}-x","config":{}}"#),
        step("create.form", M::POST, "/connectors").raw(Some("application/x-www-form-urlencoded"), "name={name}-x"),
        step("create.no-content-type", M::POST, "/connectors").raw(None, r#"{"name":"{name}-x","config":{}}"#),
        step("create.bad-json", M::POST, "/connectors").raw(Some("application/json"), r#"{"name":"#),
        step("create.unknown-plugin", M::POST, "/connectors")
            .json(json!({"name": "{name}-x", "config": {"connector.class": "NoSuchConnector", "topics": "{topic}"}})),
        step("create", M::POST, "/connectors").json(json!({"name": "{name}", "config": config})),
        step("create.conflict", M::POST, "/connectors").json(json!({"name": "{name}", "config": config})),
        step("status.running", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("connector", M::GET, "/connectors/{name}"),
        step("connector.trailing-slash", M::GET, "/connectors/{name}/"),
        step("config", M::GET, "/connectors/{name}/config"),
        step("tasks", M::GET, "/connectors/{name}/tasks"),
        step("task.status", M::GET, "/connectors/{name}/tasks/0/status"),
        step("task.unknown", M::GET, "/connectors/{name}/tasks/7/status"),
        step("topics", M::GET, "/connectors/{name}/topics").until(Until::Topics(1)),
        step("expand.status", M::GET, "/connectors?expand=status"),
        step("expand.info", M::GET, "/connectors?expand=info"),
        step("expand.both", M::GET, "/connectors?expand=status&expand=info"),
        step("offsets.running", M::GET, "/connectors/{name}/offsets").until(Until::Offset(RECORDS)),
        step("offsets.alter.running", M::PATCH, "/connectors/{name}/offsets")
            .json(offsets(json!({"kafka_topic": "{topic}", "kafka_partition": 0}))),
        step("offsets.reset.running", M::DELETE, "/connectors/{name}/offsets"),
        step("pause", M::PUT, "/connectors/{name}/pause"),
        step("status.paused", M::GET, "/connectors/{name}/status").until(Until::State("PAUSED", 1)),
        step("resume", M::PUT, "/connectors/{name}/resume"),
        step("status.resumed", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("restart", M::POST, "/connectors/{name}/restart"),
        step("status.restarted", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("restart.include-tasks", M::POST, "/connectors/{name}/restart?includeTasks=true"),
        step("status.restarted-with-tasks", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("restart.only-failed", M::POST, "/connectors/{name}/restart?onlyFailed=true"),
        step(
            "restart.include-tasks.only-failed",
            M::POST,
            "/connectors/{name}/restart?includeTasks=true&onlyFailed=true",
        ),
        step("restart.bad-flag", M::POST, "/connectors/{name}/restart?includeTasks=perhaps"),
        step("restart.unknown", M::POST, "/connectors/no-such-connector/restart"),
        step("task.restart", M::POST, "/connectors/{name}/tasks/0/restart"),
        step("status.task-restarted", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("stop", M::PUT, "/connectors/{name}/stop"),
        step("status.stopped", M::GET, "/connectors/{name}/status").until(Until::State("STOPPED", 0)),
        step("tasks.stopped", M::GET, "/connectors/{name}/tasks"),
        step("offsets.stopped", M::GET, "/connectors/{name}/offsets").until(Until::Offset(RECORDS)),
        step("offsets.alter", M::PATCH, "/connectors/{name}/offsets")
            .json(offsets(json!({"kafka_topic": "{topic}", "kafka_partition": 0}))),
        step("offsets.altered", M::GET, "/connectors/{name}/offsets").until(Until::Offset(1)),
        step("offsets.alter.no-partition", M::PATCH, "/connectors/{name}/offsets")
            .json(offsets(json!({"kafka_topic": "{topic}"}))),
        step("offsets.alter.empty", M::PATCH, "/connectors/{name}/offsets").json(json!({})),
        step("offsets.reset", M::DELETE, "/connectors/{name}/offsets"),
        step("offsets.after-reset", M::GET, "/connectors/{name}/offsets"),
        step("config.put", M::PUT, "/connectors/{name}/config").json(named("{name}")),
        step("config.put.other-name", M::PUT, "/connectors/{name}/config").json(named("{name}-other")),
        step("config.put.new", M::PUT, "/connectors/{name}-b/config").json(config.clone()),
        step("resume.stopped", M::PUT, "/connectors/{name}/resume"),
        step("status.resumed-from-stop", M::GET, "/connectors/{name}/status").until(Until::State("RUNNING", 1)),
        step("loggers", M::GET, "/admin/loggers"),
        step("logger", M::GET, "/admin/loggers/{logger}"),
        step("logger.set", M::PUT, "/admin/loggers/{logger}").json(json!({"level": "DEBUG"})),
        step("logger.after-set", M::GET, "/admin/loggers/{logger}"),
        step("logger.set.worker-scope", M::PUT, "/admin/loggers/{logger}?scope=worker").json(json!({"level": "INFO"})),
        step("logger.set.cluster-scope", M::PUT, "/admin/loggers/{logger}?scope=cluster")
            .json(json!({"level": "INFO"})),
        step("logger.set.bad-level", M::PUT, "/admin/loggers/{logger}").json(json!({"level": "LOUD"})),
        step("logger.set.no-level", M::PUT, "/admin/loggers/{logger}").json(json!({})),
        // Last before the delete: Connect's standalone worker answers it and
        // then lists a FAILED task 7 in the connector's status.
        step("task.restart.unknown", M::POST, "/connectors/{name}/tasks/7/restart"),
        step("delete", M::DELETE, "/connectors/{name}"),
        step("delete.b", M::DELETE, "/connectors/{name}-b"),
        step("deleted", M::GET, "/connectors/{name}").until(Until::Status(404)),
        step("delete.again", M::DELETE, "/connectors/{name}"),
        step("connectors.after-delete", M::GET, "/connectors"),
        step("method.not-allowed", M::DELETE, "/connectors"),
        step("route.unknown", M::GET, "/no-such-route"),
    ]
}

/// Runs the sequence against `target` and returns each step's answer.
pub async fn run(target: &Target) -> Vec<Answer> {
    let http = reqwest::Client::new();
    let mut answers = Vec::new();
    for step in steps(target) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (status, body) = send(&http, target, &step).await;
            let reached = match step.until {
                None => true,
                Some(until) => reached(until, status, &body),
            };
            if reached || Instant::now() >= deadline {
                let timed_out = (!reached).then(|| format!("never reached {}", describe(step.until.unwrap())));
                answers.push(Answer { step: step.name, status, body, timed_out });
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
    answers
}

async fn send(http: &reqwest::Client, target: &Target, step: &Step) -> (u16, Value) {
    let url = format!("{}{}", target.url, target.fill(step.path));
    let mut request = http.request(step.method.clone(), url);
    match &step.body {
        Body::None => {}
        Body::Json(body) => request = request.json(&fill_json(target, body)),
        Body::Raw(content_type, body) => {
            if let Some(content_type) = content_type {
                request = request.header("content-type", *content_type);
            }
            request = request.body(target.fill(body));
        }
    }
    let response = request.send().await.unwrap_or_else(|e| panic!("{}: {} failed: {e}", target.label, step.name));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| json!({ "(not JSON)": text }))
    };
    (status, body)
}

fn fill_json(target: &Target, value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(target.fill(s)),
        Value::Array(items) => items.iter().map(|v| fill_json(target, v)).collect(),
        Value::Object(map) => map.iter().map(|(k, v)| (target.fill(k), fill_json(target, v))).collect(),
        other => other.clone(),
    }
}

fn reached(until: Until, status: u16, body: &Value) -> bool {
    match until {
        Until::State(state, tasks) => {
            let task_states: Vec<&Value> = body["tasks"].as_array().map(|t| t.iter().collect()).unwrap_or_default();
            body["connector"]["state"] == state
                && task_states.len() == tasks
                && task_states.iter().all(|t| t["state"] == state)
        }
        Until::Offset(offset) => {
            status == 200
                && body["offsets"].as_array().is_some_and(|o| {
                    o.iter().any(|o| o["partition"]["kafka_partition"] == 0 && o["offset"]["kafka_offset"] == offset)
                })
        }
        Until::Status(expected) => status == expected,
        Until::Topics(count) => {
            body.as_object().and_then(|o| o.values().next()).and_then(|c| c["topics"].as_array()).map(Vec::len)
                == Some(count)
        }
    }
}

fn describe(until: Until) -> String {
    match until {
        Until::State(state, tasks) => format!("{state} with {tasks} task(s) {state}"),
        Until::Offset(offset) => format!("offset {offset} on partition 0"),
        Until::Status(status) => format!("status {status}"),
        Until::Topics(count) => format!("{count} active topic(s)"),
    }
}
