//! Connector config validation, answered as Connect answers
//! `PUT /connector-plugins/{plugin}/config/validate`: the host's own keys
//! first, then the plugin's declared keys (required, types), then the
//! plugin's own `validate`.

use super::plugins::Refusal;
use super::types::{ConfigInfo, ConfigInfos, ConfigKeyInfo, ConfigMap, ConfigValueInfo};
use crate::config::KeyDef;
use crate::connector::{
    ConnectorConfig, GroupProtocol, WorkerDefaults, connect_keys, connector_keys, derive_grants, grant_key,
    looks_secret,
};
use crate::policy::RequestBounds;
use crate::runtime::bindings::{ConfigKey, ConfigType, Importance};
use crate::runtime::{Plugin, PluginKind, Runtime};
use std::collections::BTreeMap;
use tokio::sync::Semaphore;

/// The keys every connector takes, whatever its plugin, from the host's table.
pub fn host_key_infos() -> Vec<ConfigKeyInfo> {
    connector_keys().keys().iter().enumerate().map(|(i, key)| host_key_info(key, i as i32 + 1)).collect()
}

/// The keys of a ConfigDef of the host's own (a built-in transform's).
pub fn def_key_infos(def: &crate::config::ConfigDef) -> Vec<ConfigKeyInfo> {
    def.keys().iter().enumerate().map(|(i, key)| host_key_info(key, i as i32 + 1)).collect()
}

