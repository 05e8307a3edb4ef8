//! The two sides of each comparison: a Kafka Connect worker (through
//! `scripts/connect.sh`) running Connect's FileStreamSinkConnector, and a
//! `spillway serve` running the `file-sink` plugin, both on the test broker,
//! each with its own connector name and topic (they must not share a
//! consumer group).

use crate::repo;
use crate::support::worker::{Worker, group_member_config};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// One server under test and what is its own in its answers.
pub struct Target {
    /// Which server this is, for the test's output.
    pub label: String,
    pub url: String,
    /// The connector the sequence creates (a second one is `<name>-b`).
    pub name: String,
    pub topic: String,
    /// `connector.class` in a config.
    pub class: String,
    /// The plugin's name in `/connector-plugins/{plugin}/...`.
    pub plugin: String,
    /// A logger the sequence reads and sets.
    pub logger: String,
    /// The file the connector writes.
    pub file: PathBuf,
    /// Keys only this plugin needs, added to each connector config.
    pub plugin_keys: Vec<(String, String)>,
    _process: Process,
    _dir: tempfile::TempDir,
}

enum Process {
    Connect { dir: PathBuf },
    Spillway(#[allow(dead_code)] Worker),
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Process::Connect { dir } = self {
            connect_sh(&["stop", "--dir", dir.to_str().unwrap()]);
        }
    }
}

fn connect_sh(args: &[&str]) -> String {
    let output =
        Command::new(repo().join("scripts/connect.sh")).args(args).output().expect("running scripts/connect.sh");
    assert!(
        output.status.success(),
        "scripts/connect.sh {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    stdout.lines().last().unwrap_or_default().trim().to_string()
}

impl Target {
    /// A Kafka Connect worker: standalone, or the only member of `group`.
    pub fn connect(bootstrap: &str, group: Option<&str>, suffix: &str) -> Target {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("connect");
        let mut args = vec!["start", "--dir", state.to_str().unwrap(), "--bootstrap", bootstrap];
        if let Some(group) = group {
            args.extend(["--distributed", group]);
        }
        let url = connect_sh(&args);
        let version = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
        let mode = if group.is_some() { "distributed" } else { "standalone" };
        let file = dir.path().join("out.txt");
        Target {
            label: format!("Kafka Connect {version} {mode} (scripts/connect.sh)"),
            url,
            name: format!("diff-connect-{suffix}"),
            topic: format!("diff-connect-{suffix}-in"),
            class: "org.apache.kafka.connect.file.FileStreamSinkConnector".into(),
            plugin: "FileStreamSinkConnector".into(),
            logger: "org.apache.kafka.connect.runtime.WorkerSinkTask".into(),
            plugin_keys: vec![("file".into(), file.to_str().unwrap().into())],
            file,
            _process: Process::Connect { dir: state },
            _dir: dir,
        }
    }

    /// `spillway serve`: standalone, or the only member of `group`.
    pub async fn spillway(bootstrap: &str, group: Option<&str>, suffix: &str) -> Target {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        let worker = match group {
            None => Worker::start(bootstrap, dir.path(), "text", "worker.log").await,
            Some(group) => {
                let config = group_member_config(dir.path(), group);
                Worker::start_with(bootstrap, dir.path(), "text", "worker.log", &["--config", config.to_str().unwrap()])
                    .await
            }
        };
        let mode = if group.is_some() { "group" } else { "standalone" };
        let file = out.join("out.jsonl");
        Target {
            label: format!("spillway serve ({mode})"),
            url: worker.url.clone(),
            name: format!("diff-spillway-{suffix}"),
            topic: format!("diff-spillway-{suffix}-in"),
            class: "file-sink".into(),
            plugin: "file-sink".into(),
            logger: "spillway_task".into(),
            plugin_keys: vec![
                ("file".into(), file.to_str().unwrap().into()),
                ("plugin.grant.fs.out.path".into(), out.to_str().unwrap().into()),
            ],
            file,
            _process: Process::Spillway(worker),
            _dir: dir,
        }
    }

    /// The config a user writes for the connector: Connect's keys, and
    /// the plugin's own.
    pub fn connector_config(&self) -> Value {
        let mut config = json!({
            "connector.class": self.class,
            "tasks.max": "1",
            "topics": self.topic,
        });
        for (key, value) in &self.plugin_keys {
            config[key] = json!(value);
        }
        config
    }

    /// `text` with this target's own values in place of the sequence's
    /// placeholders.
    pub fn fill(&self, text: &str) -> String {
        text.replace("{name}", &self.name)
            .replace("{topic}", &self.topic)
            .replace("{class}", &self.class)
            .replace("{plugin}", &self.plugin)
            .replace("{logger}", &self.logger)
    }

    /// What is this target's own in its answers, longest first, and the
    /// placeholder each becomes.
    pub fn own_values(&self) -> Vec<(String, &'static str)> {
        let mut values = vec![
            (self.name.clone(), "{name}"),
            (self.topic.clone(), "{topic}"),
            (self.class.clone(), "{class}"),
            (self.plugin.clone(), "{plugin}"),
            (self.logger.clone(), "{logger}"),
            (self.file.to_str().unwrap().to_string(), "{file}"),
        ];
        values.sort_by_key(|(value, _)| std::cmp::Reverse(value.len()));
        values
    }
}
