//! Connector config validation, answered as Connect answers
//! `PUT /connector-plugins/{plugin}/config/validate`: the host's own keys
//! first, then the plugin's declared keys (required, types), then the
//! plugin's own `validate`.

use super::types::{ConfigInfo, ConfigInfos, ConfigKeyInfo, ConfigMap, ConfigValueInfo};
use crate::runtime::bindings::{ConfigKey, ConfigType, Importance};
use crate::runtime::{Plugin, Runtime};
use crate::task::{ConnectorConfig, GroupProtocol, WorkerDefaults};
use std::collections::BTreeMap;

/// The keys every connector takes, whatever its plugin.
const HOST_KEYS: &[(&str, &str, bool, Option<&str>, &str)] = &[
    ("name", "STRING", true, None, "Globally unique name of the connector."),
    ("connector.class", "STRING", true, None, "Name of the plugin that implements the connector."),
    ("tasks.max", "INT", false, Some("1"), "Maximum number of tasks (share-group members) to run."),
    ("topics", "LIST", true, None, "Topics to consume, comma-separated."),
    (
        "errors.tolerance",
        "STRING",
        false,
        Some("none"),
        "none: a rejected record fails the task; all: it goes to the DLQ.",
    ),
    ("errors.deadletterqueue.topic.name", "STRING", false, Some(""), "Topic for rejected records."),
    (
        "errors.deadletterqueue.context.headers.enable",
        "BOOLEAN",
        false,
        Some("true"),
        "Add __connect.errors.* headers.",
    ),
    (
        "errors.retry.timeout",
        "LONG",
        false,
        Some("300000"),
        "How long a record may keep asking for retries; -1 for no bound.",
    ),
    ("errors.retry.delay.max.ms", "LONG", false, Some("60000"), "Longest pause between retries."),
    ("plugin.memory.max.bytes", "LONG", false, Some("268435456"), "Linear memory one plugin instance may use."),
    ("plugin.call.timeout.ms", "LONG", false, Some("30000"), "Longest one call into the plugin may run."),
    ("flush.interval.ms", "LONG", false, Some("10000"), "Longest a held record waits for a flush."),
    ("batch.max.records", "INT", false, Some("500"), "Records per put()."),
];

pub fn host_key_infos() -> Vec<ConfigKeyInfo> {
    HOST_KEYS
        .iter()
        .enumerate()
        .map(|(i, (name, kind, required, default, doc))| ConfigKeyInfo {
            name: name.to_string(),
            kind: kind.to_string(),
            required: *required,
            default_value: default.map(String::from),
            importance: "HIGH".into(),
            documentation: doc.to_string(),
            group: Some("Common".into()),
            width: "NONE".into(),
            display_name: name.to_string(),
            dependents: Vec::new(),
            order: i as i32 + 1,
        })
        .collect()
}

pub fn plugin_key_infos(plugin: &Plugin) -> Vec<ConfigKeyInfo> {
    plugin.metadata.config.iter().enumerate().map(|(i, key)| key_info(key, i as i32 + 1)).collect()
}

fn key_info(key: &ConfigKey, order: i32) -> ConfigKeyInfo {
    ConfigKeyInfo {
        name: key.name.clone(),
        kind: match key.type_ {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
            ConfigType::Password => "PASSWORD",
        }
        .into(),
        required: key.required,
        default_value: key.default_value.clone(),
        importance: match key.importance {
            Importance::High => "HIGH",
            Importance::Medium => "MEDIUM",
            Importance::Low => "LOW",
        }
        .into(),
        documentation: key.documentation.clone(),
        group: Some("Plugin".into()),
        width: "NONE".into(),
        display_name: key.name.clone(),
        dependents: Vec::new(),
        order,
    }
}

