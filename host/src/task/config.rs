//! A connector's configuration, resolved and checked: everything the task
//! loop needs, in types rather than strings.

use crate::capabilities::{self, Grants};
pub use crate::config::Problem as ConfigProblem;
use crate::config::{ConfigDef, ConfigProviders, HIDDEN, Importance, KeyDef, Segment, Type, Validator, Value};
use crate::kafka::clients::ClientSettings;
use crate::kafka::share::TOPICS_REGEX_REFRESH;
use crate::policy::{GrantPolicy, Requested};
use crate::runtime::Limits;
use regex::Regex;
use std::collections::BTreeMap;
use std::sync::LazyLock;
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
    /// Which build of it runs.
    pub plugin_pick: PluginPick,
    pub tasks_max: u32,
    /// Empty when the connector consumes by `topics_regex`.
    pub topics: Vec<String>,
    /// `topics.regex` as given (not anchored): the connector consumes every
    /// topic whose whole name it matches.
    pub topics_regex: Option<String>,
    /// How often a `topics_regex` share group looks for new matching topics;
    /// `None`: only when it joins. (A classic group's librdkafka reads the
    /// same key from `clients`.)
    pub topics_refresh: Option<Duration>,
    pub group_protocol: GroupProtocol,
    pub group_id: String,
    /// The worker's client settings under the connector's
    /// `consumer.override.*`, `producer.override.*` and `admin.override.*`.
    pub clients: ClientSettings,
    pub batch_max_records: usize,
    pub errors: ErrorPolicy,
    /// Longest a held record waits before the host asks the plugin to flush.
    pub flush_interval: Duration,
    pub limits: Limits,
    pub grants: Grants,
    /// The worker's own topics, which its kafka grants may not write.
    pub worker_topics: Vec<String>,
    /// The configuration as the user gave it, placeholders resolved: what
    /// the plugin is given (but for the host's secrets).
    pub raw: BTreeMap<String, String>,
}

/// Which installed build of its plugin a connector runs: the newest that
/// `connector.plugin.version` admits and, with `connector.plugin.digest`,
/// whose file has that digest.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PluginPick {
    pub version: Option<semver::VersionReq>,
    pub digest: Option<String>,
}

impl PluginPick {
    /// The keys that pick a build.
    pub const KEYS: [&str; 2] = ["connector.plugin.version", "connector.plugin.digest"];

