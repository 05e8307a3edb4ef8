//! Kafka Connect's names for what Spillway runs: a plugin declares
//! (`spillway:connect`) the connector classes it stands in for and the
//! Connect keys that name its targets, and a config written for Connect is
//! brought to Spillway's here, before anything else reads it. A key that
//! names a target becomes a setting of a grant, checked by the worker's
//! policy as an explicit grant is, and stays in the host.

use spillway_capabilities::GRANT_PREFIX;
use spillway_config::Problem;
use spillway_runtime::ConnectNames;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The Connect names of every installed plugin, by plugin name: written by
/// the plugin registry as it installs and removes plugins, read when a
/// config is parsed. Clones share one table.
#[derive(Clone, Debug, Default)]
pub struct InstalledNames(Arc<RwLock<BTreeMap<String, ConnectNames>>>);

impl InstalledNames {
    /// What `plugin` (its newest build) answers to; empty names are not kept.
    pub fn set(&self, plugin: &str, names: &ConnectNames) {
        let mut table = self.0.write().expect("never poisoned: no code panics holding it");
        match names == &ConnectNames::default() {
            true => table.remove(plugin),
            false => table.insert(plugin.to_string(), names.clone()),
        };
    }

    pub fn remove(&self, plugin: &str) {
        self.0.write().expect("never poisoned").remove(plugin);
    }

    /// The plugin `class` names and what it answers to: a plugin's own name,
    /// or a Connect class one declares (or its short forms).
    pub fn lookup(&self, class: &str) -> Option<(String, ConnectNames)> {
        let table = self.0.read().expect("never poisoned");
        if let Some(names) = table.get(class) {
            return Some((class.to_string(), names.clone()));
        }
        table.iter().find(|(_, names)| answers_to(names, class)).map(|(p, n)| (p.clone(), n.clone()))
    }
}

/// Whether `class` is one of `names`' classes, in full
/// (`io.confluent.connect.s3.S3SinkConnector`) or as Connect also accepts
/// it: the simple name (`S3SinkConnector`) or that without `Connector`.
pub fn answers_to(names: &ConnectNames, class: &str) -> bool {
    let class = class.trim();
    names.classes.iter().any(|full| {
        let simple = full.rsplit('.').next().unwrap_or(full);
        full == class || simple == class || simple.strip_suffix("Connector") == Some(class)
    })
}

/// A grant setting a Connect key gave.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DerivedKey {
    /// `plugin.grant.<capability>.<grant>.<setting>`.
    pub key: String,
    /// The Connect key it came from.
    pub from: String,
}

/// A config in Connect's words brought to Spillway's.
pub struct Derived {
    /// The config with each derived grant setting added and the keys it came
    /// from taken out (the plugin never sees them).
    pub config: BTreeMap<String, String>,
    pub keys: Vec<DerivedKey>,
    pub problems: Vec<Problem>,
}

impl Derived {
    /// A problem with a derived setting blamed on the Connect key it came
    /// from, which is what the user wrote.
    pub fn blame(&self, mut problem: Problem) -> Problem {
        if let Some(derived) = self.keys.iter().find(|d| d.key == problem.key) {
            problem.message = format!("as {}: {}", derived.key, problem.message);
            problem.key = derived.from.clone();
        }
        problem
    }
}

/// Derives the grants `names` declares from `raw`'s Connect keys, and checks
/// that its keys naming the consumed cluster name `own_cluster`.
pub fn derive(raw: &BTreeMap<String, String>, names: &ConnectNames, own_cluster: &str) -> Derived {
    let given = |key: &str| raw.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut config = raw.clone();
    let mut keys: Vec<DerivedKey> = Vec::new();
    let mut problems = Vec::new();
    for source in &names.grant_sources {
        config.remove(&source.connect_key);
        let Some(value) = given(&source.connect_key) else { continue };
        let grant = format!("{GRANT_PREFIX}{}.{}.", source.capability, source.grant);
        let key = format!("{grant}{}", source.setting);
        if let Some(explicit) = raw.keys().find(|k| k.starts_with(&grant)) {
            problems.push(Problem::new(
                &source.connect_key,
                format!("gives {key}, and {explicit} grants the same explicitly: give one or the other"),
            ));
            continue;
        }
        let value = source.template.replace("{}", value);
        if let Some(earlier) = keys.iter().find(|d| d.key == key) {
            if config.get(&key) != Some(&value) {
                let message = format!("gives {key} another value than {} does: give one of them", earlier.from);
                problems.push(Problem::new(&source.connect_key, message));
            }
            continue;
        }
        config.insert(key.clone(), value);
        keys.push(DerivedKey { key, from: source.connect_key.clone() });
    }
    for key in &names.worker_cluster_keys {
        if let Some(named) = given(key)
            && servers(named) != servers(own_cluster)
        {
            problems.push(Problem::new(
                key,
                format!(
                    "names {named}, and a connector here consumes through its worker, whose cluster is \
                     {own_cluster}: run it on a worker of that cluster"
                ),
            ));
        }
    }
    Derived { config, keys, problems }
}

