//! A connector's configuration, resolved and checked: everything the task
//! loop needs, in types rather than strings.

use crate::capabilities::Grants;
use crate::runtime::Limits;
use std::collections::BTreeMap;
use std::time::Duration;

/// How a connector's tasks consume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupProtocol {
    /// KIP-932 share group: per-record acknowledgement, elastic tasks.
    Share,
    /// A consumer group (`classic`, or KIP-848 `consumer`) with offset commits.
    Classic,
}

/// `errors.tolerance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// A rejected record fails the task (and is released, not lost).
    None,
    /// A rejected record goes to the dead-letter queue (or is logged) and the
    /// task goes on.
    All,
}

#[derive(Clone, Debug)]
pub struct ConnectorConfig {
    pub name: String,
    /// The plugin's name (Connect's `connector.class`).
    pub plugin: String,
    pub tasks_max: u32,
    pub topics: Vec<String>,
    pub group_protocol: GroupProtocol,
    pub group_id: String,
    /// `consumer.override.*` with the prefix removed, except `group.protocol`.
    pub consumer_overrides: Vec<(String, String)>,
    pub batch_max_records: usize,
    pub errors: ErrorPolicy,
    /// Longest a held record waits before the host asks the plugin to flush.
    pub flush_interval: Duration,
    pub limits: Limits,
    pub grants: Grants,
    /// The configuration as the user gave it, passed to the plugin.
    pub raw: BTreeMap<String, String>,
}

#[derive(Clone, Debug)]
pub struct ErrorPolicy {
    pub tolerance: Tolerance,
    pub dlq_topic: Option<String>,
    pub dlq_context_headers: bool,
    /// How long a record may keep failing with `retry` before it is treated
    /// as rejected; `None` retries without a time bound.
    pub retry_timeout: Option<Duration>,
    pub retry_delay_max: Duration,
}

/// A problem with one key, as Connect's validation reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    pub key: String,
    pub message: String,
}

/// Worker-level defaults a connector config may override.
#[derive(Clone, Debug)]
pub struct WorkerDefaults {
    /// `consumer.group.protocol`: `share` unless the worker says otherwise.
    pub group_protocol: GroupProtocol,
}

impl Default for WorkerDefaults {
    fn default() -> Self {
        WorkerDefaults { group_protocol: GroupProtocol::Share }
    }
}

impl ConnectorConfig {
    /// Resolves a connector config. Every problem is reported, not just the first.
    pub fn parse(raw: &BTreeMap<String, String>, worker: &WorkerDefaults) -> Result<Self, Vec<ConfigProblem>> {
        let mut p = Parser { raw, problems: Vec::new() };
        let name = p.required("name");
        let plugin = p.required("connector.class");
        let tasks_max = p.number("tasks.max", 1u32);
        if tasks_max == 0 {
            p.problem("tasks.max", "must be at least 1");
        }
        let topics: Vec<String> =
            p.required("topics").split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
        if topics.is_empty() && raw.contains_key("topics") {
            p.problem("topics", "names no topic");
        }

        let group_protocol = match raw.get("consumer.override.group.protocol").map(String::as_str) {
            None => worker.group_protocol,
            Some("share") => GroupProtocol::Share,
            Some("classic" | "consumer") => GroupProtocol::Classic,
            Some(other) => {
                p.problem("consumer.override.group.protocol", &format!("'{other}' is not share, classic or consumer"));
                worker.group_protocol
            }
        };
        let consumer_overrides: Vec<(String, String)> = raw
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("consumer.override.")?.to_string(), v.clone())))
            // `share` is ours, not librdkafka's; `classic`/`consumer` pass through.
            .filter(|(k, v)| !(k == "group.protocol" && v == "share"))
            .collect();
        let group_id = raw.get("consumer.override.group.id").cloned().unwrap_or_else(|| format!("connect-{name}"));

        let tolerance = match p.optional("errors.tolerance", "none") {
            "none" => Tolerance::None,
            "all" => Tolerance::All,
            other => {
                p.problem("errors.tolerance", &format!("'{other}' is not none or all"));
                Tolerance::None
            }
        };
        let dlq_topic = raw.get("errors.deadletterqueue.topic.name").filter(|t| !t.trim().is_empty()).cloned();
        if dlq_topic.is_some() && tolerance == Tolerance::None {
            p.problem(
                "errors.deadletterqueue.topic.name",
                "a dead-letter queue needs errors.tolerance=all (with none, a rejected record fails the task)",
            );
        }
        if dlq_topic.as_ref().is_some_and(|t| topics.contains(t)) {
            p.problem("errors.deadletterqueue.topic.name", "must not be one of the connector's own topics");
        }
        let retry_timeout_ms: i64 = p.number("errors.retry.timeout", 300_000);
        let errors = ErrorPolicy {
            tolerance,
            dlq_topic,
            dlq_context_headers: p.boolean("errors.deadletterqueue.context.headers.enable", true),
            retry_timeout: (retry_timeout_ms >= 0).then(|| Duration::from_millis(retry_timeout_ms as u64)),
            retry_delay_max: Duration::from_millis(p.number("errors.retry.delay.max.ms", 60_000)),
        };

        let limits = Limits {
            memory_bytes: p.number("plugin.memory.max.bytes", Limits::default().memory_bytes),
            call_timeout: Duration::from_millis(p.number("plugin.call.timeout.ms", 30_000)),
        };
        let grants = match Grants::from_config(raw.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
            Ok(g) => g,
            Err(e) => {
                p.problem("plugin.grant", &e.to_string());
                Grants::default()
            }
        };
        let config = ConnectorConfig {
            name: name.to_string(),
            plugin: plugin.to_string(),
            tasks_max,
            topics,
            group_protocol,
            group_id,
            consumer_overrides,
            batch_max_records: p.number("batch.max.records", 500usize).max(1),
            errors,
            flush_interval: Duration::from_millis(p.number("flush.interval.ms", 10_000)),
            limits,
            grants,
            raw: raw.clone(),
        };
        if p.problems.is_empty() { Ok(config) } else { Err(p.problems) }
    }
}

