//! `spillway connectors import FILE`: a Kafka Connect connector config
//! (Connect's JSON, `{"name", "config"}` or bare, or a standalone worker's
//! `.properties`) as Spillway would run it. The server that would run it
//! validates it; each key is then shown with what becomes of it: read by
//! Spillway or by the plugin, a grant derived from it, ignored, or refused
//! with why. `--apply` creates the connector when nothing is refused.

use super::client::segment;
use super::error::{CliError, ErrorKind};
use super::{Session, read_config_file, table};
use crate::herder::{ConfigInfos, ConnectorInfo};
use reqwest::Method;
use serde_json::{Map, Value, json};
use std::path::Path;

pub async fn import(s: &Session, file: &Path, apply: bool) -> Result<String, CliError> {
    let config = read_connect_config(file)?;
    let Some(class) = config.get("connector.class").and_then(Value::as_str).map(String::from) else {
        return Err(CliError::local(format!("{}: no connector.class to name the plugin", file.display())));
    };
    let path = format!("/connector-plugins/{}/config/validate", segment(&class));
    let answer = s.send(Method::PUT, &path, Some(&Value::Object(config.clone()))).await?;
    let infos: ConfigInfos = answer.json()?;
    let mut report = s.show(answer, |_| Ok(import_report(&config, &infos)))?;
    if infos.error_count > 0 {
        let message = format!("{} key(s) refused: nothing was created", infos.error_count);
        return Err(CliError { kind: ErrorKind::Invalid, message, output: Some(report) });
    }
    if !apply {
        report.push_str(&format!("run it: spillway connectors import --apply {}\n", file.display()));
        return Ok(report);
    }
    let Some(name) = config.get("name").and_then(Value::as_str).map(String::from) else {
        return Err(CliError::local(format!("{}: no name for the connector", file.display())));
    };
    let request = json!({ "name": name, "config": config });
    let answer = s.send(Method::POST, "/connectors", Some(&request)).await?;
    let info: ConnectorInfo = answer.json()?;
    report.push_str(&format!("created connector {} ({} task(s))\n", info.name, info.tasks.len()));
    Ok(report)
}

