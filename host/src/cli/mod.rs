//! `spillway connectors …` and `spillway plugins`: a command-line client for
//! the REST API (any Kafka Connect-compatible one, in fact).
//!
//! Each command returns the text to print, so that tests can check it; a
//! failure carries the server's error message.

mod client;
mod table;

pub use client::Client;

use crate::herder::{ConnectorInfo, ConnectorStateInfo, PluginInfo, State};
use anyhow::{Context, Result, bail};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const DEFAULT_URL: &str = "http://127.0.0.1:8083";

/// Where the REST API is.
#[derive(clap::Args, Clone, Debug)]
pub struct ServerArgs {
    /// Base URL of the Spillway (or Kafka Connect) REST API; anywhere on the
    /// line (`spillway connectors status NAME --url URL`).
    #[arg(long, global = true, env = "SPILLWAY_URL", default_value = DEFAULT_URL)]
    pub url: String,
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum ConnectorsCommand {
    /// Lists connectors with their state and tasks.
    List,
    /// Shows a connector's and its tasks' states.
    Status { name: String },
    /// Creates a connector from a JSON file: {"name": .., "config": {..}}.
    Create { file: PathBuf },
    /// Deletes a connector.
    Delete { name: String },
    /// Restarts a connector; with flags, its tasks too (KIP-745).
    Restart {
        name: String,
        /// Restart the tasks as well as the connector.
        #[arg(long)]
        include_tasks: bool,
        /// Restart only instances that have failed.
        #[arg(long)]
        only_failed: bool,
    },
    /// Pauses a connector's tasks.
    Pause { name: String },
    /// Resumes a paused or stopped connector.
    Resume { name: String },
    /// Stops a connector: its tasks are shut down, its config kept.
    Stop { name: String },
}

/// Runs one `connectors` command and returns what to print.
pub async fn connectors(url: &str, command: ConnectorsCommand) -> Result<String> {
    let client = Client::new(url)?;
    let path = |name: &str, rest: &str| format!("/connectors/{}{rest}", client::segment(name));
    match command {
        ConnectorsCommand::List => list(&client).await,
        ConnectorsCommand::Status { name } => {
            let status: ConnectorStateInfo = client.get(&path(&name, "/status")).await?.json()?;
            Ok(status_table(&status))
        }
        ConnectorsCommand::Create { file } => {
            let request = read_create_request(&file)?;
            let info: ConnectorInfo = client.send(Method::POST, "/connectors", Some(&request)).await?.json()?;
            Ok(format!("created connector {} ({} task(s))\n", info.name, info.tasks.len()))
        }
        ConnectorsCommand::Delete { name } => {
            client.send(Method::DELETE, &path(&name, ""), None).await?;
            Ok(format!("deleted connector {name}\n"))
        }
        ConnectorsCommand::Restart { name, include_tasks, only_failed } => {
            let query = format!("/restart?includeTasks={include_tasks}&onlyFailed={only_failed}");
            let answer = client.send(Method::POST, &path(&name, &query), None).await?;
            if answer.status == StatusCode::NO_CONTENT {
                return Ok(format!("restarted connector {name}\n"));
            }
            let status: ConnectorStateInfo = answer.json()?;
            Ok(format!("restart of {name} accepted:\n{}", status_table(&status)))
        }
        ConnectorsCommand::Pause { name } => target(&client, &path(&name, "/pause"), "pause", &name).await,
        ConnectorsCommand::Resume { name } => target(&client, &path(&name, "/resume"), "resume", &name).await,
        ConnectorsCommand::Stop { name } => target(&client, &path(&name, "/stop"), "stop", &name).await,
    }
}

/// `spillway plugins`.
pub async fn plugins(url: &str) -> Result<String> {
    let plugins: Vec<PluginInfo> = Client::new(url)?.get("/connector-plugins").await?.json()?;
    let rows: Vec<Vec<String>> = plugins
        .iter()
        .map(|p| vec![p.class.clone(), p.kind.clone(), p.version.clone(), short_digest(&p.digest)])
        .collect();
    Ok(table::render(&["PLUGIN", "TYPE", "VERSION", "DIGEST"], &rows))
}

async fn target(client: &Client, path: &str, verb: &str, name: &str) -> Result<String> {
    client.send(Method::PUT, path, None).await?;
    Ok(format!("{verb} of connector {name} requested\n"))
}

async fn list(client: &Client) -> Result<String> {
    let expanded: BTreeMap<String, Value> = client.get("/connectors?expand=status&expand=info").await?.json()?;
    let mut rows = Vec::new();
    for (name, e) in expanded {
        let status: Option<ConnectorStateInfo> = serde_json::from_value(e["status"].clone()).ok();
        let class = e["info"]["config"]["connector.class"].as_str().unwrap_or("?").to_string();
        let (state, tasks, worker) = match &status {
            Some(s) => (state_name(s.connector.state), task_summary(s), s.connector.worker_id.clone()),
            None => ("?".into(), "?".into(), "?".into()),
        };
        rows.push(vec![name, class, state, tasks, worker]);
    }
    if rows.is_empty() {
        return Ok("no connectors\n".into());
    }
    Ok(table::render(&["CONNECTOR", "PLUGIN", "STATE", "TASKS", "WORKER"], &rows))
}

/// `running/total`, e.g. `1/2`.
fn task_summary(status: &ConnectorStateInfo) -> String {
    let running = status.tasks.iter().filter(|t| t.state == State::Running).count();
    format!("{running}/{}", status.tasks.len())
}

fn status_table(s: &ConnectorStateInfo) -> String {
    let mut out = format!(
        "connector {} ({}): {} on {}, tasks running {}\n",
        s.name,
        s.kind,
        state_name(s.connector.state),
        s.connector.worker_id,
        task_summary(s)
    );
    if let Some(trace) = &s.connector.trace {
        out.push_str(&format!("  {}\n", first_line(trace)));
    }
    if !s.tasks.is_empty() {
        let rows: Vec<Vec<String>> = s
            .tasks
            .iter()
            .map(|t| {
                let trace = t.trace.as_deref().map(first_line).unwrap_or_default();
                vec![t.id.to_string(), state_name(t.state), t.worker_id.clone(), trace]
            })
            .collect();
        out.push_str(&table::render(&["TASK", "STATE", "WORKER", "TRACE"], &rows));
    }
    out
}

fn state_name(state: State) -> String {
    serde_json::to_value(state).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_else(|| "?".into())
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 100 { format!("{}…", line.chars().take(99).collect::<String>()) } else { line.into() }
}

fn short_digest(digest: &str) -> String {
    digest.chars().take("sha256:".len() + 12).collect()
}

/// Connect's `{"name", "config"}`; a bare config with a `name` key is
/// accepted too.
fn read_create_request(file: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let value: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", file.display()))?;
    if value.get("config").is_some() {
        return Ok(value);
    }
    match value.get("name").and_then(Value::as_str) {
        Some(name) => Ok(json!({ "name": name, "config": value })),
        None => bail!("{}: expected {{\"name\": .., \"config\": {{..}}}}", file.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herder::{InstanceState, TaskState};

    #[test]
    fn status_table_shows_tasks_and_first_trace_line() {
        let task = |id, state, trace: Option<&str>| TaskState {
            id,
            state,
            worker_id: "w:8083".into(),
            trace: trace.map(String::from),
            delivery: None,
        };
        let status = ConnectorStateInfo {
            name: "c".into(),
            connector: InstanceState { state: State::Running, worker_id: "w:8083".into(), trace: None },
            tasks: vec![task(0, State::Running, None), task(1, State::Failed, Some("boom\nat line 2"))],
            kind: "sink".into(),
        };
        let text = status_table(&status);
        assert!(text.starts_with("connector c (sink): RUNNING on w:8083, tasks running 1/2\n"), "{text}");
        assert!(text.contains("1     FAILED   w:8083  boom\n"), "{text}");
        assert!(!text.contains("line 2"));
    }

    #[test]
    fn create_file_accepts_both_forms() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.json");
        std::fs::write(&file, r#"{"name": "n", "connector.class": "noop-sink"}"#).unwrap();
        assert_eq!(read_create_request(&file).unwrap()["config"]["connector.class"], "noop-sink");
        std::fs::write(&file, r#"{"name": "n", "config": {"topics": "t"}}"#).unwrap();
        assert_eq!(read_create_request(&file).unwrap()["config"]["topics"], "t");
        std::fs::write(&file, r#"{"topics": "t"}"#).unwrap();
        assert!(read_create_request(&file).is_err());
    }
}