struct Parser<'a> {
    raw: &'a BTreeMap<String, String>,
    problems: Vec<ConfigProblem>,
}

impl<'a> Parser<'a> {
    fn problem(&mut self, key: &str, message: &str) {
        self.problems.push(ConfigProblem { key: key.into(), message: message.into() });
    }

    fn required(&mut self, key: &str) -> &'a str {
        match self.raw.get(key).map(|v| v.trim()) {
            Some(v) if !v.is_empty() => v,
            _ => {
                self.problem(key, "Missing required configuration");
                ""
            }
        }
    }

    fn optional(&mut self, key: &str, default: &'a str) -> &'a str {
        self.raw.get(key).map_or(default, |v| v.trim())
    }

    fn number<T: std::str::FromStr>(&mut self, key: &str, default: T) -> T {
        match self.raw.get(key) {
            None => default,
            Some(v) => v.trim().parse().unwrap_or_else(|_| {
                self.problem(key, &format!("Invalid value '{v}': not a valid number"));
                default
            }),
        }
    }

    fn boolean(&mut self, key: &str, default: bool) -> bool {
        match self.raw.get(key).map(|v| v.trim()) {
            None => default,
            Some("true") => true,
            Some("false") => false,
            Some(v) => {
                self.problem(key, &format!("Invalid value '{v}': expected true or false"));
                default
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut base: BTreeMap<String, String> = [("name", "c1"), ("connector.class", "noop-sink"), ("topics", "a, b")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        base.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        base
    }

    #[test]
    fn worker_default_is_share_and_connector_override_wins() {
        let worker = WorkerDefaults::default();
        let shared = ConnectorConfig::parse(&config(&[]), &worker).unwrap();
        assert_eq!(shared.group_protocol, GroupProtocol::Share);
        assert_eq!(shared.topics, vec!["a", "b"]);
        assert_eq!(shared.group_id, "connect-c1");

        let classic =
            ConnectorConfig::parse(&config(&[("consumer.override.group.protocol", "classic")]), &worker).unwrap();
        assert_eq!(classic.group_protocol, GroupProtocol::Classic);
        // `classic` passes through to the consumer; `share` never does.
        assert!(classic.consumer_overrides.contains(&("group.protocol".into(), "classic".into())));
        assert!(!shared.consumer_overrides.iter().any(|(k, _)| k == "group.protocol"));

        let classic_worker = WorkerDefaults { group_protocol: GroupProtocol::Classic };
        let over =
            ConnectorConfig::parse(&config(&[("consumer.override.group.protocol", "share")]), &classic_worker).unwrap();
        assert_eq!(over.group_protocol, GroupProtocol::Share);
    }

    #[test]
    fn other_consumer_overrides_pass_through() {
        let c = ConnectorConfig::parse(&config(&[("consumer.override.fetch.min.bytes", "1024")]), &Default::default())
            .unwrap();
        assert_eq!(c.consumer_overrides, vec![("fetch.min.bytes".to_string(), "1024".to_string())]);
    }

    #[test]
    fn every_problem_is_reported() {
        let raw: BTreeMap<String, String> = [("tasks.max", "zero"), ("errors.tolerance", "some")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let problems = ConnectorConfig::parse(&raw, &Default::default()).unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        for key in ["name", "connector.class", "topics", "tasks.max", "errors.tolerance"] {
            assert!(keys.contains(&key), "{key} not reported in {problems:?}");
        }
    }

    #[test]
    fn dead_letter_queue_needs_tolerance_all() {
        let bad = config(&[("errors.deadletterqueue.topic.name", "dlq")]);
        let problems = ConnectorConfig::parse(&bad, &Default::default()).unwrap_err();
        assert_eq!(problems[0].key, "errors.deadletterqueue.topic.name");
        let good = config(&[("errors.deadletterqueue.topic.name", "dlq"), ("errors.tolerance", "all")]);
        let c = ConnectorConfig::parse(&good, &Default::default()).unwrap();
        assert_eq!(c.errors.dlq_topic.as_deref(), Some("dlq"));
        assert_eq!(c.errors.tolerance, Tolerance::All);
    }
}