    /// From a config as given. A range the table refuses reads as unset (the
    /// table reports it), so that resolving still says what is installed.
    pub fn of(raw: &BTreeMap<String, String>) -> Self {
        let given = |key: &str| raw.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        PluginPick {
            version: given(Self::KEYS[0]).and_then(|v| semver::VersionReq::parse(v).ok()),
            digest: given(Self::KEYS[1]).map(str::to_ascii_lowercase),
        }
    }
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

/// What the worker decides for its connectors: defaults a connector config
/// may override, and the ceilings it may not pass.
#[derive(Clone, Debug)]
pub struct WorkerDefaults {
    /// `consumer.group.protocol`: `share` unless the worker says otherwise.
    pub group_protocol: GroupProtocol,
    pub policy: GrantPolicy,
    /// What `${provider:…}` placeholders in a connector config read.
    pub providers: ConfigProviders,
    /// The worker's settings for its clients (security included).
    pub clients: ClientSettings,
}

impl Default for WorkerDefaults {
    fn default() -> Self {
        WorkerDefaults {
            group_protocol: GroupProtocol::Share,
            policy: GrantPolicy::default(),
            providers: ConfigProviders::default(),
            clients: ClientSettings::default(),
        }
    }
}

impl ConnectorConfig {
    /// Resolves a connector config, its `${provider:…}` placeholders first.
    /// Every problem is reported, not just the first.
    /// No problem's message shows a secret: neither a value a provider
    /// resolved nor a PASSWORD key's.
    pub fn parse(raw: &BTreeMap<String, String>, worker: &WorkerDefaults) -> Result<Self, Vec<ConfigProblem>> {
        let (resolved, unresolved) = worker.providers.resolve(raw);
        Self::parse_resolved(&resolved, unresolved, worker).map_err(|problems| {
            let secrets = secret_values(raw, &resolved);
            problems.into_iter().map(|p| hide_secrets(p, &secrets)).collect()
        })
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
        // Connect's keys for stages not built here are refused, not passed
        // over: records would reach the plugin untransformed.
        for key in ["transforms", "predicates"] {
            if raw.get(key).is_some_and(|v| !v.trim().is_empty()) {
                problem(key, "Kafka Connect's transforms and predicates do not run in Spillway yet; remove the key");
            }
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
        let grants = Grants::from_config(raw.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap_or_else(|e| {
            let message = format!("{e:#}");
            let key = grant_key_named_in(raw, &message);
            // The table may have reported the same key already, in its words.
            if !problems.iter().any(|p| p.key == key) {
                problems.push(ConfigProblem { key, message });
            }
            Grants::default()
        });
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
            clients,
            batch_max_records: values.int("batch.max.records") as usize,
            errors,
            flush_interval: values.millis("flush.interval.ms"),
            limits,
            grants,
            worker_topics: worker.policy.worker_topics().to_vec(),
            raw: raw.clone(),
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

/// A `topics.regex` as Connect applies it (Java's `matches()`): to the
/// whole topic name.
pub fn topics_pattern(regex: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{regex})$"))
}

/// The client settings under `*.override.*` whose values are secrets: never
/// shown, as the worker's own are not.
fn secret_override_keys() -> Vec<KeyDef> {
    let mut keys = Vec::new();
    for role in crate::kafka::clients::Role::ALL {
        for setting in crate::kafka::security::secret_settings() {
            let name = format!("{}.override.{setting}", role.name());
            let doc = format!("A secret of the {} clients: shown as [hidden].", role.name());
            keys.push(KeyDef::new(&name, Type::Password, Importance::Low, &doc));
        }
    }
    keys
}

/// Librdkafka's own name for the interval; its 0 and -1 turn the refresh off.
const REFRESH_KEY: &str = "consumer.override.topic.metadata.refresh.interval.ms";

/// Checks a `topics.regex`: valid for the `regex` crate (the share group's
/// client matches with it), and read the same by POSIX extended regex
/// (glibc's `regcomp`, which librdkafka subscribes a classic group with).
/// Both agree on literals, `.`, `[...]` with `[:class:]`, groups, `|`, the
/// greedy quantifiers and `\w \s \b`; what else Rust accepts, POSIX
/// lacks or reads otherwise (`\d` is a `d` there) and is refused here.
fn check_topics_regex(regex: &str) -> Result<(), String> {
    if let Err(e) = Regex::new(regex) {
        let reason = e.to_string();
        let reason = reason.lines().find_map(|l| l.strip_prefix("error: ")).unwrap_or(&reason).to_string();
        return Err(format!("not a valid regular expression: {reason}"));
    }
    match posix_difference(regex) {
        Some(difference) => Err(format!("{difference} (librdkafka matches with POSIX extended regex)")),
        None => Ok(()),
    }
}

/// The first construct of a pattern (valid for the `regex` crate) that
/// POSIX extended regex lacks or reads differently.
fn posix_difference(regex: &str) -> Option<String> {
    let mut chars = regex.chars().peekable();
    let mut after_quantifier = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                // GNU regex reads \` and \' as anchors.
                Some(e) if (e.is_ascii_punctuation() && !"`'".contains(e)) || "wWsSbB".contains(e) => {}
                Some(e) => {
                    let instead = match e {
                        'd' => ": write [0-9]",
                        'D' => ": write [^0-9]",
                        _ => "",
                    };
                    return Some(format!("\\{e} is not POSIX{instead}"));
                }
                None => {}
            },
            '(' if chars.peek() == Some(&'?') => {
                return Some("(?...) is not POSIX: no flags, lookaround or non-capturing groups".into());
            }
            '?' if after_quantifier => return Some("lazy quantifiers (*?, +?, ??) are not POSIX".into()),
            '[' => {
                // `[^]...]` and `[]...]`: a leading `]` is a member.
                chars.next_if_eq(&'^');
                chars.next_if_eq(&']');
                let mut previous = None;
                while let Some(m) = chars.next() {
                    match m {
                        ']' => break,
                        '\\' => {
                            return Some(
                                "a \\ inside [...] is a backslash to POSIX: write members plainly (- last, ] first)"
                                    .into(),
                            );
                        }
                        '[' if chars.next_if_eq(&':').is_some() => {
                            if chars.next_if_eq(&'^').is_some() {
                                return Some("[:^class:] is not POSIX".into());
                            }
                            while chars.next().is_some_and(|c| c != ']') {}
                        }
                        '[' => return Some("a class inside [...] is not POSIX".into()),
                        '&' | '-' | '~' if previous == Some(m) => {
                            return Some(format!("{m}{m} inside [...] is not POSIX"));
                        }
                        _ => {}
                    }
                    previous = Some(m);
                }
            }
            _ => {}
        }
        after_quantifier = matches!(c, '*' | '+' | '?' | '}');
    }
    None
}

/// A plugin digest as the registry shows them: `sha256:` and 64 hex digits.
fn check_digest(digest: &str) -> Result<(), String> {
    match digest.trim().strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(()),
        _ => {
            Err(format!("'{digest}' is not a digest: write sha256: and 64 hex digits, as GET /connector-plugins shows"))
        }
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
fn grant_key_named_in(raw: &BTreeMap<String, String>, message: &str) -> String {
    let key_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    let named = |key: &str| message.match_indices(key).any(|(at, _)| !message[at + key.len()..].starts_with(key_char));
    raw.keys().find(|k| k.starts_with("plugin.") && named(k)).map_or_else(|| "plugin.grant".to_string(), String::clone)
}

/// Every key the host reads from a connector config: names, types, defaults,
/// checks and documentation, in one place. [`ConnectorConfig::parse`], the
/// herder's validation, `GET /connector-plugins/{p}/config` and the README's
/// table (`spillway config-keys`) all come from it. Keys it does not define
/// are the plugin's to check, as in Connect.
pub fn connector_keys() -> &'static ConfigDef {
    static KEYS: LazyLock<ConfigDef> = LazyLock::new(|| {
        use Importance::{High, Low, Medium};
        let key = KeyDef::new;
        let credential =
            "A credential of the grant, for a capability that takes one; hidden wherever the config is shown.";
        ConfigDef::new()
            .group(
                "Common",
                [
                    key("name", Type::String, High, "Globally unique name of the connector.").required(),
                    key("connector.class", Type::String, High, "Name of the plugin that implements the connector.")
                        .required(),
                    key("tasks.max", Type::Int, High, "Maximum number of tasks (group members) to run.")
                        .with_default("1")
                        .with_validator(Validator::at_least(1)),
                    key(
                        "topics",
                        Type::List,
                        High,
                        "Topics to consume, comma-separated. Give this or topics.regex, not both.",
                    )
                    .with_default(""),
                    key(
                        "topics.regex",
                        Type::String,
                        High,
                        "A regular expression matched against whole topic names: the connector consumes every topic \
                         it matches, including ones created later (found within \
                         topic.metadata.refresh.interval.ms). Give this or topics, not both. It must read alike to \
                         Rust's regex crate (share groups) and librdkafka's POSIX extended regex (classic groups): \
                         no lookaround, (?...) groups, lazy quantifiers or \\d (write [0-9]), no backslash inside \
                         [...].",
                    )
                    .with_default("")
                    .with_validator(Validator::new(
                        "a regex both Rust and POSIX read alike",
                        |v| match v {
                            Value::String(regex) if !regex.is_empty() => check_topics_regex(regex),
                            _ => Ok(()),
                        },
                    )),
                    key("batch.max.records", Type::Int, Medium, "Records per put().")
                        .with_default("500")
                        .with_validator(Validator::at_least(1)),
                    key(
                        "flush.interval.ms",
                        Type::Long,
                        Medium,
                        "Longest a held record waits before the host asks the plugin to flush (share groups also \
                         flush at the broker's in-flight cap and before locks run out).",
                    )
                    .with_default("10000")
                    .with_validator(Validator::at_least(0)),
                    key(
                        PluginPick::KEYS[0],
                        Type::String,
                        Medium,
                        "Which installed version of the plugin to run: a semver range as Cargo reads one (0.2 \
                         or ^0.2 admits 0.2.x, =0.2.1 that version only, >=0.1, <0.3 both). Unset: the newest \
                         installed. Changing it on a running connector swaps its tasks to the new version \
                         without stopping them.",
                    )
                    .with_validator(Validator::new("a semver range", |v| match v {
                        Value::String(range) if !range.trim().is_empty() => {
                            semver::VersionReq::parse(range).map(|_| ()).map_err(|e| format!("not a semver range: {e}"))
                        }
                        _ => Ok(()),
                    })),
                    key(
                        PluginPick::KEYS[1],
                        Type::String,
                        Medium,
                        "The SHA-256 digest (sha256:<64 hex digits>, as GET /connector-plugins shows) the plugin's \
                         file must have: a file changed since it was pinned is refused.",
                    )
                    .with_validator(Validator::new("sha256:<64 hex digits>", |v| match v {
                        Value::String(digest) if !digest.trim().is_empty() => check_digest(digest),
                        _ => Ok(()),
                    })),
                ],
            )
            .group(
                "Consumer",
                [
                    key(
                        "consumer.override.group.protocol",
                        Type::String,
                        High,
                        "share: a KIP-932 share group (records acknowledged one by one, tasks scale freely); \
                         classic or consumer (KIP-848): a consumer group with offset commits. Unset: the \
                         worker's default, share (classic on the embedded broker).",
                    )
                    .with_validator(Validator::one_of(&["share", "classic", "consumer"])),
                    key(
                        "consumer.override.group.id",
                        Type::String,
                        Medium,
                        "The group the tasks join. Unset: connect- followed by the connector's name.",
                    ),
                    key(
                        REFRESH_KEY,
                        Type::Long,
                        Low,
                        "How often, in ms, a topics.regex connector looks for new matching topics (librdkafka's \
                         property, which the share group's client reads too); 0 or -1: only at the start. Unset: \
                         30000 with topics.regex, librdkafka's default otherwise.",
                    )
                    .with_validator(Validator::at_least(-1)),
                    key(
                        "consumer.override.*",
                        Type::String,
                        Medium,
                        "Any other consumer (librdkafka) property, passed on with the prefix removed, over the \
                         worker's; librdkafka checks it at validation. The security settings (security.protocol, \
                         sasl.*, ssl.*) apply to share groups too; a Java client's sasl.jaas.config is read for its \
                         username and password.",
                    ),
                    key(
                        "producer.override.*",
                        Type::String,
                        Low,
                        "A librdkafka property of the dead-letter queue's producer, over the worker's.",
                    ),
                    key(
                        "admin.override.*",
                        Type::String,
                        Low,
                        "A librdkafka property of the clients that read the connector's offsets and, for a kafka \
                         grant, its source topics, over the worker's.",
                    ),
                ]
                .into_iter()
                .chain(secret_override_keys()),
            )
            .group(
                "Errors",
                [
                    key(
                        "errors.tolerance",
                        Type::String,
                        Medium,
                        "none: a rejected record fails the task (and is released, not lost); all: it goes to the \
                         dead-letter queue (or is logged) and the task goes on.",
                    )
                    .with_default("none")
                    .with_validator(Validator::one_of(&["none", "all"])),
                    key(
                        "errors.deadletterqueue.topic.name",
                        Type::String,
                        Medium,
                        "Topic for rejected records; needs errors.tolerance=all, and must not be one of the \
                         connector's topics.",
                    )
                    .with_default(""),
                    key(
                        "errors.deadletterqueue.context.headers.enable",
                        Type::Boolean,
                        Medium,
                        "Add __connect.errors.* headers to dead-lettered records (true here, false in Connect).",
                    )
                    .with_default("true"),
                    key(
                        "errors.retry.timeout",
                        Type::Long,
                        Medium,
                        "How long, in ms, a record may keep asking for retries before it counts as rejected; \
                         -1 for no bound.",
                    )
                    .with_default("300000"),
                    key("errors.retry.delay.max.ms", Type::Long, Medium, "Longest pause between retries, in ms.")
                        .with_default("60000")
                        .with_validator(Validator::at_least(0)),
                ],
            )
            .group(
                "Plugin sandbox",
                [
                    key("plugin.memory.max.bytes", Type::Long, Medium, "Linear memory one plugin instance may use.")
                        .with_default("268435456")
                        .with_validator(Validator::at_least(0)),
                    key(
                        "plugin.call.timeout.ms",
                        Type::Long,
                        Medium,
                        "Longest one call into the plugin may run (an endless loop fails the task; stopping the \
                         task interrupts a running call at once).",
                    )
                    .with_default("30000")
                    .with_validator(Validator::at_least(1)),
                    key(
                        "plugin.deterministic",
                        Type::Boolean,
                        Low,
                        "For tests: clocks read 0 and random bytes are a fixed stream, so runs are reproducible. \
                         By default a plugin gets the real clocks and real entropy (they grant no authority).",
                    )
                    .with_default("false"),
                ],
            )
            .group(
                "Grants",
                [
                    key(
                        "plugin.grant.fs.<name>.path",
                        Type::String,
                        High,
                        "An absolute host directory the plugin may read and write, at the same path.",
                    ),
                    key(
                        "plugin.grant.fs.<name>.read-only",
                        Type::Boolean,
                        Medium,
                        "true: the plugin may only read the grant's directory.",
                    )
                    .with_default("false"),
                    key(
                        "plugin.grant.net.<name>.connect",
                        Type::List,
                        High,
                        "ip:port addresses the plugin may open TCP connections to.",
                    ),
                    key(
                        "plugin.grant.env.<name>.value",
                        Type::String,
                        Medium,
                        "An environment variable for the plugin, named after the grant upper-cased with - as _ \
                         (plugin.grant.env.api-url.value sets API_URL).",
                    ),
                ]
                .into_iter()
                .chain(
                    capabilities::object_store::setting_keys()
                        .into_iter()
                        .map(|k| k.prefixed("plugin.grant.object-store.<name>.")),
                )
                .chain(capabilities::sql::setting_keys().into_iter().map(|k| k.prefixed("plugin.grant.sql.<name>.")))
                .chain(
                    capabilities::kafka::setting_keys().into_iter().map(|k| k.prefixed("plugin.grant.kafka.<name>.")),
                )
                .chain([
                    key("plugin.grant.<capability>.<name>.password", Type::Password, Medium, credential),
                    key("plugin.grant.<capability>.<name>.secret.access.key", Type::Password, Medium, credential),
                    key("plugin.grant.<capability>.<name>.token", Type::Password, Medium, credential),
                    key("plugin.grant.<capability>.<name>.secret", Type::Password, Medium, credential),
                    key(
                        "plugin.grant.fs.dirs",
                        Type::List,
                        Low,
                        "Old spelling, still accepted: absolute host directories the plugin may read and write, \
                         at the same paths.",
                    ),
                    key(
                        "plugin.grant.net.connect",
                        Type::List,
                        Low,
                        "Old spelling, still accepted: ip:port addresses the plugin may open TCP connections to.",
                    ),
                    key(
                        "plugin.grant.env.<NAME>",
                        Type::String,
                        Low,
                        "Old spelling, still accepted: an environment variable NAME for the plugin.",
                    )
                    .with_placeholder("NAME", Segment::EnvVarName),
                    key("plugin.grant.clock", Type::Boolean, Low, NO_LONGER_NEEDED),
                    key("plugin.grant.random", Type::Boolean, Low, NO_LONGER_NEEDED),
                ]),
            )
    });
    &KEYS
}

const NO_LONGER_NEEDED: &str =
    "Accepted, no longer needed: real clocks and entropy are the default; see plugin.deterministic.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::clients::Role;

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
        assert!(classic.clients.for_role(Role::Consumer).contains(&("group.protocol".into(), "classic".into())));
        assert!(!shared.clients.for_role(Role::Consumer).iter().any(|(k, _)| k == "group.protocol"));