/// A connector config: JSON as `read_config_file` reads it, or Java
/// properties (Connect standalone's connector files) when the file is not
/// JSON. Properties values are strings, as Connect's are.
fn read_connect_config(file: &Path) -> Result<Map<String, Value>, CliError> {
    let text =
        std::fs::read_to_string(file).map_err(|e| CliError::local(format!("reading {}: {e}", file.display())))?;
    if text.trim_start().starts_with('{') {
        return read_config_file(file);
    }
    let properties = java_properties::read(text.as_bytes())
        .map_err(|e| CliError::local(format!("{} is neither JSON nor Java properties: {e}", file.display())))?;
    Ok(properties.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

/// One row per key of `config`: what Spillway does with it.
fn import_report(config: &Map<String, Value>, infos: &ConfigInfos) -> String {
    let plugin = infos.configs.iter().any(|c| c.definition.group.as_deref() == Some("Plugin"));
    let rows: Vec<Vec<String>> = config.keys().map(|key| vec![key.clone(), fate(key, infos, plugin)]).collect();
    let mut out = format!("{} as Spillway runs it:\n", infos.name);
    out.push_str(&table::render(&["KEY", "IN SPILLWAY"], &rows));
    let own: Vec<&String> =
        infos.warnings.iter().filter(|w| !config.keys().any(|k| w.starts_with(&format!("{k}:")))).collect();
    for warning in own {
        out.push_str(&format!("warning: {warning}\n"));
    }
    out
}

fn fate(key: &str, infos: &ConfigInfos, plugin_known: bool) -> String {
    let listed = infos.configs.iter().find(|c| c.value.name == key);
    if let Some(errors) = listed.map(|c| &c.value.errors).filter(|e| !e.is_empty()) {
        return format!("refused: {}", errors.join("; "));
    }
    if let Some(derived) = infos.derived_grants.iter().find(|d| d.from == key) {
        return format!("gives {} (the grant stays in the host)", derived.key);
    }
    if let Some(warning) = infos.warnings.iter().find(|w| w.starts_with(&format!("{key}:"))) {
        return format!("ignored: {}", &warning[key.len() + 1..].trim_start());
    }
    let group = listed.and_then(|c| c.definition.group.clone()).or_else(|| {
        // A key under a pattern (`consumer.override.*`).
        let patterns = infos.configs.iter().filter(|c| c.definition.name.ends_with('*'));
        patterns
            .filter(|c| key.starts_with(c.definition.name.trim_end_matches('*')))
            .find_map(|c| c.definition.group.clone())
    });
    match group.as_deref() {
        Some("Plugin") => "read by the plugin".into(),
        Some(group) => format!("read by Spillway ({group})"),
        None if !plugin_known => "not checked: the plugin is not installed".into(),
        None => "read by Spillway".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::DerivedKey;
    use crate::herder::{ConfigInfo, ConfigKeyInfo, ConfigValueInfo};

    fn info(name: &str, group: &str, errors: &[&str]) -> ConfigInfo {
        ConfigInfo {
            definition: ConfigKeyInfo {
                name: name.into(),
                kind: "STRING".into(),
                required: false,
                default_value: None,
                importance: "LOW".into(),
                documentation: String::new(),
                group: Some(group.into()),
                width: "NONE".into(),
                display_name: name.into(),
                dependents: Vec::new(),
                order: 1,
            },
            value: ConfigValueInfo {
                name: name.into(),
                value: None,
                recommended_values: Vec::new(),
                errors: errors.iter().map(|e| e.to_string()).collect(),
                visible: true,
            },
        }
    }

    #[test]
    fn each_key_is_shown_read_derived_ignored_or_refused() {
        let infos = ConfigInfos {
            name: "io.confluent.connect.s3.S3SinkConnector".into(),
            error_count: 1,
            groups: Vec::new(),
            configs: vec![
                info("topics", "Common", &[]),
                info("flush.size", "Plugin", &[]),
                info("consumer.override.*", "Consumer", &[]),
                info(
                    "transforms",
                    "Transforms",
                    &["Invalid value a,a for configuration transforms: Duplicate alias provided."],
                ),
            ],
            warnings: vec!["s3.compresion.type: nothing reads it; did you mean s3.compression.type?".into()],
            derived_grants: vec![DerivedKey {
                key: "plugin.grant.object-store.s3.url".into(),
                from: "s3.bucket.name".into(),
            }],
        };
        let config: Map<String, Value> = [
            "topics",
            "flush.size",
            "consumer.override.max.poll.records",
            "transforms",
            "s3.compresion.type",
            "s3.bucket.name",
        ]
        .iter()
        .map(|k| (k.to_string(), Value::String("x".into())))
        .collect();
        let report = import_report(&config, &infos);
        for (key, fate) in [
            ("topics", "read by Spillway (Common)"),
            ("flush.size", "read by the plugin"),
            ("consumer.override.max.poll.records", "read by Spillway (Consumer)"),
            ("transforms", "refused: Invalid value a,a for configuration transforms: Duplicate alias provided."),
            ("s3.compresion.type", "ignored: nothing reads it; did you mean s3.compression.type?"),
            ("s3.bucket.name", "gives plugin.grant.object-store.s3.url"),
        ] {
            let line = report.lines().find(|l| l.starts_with(key)).unwrap_or_else(|| panic!("{key}: {report}"));
            assert!(line.contains(fate), "{key}: {line}");
        }
    }

    #[test]
    fn a_properties_file_reads_as_connect_standalone_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s3.properties");
        std::fs::write(
            &file,
            "# Confluent's quick start\nname=s3-sink\nconnector.class=io.confluent.connect.s3.S3SinkConnector\n\
             topics = s3_topic\nflush.size: 3\npath.format='year'=YYYY/\\\n  'month'=MM\n",
        )
        .unwrap();
        let config = read_connect_config(&file).unwrap();
        assert_eq!(config["name"], "s3-sink");
        assert_eq!(config["topics"], "s3_topic");
        assert_eq!(config["flush.size"], "3");
        assert_eq!(config["path.format"], "'year'=YYYY/'month'=MM");
        let json = dir.path().join("s3.json");
        std::fs::write(&json, r#"{"name": "s3", "config": {"topics": "t"}}"#).unwrap();
        let config = read_connect_config(&json).unwrap();
        assert_eq!((config["name"].as_str(), config["topics"].as_str()), (Some("s3"), Some("t")));
    }
}
