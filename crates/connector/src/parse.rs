//! From a config as given to a [`ConnectorConfig`]: placeholders resolved,
//! every key checked against the table, the grants against the worker's
//! policy, and every problem reported with no secret in its message.

use super::connect_names;
use super::keys::{AVRO_CONVERTER, REFRESH_KEY, SHARE_GROUP_CONFIGS};
use super::*;
use regex::Regex;
use spillway_capabilities as capabilities;
use spillway_config::{HIDDEN, Value};
use spillway_kafka::share::TOPICS_REGEX_REFRESH;
use spillway_policy::Requested;

/// Refuses a config of more keys than the worker allows
/// (`policy.connector.config.keys.max`) before anything reads its keys one
/// by one: each is checked, and an override builds a client config.
pub fn check_key_count(raw: &BTreeMap<String, String>, worker: &WorkerDefaults) -> Result<(), String> {
    let max = worker.policy.requests.config_keys;
    match raw.len() {
        n if n > max => Err(format!("the config has {n} keys; a connector config may have at most {max}")),
        _ => Ok(()),
    }
}

impl ConnectorConfig {
    /// Resolves a connector config, its `${provider:…}` placeholders first.
    /// Every problem is reported, not just the first.
    /// No problem's message shows a secret: neither a value a provider
    /// resolved nor a PASSWORD key's.
    pub fn parse(raw: &BTreeMap<String, String>, worker: &WorkerDefaults) -> Result<Self, Vec<ConfigProblem>> {
        check_key_count(raw, worker).map_err(|message| vec![ConfigProblem { key: "name".into(), message }])?;
        let (resolved, mut unresolved) = worker.providers.resolve(raw);
        // A config written for Connect: its class names the plugin, and its
        // keys for targets give grants (as written, to tell secrets apart).
        let class = raw.get("connector.class").map(|c| c.trim()).unwrap_or_default();
        let (plugin, names) =
            worker.connect_names.lookup(class).unwrap_or_else(|| (class.to_string(), Default::default()));
        let given = connect_names::derive(raw, &names, &worker.cluster).config;
        let mut derived = connect_names::derive(&resolved, &names, &worker.cluster);
        unresolved.append(&mut derived.problems);
        let parsed = Self::parse_resolved(&derived.config, unresolved, worker).map_err(|problems| {
            let secrets = secret_values(&given, &derived.config);
            problems.into_iter().map(|p| derived.blame(hide_secrets(p, &secrets))).collect::<Vec<_>>()
        })?;
        Ok(ConnectorConfig { plugin, derived: derived.keys, ..parsed })
    }