/// A bootstrap list as a set of `host:port`s.
fn servers(list: &str) -> Vec<String> {
    let mut servers: Vec<String> =
        list.split(',').map(|s| s.trim().to_ascii_lowercase()).filter(|s| !s.is_empty()).collect();
    servers.sort();
    servers.dedup();
    servers
}

/// Every key `names` reads from a config: the host takes them, so that they
/// count as read.
pub fn connect_keys(names: &ConnectNames) -> impl Iterator<Item = &str> {
    let sources = names.grant_sources.iter().map(|s| s.connect_key.as_str());
    sources.chain(names.worker_cluster_keys.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_runtime::GrantSource;

    fn names() -> ConnectNames {
        let source = |connect_key: &str, setting: &str, template: &str| GrantSource {
            connect_key: connect_key.into(),
            capability: "sql".into(),
            grant: "db".into(),
            setting: setting.into(),
            template: template.into(),
        };
        ConnectNames {
            classes: vec!["io.confluent.connect.jdbc.JdbcSinkConnector".into()],
            grant_sources: vec![
                source("connection.url", "url", "{}"),
                source("connection.user", "user", "{}"),
                source("connection.username", "user", "{}"),
                source("db.name", "url", "postgres://h/{}"),
            ],
            worker_cluster_keys: vec!["source.cluster.bootstrap.servers".into()],
        }
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_class_answers_in_full_and_in_connects_short_forms() {
        for class in ["io.confluent.connect.jdbc.JdbcSinkConnector", "JdbcSinkConnector", "JdbcSink", " JdbcSink "] {
            assert!(answers_to(&names(), class), "{class}");
        }
        for class in ["jdbc", "io.debezium.connector.jdbc.JdbcSinkConnector", "Connector", ""] {
            assert!(!answers_to(&names(), class), "{class}");
        }
    }

    #[test]
    fn connect_keys_become_grant_settings_the_plugin_does_not_see() {
        let raw =
            map(&[("connection.url", " jdbc:postgresql://h/db "), ("connection.user", "app"), ("pk.mode", "none")]);
        let derived = derive(&raw, &names(), "");
        assert!(derived.problems.is_empty(), "{:?}", derived.problems);
        assert_eq!(
            derived.config,
            map(&[
                ("plugin.grant.sql.db.url", "jdbc:postgresql://h/db"),
                ("plugin.grant.sql.db.user", "app"),
                ("pk.mode", "none"),
            ])
        );
        let from: Vec<&str> = derived.keys.iter().map(|d| d.from.as_str()).collect();
        assert_eq!(from, ["connection.url", "connection.user"]);
        // A template puts the value where it says.
        let derived = derive(&map(&[("db.name", "orders")]), &names(), "");
        assert_eq!(derived.config["plugin.grant.sql.db.url"], "postgres://h/orders");
    }

    #[test]
    fn two_keys_for_one_setting_must_agree_and_an_explicit_grant_excludes_derived_ones() {
        let agreeing = map(&[("connection.user", "app"), ("connection.username", "app")]);
        assert!(derive(&agreeing, &names(), "").problems.is_empty());
        let disagreeing = map(&[("connection.user", "app"), ("connection.username", "root")]);
        let problems = derive(&disagreeing, &names(), "").problems;
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "connection.username");
        assert!(problems[0].message.contains("another value than connection.user"), "{}", problems[0].message);

        let both = map(&[("connection.url", "postgres://h/db"), ("plugin.grant.sql.db.password", "x")]);
        let derived = derive(&both, &names(), "");
        assert_eq!(derived.problems.len(), 1);
        assert_eq!(derived.problems[0].key, "connection.url");
        assert!(!derived.config.contains_key("plugin.grant.sql.db.url"));
    }

    #[test]
    fn a_derived_settings_problem_is_blamed_on_the_key_written() {
        let derived = derive(&map(&[("connection.url", "oracle://h/db")]), &names(), "");
        let problem = derived.blame(Problem::new("plugin.grant.sql.db.url", "not a postgres:// URL"));
        assert_eq!(problem.key, "connection.url");
        assert_eq!(problem.message, "as plugin.grant.sql.db.url: not a postgres:// URL");
        let other = derived.blame(Problem::new("topics", "x"));
        assert_eq!(other.key, "topics");
    }

    #[test]
    fn the_consumed_cluster_must_be_the_workers() {
        let key = "source.cluster.bootstrap.servers";
        let own = "b:9092,a:9092";
        assert!(derive(&map(&[(key, " A:9092, b:9092 ")]), &names(), own).problems.is_empty());
        let problems = derive(&map(&[(key, "elsewhere:9092")]), &names(), own).problems;
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, key);
    }

    #[test]
    fn the_installed_names_find_a_plugin_by_its_name_or_a_class() {
        let installed = InstalledNames::default();
        installed.set("sql-sink", &names());
        installed.set("file-sink", &ConnectNames::default());
        assert_eq!(installed.lookup("sql-sink").unwrap().0, "sql-sink");
        assert_eq!(installed.lookup("JdbcSinkConnector").unwrap().0, "sql-sink");
        assert!(installed.lookup("file-sink").is_none(), "names nothing: not kept");
        installed.remove("sql-sink");
        assert!(installed.lookup("JdbcSinkConnector").is_none());
    }
}
