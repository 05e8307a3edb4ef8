//! `spillway connectors …`, `spillway plugins …` and `spillway loggers …`: a
//! command-line client for the REST API (any Kafka Connect-compatible one, in
//! fact).
//!
//! Each command returns the text to print, so that tests can check it: a
//! table for people, or with `--output json` the server's answer as is, for
//! scripts. A failure carries the server's error message and the kind of
//! failure that `main` turns into the exit code.

mod client;
mod connectors;
mod error;
mod import;
mod loggers;
mod plugins;
mod table;

pub use client::Client;
pub use connectors::{ConfigCommand, ConnectorsCommand, OffsetsCommand, connectors, parse_partition_offset};
pub use error::{CliError, EXIT_CODES, ErrorKind};
pub use loggers::{LoggersCommand, Scope, loggers};
pub use plugins::{PluginsCommand, plugins};

use client::Answer;
use reqwest::Method;
use serde_json::{Map, Value};
use std::path::Path;

pub const DEFAULT_URL: &str = "http://127.0.0.1:8083";

/// Where the REST API is and how to print its answers; anywhere on the line
/// (`spillway connectors status NAME --url URL -o json`).
#[derive(clap::Args, Clone, Debug)]
pub struct ClientArgs {
    /// Base URL of the Spillway (or Kafka Connect) REST API, for the client
    /// commands.
    #[arg(long, global = true, env = "SPILLWAY_URL", default_value = DEFAULT_URL)]
    pub url: String,
    /// How the client commands print answers: tables for people, or the
    /// server's JSON as is (pretty-printed; nothing when it sent no body) for
    /// scripts.
    #[arg(long, short = 'o', global = true, env = "SPILLWAY_OUTPUT", value_enum, default_value_t)]
    pub output: Output,
}

impl ClientArgs {
    pub fn new(url: &str, output: Output) -> Self {
        ClientArgs { url: url.to_string(), output }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    #[default]
    Table,
    Json,
}

/// One command's connection to the server, and the form its answer is
/// printed in.
struct Session {
    client: Client,
    output: Output,
}

impl Session {
    fn new(args: &ClientArgs) -> Result<Self, CliError> {
        Ok(Session { client: Client::new(&args.url)?, output: args.output })
    }

    async fn get(&self, path: &str) -> Result<Answer, CliError> {
        self.client.get(path).await
    }

    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer, CliError> {
        self.client.send(method, path, body).await
    }

    async fn put_bytes(&self, path: &str, bytes: Vec<u8>) -> Result<Answer, CliError> {
        self.client.put_bytes(path, bytes).await
    }

    /// The answer as asked for: the server's JSON, or `table` made of it.
    fn show(
        &self,
        answer: Answer,
        table: impl FnOnce(&Answer) -> Result<String, CliError>,
    ) -> Result<String, CliError> {
        match self.output {
            Output::Json => Ok(answer.pretty()),
            Output::Table => table(&answer),
        }
    }
}

fn read_json(file: &Path) -> Result<Value, CliError> {
    let text =
        std::fs::read_to_string(file).map_err(|e| CliError::local(format!("reading {}: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| CliError::local(format!("{} is not valid JSON: {e}", file.display())))
}

/// A connector config from a file: a bare JSON object, or Connect's
/// `{"name": .., "config": {..}}`, whose name goes into the config when the
/// config has none (so that the server checks it against the one it is
/// given).
fn read_config_file(file: &Path) -> Result<Map<String, Value>, CliError> {
    let value = read_json(file)?;
    let (name, config) = match value.get("config") {
        Some(config) => (value.get("name").cloned(), config.clone()),
        None => (None, value),
    };
    let Value::Object(mut config) = config else {
        return Err(CliError::local(format!("{}: the config must be a JSON object of strings", file.display())));
    };
    if let Some(name) = name {
        config.entry("name").or_insert(name);
    }
    Ok(config)
}

/// The first line of `text`, cut at 100 characters.
fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("");
    if line.chars().count() > 100 { format!("{}…", line.chars().take(99).collect::<String>()) } else { line.into() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_file_accepts_both_forms() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.json");
        std::fs::write(&file, r#"{"name": "n", "connector.class": "noop-sink"}"#).unwrap();
        assert_eq!(read_config_file(&file).unwrap()["connector.class"], "noop-sink");
        std::fs::write(&file, r#"{"name": "n", "config": {"topics": "t"}}"#).unwrap();
        let config = read_config_file(&file).unwrap();
        assert_eq!((&config["topics"], &config["name"]), (&Value::from("t"), &Value::from("n")));
        std::fs::write(&file, r#"{"name": "n", "config": {"name": "other"}}"#).unwrap();
        assert_eq!(read_config_file(&file).unwrap()["name"], "other", "left for the server to refuse");
        std::fs::write(&file, r#"["a"]"#).unwrap();
        assert_eq!(read_config_file(&file).unwrap_err().kind, ErrorKind::Local);
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(read_config_file(&file).unwrap_err().kind, ErrorKind::Local);
        assert_eq!(read_config_file(&dir.path().join("missing.json")).unwrap_err().kind, ErrorKind::Local);
    }
}