    fn parse_resolved(
        raw: &BTreeMap<String, String>,
        mut unresolved: Vec<ConfigProblem>,
        worker: &WorkerDefaults,
    ) -> Result<Self, Vec<ConfigProblem>> {
        let (values, mut problems) = connector_keys().parse(raw);
        problems.append(&mut unresolved);
        let mut problem = |key: &str, message: &str| {
            problems.push(ConfigProblem { key: key.into(), message: message.into() });
        };
        let name = values.string("name").to_string();
        let topics = values.list("topics").to_vec();
        // An invalid regex reads as unset; the table reported it.
        let topics_regex = Some(values.string("topics.regex")).filter(|r| !r.is_empty()).map(String::from);
        // As Connect checks them: a blank value counts as not given.
        let given = |key: &str| raw.get(key).is_some_and(|v| !v.trim().is_empty());
        match (given("topics"), given("topics.regex")) {
            (true, true) => {
                let message = "topics and topics.regex are mutually exclusive options, but both are set.";
                problem("topics", message);
                problem("topics.regex", message);
            }
            (false, false) => {
                let message = "Must configure one of topics or topics.regex";
                problem("topics", message);
                problem("topics.regex", message);
            }
            (true, false) if topics.is_empty() => problem(
                "topics",
                &format!("Invalid value '{}' for configuration topics: names no topic", raw["topics"]),
            ),
            _ => {}
        }
        let topics_refresh = match values.get(REFRESH_KEY) {
            None => Some(TOPICS_REGEX_REFRESH),
            Some(Value::Long(ms)) if *ms > 0 => Some(millis(*ms)),
            // librdkafka's meaning of 0 and -1: no refresh after the start.
            Some(_) => None,
        };

        // The table admits share, classic and consumer only; unset (or
        // refused) leaves the worker's choice.
        let group_protocol = match values.string("consumer.override.group.protocol") {
            "share" => GroupProtocol::Share,
            "classic" | "consumer" => GroupProtocol::Classic,
            _ => worker.group_protocol,
        };
        let (clients, client_problems) = worker.clients.with_overrides(raw, &worker.policy.client_overrides);
        let group_id = match values.string("consumer.override.group.id") {
            "" => format!("connect-{name}"),
            id => id.to_string(),
        };

        // The table admits none and all only.
        let tolerance = if values.string("errors.tolerance") == "all" { Tolerance::All } else { Tolerance::None };
        let dlq_topic = Some(values.string("errors.deadletterqueue.topic.name")).filter(|t| !t.is_empty());
        if dlq_topic.is_some() && tolerance == Tolerance::None {
            problem(
                "errors.deadletterqueue.topic.name",
                "a dead-letter queue needs errors.tolerance=all (with none, a rejected record fails the task)",
            );
        }
        if dlq_topic.is_some_and(|t| topics.iter().any(|topic| topic == t)) {
            problem("errors.deadletterqueue.topic.name", "must not be one of the connector's own topics");
        }
        if let (Some(dlq), Some(regex)) = (dlq_topic, &topics_regex)
            && topics_pattern(regex).is_ok_and(|p| p.is_match(dlq))
        {
            problem(
                "errors.deadletterqueue.topic.name",
                "must not be one of the connector's own topics, and topics.regex matches it",
            );
        }
        let mut registry = |role: &str| {
            if values.string(&format!("{role}.converter")).trim() != AVRO_CONVERTER {
                return None;
            }
            let url_key = format!("{role}.converter.schema.registry.url");
            match values.string(&url_key).trim() {
                // A refused URL reads as unset; the table reported it.
                "" if given(&url_key) => None,
                "" => {
                    problem(&url_key, "AvroConverter reads each record's schema from a Schema Registry: give its URL");
                    None
                }
                url => Some(RegistryConfig {
                    url: url.to_string(),
                    user_info: Some(values.password(&format!("{role}.converter.basic.auth.user.info")))
                        .filter(|u| !u.is_empty())
                        .map(String::from),
                }),
            }
        };
        let converters = Converters { key: registry("key"), value: registry("value") };
        let is_plugin = |name: &str| worker.connect_names.is_transform(name);
        let transforms = spillway_transforms::Chain::parse(raw, &is_plugin).unwrap_or_else(|refused| {
            problems.extend(refused);
            Default::default()
        });
        let (stages, most) = (transforms.plugins().count(), worker.policy.requests.transform_plugins);
        if stages > most {
            let message = format!(
                "{stages} transform plugin stages, and the worker's policy.transform.plugins.max allows {most} \
                 (each is a plugin instance per task)"
            );
            problems.push(ConfigProblem { key: "transforms".into(), message });
        }
        let mut named: Vec<(&str, &str)> = topics.iter().map(|t| ("topics", t.as_str())).collect();
        named.extend(dlq_topic.map(|t| ("errors.deadletterqueue.topic.name", t)));
        let pattern = topics_regex.as_deref().and_then(|r| topics_pattern(r).ok());
        problems.extend(worker.policy.check_topics(&named, pattern.as_ref().map(|p| ("topics.regex", p))));
        let retry_timeout_ms = values.long("errors.retry.timeout");
        let errors = ErrorPolicy {
            tolerance,
            dlq_topic: dlq_topic.map(String::from),
            dlq_context_headers: values.boolean("errors.deadletterqueue.context.headers.enable"),
            retry_timeout: (retry_timeout_ms >= 0).then(|| millis(retry_timeout_ms)),
            retry_delay_max: values.millis("errors.retry.delay.max.ms"),
        };

        // The casts here and below are of values the table's validators keep
        // at least 0 (memory) or 1 (tasks, batch size).
        let mut limits = Limits {
            memory_bytes: values.long("plugin.memory.max.bytes") as usize,
            call_timeout: values.millis("plugin.call.timeout.ms"),
        };
        let mut tasks_max = values.int("tasks.max") as u32;
        let reach = capabilities::reach::reach_of(raw);
        let (mut refused, lowered) = worker.policy.check(&Requested {
            dirs: reach.dirs,
            connect: reach.connect,
            targets: reach.targets,
            memory_bytes: (limits.memory_bytes as u64, given("plugin.memory.max.bytes")),
            call_timeout: (limits.call_timeout, given("plugin.call.timeout.ms")),
            tasks_max: (tasks_max, given("tasks.max")),
        });
        problems.append(&mut refused);
        limits.memory_bytes = lowered.memory_bytes.map_or(limits.memory_bytes, |b| b as usize);
        limits.call_timeout = lowered.call_timeout.unwrap_or(limits.call_timeout);
        tasks_max = lowered.tasks_max.unwrap_or(tasks_max);
        // `Grants` checks what the table cannot (paths, addresses, unknown
        // capabilities); it stops at its first error.
        let mut grants = Grants::from_config(raw.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_or_else(|e| {
            let message = format!("{e:#}");
            let key = grant_key_named_in(raw, &message);
            // The table may have reported the same key already, in its words.
            if !problems.iter().any(|p| p.key == key) {
                problems.push(ConfigProblem { key, message });
            }
            Grants::default()
        });
        // As the instance-wide ceilings above: a given pool size above the
        // worker's is refused, a default lowered to it.
        if let Some(max) = worker.policy.sql_pool_size_max {
            for (name, grant) in grants.sql.iter_mut().filter(|(_, g)| g.pool_size > max) {
                let key = format!("plugin.grant.sql.{name}.pool.size");
                match raw.contains_key(&key) {
                    true => problems.push(ConfigProblem {
                        message: format!("{} is above the worker's policy.sql.pool.size.max ({max})", grant.pool_size),
                        key,
                    }),
                    false => grant.pool_size = max,
                }
            }
        }
        grants.bounds = worker.policy.bounds.clone();
        let share_group_configs: BTreeMap<String, String> = SHARE_GROUP_CONFIGS
            .iter()
            .filter(|key| given(key))
            .map(|key| (key.to_string(), raw[*key].trim().to_string()))
            .collect();
        if group_protocol == GroupProtocol::Classic {
            for key in share_group_configs.keys() {
                problems.push(ConfigProblem {
                    key: key.clone(),
                    message: "a share group's config, and this connector's group is a classic consumer group \
                              (consumer.override.group.protocol)"
                        .into(),
                });
            }
        }
        if group_protocol == GroupProtocol::Share
            && let Some((name, _)) = grants.kafka.iter().find(|(_, g)| g.exactly_once)
        {
            problems.push(ConfigProblem {
                key: format!("plugin.grant.kafka.{name}.exactly.once"),
                message: "exactly-once needs a classic consumer group (consumer.override.group.protocol=classic): \
                          a share group's acknowledgements cannot join a Kafka transaction (KIP-1289 is not \
                          adopted), so share-group connectors deliver at least once"
                    .into(),
            });
        }
        let config = ConnectorConfig {
            name,
            plugin: values.string("connector.class").to_string(),
            plugin_pick: PluginPick::of(raw),
            tasks_max,
            topics,
            topics_regex,
            topics_refresh,
            group_protocol,
            group_id,
            share_group_configs,
            clients,
            batch_max_records: values.int("batch.max.records") as usize,
            errors,
            flush_interval: values.millis("flush.interval.ms"),
            limits,
            grants,
            worker_topics: worker.policy.worker_topics().to_vec(),
            raw: raw.clone(),
            derived: Vec::new(),
            converters,
            transforms: std::sync::Arc::new(transforms),
        };
        problems.extend(client_problems);
        if problems.is_empty() { Ok(config) } else { Err(problems) }
    }
}

impl ConnectorConfig {
    /// `topics.regex`, compiled to match whole names; `None` for a
    /// connector that names its topics.
    pub fn topics_pattern(&self) -> Option<Regex> {
        let regex = self.topics_regex.as_deref()?;
        Some(topics_pattern(regex).expect("checked when the config was parsed"))
    }
}

/// The secrets of a config, by key: what its providers resolved, and the
/// values of its PASSWORD keys.
fn secret_values(given: &BTreeMap<String, String>, resolved: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let secret = |(key, value): (&String, &String)| given.get(key) != Some(value) || connector_keys().is_secret(key);
    resolved.iter().filter(|pair| secret(*pair)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// `problem` with secrets in its message shown as `[hidden]`: its own key's
/// (whole, and each list item), and elsewhere those long enough not to be a
/// common word or number.
fn hide_secrets(mut problem: ConfigProblem, secrets: &[(String, String)]) -> ConfigProblem {
    let mut hidden: Vec<&str> = Vec::new();
    for (key, value) in secrets {
        let items = std::iter::once(value.as_str()).chain(value.split(',').map(str::trim));
        hidden.extend(items.filter(|s| !s.is_empty() && (*key == problem.key || s.len() >= 4)));
    }
    hidden.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in hidden {
        problem.message = problem.message.replace(secret, HIDDEN);
    }
    problem
}

/// Milliseconds the table keeps non-negative.
fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// The given key a `Grants` error names (a `plugin.grant.*` key or
/// `plugin.deterministic`), else `plugin.grant`.
/// A name counts where it ends the key (`…env.A` is not named by `…env.AB`).
pub(super) fn grant_key_named_in(raw: &BTreeMap<String, String>, message: &str) -> String {
    let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let named = |key: &str| message.match_indices(key).any(|(at, _)| !message[at + key.len()..].starts_with(key_char));
    raw.keys().find(|k| k.starts_with("plugin.") && named(k)).map_or_else(|| "plugin.grant".to_string(), String::clone)
}
