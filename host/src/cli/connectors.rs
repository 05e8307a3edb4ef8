//! `spillway connectors …`.

use super::client::{Answer, segment};
use super::error::{CliError, ErrorKind};
use super::{ClientArgs, Session, first_line, read_config_file, read_json, table};
use crate::herder::{
    ConfigInfos, ConnectorInfo, ConnectorOffsets, ConnectorStateInfo, OffsetPartition, OffsetValue, PartitionOffset,
    State,
};
use reqwest::{Method, StatusCode};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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
    /// Shows or changes a connector's config.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Checks a config file against its plugin (named by connector.class)
    /// without creating anything; exits 6 if the config has errors.
    Validate { file: PathBuf },
    /// Shows what a Kafka Connect connector config (JSON, or a standalone
    /// worker's .properties) becomes here, key by key: read, a grant
    /// derived, ignored or refused with why; exits 6 if a key is refused.
    Import {
        file: PathBuf,
        /// Create the connector when no key is refused.
        #[arg(long)]
        apply: bool,
    },
    /// Shows or changes a classic-group connector's committed offsets.
    Offsets {
        #[command(subcommand)]
        command: OffsetsCommand,
    },
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum ConfigCommand {
    /// Shows a connector's config (password values as the server gives them).
    Get { name: String },
    /// Replaces a connector's whole config with a JSON file's (a bare config,
    /// or {"name": .., "config": {..}}); creates the connector if there is
    /// none.
    Set { name: String, file: PathBuf },
    /// Changes some keys of a connector's config and keeps the others.
    #[command(group(clap::ArgGroup::new("changes").required(true).multiple(true).args(["set", "unset"])))]
    Patch {
        name: String,
        /// KEY=VALUE: the keys to set.
        #[arg(value_name = "KEY=VALUE", value_parser = parse_key_value)]
        set: Vec<(String, String)>,
        /// A key to remove (repeatable).
        #[arg(long, value_name = "KEY")]
        unset: Vec<String>,
    },
}

#[derive(clap::Subcommand, Clone, Debug)]
pub enum OffsetsCommand {
    /// Shows a connector's committed offset in each partition.
    Get { name: String },
    /// Sets a stopped connector's offsets, from a JSON file of Connect's
    /// {"offsets": [..]} or from --partition flags.
    #[command(group(clap::ArgGroup::new("offsets").required(true).args(["file", "partitions"])))]
    Alter {
        name: String,
        /// Connect's body: {"offsets": [{"partition": {"kafka_topic": ..,
        /// "kafka_partition": ..}, "offset": {"kafka_offset": ..}}]}.
        file: Option<PathBuf>,
        /// TOPIC:PARTITION=OFFSET (repeatable); OFFSET `null` resets the
        /// partition (a share group: a whole topic at a time).
        #[arg(long = "partition", value_name = "TOPIC:PARTITION=OFFSET", value_parser = parse_partition_offset)]
        partitions: Vec<PartitionOffset>,
    },
    /// Deletes a stopped connector's offsets: it starts again from its
    /// offset reset policy.
    Reset { name: String },
}