        let classic_worker = WorkerDefaults { group_protocol: GroupProtocol::Classic, ..Default::default() };
        let over =
            ConnectorConfig::parse(&config(&[("consumer.override.group.protocol", "share")]), &classic_worker).unwrap();
        assert_eq!(over.group_protocol, GroupProtocol::Share);
    }

    #[test]
    fn other_consumer_overrides_pass_through() {
        let c = ConnectorConfig::parse(&config(&[("consumer.override.fetch.min.bytes", "1024")]), &Default::default())
            .unwrap();
        assert_eq!(c.clients.for_role(Role::Consumer), vec![("fetch.min.bytes".to_string(), "1024".to_string())]);
    }

    #[test]
    fn every_problem_is_reported() {
        let raw: BTreeMap<String, String> = [("tasks.max", "zero"), ("errors.tolerance", "some")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let problems = ConnectorConfig::parse(&raw, &Default::default()).unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        for key in ["name", "connector.class", "topics", "topics.regex", "tasks.max", "errors.tolerance"] {
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

    #[test]
    fn defaults_come_from_the_table() {
        let c = ConnectorConfig::parse(&config(&[]), &Default::default()).unwrap();
        let default = |key: &str| connector_keys().find(key).unwrap().default_value().unwrap().to_string();
        assert_eq!(c.tasks_max.to_string(), default("tasks.max"));
        assert_eq!(c.batch_max_records.to_string(), default("batch.max.records"));
        assert_eq!(c.flush_interval.as_millis().to_string(), default("flush.interval.ms"));
        assert_eq!(c.limits.memory_bytes.to_string(), default("plugin.memory.max.bytes"));
        assert_eq!(c.limits.call_timeout.as_millis().to_string(), default("plugin.call.timeout.ms"));
        assert_eq!(c.errors.retry_timeout.unwrap().as_millis().to_string(), default("errors.retry.timeout"));
        assert_eq!(c.errors.retry_delay_max.as_millis().to_string(), default("errors.retry.delay.max.ms"));
        assert_eq!(c.errors.dlq_context_headers.to_string(), default("errors.deadletterqueue.context.headers.enable"));
        assert_eq!(c.grants.wasi.deterministic.to_string(), default("plugin.deterministic"));
        assert_eq!(c.errors.tolerance, Tolerance::None);
        assert_eq!(default("errors.tolerance"), "none");
    }

    #[test]
    fn given_values_are_read() {
        let c = ConnectorConfig::parse(
            &config(&[
                ("tasks.max", "3"),
                ("batch.max.records", "7"),
                ("flush.interval.ms", "250"),
                ("plugin.memory.max.bytes", "1048576"),
                ("plugin.call.timeout.ms", "900"),
                ("plugin.deterministic", "true"),
                ("errors.retry.timeout", "-1"),
                ("errors.deadletterqueue.context.headers.enable", "false"),
                ("consumer.override.group.id", "mine"),
            ]),
            &Default::default(),
        )
        .unwrap();
        assert_eq!((c.tasks_max, c.batch_max_records), (3, 7));
        assert_eq!(c.flush_interval, Duration::from_millis(250));
        assert_eq!(c.limits.memory_bytes, 1 << 20);
        assert_eq!(c.limits.call_timeout, Duration::from_millis(900));
        assert!(c.grants.wasi.deterministic);
        assert_eq!(c.errors.retry_timeout, None);
        assert!(!c.errors.dlq_context_headers);
        assert_eq!(c.group_id, "mine");
    }

    #[test]
    fn ranges_and_types_are_checked_for_every_key() {
        let problems = ConnectorConfig::parse(
            &config(&[
                ("batch.max.records", "0"),
                ("plugin.call.timeout.ms", "0"),
                ("plugin.memory.max.bytes", "-1"),
                ("plugin.deterministic", "yes"),
                ("consumer.override.group.protocol", "streams"),
                ("topics", " , "),
            ]),
            &Default::default(),
        )
        .unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "batch.max.records",
                "consumer.override.group.protocol",
                "plugin.memory.max.bytes",
                "plugin.call.timeout.ms",
                "plugin.deterministic",
                "topics",
            ],
            "{problems:#?}"
        );
        assert_eq!(problems[5].message, "Invalid value ' , ' for configuration topics: names no topic");
    }

    /// Like `config`, with `topics` as given in `pairs` (or not at all).
    fn config_without_topics(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut raw = config(pairs);
        if !pairs.iter().any(|(k, _)| *k == "topics") {
            raw.remove("topics");
        }
        raw
    }

    #[test]
    fn transforms_and_predicates_are_refused_not_passed_over() {
        let mut raw = BTreeMap::from([
            ("name".to_string(), "c".to_string()),
            ("connector.class".to_string(), "noop-sink".to_string()),
            ("topics".to_string(), "t".to_string()),
            ("transforms".to_string(), "".to_string()),
        ]);
        assert!(ConnectorConfig::parse(&raw, &Default::default()).is_ok(), "empty, as Connect's default");
        raw.insert("transforms".into(), "mask".into());
        raw.insert("predicates".into(), "isFoo".into());
        let keys: Vec<String> = problems_of(&raw).into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["transforms", "predicates"]);
    }

    fn problems_of(raw: &BTreeMap<String, String>) -> Vec<(String, String)> {
        let problems = ConnectorConfig::parse(raw, &Default::default()).unwrap_err();
        problems.into_iter().map(|p| (p.key, p.message)).collect()
    }

    #[test]
    fn exactly_one_of_topics_and_topics_regex() {
        let both_keys = |message: &str| {
            vec![("topics".to_string(), message.to_string()), ("topics.regex".to_string(), message.to_string())]
        };
        assert_eq!(problems_of(&config_without_topics(&[])), both_keys("Must configure one of topics or topics.regex"));
        assert_eq!(
            problems_of(&config(&[("topics.regex", "orders-.*")])),
            both_keys("topics and topics.regex are mutually exclusive options, but both are set.")
        );
        // Blank counts as not given, as in Connect.
        assert_eq!(
            problems_of(&config_without_topics(&[("topics", " "), ("topics.regex", "")])),
            both_keys("Must configure one of topics or topics.regex")
        );
        let by_regex = ConnectorConfig::parse(
            &config_without_topics(&[("topics", ""), ("topics.regex", "orders-.*")]),
            &Default::default(),
        )
        .unwrap();
        assert!(by_regex.topics.is_empty());
        assert_eq!(by_regex.topics_regex.as_deref(), Some("orders-.*"));
        let by_name = ConnectorConfig::parse(&config(&[]), &Default::default()).unwrap();
        assert!(by_name.topics_regex.is_none() && by_name.topics_pattern().is_none());
    }

    #[test]
    fn topics_regex_matches_whole_names() {
        let c = ConnectorConfig::parse(
            &config_without_topics(&[("topics.regex", "orders|payments-[0-9]+")]),
            &Default::default(),
        )
        .unwrap();
        let pattern = c.topics_pattern().unwrap();
        for name in ["orders", "payments-7"] {
            assert!(pattern.is_match(name), "{name}");
        }
        for name in ["orders-eu", "old-orders", "payments-", "xpayments-7"] {
            assert!(!pattern.is_match(name), "{name}");
        }
    }

    #[test]
    fn an_invalid_topics_regex_is_a_problem_of_its_key() {
        assert_eq!(
            problems_of(&config_without_topics(&[("topics.regex", "orders-(")])),
            [(
                "topics.regex".to_string(),
                "Invalid value 'orders-(' for configuration topics.regex: not a valid regular expression: unclosed \
                 group"
                    .to_string()
            )]
        );
    }

    #[test]
    fn topics_regex_must_read_the_same_to_posix() {
        for regex in [
            "orders-.*",
            "(orders|payments)-[0-9]+",
            "orders-[[:digit:]]+",
            "a\\.b",
            "a\\w+",
            "[]a-]+",
            "a{1,2}b?",
            "a[^.]b",
        ] {
            assert_eq!(check_topics_regex(regex), Ok(()), "{regex}");
        }
        for (regex, why) in [
            ("orders-\\d+", "\\d is not POSIX: write [0-9]"),
            ("(?:orders)", "(?...) is not POSIX"),
            ("(?i)orders", "(?...) is not POSIX"),
            ("orders-.+?", "lazy quantifiers"),
            ("orders-[0-9]{1,3}?", "lazy quantifiers"),
            ("orders[\\w-]", "a \\ inside [...]"),
            ("orders[a&&b]", "&& inside [...]"),
            ("orders[[:^digit:]]", "[:^class:]"),
            ("orders\\'", "\\' is not POSIX"),
        ] {
            let refused = check_topics_regex(regex).unwrap_err();
            assert!(
                refused.starts_with(why) && refused.ends_with("(librdkafka matches with POSIX extended regex)"),
                "{regex}: {refused}"
            );
        }
        // The regex crate itself has no lookaround.
        let lookahead = check_topics_regex("(?=o)orders").unwrap_err();
        assert!(lookahead.starts_with("not a valid regular expression: look-around"), "{lookahead}");
    }

    /// What `check_topics_regex` accepts, glibc's `regcomp` (which librdkafka
    /// matches a classic group's pattern with) reads as the `regex` crate
    /// does; and `\d`, which it refuses, glibc reads as a `d`.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn accepted_patterns_match_alike_in_glibc() {
        use std::ffi::{CString, c_char, c_int};
        /// Room for glibc's `regex_t` (64 bytes on 64-bit targets).
        #[repr(C, align(8))]
        struct RegexT([u8; 256]);
        unsafe extern "C" {
            fn regcomp(preg: *mut RegexT, pattern: *const c_char, cflags: c_int) -> c_int;
            fn regexec(
                preg: *const RegexT,
                string: *const c_char,
                nmatch: usize,
                pmatch: *mut u8,
                eflags: c_int,
            ) -> c_int;
            fn regfree(preg: *mut RegexT);
        }
        const REG_EXTENDED: c_int = 1;
        const REG_NOSUB: c_int = 8;
        // Anchored as `ClassicSource` hands it to librdkafka.
        let posix = |regex: &str, name: &str| -> bool {
            let pattern = CString::new(format!("^({regex})$")).unwrap();
            let name = CString::new(name).unwrap();
            let mut compiled = RegexT([0; 256]);
            // SAFETY: a buffer larger than regex_t, freed once compiled.
            unsafe {
                assert_eq!(regcomp(&mut compiled, pattern.as_ptr(), REG_EXTENDED | REG_NOSUB), 0, "{regex}");
                let matched = regexec(&compiled, name.as_ptr(), 0, std::ptr::null_mut(), 0) == 0;
                regfree(&mut compiled);
                matched
            }
        };
        let names = [
            "orders-1",
            "orders-12",
            "orders-d",
            "orders-",
            "orders_1",
            "orders.1",
            "xorders-1",
            "orders-1x",
            "payments-7",
            "a_b",
            "a-b",
            "ab",
            "a.b",
            "axb",
            "a",
            "aab",
            "]]",
        ];
        for regex in [
            "orders-.*",
            "(orders|payments)-[0-9]+",
            "orders-[[:digit:]]+",
            "a\\.b",
            "a\\w+",
            "[]a-]+",
            "a{1,2}b?",
            "a[^.]b",
            "orders|payments-7",
        ] {
            assert_eq!(check_topics_regex(regex), Ok(()), "{regex}");
            let rust = topics_pattern(regex).unwrap();
            for name in names {
                assert_eq!(posix(regex, name), rust.is_match(name), "{regex} on {name}");
            }
        }
        let digits = topics_pattern("orders-\\d+").unwrap();
        assert!(digits.is_match("orders-1") && !posix("orders-\\d+", "orders-1") && posix("orders-\\d+", "orders-d"));
    }

    #[test]
    fn the_dead_letter_topic_must_not_match_topics_regex() {
        let raw = config_without_topics(&[
            ("topics.regex", "orders-.*"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "orders-dlq"),
        ]);
        let problems = problems_of(&raw);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].0, "errors.deadletterqueue.topic.name");
        assert!(problems[0].1.contains("topics.regex matches it"), "{problems:?}");
        let mut elsewhere = raw.clone();
        elsewhere.insert("errors.deadletterqueue.topic.name".into(), "dlq-orders".into());
        assert!(ConnectorConfig::parse(&elsewhere, &Default::default()).is_ok());
    }

    #[test]
    fn the_regex_refresh_defaults_to_thirty_seconds_and_follows_librdkafka() {
        let refresh = |value: Option<&str>| {
            let pairs: Vec<(&str, &str)> = value.map(|v| (REFRESH_KEY, v)).into_iter().collect();
            ConnectorConfig::parse(&config(&pairs), &Default::default()).map(|c| c.topics_refresh)
        };
        assert_eq!(refresh(None).unwrap(), Some(TOPICS_REGEX_REFRESH));
        assert_eq!(refresh(Some("500")).unwrap(), Some(Duration::from_millis(500)));
        assert_eq!(refresh(Some("-1")).unwrap(), None, "librdkafka's 'never'");
        assert_eq!(refresh(Some("0")).unwrap(), None);
        assert_eq!(refresh(Some("-2")).unwrap_err()[0].key, REFRESH_KEY);
        // A classic group's librdkafka gets it as it was given.
        let c = ConnectorConfig::parse(&config(&[(REFRESH_KEY, "500")]), &Default::default()).unwrap();
        assert!(
            c.clients.for_role(Role::Consumer).contains(&("topic.metadata.refresh.interval.ms".into(), "500".into()))
        );
    }

    #[test]
    fn a_grant_error_is_reported_under_its_key() {
        let problems = ConnectorConfig::parse(
            &config(&[("plugin.grant.fs.dirs", "relative/dir"), ("plugin.grant.env.A", "1")]),
            &Default::default(),
        )
        .unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].key, "plugin.grant.fs.dirs");
        assert!(problems[0].message.contains("absolute"), "{problems:#?}");

        // The table's type check and the grant's own say the same: once.
        let problems =
            ConnectorConfig::parse(&config(&[("plugin.grant.clock", "maybe")]), &Default::default()).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].key, "plugin.grant.clock");
    }

    #[test]
    fn a_grant_error_naming_no_given_key_goes_under_plugin_grant() {
        let raw = config(&[("plugin.grant.env.A", "1")]);
        assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.AB: refused"), "plugin.grant");
        assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.A: refused"), "plugin.grant.env.A");
        let raw = config(&[("plugin.grant.env.A", "1"), ("plugin.grant.env.AB", "2")]);
        assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.AB: refused"), "plugin.grant.env.AB");
    }

    #[test]
    fn grant_keys_old_and_new_find_their_entries() {
        let keys = connector_keys();
        for (key, entry) in [
            ("plugin.grant.fs.logs.path", "plugin.grant.fs.<name>.path"),
            ("plugin.grant.fs.logs.read-only", "plugin.grant.fs.<name>.read-only"),
            ("plugin.grant.net.db.connect", "plugin.grant.net.<name>.connect"),
            ("plugin.grant.env.api-url.value", "plugin.grant.env.<name>.value"),
            ("plugin.grant.env.API_URL", "plugin.grant.env.<NAME>"),
            ("plugin.grant.fs.dirs", "plugin.grant.fs.dirs"),
            ("plugin.grant.net.connect", "plugin.grant.net.connect"),
            ("plugin.grant.net.db.token", "plugin.grant.<capability>.<name>.token"),
            ("consumer.override.fetch.min.bytes", "consumer.override.*"),
            ("consumer.override.group.id", "consumer.override.group.id"),
        ] {
            assert_eq!(keys.find(key).map(|k| k.name()), Some(entry), "{key}");
        }
        assert!(keys.find("plugin.grant.fs.My_Dir.path").is_none(), "a grant's name is [a-z0-9-]+");
        assert!(keys.find("share.delivery.count.limit").is_none(), "read from the broker, not configured");
    }

    #[test]
    fn capability_targets_outside_the_workers_policy_are_refused_on_their_keys() {
        let worker_config: BTreeMap<String, String> =
            [("policy.sql.urls", "postgres://db.internal:5432"), ("policy.kafka.bootstrap.servers", "target:9092")]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
        let policy = crate::herder::WorkerFile::parse(&worker_config).unwrap().policy;
        let worker = WorkerDefaults { policy, ..Default::default() };
        let admitted = config(&[
            ("plugin.grant.sql.db.url", "postgres://db.internal:5432/sink"),
            ("plugin.grant.kafka.out.bootstrap.servers", "target:9092"),
        ]);
        ConnectorConfig::parse(&admitted, &worker).unwrap();
        let refused = config(&[
            ("plugin.grant.sql.db.url", "postgres://db.internal.evil.example:5432/sink"),
            ("plugin.grant.kafka.out.bootstrap.servers", "target:9092,elsewhere:9092"),
        ]);
        let problems = ConnectorConfig::parse(&refused, &worker).unwrap_err();
        let got: Vec<(&str, bool)> = problems
            .iter()
            .map(|p| (p.key.as_str(), p.message.contains("is outside what the worker's policy")))
            .collect();
        assert_eq!(
            got,
            [("plugin.grant.kafka.out.bootstrap.servers", true), ("plugin.grant.sql.db.url", true)],
            "{problems:?}"
        );
    }

    #[test]
    fn grant_credentials_are_secret_and_nothing_else_is() {
        let keys = connector_keys();
        for key in [
            "plugin.grant.net.db.password",
            "plugin.grant.s3.bucket.secret.access.key",
            "plugin.grant.http.api.token",
            "plugin.grant.net.db.secret",
            "plugin.grant.object-store.archive.secret.access.key",
            "plugin.grant.sql.db.password",
            "plugin.grant.kafka.target.sasl.password",
            "plugin.grant.kafka.target.ssl.key.password",
            "consumer.override.sasl.password",
            "producer.override.ssl.key.password",
            "admin.override.sasl.jaas.config",
        ] {
            assert!(keys.is_secret(key), "{key}");
        }
        let secret_entries: Vec<&str> = keys.keys().iter().filter(|k| k.is_secret()).map(|k| k.name()).collect();
        // Eight of grants, three per kind of Kafka client.
        assert_eq!(secret_entries.len(), 17, "{secret_entries:?}");
        for key in [
            "plugin.grant.fs.logs.path",
            "plugin.grant.env.TOKEN",
            "plugin.grant.s3.bucket.access.key",
            "plugin.grant.object-store.archive.access.key.id",
            "plugin.grant.sql.db.user",
            "plugin.grant.sql.db.url",
            "plugin.grant.kafka.target.sasl.username",
            "plugin.grant.kafka.target.bootstrap.servers",
            "name",
        ] {
            assert!(!keys.is_secret(key), "{key}");
        }
    }

    /// The README's table is `connector_keys().markdown_table()`, verbatim.
    #[test]
    fn readme_documents_the_table() {
        crate::config::assert_readme_documents(connector_keys(), "connector-keys", "config-keys");
    }
}