fn host_key_info(key: &KeyDef, order: i32) -> ConfigKeyInfo {
    ConfigKeyInfo {
        name: key.name().to_string(),
        kind: key.kind().name().into(),
        required: key.is_required(),
        default_value: key.default_value().map(String::from),
        importance: key.importance().name().into(),
        documentation: key.documentation().to_string(),
        group: Some(key.group().to_string()),
        width: "NONE".into(),
        display_name: key.name().to_string(),
        dependents: Vec::new(),
        order,
    }
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

/// Validates `config` for `plugin`, the build its config picks; a plugin
/// that is not installed, or no build that the config admits, is an error on
/// the key to blame.
pub async fn validate(
    runtime: &Runtime,
    validations: &Semaphore,
    plugin_name: &str,
    plugin: Result<&Plugin, Refusal>,
    transforms: Option<Result<&[Plugin], Refusal>>,
    config: &ConfigMap,
    defaults: &WorkerDefaults,
) -> ConfigInfos {
    let mut errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // The builds the config picks, which say which of its keys are secrets.
    let mut builds: Vec<&Plugin> = plugin.as_ref().ok().copied().into_iter().collect();
    builds.extend(transforms.as_ref().and_then(|t| t.as_ref().ok()).into_iter().flat_map(|t| t.iter()));
    let mut warnings = match ConnectorConfig::parse(config, defaults) {
        Ok(parsed) => {
            let transform_errors = match transforms {
                None => Vec::new(),
                Some(Err(Refusal { key, message })) => vec![(key, message)],
                Some(Ok(plugins)) => {
                    let bounds = &defaults.policy.requests;
                    validate_transforms(runtime, validations, &parsed, config, plugins, bounds).await
                }
            };
            for (key, message) in transform_errors {
                errors.entry(key).or_default().push(message);
            }
            warnings(&parsed)
        }
        Err(problems) => {
            for p in problems {
                errors.entry(p.key).or_default().push(p.message);
            }
            Vec::new()
        }
    };
    let mut keys = host_key_infos();
    match &plugin {
        Err(Refusal { key, message }) => errors.entry(key.to_string()).or_default().push(message.clone()),
        Ok(plugin) => {
            // The plugin checks the config as given, as Connect's connectors
            // do: what a provider resolves is a secret of the host's, so a
            // placeholder reaches the plugin as written, and its value is
            // checked when a task starts.
            for key in &plugin.metadata.config {
                let value = config.get(&key.name);
                if value.is_some_and(|v| v.contains("${")) {
                    continue;
                }
                if let Some(message) = check_value(key, value) {
                    errors.entry(key.name.clone()).or_default().push(message);
                }
            }
            keys.extend(plugin_key_infos(plugin));
            warnings.extend(ignored_keys(config, plugin));
            for e in plugin_validate(runtime, validations, plugin, config, &defaults.policy.requests).await {
                errors.entry(e.0).or_default().push(e.1);
            }
        }
    }
    let derived_grants = match &plugin {
        Ok(plugin) => derive_grants(config, &plugin.connect, &defaults.cluster).keys,
        Err(_) => Vec::new(),
    };
    ConfigInfos { derived_grants, ..config_infos(plugin_name, keys, config, errors, warnings, &builds) }
}

/// The answer: each defined key with its value and errors, then every other
/// key with errors.
fn config_infos(
    plugin_name: &str,
    keys: Vec<ConfigKeyInfo>,
    config: &ConfigMap,
    mut errors: BTreeMap<String, Vec<String>>,
    warnings: Vec<String>,
    builds: &[&Plugin],
) -> ConfigInfos {
    let mut configs: Vec<ConfigInfo> = keys
        .into_iter()
        .map(|definition| {
            // As Connect: an unset key's value is its default.
            let value = shown_value(config, &definition.name, builds).or_else(|| definition.default_value.clone());
            let errors = errors.remove(&definition.name).unwrap_or_default();
            config_info(definition, value, errors)
        })
        .collect();
    // Errors on keys no definition names exactly (a grant key matching a
    // pattern, an unknown plugin.grant.*) still count, each under its key.
    for (name, errs) in errors {
        let definition = match connector_keys().find(&name) {
            Some(key) => ConfigKeyInfo { name: name.clone(), display_name: name.clone(), ..host_key_info(key, 0) },
            None => ConfigKeyInfo {
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
        };
        configs.push(config_info(definition, shown_value(config, &name, builds), errs));
    }
    let mut groups: Vec<String> = connector_keys().groups().into_iter().map(String::from).collect();
    groups.push("Plugin".into());
    ConfigInfos {
        name: plugin_name.to_string(),
        error_count: configs.iter().map(|c| c.value.errors.len()).sum(),
        groups,
        configs,
        warnings,
        derived_grants: Vec::new(),
    }
}

/// `key`'s value as validation shows it: `[hidden]` for a secret (see
/// [`is_secret`]).
fn shown_value(config: &ConfigMap, key: &str, builds: &[&Plugin]) -> Option<String> {
    config.get(key).map(|v| if is_secret(builds, key) { HIDDEN.into() } else { v.clone() })
}

pub use crate::config::HIDDEN;

/// A secret key: the host's table says so, its name says it is one
/// (`connection.password`, whatever plugin is installed), or one of
/// `builds` (the plugin builds its config picks: its sink, its transform
/// plugins) declares it a PASSWORD: a sink its own keys, or names it as a
/// Connect key from which a grant's secret is derived; a transform the keys
/// under `transforms.<alias>.`.
pub fn is_secret(builds: &[&Plugin], key: &str) -> bool {
    if connector_keys().is_secret(key) || looks_secret(key) {
        return true;
    }
    let password = |plugin: &Plugin, key: &str| {
        plugin.metadata.config.iter().any(|k| k.name == key && k.type_ == ConfigType::Password)
    };
    let derives_secret =
        |s: &crate::runtime::GrantSource| s.connect_key == key && connector_keys().is_secret(&grant_key(s));
    let stage_key = key.strip_prefix("transforms.").and_then(|rest| rest.split_once('.')).map(|(_, k)| k);
    builds.iter().any(|plugin| match (plugin.kind, stage_key) {
        (PluginKind::Transform, Some(own)) => password(plugin, own),
        (PluginKind::Transform, None) => false,
        (PluginKind::Sink, _) => password(plugin, key) || plugin.connect.grant_sources.iter().any(derives_secret),
    })
}

/// Whether a plugin is given `key`: not a host secret, not a key the host
/// keeps (a grant derived from it), not a key of the transform chain (the
/// transforms', their secrets among them), and not a key that names a
/// secret unless the plugin declares it.
pub fn plugin_reads(plugin: &Plugin, key: &str) -> bool {
    let declared = || plugin.metadata.config.iter().any(|k| k.name == key);
    let chain_key = key.starts_with("transforms.") || key.starts_with("predicates.");
    !connector_keys().is_secret(key)
        && !chain_key
        && !connect_keys(&plugin.connect).any(|k| k == key)
        && (!looks_secret(key) || declared())
}

/// `config` as the REST API shows it: each secret value `[hidden]`, as
/// validation shows it (stricter than Connect, which prints them). A
/// placeholder (`${file:…}`) is no secret and shows as written.
pub fn shown(builds: &[&Plugin], config: &ConfigMap) -> ConfigMap {
    let hide = |k: &str, v: &str| is_secret(builds, k) && !v.trim_start().starts_with("${");
    config.iter().map(|(k, v)| (k.clone(), if hide(k, v) { HIDDEN.into() } else { v.clone() })).collect()
}

/// A secret sent back as `[hidden]` (a config read, changed and written
/// back) keeps the value `previous` holds, rather than become the word.
pub fn keep_hidden_secrets(builds: &[&Plugin], config: &mut ConfigMap, previous: &ConfigMap) {
    for (key, value) in config.iter_mut() {
        if value == HIDDEN
            && is_secret(builds, key)
            && let Some(kept) = previous.get(key)
        {
            value.clone_from(kept);
        }
    }
}

fn config_info(definition: ConfigKeyInfo, value: Option<String>, errors: Vec<String>) -> ConfigInfo {
    ConfigInfo {
        value: ConfigValueInfo {
            name: definition.name.clone(),
            value,
            recommended_values: Vec::new(),
            errors,
            visible: true,
        },
        definition,
    }
}

/// What a valid config allows but its user will likely regret.
pub fn warnings(config: &ConnectorConfig) -> Vec<String> {
    let mut warnings: Vec<String> = config
        .grants
        .deprecated
        .iter()
        .map(|(key, instead)| format!("{key} is an old spelling, still accepted; use {instead}"))
        .collect();
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

/// A warning for each key of `config` that neither the host's table nor
/// `plugin` declares (its keys, and the Connect keys it derives grants
/// from): nothing reads it, so a misspelt key (`s3.compresion.type`) would
/// change nothing in silence. It names the nearest key that is read.
fn ignored_keys(config: &ConfigMap, plugin: &Plugin) -> Vec<String> {
    let mut declared: Vec<&str> = plugin.metadata.config.iter().map(|k| k.name.as_str()).collect();
    declared.extend(connect_keys(&plugin.connect));
    let host = connector_keys().keys().iter().filter(|k| !k.is_pattern()).map(|k| k.name());
    let known: Vec<&str> = host.chain(declared.iter().copied()).collect();
    let plugin_name = &plugin.metadata.name;
    config
        .keys()
        .filter(|key| connector_keys().find(key).is_none() && !declared.contains(&key.as_str()))
        .map(|key| {
            let ignored =
                format!("{key}: neither the host nor plugin {plugin_name} reads this key, so it changes nothing");
            match nearest_key(key, &known) {
                Some(near) => format!("{ignored}; did you mean {near}?"),
                None => ignored,
            }
        })
        .collect()
}

/// The known key `key` most likely stands for: one it ends with after a
/// prefix of another product's (`s3.compression.type`: `compression.type`),
/// else the closest spelling within a third of its length.
fn nearest_key<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    let suffix = known
        .iter()
        .copied()
        .filter(|k| k.contains('.') && key.strip_suffix(k).is_some_and(|prefix| prefix.ends_with('.')))
        .max_by_key(|k| k.len());
    suffix.or_else(|| {
        let near = known.iter().copied().map(|k| (strsim::levenshtein(key, k), k));
        near.filter(|(distance, k)| *distance <= k.len().max(key.len()) / 3).min().map(|(_, k)| k)
    })
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

/// Checks the settings of each transform plugin stage of `parsed`'s chain
/// (`plugins`, in order) as a connector's are checked: its declared keys'
/// values, no key it does not declare, then its own `validate`. Problems
/// are reported under `transforms.<alias>.<key>`. As for the sink, the
/// settings are taken from `given`, the config as written: a placeholder's
/// value is a secret of the host's, checked when a task starts, and never
/// quoted back nor shown to the plugin here.
async fn validate_transforms(
    runtime: &Runtime,
    validations: &Semaphore,
    parsed: &ConnectorConfig,
    given: &ConfigMap,
    plugins: &[Plugin],
    bounds: &RequestBounds,
) -> Vec<(String, String)> {
    let mut errors = Vec::new();
    for ((alias, step), plugin) in parsed.transforms.plugins().zip(plugins) {
        let prefix = format!("transforms.{alias}.");
        let settings: ConfigMap = step
            .settings
            .iter()
            .filter_map(|(key, _)| Some((key.clone(), given.get(&format!("{prefix}{key}"))?.clone())))
            .collect();
        for key in &plugin.metadata.config {
            let value = settings.get(&key.name);
            if value.is_some_and(|v| v.contains("${")) {
                continue;
            }
            if let Some(message) = check_value(key, value) {
                errors.push((prefix.clone() + &key.name, message));
            }
        }
        let declared: Vec<&str> = plugin.metadata.config.iter().map(|k| k.name.as_str()).collect();
        for key in settings.keys().filter(|k| !declared.contains(&k.as_str())) {
            let message = format!(
                "{} has no key {key}, so it would change nothing (its keys: {})",
                plugin.metadata.name,
                if declared.is_empty() { "none".to_string() } else { declared.join(", ") }
            );
            errors.push((prefix.clone() + key, message));
        }
        for (key, message) in plugin_validate(runtime, validations, plugin, &settings, bounds).await {
            let key = if key == "connector.class" { format!("{prefix}type") } else { prefix.clone() + &key };
            errors.push((key, message));
        }
    }
    errors
}

/// The plugin's own checks, in a throwaway instance with no grants, within
/// the worker's bounds: a turn among `bounds.validations`, and
/// `bounds.validate_timeout` (instantiation included: with no grants, it
/// has nothing to wait for but itself).
async fn plugin_validate(
    runtime: &Runtime,
    validations: &Semaphore,
    plugin: &Plugin,
    config: &ConfigMap,
    bounds: &RequestBounds,
) -> Vec<(String, String)> {
    let pairs: Vec<(String, String)> =
        config.iter().filter(|(k, _)| plugin_reads(plugin, k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    // Waiting for a turn is not the plugin's time. Declared first, the turn
    // is given back last, after the probe is gone. The semaphore is never closed.
    let _turn = validations.acquire().await.expect("the validations semaphore is never closed");
    let result = async {
        let mut probe = runtime.validation_probe(plugin).await?;
        probe.validate(&pairs).await.map_err(anyhow::Error::from)
    };
    // Dropping the call ends it: running wasm yields at every epoch tick.
    match tokio::time::timeout(bounds.validate_timeout, result).await {
        Ok(Ok(errors)) => errors.into_iter().map(|e| (e.key, e.message)).collect(),
        Ok(Err(e)) => vec![("connector.class".into(), format!("the plugin's validate failed: {e:#}"))],
        Err(_) => vec![(
            "connector.class".into(),
            format!("the plugin's validate did not return within {} ms", bounds.validate_timeout.as_millis()),
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> ConfigMap {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn an_ignored_key_names_the_key_it_likely_stands_for() {
        let known = ["compression.type", "topics", "tasks.max", "name", "flush.size", "s3.bucket"];
        assert_eq!(nearest_key("s3.compression.type", &known), Some("compression.type"));
        assert_eq!(nearest_key("task.max", &known), Some("tasks.max"));
        assert_eq!(nearest_key("flush.sise", &known), Some("flush.size"));
        // A one-word key is no suffix to go by: `s3.bucket.name` is not `name`.
        assert_eq!(nearest_key("s3.bucket.name", &known), None);
        assert_eq!(nearest_key("value.converter", &known), None);
    }

    #[test]
    fn old_grant_spellings_are_accepted_with_a_warning() {
        let base =
            [("name", "c"), ("connector.class", "p"), ("topics", "t"), ("consumer.override.group.protocol", "classic")];
        let parse = |extra: &[(&str, &str)]| {
            let pairs: Vec<(&str, &str)> = base.iter().chain(extra).copied().collect();
            ConnectorConfig::parse(&map(&pairs), &Default::default()).unwrap()
        };
        let old = warnings(&parse(&[("plugin.grant.fs.dirs", "/data"), ("plugin.grant.clock", "true")]));
        assert_eq!(old.len(), 2, "{old:?}");
        // In key order.
        assert!(old[0].contains("plugin.grant.clock") && old[0].contains("real clocks and randomness are the default"));
        assert!(
            old[1].contains("plugin.grant.fs.dirs is an old spelling")
                && old[1].contains("plugin.grant.fs.<name>.path")
        );
        assert!(warnings(&parse(&[("plugin.grant.fs.data.path", "/data")])).is_empty());
    }

    #[test]
    fn host_keys_are_the_tables_in_order() {
        let infos = host_key_infos();
        let names: Vec<&str> = infos.iter().map(|k| k.name.as_str()).collect();
        let table: Vec<&str> = connector_keys().keys().iter().map(KeyDef::name).collect();
        assert_eq!(names, table);
        assert!(infos.windows(2).all(|w| w[0].order < w[1].order));
        let tasks = serde_json::to_value(&infos[names.iter().position(|n| *n == "tasks.max").unwrap()]).unwrap();
        assert_eq!(
            tasks,
            json!({"name": "tasks.max", "type": "INT", "required": false, "default_value": "1", "importance": "HIGH",
                   "documentation": "Maximum number of tasks (group members) to run.", "group": "Common",
                   "width": "NONE", "display_name": "tasks.max", "dependents": [], "order_in_group": 3})
        );
        let token = infos.iter().find(|k| k.name == "plugin.grant.<capability>.<name>.token").unwrap();
        assert_eq!((token.kind.as_str(), token.group.as_deref()), ("PASSWORD", Some("Grants")));
    }

    #[test]
    fn a_secret_is_hidden_wherever_it_shows() {
        let mut keys = host_key_infos();
        let plugin_password = ConfigKeyInfo {
            name: "db.password".into(),
            kind: "PASSWORD".into(),
            ..host_key_info(connector_keys().find("name").unwrap(), 99)
        };
        keys.push(plugin_password);
        let config = map(&[
            ("db.password", "pw-4a1f"),
            ("plugin.grant.net.db.token", "tk-9c3e"),
            ("plugin.grant.fs.logs.path", "/visible"),
        ]);
        let errors: BTreeMap<String, Vec<String>> = [
            ("plugin.grant.net.db.token".to_string(), vec!["refused".to_string()]),
            ("plugin.grant.fs.logs.path".to_string(), vec!["refused".to_string()]),
        ]
        .into();
        let infos = config_infos("p", keys, &config, errors, Vec::new(), &[]);
        let text = serde_json::to_string(&infos).unwrap();
        assert!(!text.contains("pw-4a1f") && !text.contains("tk-9c3e"), "{text}");
        assert!(text.contains("/visible"), "{text}");
        let value_of = |key: &str| infos.configs.iter().find(|c| c.value.name == key).unwrap();
        assert_eq!(value_of("db.password").value.value.as_deref(), Some("[hidden]"));
        let token = value_of("plugin.grant.net.db.token");
        assert_eq!(token.value.value.as_deref(), Some("[hidden]"));
        assert_eq!((token.definition.kind.as_str(), token.value.errors.len()), ("PASSWORD", 1));
        assert_eq!(infos.error_count, 2);
    }

    #[tokio::test]
    async fn every_problem_is_listed_under_its_key() {
        let cache = tempfile::tempdir().unwrap();
        let runtime = Runtime::new(cache.path()).unwrap();
        let config =
            map(&[("name", "v"), ("connector.class", "nope"), ("tasks.max", "0"), ("errors.tolerance", "some")]);
        let none_installed = crate::herder::PluginRegistry::default();
        let missing = none_installed.resolve("nope", &Default::default());
        let turns = Semaphore::new(1);
        let infos = validate(&runtime, &turns, "nope", missing, None, &config, &WorkerDefaults::default()).await;
        let errors_of = |key: &str| {
            infos.configs.iter().find(|c| c.value.name == key).map(|c| c.value.errors.len()).unwrap_or_default()
        };
        // Neither topics nor topics.regex: Connect lists the problem under both.
        for key in ["connector.class", "topics", "topics.regex", "tasks.max", "errors.tolerance"] {
            assert_eq!(errors_of(key), 1, "{key}: {infos:#?}");
        }
        assert_eq!(infos.error_count, 5);
        let groups =
            ["Common", "Transforms", "Predicates", "Consumer", "Share group", "Errors", "Plugin sandbox", "Grants"];
        assert_eq!(infos.groups, [&groups[..], &["Plugin"]].concat());
    }
}