/// Runs one `connectors` command and returns what to print.
pub async fn connectors(args: &ClientArgs, command: ConnectorsCommand) -> Result<String, CliError> {
    let s = Session::new(args)?;
    match command {
        ConnectorsCommand::List => {
            let answer = s.get("/connectors?expand=status&expand=info").await?;
            s.show(answer, list_table)
        }
        ConnectorsCommand::Status { name } => {
            let answer = s.get(&path(&name, "/status")).await?;
            s.show(answer, |a| Ok(status_table(&a.json()?)))
        }
        ConnectorsCommand::Create { file } => {
            let request = read_create_request(&file)?;
            let answer = s.send(Method::POST, "/connectors", Some(&request)).await?;
            s.show(answer, |a| {
                let info: ConnectorInfo = a.json()?;
                Ok(format!("created connector {} ({} task(s))\n", info.name, info.tasks.len()))
            })
        }
        ConnectorsCommand::Delete { name } => {
            let answer = s.send(Method::DELETE, &path(&name, ""), None).await?;
            s.show(answer, |_| Ok(format!("deleted connector {name}\n")))
        }
        ConnectorsCommand::Restart { name, include_tasks, only_failed } => {
            let query = format!("/restart?includeTasks={include_tasks}&onlyFailed={only_failed}");
            let answer = s.send(Method::POST, &path(&name, &query), None).await?;
            s.show(answer, |a| {
                if a.status == StatusCode::NO_CONTENT {
                    return Ok(format!("restarted connector {name}\n"));
                }
                Ok(format!("restart of {name} accepted:\n{}", status_table(&a.json()?)))
            })
        }
        ConnectorsCommand::Pause { name } => target(&s, &name, "pause").await,
        ConnectorsCommand::Resume { name } => target(&s, &name, "resume").await,
        ConnectorsCommand::Stop { name } => target(&s, &name, "stop").await,
        ConnectorsCommand::Config { command } => config(&s, command).await,
        ConnectorsCommand::Validate { file } => validate(&s, &file).await,
        ConnectorsCommand::Import { file, apply } => super::import::import(&s, &file, apply).await,
        ConnectorsCommand::Offsets { command } => offsets(&s, command).await,
    }
}

fn path(name: &str, rest: &str) -> String {
    format!("/connectors/{}{rest}", segment(name))
}

async fn target(s: &Session, name: &str, verb: &str) -> Result<String, CliError> {
    let answer = s.send(Method::PUT, &path(name, &format!("/{verb}")), None).await?;
    s.show(answer, |_| Ok(format!("{verb} of connector {name} requested\n")))
}

async fn config(s: &Session, command: ConfigCommand) -> Result<String, CliError> {
    match command {
        ConfigCommand::Get { name } => {
            let answer = s.get(&path(&name, "/config")).await?;
            s.show(answer, |a| {
                let config: BTreeMap<String, String> = a.json()?;
                let rows: Vec<Vec<String>> = config.into_iter().map(|(k, v)| vec![k, v]).collect();
                Ok(table::render(&["KEY", "VALUE"], &rows))
            })
        }
        ConfigCommand::Set { name, file } => {
            let config = read_config_file(&file)?;
            let answer = s.send(Method::PUT, &path(&name, "/config"), Some(&Value::Object(config))).await?;
            s.show(answer, |a| {
                let info: ConnectorInfo = a.json()?;
                let done = if a.status == StatusCode::CREATED { "created connector" } else { "replaced the config of" };
                Ok(format!("{done} {} ({} task(s))\n", info.name, info.tasks.len()))
            })
        }
        ConfigCommand::Patch { name, set, unset } => {
            let patch = config_patch(&set, &unset)?;
            let answer = s.send(Method::PATCH, &path(&name, "/config"), Some(&patch)).await?;
            s.show(answer, |_| {
                Ok(format!("patched the config of {name}: {} key(s) set, {} removed\n", set.len(), unset.len()))
            })
        }
    }
}

/// `KEY=VALUE`; the value may be empty and may hold `=`.
fn parse_key_value(raw: &str) -> Result<(String, String), String> {
    match raw.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
        _ => Err(format!("expected KEY=VALUE, not '{raw}' (use --unset KEY to remove a key)")),
    }
}

/// The PATCH body: a value for each key set, null for each removed, as
/// Connect's PATCH removes keys with null values.
fn config_patch(set: &[(String, String)], unset: &[String]) -> Result<Value, CliError> {
    let mut patch = Map::new();
    for (key, value) in set {
        patch.insert(key.clone(), Value::String(value.clone()));
    }
    for key in unset {
        if patch.insert(key.clone(), Value::Null).is_some() {
            return Err(CliError::local(format!("{key} is both set and unset")));
        }
    }
    Ok(Value::Object(patch))
}