/// Validates `config` for `plugin`; `None` for a plugin that is not
/// installed (connector.class then carries the error).
pub async fn validate(
    runtime: &Runtime,
    plugin_name: &str,
    plugin: Option<&Plugin>,
    config: &ConfigMap,
    defaults: &WorkerDefaults,
) -> ConfigInfos {
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let warnings = match ConnectorConfig::parse(config, defaults) {
        Ok(parsed) => warnings(&parsed),
        Err(problems) => {
            for p in problems {
                errors.entry(p.key).or_default().push(p.message);
            }
            Vec::new()
        }
    };
    let mut keys = host_key_infos();
    match plugin {
        None => errors
            .entry("connector.class".into())
            .or_default()
            .push(format!("Failed to find any installed plugin named '{plugin_name}'")),
        Some(plugin) => {
            for key in &plugin.metadata.config {
                if let Some(message) = check_value(key, config.get(&key.name)) {
                    errors.entry(key.name.clone()).or_default().push(message);
                }
            }
            keys.extend(plugin_key_infos(plugin));
            for e in plugin_validate(runtime, plugin, config).await {
                errors.entry(e.0).or_default().push(e.1);
            }
        }
    }
    let configs: Vec<ConfigInfo> = keys
        .into_iter()
        .map(|definition| {
            let name = definition.name.clone();
            let secret = definition.kind == "PASSWORD";
            ConfigInfo {
                value: ConfigValueInfo {
                    value: config.get(&name).map(|v| if secret { "[hidden]".into() } else { v.clone() }),
                    errors: errors.remove(&name).unwrap_or_default(),
                    name,
                    recommended_values: Vec::new(),
                    visible: true,
                },
                definition,
            }
        })
        .collect();
    // Errors on keys no definition covers (say, a bad plugin.grant.*) still count.
    let mut configs = configs;
    for (name, errs) in errors {
        configs.push(ConfigInfo {
            definition: ConfigKeyInfo {
                name: name.clone(),
                kind: "STRING".into(),
                required: false,
                default_value: None,
                importance: "LOW".into(),
                documentation: String::new(),
                group: None,
                width: "NONE".into(),
                display_name: name.clone(),
                dependents: Vec::new(),
                order: 0,
            },
            value: ConfigValueInfo {
                value: config.get(&name).cloned(),
                name,
                recommended_values: Vec::new(),
                errors: errs,
                visible: true,
            },
        });
    }
    ConfigInfos {
        name: plugin_name.to_string(),
        error_count: configs.iter().map(|c| c.value.errors.len()).sum(),
        groups: vec!["Common".into(), "Plugin".into()],
        configs,
        warnings,
    }
}

/// What a valid config allows but its user will likely regret.
pub fn warnings(config: &ConnectorConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    if config.group_protocol == GroupProtocol::Share && config.errors.dlq_topic.is_none() {
        warnings.push(
            "share group without errors.deadletterqueue.topic.name: a record still failing on its last delivery \
             (the broker's share.delivery.count.limit) is archived by the broker and lost to this connector; \
             stopping the task cannot keep it, as it can in a consumer group. Configure a dead-letter queue \
             (errors.tolerance=all) to keep such records."
                .into(),
        );
    }
    warnings
}

/// A required key that is missing, or a value that does not parse as its type.
fn check_value(key: &ConfigKey, value: Option<&String>) -> Option<String> {
    let Some(value) = value else {
        return (key.required && key.default_value.is_none()).then(|| "Missing required configuration".into());
    };
    let v = value.trim();
    let ok = match key.type_ {
        ConfigType::Boolean => v == "true" || v == "false",
        ConfigType::Int => v.parse::<i32>().is_ok(),
        ConfigType::Long => v.parse::<i64>().is_ok(),
        ConfigType::Double => v.parse::<f64>().is_ok(),
        ConfigType::String | ConfigType::List | ConfigType::Password => true,
    };
    (!ok).then(|| format!("Invalid value '{value}' for configuration {}", key.name))
}

/// The plugin's own checks, in a throwaway instance with no grants.
async fn plugin_validate(runtime: &Runtime, plugin: &Plugin, config: &ConfigMap) -> Vec<(String, String)> {
    let runtime = runtime.clone();
    let plugin = plugin.clone();
    let pairs: Vec<(String, String)> = config.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let result = async {
        let mut probe = runtime.validation_probe(&plugin).await?;
        probe.validate(&pairs).await.map_err(anyhow::Error::from)
    };
    match result.await {
        Ok(errors) => errors.into_iter().map(|e| (e.key, e.message)).collect(),
        Err(e) => vec![("connector.class".into(), format!("the plugin's validate failed: {e:#}"))],
    }
}
