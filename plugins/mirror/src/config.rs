//! The mirror's configuration keys: one table ([`keys`]) that `metadata()`,
//! the README and the parser share, and [`Settings`], the parsed form.
//! Keys MirrorMaker 2 has are spelled as it spells them, with its defaults.

use crate::policy::Policy;
use regex_lite::Regex;
use spillway_sdk::{Config, ConfigError, ConfigKey, ConfigReader, ConfigType};

/// MirrorMaker 2's `topics.exclude` default.
pub const TOPICS_EXCLUDE: &str = r".*[\-\.]internal, .*\.replica, __.*";
/// MirrorMaker 2's `groups.exclude` default.
pub const GROUPS_EXCLUDE: &str = "console-consumer-.*, connect-.*, __.*";
/// MirrorMaker 2's `config.properties.exclude` default: topic configs that
/// belong to the source cluster, not to the topic.
pub const CONFIG_PROPERTIES_EXCLUDE: &str = r"follower\.replication\.throttled\.replicas, leader\.replication\.throttled\.replicas, message\.timestamp\.difference\.max\.ms, message\.timestamp\.type, unclean\.leader\.election\.enable, min\.insync\.replicas";

const DEFAULT_POLICY: &[&str] =
    &["default", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy", "DefaultReplicationPolicy"];
const IDENTITY_POLICY: &[&str] =
    &["identity", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy", "IdentityReplicationPolicy"];

/// Every key the mirror takes, in the order the README lists them.
pub fn keys() -> Vec<ConfigKey> {
    use ConfigType::{Boolean, List, Long, String};
    let k = ConfigKey::optional;
    vec![
        k(
            "target.grant",
            String,
            "target",
            "Name of the Kafka grant to produce to: the cluster of plugin.grant.kafka.<name>.bootstrap.servers, \
             whose client settings and credentials stay in the host.",
        ),
        k(
            "source.cluster.alias",
            String,
            "source",
            "The alias of the cluster the connector consumes from: the prefix of remote topic names under the \
             default replication policy.",
        ),
        k(
            "target.cluster.alias",
            String,
            "target",
            "The alias of the granted cluster: a source topic whose upstream aliases include it came from the \
             target and is not copied back (default policy only).",
        ),
        k(
            "replication.policy.class",
            String,
            "default",
            "How target topics are named. default (or org.apache.kafka.connect.mirror.DefaultReplicationPolicy): \
             <source alias><separator><topic>, with loop prevention; identity (or \
             org.apache.kafka.connect.mirror.IdentityReplicationPolicy): the source topic's name, without loop \
             prevention.",
        ),
        k(
            "replication.policy.separator",
            String,
            ".",
            "What separates the source alias from the topic in remote topic names.",
        ),
        k(
            "topics.exclude",
            List,
            TOPICS_EXCLUDE,
            "Regexes (each matching a whole topic name) of topics not copied: their records are accepted and \
             dropped. The host's topics / topics.regex say what is consumed.",
        ),
        k(
            "sync.topic.configs.enabled",
            Boolean,
            "true",
            "A target topic the mirror creates gets the source topic's own configs (less \
             config.properties.exclude); off: the broker's defaults.",
        ),
        k(
            "config.properties.exclude",
            List,
            CONFIG_PROPERTIES_EXCLUDE,
            "Regexes (each matching a whole config name) of topic configs never copied to a target topic.",
        ),
        k(
            "emit.checkpoints.enabled",
            Boolean,
            "true",
            "Translate the source cluster's consumer group offsets into the target's and commit them there \
             (MirrorMaker 2's checkpoints with sync.group.offsets.enabled), from task 0, for groups with no \
             member on the target.",
        ),
        k(
            "emit.checkpoints.interval.seconds",
            Long,
            "60",
            "How often task 0 translates and commits group offsets, in seconds (at least 1).",
        ),
        k("groups", List, ".*", "Regexes (each matching a whole group id) of the consumer groups translated."),
        k(
            "groups.exclude",
            List,
            GROUPS_EXCLUDE,
            "Regexes (each matching a whole group id) of consumer groups not translated, even when groups \
             matches them.",
        ),
    ]
}

/// A list of regexes, each matching a whole name; an empty list matches nothing.
#[derive(Clone, Debug, Default)]
pub struct Filter(Option<Regex>);

impl Filter {
    /// The patterns of a list key; a pattern that does not compile is an
    /// error of `key`.
    fn read(r: &mut ConfigReader, key: &str) -> Filter {
        let patterns = r.list(key);
        let mut bad = false;
        for pattern in &patterns {
            if let Err(e) = Regex::new(pattern) {
                r.error(key, format!("'{pattern}' is not a regex: {e}"));
                bad = true;
            }
        }
        if bad || patterns.is_empty() {
            return Filter(None);
        }
        let alternatives: Vec<String> = patterns.iter().map(|p| format!("(?:{p})")).collect();
        match Regex::new(&format!("^(?:{})$", alternatives.join("|"))) {
            Ok(regex) => Filter(Some(regex)),
            Err(e) => {
                r.error(key, format!("the regexes do not combine: {e}"));
                Filter(None)
            }
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        self.0.as_ref().is_some_and(|r| r.is_match(name))
    }
}

/// The parsed configuration of one task.
#[derive(Clone, Debug)]
pub struct Settings {
    pub grant: String,
    pub policy: Policy,
    pub topics_exclude: Filter,
    pub sync_topic_configs: bool,
    pub config_exclude: Filter,
    pub emit_checkpoints: bool,
    pub checkpoint_interval_ms: u64,
    pub groups: Filter,
    pub groups_exclude: Filter,
    /// `task.id`, which the host adds: only task 0 translates group offsets.
    pub task_id: u32,
}

impl Settings {
    /// Parses and checks the whole configuration; every problem is reported, one per key.
    pub fn parse(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut r = ConfigReader::new(config, keys());

        let grant = r.string("target.grant").trim().to_string();
        if grant.is_empty() || !grant.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            r.error("target.grant", format!("'{grant}' is not a grant name: [a-z0-9-]+"));
        }
        let source_alias = r.string("source.cluster.alias").trim().to_string();
        let target_alias = r.string("target.cluster.alias").trim().to_string();
        let identity = r.choice("replication.policy.class", &[DEFAULT_POLICY, IDENTITY_POLICY]) == 1;
        // As written: a separator may be any string, if not an empty one.
        let separator = r.string("replication.policy.separator");
        if separator.is_empty() {
            r.error("replication.policy.separator", "must not be empty");
        }
        for (key, alias) in [("source.cluster.alias", &source_alias), ("target.cluster.alias", &target_alias)] {
            if alias.is_empty() {
                r.error(key, "must not be empty");
            } else if !identity && !separator.is_empty() && alias.contains(separator.as_str()) {
                r.error(
                    key,
                    format!("'{alias}' contains the separator '{separator}': remote topic names would be ambiguous"),
                );
            }
        }
        if !identity && !source_alias.is_empty() && source_alias == target_alias {
            r.error(
                "target.cluster.alias",
                format!("'{target_alias}' is also the source's alias: every remote topic would look like a loop"),
            );
        }
        let policy =
            if identity { Policy::Identity } else { Policy::Default { source_alias, target_alias, separator } };

        let topics_exclude = Filter::read(&mut r, "topics.exclude");
        let sync_topic_configs = r.boolean("sync.topic.configs.enabled");
        let config_exclude = Filter::read(&mut r, "config.properties.exclude");
        let emit_checkpoints = r.boolean("emit.checkpoints.enabled");
        let raw = r.string("emit.checkpoints.interval.seconds");
        let checkpoint_interval_ms = match raw.trim().parse::<u64>() {
            Ok(s) if s >= 1 => s.saturating_mul(1000),
            _ => {
                r.error(
                    "emit.checkpoints.interval.seconds",
                    format!("invalid value '{raw}': a number of seconds, at least 1"),
                );
                60_000
            }
        };
        let groups = Filter::read(&mut r, "groups");
        let groups_exclude = Filter::read(&mut r, "groups.exclude");
        let task_id = match config.get("task.id") {
            None => 0,
            Some(raw) => raw.trim().parse().unwrap_or_else(|_| {
                r.error("task.id", format!("invalid value '{raw}': the task's number"));
                0
            }),
        };

        r.finish(Settings {
            grant,
            policy,
            topics_exclude,
            sync_topic_configs,
            config_exclude,
            emit_checkpoints,
            checkpoint_interval_ms,
            groups,
            groups_exclude,
            task_id,
        })
    }

    /// Whether this task translates group offsets.
    pub fn checkpoints(&self) -> bool {
        self.emit_checkpoints && self.task_id == 0
    }

    /// Whether the offsets of `group` are translated.
    pub fn group_wanted(&self, group: &str) -> bool {
        self.groups.matches(group) && !self.groups_exclude.matches(group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>())
    }

    fn error_keys(pairs: &[(&str, &str)]) -> Vec<String> {
        match Settings::parse(&config(pairs)) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.into_iter().map(|e| e.key).collect(),
        }
    }

    #[test]
    fn defaults_are_mirrormaker_2s() {
        let s = Settings::parse(&config(&[])).unwrap();
        assert_eq!(s.grant, "target");
        assert_eq!(
            s.policy,
            Policy::Default { source_alias: "source".into(), target_alias: "target".into(), separator: ".".into() }
        );
        assert!(s.sync_topic_configs && s.emit_checkpoints && s.checkpoints());
        assert_eq!((s.checkpoint_interval_ms, s.task_id), (60_000, 0));
        for excluded in ["mm2-offsets.source.internal", "orders-internal", "orders.replica", "__consumer_offsets"] {
            assert!(s.topics_exclude.matches(excluded), "{excluded}");
        }
        for kept in ["orders", "internal", "orders.internals", "a_b"] {
            assert!(!s.topics_exclude.matches(kept), "{kept}");
        }
        for excluded in ["min.insync.replicas", "message.timestamp.type", "unclean.leader.election.enable"] {
            assert!(s.config_exclude.matches(excluded), "{excluded}");
        }
        assert!(!s.config_exclude.matches("retention.ms"));
        assert!(!s.config_exclude.matches("min_insync_replicas"), "dots are literal");
        assert!(s.group_wanted("billing"));
        for excluded in ["console-consumer-4711", "connect-mirror", "__share"] {
            assert!(!s.group_wanted(excluded), "{excluded}");
        }
    }

    #[test]
    fn policies_by_name_or_java_class() {
        for name in ["identity", "IDENTITY", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"] {
            let s = Settings::parse(&config(&[("replication.policy.class", name)])).unwrap();
            assert_eq!(s.policy, Policy::Identity, "{name}");
        }
        let s = Settings::parse(&config(&[
            ("replication.policy.class", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"),
            ("replication.policy.separator", "_"),
            ("source.cluster.alias", "us"),
        ]))
        .unwrap();
        assert_eq!(s.policy.remote_topic("orders"), "us_orders");
    }

    #[test]
    fn checkpoints_are_task_0s() {
        let s = Settings::parse(&config(&[("task.id", "1")])).unwrap();
        assert!(!s.checkpoints());
        let s = Settings::parse(&config(&[("task.id", "0"), ("emit.checkpoints.enabled", "false")])).unwrap();
        assert!(!s.checkpoints());
        let s = Settings::parse(&config(&[("task.id", "0"), ("emit.checkpoints.interval.seconds", "1")])).unwrap();
        assert_eq!(s.checkpoint_interval_ms, 1000);
    }

    #[test]
    fn filters_match_whole_names_and_empty_lists_nothing() {
        let s =
            Settings::parse(&config(&[("groups", "app-.*, billing"), ("groups.exclude", ""), ("topics.exclude", "")]))
                .unwrap();
        assert!(s.group_wanted("app-1") && s.group_wanted("billing"));
        assert!(!s.group_wanted("billing-2") && !s.group_wanted("my-app-1"));
        assert!(!s.topics_exclude.matches("__consumer_offsets"));
        let s = Settings::parse(&config(&[("groups", "a|b")])).unwrap();
        assert!(s.group_wanted("b") && !s.group_wanted("ab"), "an alternation inside a pattern stays whole");
        let s = Settings::parse(&config(&[("groups", "(?i)app, billing")])).unwrap();
        assert!(s.group_wanted("APP") && s.group_wanted("billing"));
        assert!(!s.group_wanted("BILLING"), "a pattern's flags stay in it");
    }

    #[test]
    fn every_problem_is_named_by_its_key() {
        assert_eq!(error_keys(&[("topics.exclude", "ok, (unclosed")]), ["topics.exclude"]);
        assert_eq!(error_keys(&[("groups", "[a-")]), ["groups"]);
        assert_eq!(error_keys(&[("groups.exclude", "*")]), ["groups.exclude"]);
        assert_eq!(error_keys(&[("config.properties.exclude", "a)")]), ["config.properties.exclude"]);
        assert_eq!(error_keys(&[("replication.policy.class", "custom")]), ["replication.policy.class"]);
        assert_eq!(error_keys(&[("emit.checkpoints.interval.seconds", "0")]), ["emit.checkpoints.interval.seconds"]);
        assert_eq!(error_keys(&[("emit.checkpoints.interval.seconds", "-5")]), ["emit.checkpoints.interval.seconds"]);
        assert_eq!(error_keys(&[("emit.checkpoints.interval.seconds", "1m")]), ["emit.checkpoints.interval.seconds"]);
        assert_eq!(error_keys(&[("emit.checkpoints.enabled", "yes")]), ["emit.checkpoints.enabled"]);
        assert_eq!(error_keys(&[("target.grant", "Target.Cluster")]), ["target.grant"]);
        assert_eq!(error_keys(&[("replication.policy.separator", "")]), ["replication.policy.separator"]);
        assert_eq!(error_keys(&[("source.cluster.alias", "")]), ["source.cluster.alias"]);
        assert_eq!(error_keys(&[("source.cluster.alias", "us.east")]), ["source.cluster.alias"]);
        assert_eq!(error_keys(&[("source.cluster.alias", "target")]), ["target.cluster.alias"]);
        assert_eq!(error_keys(&[("task.id", "x")]), ["task.id"]);
        // Under identity, aliases name nothing in topic names.
        assert_eq!(
            error_keys(&[("replication.policy.class", "identity"), ("source.cluster.alias", "us.east")]),
            Vec::<String>::new()
        );
        assert_eq!(
            error_keys(&[("groups", "("), ("emit.checkpoints.interval.seconds", "0")]),
            ["emit.checkpoints.interval.seconds", "groups"]
        );
    }
}
