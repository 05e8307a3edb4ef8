//! Kafka Connect's names for what Spillway runs: a plugin declares
//! (`spillway:connect`) the connector classes it stands in for and the
//! Connect keys that name its targets, and a config written for Connect is
//! brought to Spillway's here, before anything else reads it. A key that
//! names a target becomes a setting of a grant, checked by the worker's
//! policy as an explicit grant is, and stays in the host.

use spillway_capabilities::GRANT_PREFIX;
use spillway_config::Problem;
use spillway_runtime::{ConnectNames, GrantSource, PluginKind};
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The Connect names and kind of every installed plugin, by plugin name:
/// written by the plugin registry as it installs and removes plugins, read
/// when a config is parsed. Clones share one table.
#[derive(Clone, Debug, Default)]
pub struct InstalledNames(Arc<RwLock<BTreeMap<String, (ConnectNames, PluginKind)>>>);

impl InstalledNames {
    /// What `plugin` (its newest build) answers to, and what it is. Every
    /// plugin is kept, so that a plugin's own name finds it before any class
    /// another declares, as the registry resolves it.
    pub fn set(&self, plugin: &str, names: &ConnectNames, kind: PluginKind) {
        let mut table = self.0.write().expect("never poisoned: no code panics holding it");
        table.insert(plugin.to_string(), (names.clone(), kind));
    }

    /// Whether `class` names an installed transform plugin: by its name, or
    /// by a Connect class it answers to.
    pub fn is_transform(&self, class: &str) -> bool {
        let table = self.0.read().expect("never poisoned");
        let transform = |kind: &PluginKind| *kind == PluginKind::Transform;
        match table.get(class) {
            Some((_, kind)) => transform(kind),
            None => table.values().any(|(names, kind)| transform(kind) && answers_to(names, class)),
        }
    }

    pub fn remove(&self, plugin: &str) {
        self.0.write().expect("never poisoned").remove(plugin);
    }

    /// The plugin `class` names and what it answers to: a plugin's own name,
    /// or a Connect connector class a sink declares (or its short forms).
    pub fn lookup(&self, class: &str) -> Option<(String, ConnectNames)> {
        let table = self.0.read().expect("never poisoned");
        if let Some((names, _)) = table.get(class) {
            return Some((class.to_string(), names.clone()));
        }
        let sink_answering = |(_, (names, kind)): &(&String, &(ConnectNames, PluginKind))| {
            *kind == PluginKind::Sink && answers_to(names, class)
        };
        table.iter().find(sink_answering).map(|(p, (n, _))| (p.clone(), n.clone()))
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

/// The grant setting `source` gives: `plugin.grant.<capability>.<grant>.<setting>`.
pub fn grant_key(source: &GrantSource) -> String {
    format!("{GRANT_PREFIX}{}.{}.{}", source.capability, source.grant, source.setting)
}

/// Checks what a plugin declares before it is installed: each grant source
/// names a grant as an explicit key would (`[a-z0-9-]+` names, a setting
/// of such words and dots), puts the value in once, and reads a key of
/// Connect's, not one the host reads (a host key's value, a client's
/// password say, must not become the plugin's).
pub fn check(names: &ConnectNames, host_reads: impl Fn(&str) -> bool) -> Result<(), String> {
    let name = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    for source in &names.grant_sources {
        let key = &source.connect_key;
        let why = if !(name(&source.capability) && name(&source.grant)) {
            "its capability and grant must be [a-z0-9-]+"
        } else if !source.setting.split('.').all(name) {
            "its setting must be [a-z0-9-]+ words joined by dots"
        } else if source.template.matches("{}").count() != 1 {
            "its template must hold {} once"
        } else if key.starts_with("plugin.") || host_reads(key) {
            "it reads a key of the host's"
        } else {
            continue;
        };
        return Err(format!("declares that Connect key '{key}' gives {}, and {why}", grant_key(source)));
    }
    Ok(())
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
        let key = grant_key(source);
        // The grant's other settings may be given explicitly (a pool size,
        // a timeout); one setting given both ways is refused.
        if raw.contains_key(&key) {
            problems.push(Problem::new(
                &source.connect_key,
                format!("gives {key}, which the config gives explicitly too: give one or the other"),
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

        let both = map(&[("connection.url", "postgres://h/db"), ("plugin.grant.sql.db.url", "postgres://h/x")]);
        let derived = derive(&both, &names(), "");
        assert_eq!(derived.problems.len(), 1);
        assert_eq!(derived.problems[0].key, "connection.url");
        assert_eq!(derived.config["plugin.grant.sql.db.url"], "postgres://h/x", "the explicit one stays");
        // Another setting of the same grant tunes it.
        let tuned = map(&[("connection.url", "postgres://h/db"), ("plugin.grant.sql.db.pool.size", "4")]);
        assert!(derive(&tuned, &names(), "").problems.is_empty());
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
    fn a_plugin_may_not_declare_a_grant_source_that_escapes_the_grant_grammar_or_reads_a_host_key() {
        let host_reads = |key: &str| key == "consumer.override.sasl.password";
        assert_eq!(check(&names(), host_reads), Ok(()));
        let with = |edit: &dyn Fn(&mut GrantSource)| {
            let mut names = names();
            edit(&mut names.grant_sources[0]);
            check(&names, host_reads).unwrap_err()
        };
        assert!(with(&|s| s.grant = "a.b".into()).contains("[a-z0-9-]+"));
        assert!(with(&|s| s.capability = "".into()).contains("[a-z0-9-]+"));
        assert!(with(&|s| s.setting = "access..key".into()).contains("joined by dots"));
        assert!(with(&|s| s.template = "{}{}".into()).contains("{} once"));
        assert!(with(&|s| s.template = "fixed".into()).contains("{} once"));
        assert!(with(&|s| s.connect_key = "consumer.override.sasl.password".into()).contains("the host's"));
        assert!(with(&|s| s.connect_key = "plugin.deterministic".into()).contains("the host's"));
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
        installed.set("sql-sink", &names(), PluginKind::Sink);
        installed.set("JdbcSink", &ConnectNames::default(), PluginKind::Sink);
        assert_eq!(installed.lookup("sql-sink").unwrap().0, "sql-sink");
        assert_eq!(installed.lookup("JdbcSinkConnector").unwrap().0, "sql-sink");
        // A plugin's own name finds it before another's class, as the registry resolves it.
        assert_eq!(installed.lookup("JdbcSink").unwrap().0, "JdbcSink");
        installed.remove("sql-sink");
        assert!(installed.lookup("JdbcSinkConnector").is_none());
        // A transform answers to its Connect transformation class in
        // transforms.<alias>.type, and is no connector's class.
        let smt = ConnectNames { classes: vec!["com.example.Redact".into()], ..Default::default() };
        installed.set("redact", &smt, PluginKind::Transform);
        assert!(installed.is_transform("redact") && installed.is_transform("com.example.Redact"));
        assert!(!installed.is_transform("JdbcSink") && !installed.is_transform("com.example.Other"));
        assert!(installed.lookup("com.example.Redact").is_none());
    }
}