async fn validate(s: &Session, file: &Path) -> Result<String, CliError> {
    let config = read_config_file(file)?;
    let Some(plugin) = config.get("connector.class").and_then(Value::as_str).map(String::from) else {
        return Err(CliError::local(format!("{}: no connector.class to name the plugin", file.display())));
    };
    let path = format!("/connector-plugins/{}/config/validate", segment(&plugin));
    let answer = s.send(Method::PUT, &path, Some(&Value::Object(config))).await?;
    let infos: ConfigInfos = answer.json()?;
    let text = s.show(answer, |_| Ok(validation_report(&plugin, &infos)))?;
    if infos.error_count > 0 {
        return Err(CliError {
            kind: ErrorKind::Invalid,
            message: format!("the config has {} error(s)", infos.error_count),
            output: Some(text),
        });
    }
    Ok(text)
}

/// Each error against its key, then the warnings.
fn validation_report(plugin: &str, infos: &ConfigInfos) -> String {
    let mut out = if infos.error_count == 0 {
        format!("the config is valid for plugin {plugin}\n")
    } else {
        let rows: Vec<Vec<String>> = infos
            .configs
            .iter()
            .flat_map(|c| c.value.errors.iter().map(|e| vec![c.value.name.clone(), e.clone()]))
            .collect();
        table::render(&["KEY", "ERROR"], &rows)
    };
    for warning in &infos.warnings {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

async fn offsets(s: &Session, command: OffsetsCommand) -> Result<String, CliError> {
    let message =
        |a: &Answer| Ok(format!("{}\n", a.body.as_ref().and_then(|b| b["message"].as_str()).unwrap_or("done")));
    match command {
        OffsetsCommand::Get { name } => {
            let answer = s.get(&path(&name, "/offsets")).await?;
            s.show(answer, |a| Ok(offsets_table(&a.json()?)))
        }
        OffsetsCommand::Alter { name, file, partitions } => {
            let body = match file {
                Some(file) => read_json(&file)?,
                None => json!(ConnectorOffsets { offsets: partitions }),
            };
            let answer = s.send(Method::PATCH, &path(&name, "/offsets"), Some(&body)).await?;
            s.show(answer, message)
        }
        OffsetsCommand::Reset { name } => {
            let answer = s.send(Method::DELETE, &path(&name, "/offsets"), None).await?;
            s.show(answer, message)
        }
    }
}

/// `--partition TOPIC:PARTITION=OFFSET`, or `…=null` to reset the
/// partition.
pub fn parse_partition_offset(raw: &str) -> Result<PartitionOffset, String> {
    let malformed = || format!("expected TOPIC:PARTITION=OFFSET, not '{raw}'");
    let (where_, offset) = raw.rsplit_once('=').ok_or_else(malformed)?;
    let (topic, partition) = where_.rsplit_once(':').ok_or_else(malformed)?;
    if topic.is_empty() {
        return Err(malformed());
    }
    let partition: i32 = partition.parse().map_err(|_| malformed())?;
    let offset = match offset {
        "null" => None,
        number => Some(OffsetValue { kafka_offset: number.parse().map_err(|_| malformed())? }),
    };
    Ok(PartitionOffset {
        partition: OffsetPartition { kafka_topic: topic.to_string(), kafka_partition: partition },
        offset,
    })
}

fn offsets_table(offsets: &ConnectorOffsets) -> String {
    if offsets.offsets.is_empty() {
        return "no offsets\n".into();
    }
    let rows: Vec<Vec<String>> = offsets
        .offsets
        .iter()
        .map(|o| {
            let offset = o.offset.as_ref().map_or("-".to_string(), |v| v.kafka_offset.to_string());
            vec![o.partition.kafka_topic.clone(), o.partition.kafka_partition.to_string(), offset]
        })
        .collect();
    table::render(&["TOPIC", "PARTITION", "OFFSET"], &rows)
}

fn list_table(answer: &Answer) -> Result<String, CliError> {
    let expanded: BTreeMap<String, Value> = answer.json()?;
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

/// Connect's `{"name", "config"}` (sent as is, `initial_state` and all); a
/// bare config with a `name` key is accepted too.
fn read_create_request(file: &Path) -> Result<Value, CliError> {
    let value = read_json(file)?;
    if value.get("config").is_some() {
        return Ok(value);
    }
    match value.get("name").and_then(Value::as_str) {
        Some(name) => Ok(json!({ "name": name, "config": value })),
        None => Err(CliError::local(format!("{}: expected {{\"name\": .., \"config\": {{..}}}}", file.display()))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::herder::{ConfigInfo, ConfigKeyInfo, ConfigValueInfo, InstanceState, TaskState};

    #[test]
    fn status_table_shows_tasks_and_first_trace_line() {
        let task = |id, state, trace: Option<&str>| TaskState {
            id,
            state,
            worker_id: "w:8083".into(),
            trace: trace.map(String::from),
            version: None,
            delivery: None,
            guarantee: None,
            plugin: None,
            swap: None,
        };
        let status = ConnectorStateInfo {
            name: "c".into(),
            connector: InstanceState {
                state: State::Running,
                worker_id: "w:8083".into(),
                trace: None,
                version: None,
                derived_grants: Vec::new(),
            },
            tasks: vec![task(0, State::Running, None), task(1, State::Failed, Some("boom\nat line 2"))],
            kind: "sink".into(),
            lag: None,
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
        assert_eq!(read_create_request(&file).unwrap_err().kind, ErrorKind::Local);
    }

    #[test]
    fn patch_sets_values_and_nulls_removed_keys() {
        let set = vec![("a".to_string(), "1".to_string()), ("b".into(), "".into())];
        let patch = config_patch(&set, &["c".into()]).unwrap();
        assert_eq!(patch, json!({"a": "1", "b": "", "c": null}));
        assert_eq!(config_patch(&set, &["a".into()]).unwrap_err().kind, ErrorKind::Local);
        assert_eq!(parse_key_value("k=v=w").unwrap(), ("k".into(), "v=w".into()));
        assert_eq!(parse_key_value("k=").unwrap(), ("k".into(), "".into()));
        assert!(parse_key_value("k").is_err() && parse_key_value("=v").is_err());
    }

    #[test]
    fn partition_offsets_parse_from_flags() {
        let parsed = parse_partition_offset("my.topic:3=42").unwrap();
        assert_eq!(
            json!(parsed),
            json!({"partition": {"kafka_topic": "my.topic", "kafka_partition": 3}, "offset": {"kafka_offset": 42}})
        );
        assert_eq!(parse_partition_offset("t:0=null").unwrap().offset, None);
        for bad in ["t:0", "t=5", ":0=5", "t:x=5", "t:0=five", "t:0="] {
            assert!(parse_partition_offset(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn offsets_table_shows_each_partition() {
        let offsets = ConnectorOffsets {
            offsets: vec![parse_partition_offset("t:0=5").unwrap(), parse_partition_offset("t:1=null").unwrap()],
        };
        assert_eq!(offsets_table(&offsets), "TOPIC  PARTITION  OFFSET\nt      0          5\nt      1          -\n");
        assert_eq!(offsets_table(&ConnectorOffsets { offsets: vec![] }), "no offsets\n");
    }

    #[test]
    fn validation_report_lists_errors_by_key_and_warnings() {
        let info = |name: &str, errors: &[&str]| ConfigInfo {
            definition: ConfigKeyInfo {
                name: name.into(),
                kind: "STRING".into(),
                required: false,
                default_value: None,
                importance: "HIGH".into(),
                documentation: String::new(),
                group: None,
                width: "NONE".into(),
                display_name: name.into(),
                dependents: vec![],
                order: 0,
            },
            value: ConfigValueInfo {
                name: name.into(),
                value: None,
                recommended_values: vec![],
                errors: errors.iter().map(|e| e.to_string()).collect(),
                visible: true,
            },
        };
        let mut infos = ConfigInfos {
            name: "noop-sink".into(),
            error_count: 2,
            groups: vec![],
            configs: vec![info("tasks.max", &["must be at least 1"]), info("topics", &[]), info("x", &["bad"])],
            warnings: vec!["think twice".into()],
            derived_grants: vec![],
        };
        assert_eq!(
            validation_report("noop-sink", &infos),
            "KEY        ERROR\ntasks.max  must be at least 1\nx          bad\nwarning: think twice\n"
        );
        infos.error_count = 0;
        infos.configs.clear();
        assert_eq!(
            validation_report("noop-sink", &infos),
            "the config is valid for plugin noop-sink\nwarning: think twice\n"
        );
    }
}
