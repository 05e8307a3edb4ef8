//! Every key the host reads from a connector config, in one table.

use super::topics_regex::check_topics_regex;
use super::{PluginPick, VersionRange};
use spillway_capabilities as capabilities;
use spillway_config::{ConfigDef, Importance, KeyDef, Segment, Type, Validator, Value};
use std::sync::LazyLock;

/// Every key the host reads from a connector config: names, types, defaults,
/// checks and documentation, in one place. [`ConnectorConfig::parse`], the
/// herder's validation, `GET /connector-plugins/{p}/config` and the README's
/// table (`spillway config-keys`) all come from it. Keys it does not define
/// are the plugin's to check, as in Connect.
pub fn connector_keys() -> &'static ConfigDef {
    static KEYS: LazyLock<ConfigDef> =
        LazyLock::new(|| {
            use Importance::{High, Low, Medium};
            let key = KeyDef::new;
            let credential =
                "A credential of the grant, for a capability that takes one; hidden wherever the config is shown.";
            ConfigDef::new()
            .group(
                "Common",
                [
                    key("name", Type::String, High, "Globally unique name of the connector.").required(),
                    key(
                        "connector.class",
                        Type::String,
                        High,
                        "Name of the plugin that implements the connector, or a Kafka Connect connector class \
                         one answers to (io.confluent.connect.s3.S3SinkConnector, or S3SinkConnector, S3Sink).",
                    )
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
                         or ^0.2 admits 0.2.x, =0.2.1 that version only, >=0.1, <0.3 both); a build with metadata \
                         (0.2.1+patched) only where the range names it (=0.2.1+patched). Unset: the newest \
                         installed. Changing it on a running connector swaps its tasks to the new version \
                         without stopping them.",
                    )
                    .with_validator(Validator::new("a semver range", |v| match v {
                        Value::String(range) if !range.trim().is_empty() => VersionRange::parse(range).map(|_| ()),
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
            // Connect lists its converters among its Common keys.
            .group("Common", converter_keys())
            .group(
                "Transforms",
                [
                    key(
                        "transforms",
                        Type::List,
                        Low,
                        "Aliases for the transformations to be applied to records, in order, between the \
                         converters and the plugin (Kafka Connect's grammar and class names; README lists the \
                         built-ins).",
                    )
                    .with_default(""),
                    key(
                        "transforms.*",
                        Type::String,
                        Low,
                        "A transform's settings: transforms.<alias>.type (a built-in class, or the name of an \
                         installed transform plugin), .predicate, .negate, .version (a plugin's semver range, as \
                         KIP-891's; changing it on a running connector swaps its tasks to that build), and the keys \
                         its class or plugin defines; any other key under an alias is refused.",
                    ),
                ],
            )
            .group(
                "Predicates",
                [
                    key("predicates", Type::List, Low, "Aliases for the predicates used by transformations.")
                        .with_default(""),
                    key(
                        "predicates.*",
                        Type::String,
                        Low,
                        "A predicate's settings: predicates.<alias>.type (its class) and the keys its class defines.",
                    ),
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
                         worker's consumer.group.protocol, classic unless the worker opts in to share; removing \
                         the key rolls a connector back to the worker's choice.",
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
                "Share group",
                [
                    key(
                        "share.record.lock.duration.ms",
                        Type::Long,
                        Medium,
                        "Set as the share group's own share.record.lock.duration.ms (KIP-932's group config): how \
                         long a task holds a record before the broker gives it to another. The broker keeps it \
                         within its group.share.min/max.record.lock.duration.ms (15000 to 60000 by default); \
                         outside, the task fails with the broker's error. Unset: the group's or broker's (30000).",
                    )
                    .with_validator(Validator::at_least(1000)),
                    key(
                        "share.delivery.count.limit",
                        Type::Int,
                        Medium,
                        "Set as the share group's share.delivery.count.limit: deliveries the broker allows a record \
                         before it archives it (the task dead-letters a still-failing record on its last one). \
                         Within the broker's group.share.min/max.delivery.count.limit (2 to 10 by default).",
                    )
                    .with_validator(Validator::at_least(2)),
                    key(
                        "share.isolation.level",
                        Type::String,
                        Medium,
                        "Set as the share group's share.isolation.level: read_committed hands out only records of \
                         committed transactions. Unset: the group's or broker's (read_uncommitted).",
                    )
                    .with_validator(Validator::one_of(&["read_committed", "read_uncommitted"])),
                    key(
                        "share.auto.offset.reset",
                        Type::String,
                        Medium,
                        "Set as the share group's share.auto.offset.reset, over any the group has: earliest, \
                         latest, or by_duration:<ISO-8601 duration>. Unset: consumer.override.auto.offset.reset \
                         (earliest unless given) where the group has no setting of its own.",
                    )
                    .with_validator(Validator::new("earliest, latest, by_duration:<ISO-8601 duration>", |v| match v {
                        Value::String(s) if !is_reset(s) => {
                            Err("String must be earliest, latest or by_duration:<ISO-8601 duration>".into())
                        }
                        _ => Ok(()),
                    })),
                ],
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
                .chain(capabilities::grant_kinds().flat_map(|kind| {
                    let prefix = format!("{}{}.<name>.", capabilities::GRANT_PREFIX, kind.name);
                    (kind.setting_keys)().into_iter().map(move |k| k.prefixed(&prefix))
                }))
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

/// The client settings under `*.override.*` whose values are secrets: never
/// shown, as the worker's own are not.
fn secret_override_keys() -> Vec<KeyDef> {
    let mut keys = Vec::new();
    for role in spillway_kafka::clients::Role::ALL {
        for setting in spillway_kafka::security::secret_settings() {
            let name = format!("{}.override.{setting}", role.name());
            let doc = format!("A secret of the {} clients: shown as [hidden].", role.name());
            keys.push(KeyDef::new(&name, Type::Password, Importance::Low, &doc));
        }
    }
    keys
}

/// Librdkafka's own name for the interval; its 0 and -1 turn the refresh off.
pub(super) const REFRESH_KEY: &str = "consumer.override.topic.metadata.refresh.interval.ms";

/// A plugin digest as the registry shows them: `sha256:` and 64 hex digits.
/// Connect's converters whose output Spillway reads as it is: a plugin
/// gets a record's key and value as the bytes on the topic, and the SDK
/// reads JSON with or without Connect's schema envelope.
const READ_AS_IS: [&str; 3] = [
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
];

/// Confluent's Avro converter, which the host runs: a record in
/// Confluent's wire format is read with its schema from the Schema
/// Registry into Connect's JSON envelope.
pub const AVRO_CONVERTER: &str = "io.confluent.connect.avro.AvroConverter";

/// Connect's `key.converter`, `value.converter` and `header.converter`,
/// with JsonConverter's `schemas.enable` and AvroConverter's registry: the
/// converters Spillway runs or reads as they are, and a refusal that says
/// why for those it does not read yet.
fn converter_keys() -> Vec<KeyDef> {
    let converter = |role: &str, also: &'static [&'static str]| {
        let allowed: Vec<&'static str> = READ_AS_IS.iter().chain(also).copied().collect();
        let description = allowed.iter().map(|c| c.rsplit('.').next().unwrap_or(c)).collect::<Vec<_>>().join(", ");
        let avro = also.contains(&AVRO_CONVERTER);
        let doc = format!(
            "Kafka Connect's {role} converter, named as in Connect. Spillway hands the plugin a record's {role} as the \
             bytes on the topic and its SDK reads JSON with or without Connect's schema envelope, so Connect's \
             JsonConverter, StringConverter and ByteArrayConverter need no conversion and are accepted.{} Protobuf \
             and JSON Schema in Confluent's wire format are refused until Spillway reads them. Unset: as Connect's \
             default, bytes as they are.",
            if avro {
                format!(
                    " AvroConverter runs in the host: a {role} in Confluent's wire format is read with its schema \
                     (fetched by id from {role}.converter.schema.registry.url) and handed to the plugin as \
                     JsonConverter writes it, schema and payload; one that does not read goes to the dead-letter \
                     queue (stage {}_CONVERTER).",
                    role.to_ascii_uppercase()
                )
            } else {
                String::new()
            }
        );
        KeyDef::new(&format!("{role}.converter"), Type::String, Importance::Low, &doc).with_validator(Validator::new(
            format!("{description} (their Connect class names)"),
            move |value| match value {
                Value::String(class) if class.trim().is_empty() || allowed.contains(&class.trim()) => Ok(()),
                Value::String(class) if ["Avro", "Protobuf", "JsonSchema"].iter().any(|f| class.contains(f)) => {
                    Err(format!(
                        "Spillway reads no {} in Confluent's wire format yet{}",
                        class.trim().rsplit('.').next().unwrap_or_default(),
                        if avro { format!(" (it runs {AVRO_CONVERTER})") } else { String::new() }
                    ))
                }
                _ => Err(format!("not a converter Spillway reads; one of {}", allowed.join(", "))),
            },
        ))
    };
    let schemas = |role: &str| {
        let doc = format!(
            "JsonConverter's schemas.enable for the {role}: accepted either way, as the SDK reads JSON with or \
             without Connect's {{\"schema\", \"payload\"}} envelope."
        );
        KeyDef::new(&format!("{role}.converter.schemas.enable"), Type::Boolean, Importance::Low, &doc)
    };
    let registry = |role: &str| {
        let doc = format!(
            "AvroConverter's Schema Registry for the {role}: its base URL (http or https; Confluent's API, e.g. \
             Apicurio's /apis/ccompat/v7). The host fetches schemas from it by id, so it must lie under the \
             worker's policy.schema.registry.urls. Credentials go in {role}.converter.basic.auth.user.info, not \
             in the URL."
        );
        KeyDef::new(&format!("{role}.converter.schema.registry.url"), Type::String, Importance::Low, &doc)
            .with_validator(Validator::new("an http or https URL without credentials", check_registry_url))
    };
    let user_info = |role: &str| {
        let doc = format!(
            "AvroConverter's user:password for the {role}'s Schema Registry (Confluent's basic.auth.user.info), \
             sent as HTTP basic authentication; it stays in the host."
        );
        KeyDef::new(&format!("{role}.converter.basic.auth.user.info"), Type::Password, Importance::Low, &doc)
            // Without its colon, no credentials would be sent, in silence.
            .with_validator(Validator::new("user:password", |value| match value {
                Value::Password(p) if !p.value().is_empty() && !p.value().contains(':') => {
                    Err("must be user:password (no colon found)".into())
                }
                _ => Ok(()),
            }))
    };
    let source = |role: &str| {
        let doc = format!(
            "Confluent's basic.auth.credentials.source for the {role}'s Schema Registry: USER_INFO, the \
             credentials of {role}.converter.basic.auth.user.info (the only source Spillway reads: a URL with \
             credentials would show them wherever the config is shown)."
        );
        KeyDef::new(&format!("{role}.converter.basic.auth.credentials.source"), Type::String, Importance::Low, &doc)
            .with_validator(Validator::new("USER_INFO", |value| match value {
                Value::String(s) if s.trim().is_empty() || s.trim() == "USER_INFO" => Ok(()),
                _ => Err("only USER_INFO: give the credentials in basic.auth.user.info".into()),
            }))
    };
    let mut keys = Vec::new();
    for role in ["key", "value"] {
        keys.extend([converter(role, &[AVRO_CONVERTER]), schemas(role), registry(role), user_info(role), source(role)]);
    }
    keys.push(converter("header", &["org.apache.kafka.connect.storage.SimpleHeaderConverter"]));
    keys
}

/// A registry's URL: http or https, and no credentials, which would show
/// wherever the config is shown.
fn check_registry_url(value: &Value) -> Result<(), String> {
    let Value::String(text) = value else { return Ok(()) };
    if text.trim().is_empty() {
        return Ok(());
    }
    let url = url::Url::parse(text.trim()).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("a {} URL; the registry is reached over http or https", url.scheme()));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL would show wherever the config is shown: give them in \
                    basic.auth.user.info"
            .into());
    }
    Ok(())
}

fn check_digest(digest: &str) -> Result<(), String> {
    match digest.trim().strip_prefix("sha256:") {
        Some(hex) if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) => Ok(()),
        _ => {
            Err(format!("'{digest}' is not a digest: write sha256: and 64 hex digits, as GET /connector-plugins shows"))
        }
    }
}

/// The connector keys set as its share group's configs, named as Kafka
/// names the group configs.
pub const SHARE_GROUP_CONFIGS: [&str; 4] =
    ["share.record.lock.duration.ms", "share.delivery.count.limit", "share.isolation.level", "share.auto.offset.reset"];

/// `earliest`, `latest` or `by_duration:PnDTnHnMnS` (Kafka checks the
/// duration itself; this refuses what is plainly not one).
fn is_reset(value: &str) -> bool {
    match value.strip_prefix("by_duration:") {
        Some(duration) => duration.starts_with('P') && duration.len() > 1 && duration.is_ascii(),
        None => value == "earliest" || value == "latest",
    }
}

/// Whether a key no table declares names a secret by its name, as Kafka's
/// and its connectors' keys do (`connection.password`,
/// `aws.secret.access.key`, `target.cluster.sasl.jaas.config`,
/// `s3.sse.customer.key`): its value is hidden wherever a config is shown,
/// and it reaches a plugin only if the plugin declares the key.
pub fn looks_secret(key: &str) -> bool {
    let last = key.rsplit('.').next().unwrap_or(key);
    matches!(last, "password" | "passphrase" | "secret" | "token" | "credentials")
        || ["secret.access.key", "jaas.config", "secret.key", "customer.key", "private.key"]
            .iter()
            .any(|s| key.ends_with(s))
}
