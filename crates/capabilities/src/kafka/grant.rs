//! One `plugin.grant.kafka.<name>.*` grant: the target cluster's address
//! and client settings (security included), parsed from one table. They
//! configure the host's producer to that cluster and never reach the
//! plugin; `producer.override.*` stays the worker cluster's (the DLQ's).

use super::NAME;
use crate::Grants;
use crate::grants::checked_settings;
use crate::op::OpPolicy;
use crate::reach::{GrantSettings, Reach};
use anyhow::{Result, bail};
use spillway_config::{ConfigDef, Importance, KeyDef, Password, Type, Validator};
use spillway_kafka::security::SECURITY_SETTINGS;
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// Client settings passed to librdkafka under the same names when set: the
/// security settings every host client takes, and compression.
fn client_settings() -> impl Iterator<Item = &'static (&'static str, Type, &'static str)> {
    const COMPRESSION: (&str, Type, &str) =
        ("compression.type", Type::String, "none, gzip, snappy, lz4 or zstd, for what the host produces.");
    SECURITY_SETTINGS.iter().chain(std::iter::once(&COMPRESSION))
}

/// The settings one grant takes (`plugin.grant.kafka.<name>.<setting>`).
pub fn setting_keys() -> Vec<KeyDef> {
    let mut keys = vec![
        KeyDef::new(
            "bootstrap.servers",
            Type::String,
            Importance::High,
            "The target cluster: host:port pairs, comma-separated.",
        )
        .required()
        .with_validator(Validator::new("non-empty", |v| match v {
            spillway_config::Value::String(s) if s.trim().is_empty() => Err("names no broker".into()),
            _ => Ok(()),
        })),
        KeyDef::new(
            "exactly.once",
            Type::Boolean,
            Importance::High,
            "Under a classic consumer group (group.protocol=classic): every record sent through this grant joins \
             the task's Kafka transaction, committed with the source offsets (kept in this cluster, under the \
             group connect-<connector>), so that read_committed consumers see each record once. At most one grant \
             per connector. Share groups cannot: their acknowledgements cannot join a transaction (KIP-1289 is \
             not adopted), so they deliver at least once.",
        )
        .with_default("false"),
        KeyDef::new(
            "replication.factor",
            Type::Int,
            Importance::Low,
            "Replication factor of the topics that ensure-topic creates in this cluster (a mirror's target topics); \
             -1 takes the cluster's default (default.replication.factor).",
        )
        .with_default("-1")
        .with_validator(Validator::minus_one_or_at_least_one("the cluster's default")),
        KeyDef::new(
            "offset.syncs.topic",
            Type::String,
            Importance::Low,
            "Where the host records, in this cluster, which target offset each source offset landed at (for \
             translating consumer-group offsets); empty: spillway-offset-syncs.<connector>.internal.",
        ),
    ];
    for (name, kind, doc) in client_settings() {
        keys.push(KeyDef::new(name, *kind, Importance::Medium, doc));
    }
    keys.extend(OpPolicy::setting_keys(
        "Longest one operation may take: a send until every record is delivered, a metadata or admin call \
         (with retries); never past the plugin call's deadline.",
    ));
    keys
}

/// One parsed grant.
#[derive(Clone, Debug, PartialEq)]
pub struct KafkaGrant {
    pub bootstrap_servers: String,
    pub exactly_once: bool,
    /// Of the topics `ensure-topic` creates; -1: the cluster's default.
    pub replication_factor: i32,
    /// Empty: the connector's default.
    pub offset_syncs_topic: String,
    /// librdkafka settings for every client of this grant, secrets included.
    client: Vec<(String, Setting)>,
    pub policy: OpPolicy,
}

#[derive(Clone, Debug, PartialEq)]
enum Setting {
    Plain(String),
    Secret(Password),
}

impl KafkaGrant {
    pub(crate) fn from_settings(name: &str, settings: &BTreeMap<String, String>) -> Result<Self> {
        static SETTINGS: LazyLock<ConfigDef> = LazyLock::new(|| ConfigDef::new().group("kafka", setting_keys()));
        let values = checked_settings(&SETTINGS, NAME, name, settings)?;
        let mut client = Vec::new();
        for (setting, kind, _) in client_settings() {
            let value = match kind {
                Type::Password => values.password(setting),
                _ => values.string(setting),
            };
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            client.push((
                setting.to_string(),
                match kind {
                    Type::Password => Setting::Secret(Password::new(value)),
                    _ => Setting::Plain(value.to_string()),
                },
            ));
        }
        let protocol = values.string("security.protocol").trim().to_ascii_lowercase();
        if !["", "plaintext", "ssl", "sasl_plaintext", "sasl_ssl"].contains(&protocol.as_str()) {
            bail!(
                "plugin.grant.{NAME}.{name}.security.protocol: '{protocol}' is not plaintext, ssl, \
                 sasl_plaintext or sasl_ssl"
            );
        }
        Ok(KafkaGrant {
            bootstrap_servers: values.string("bootstrap.servers").trim().to_string(),
            exactly_once: values.boolean("exactly.once"),
            replication_factor: values.int("replication.factor"),
            offset_syncs_topic: values.string("offset.syncs.topic").trim().to_string(),
            client,
            policy: OpPolicy::from_values(&values),
        })
    }

    /// Every client setting, for librdkafka: this is where secrets leave
    /// the grant, into the host's own clients only.
    pub fn client_settings(&self) -> Vec<(String, String)> {
        let mut settings = vec![("bootstrap.servers".to_string(), self.bootstrap_servers.clone())];
        for (k, v) in &self.client {
            let value = match v {
                Setting::Plain(s) => s.clone(),
                Setting::Secret(p) => p.value().to_string(),
            };
            settings.push((k.clone(), value));
        }
        settings
    }

    /// The offset-syncs topic for `connector`.
    /// Where exactly-once positions are kept in the target (`positions.rs`).
    pub fn positions_topic(&self, connector: &str) -> String {
        format!("spillway-offsets.{connector}.internal")
    }

    pub fn offset_syncs_topic(&self, connector: &str) -> String {
        match self.offset_syncs_topic.as_str() {
            "" => format!("spillway-offset-syncs.{connector}.internal"),
            topic => topic.to_string(),
        }
    }
}

/// Reads grant `name` into the connector's grants.
pub(super) fn parse(grants: &mut Grants, name: &str, settings: &BTreeMap<String, String>) -> Result<()> {
    grants.kafka.insert(name.to_string(), KafkaGrant::from_settings(name, settings)?);
    Ok(())
}

/// One transaction per task: at most one grant is exactly-once.
pub(super) fn check(grants: &Grants) -> Result<()> {
    let exactly_once: Vec<&String> = grants.kafka.iter().filter(|(_, g)| g.exactly_once).map(|(n, _)| n).collect();
    if let [_, second, ..] = exactly_once.as_slice() {
        bail!(
            "plugin.grant.{NAME}.{second}.exactly.once: only one kafka grant per connector can be exactly-once \
             (one transaction per task)"
        );
    }
    Ok(())
}

/// `bootstrap.servers`: the Kafka servers the grant reaches.
pub(super) fn reach<'a>(grant: &GrantSettings<'a>, reach: &mut Reach<'a>) {
    if let Some((key, servers)) = grant.get("bootstrap.servers") {
        reach.targets.extend(crate::reach::servers_of(key, servers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn grant_settings_are_checked_and_secrets_hidden() {
        let grant = KafkaGrant::from_settings(
            "target",
            &settings(&[
                ("bootstrap.servers", "b1:9092,b2:9092"),
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "mirror"),
                ("sasl.password", "s3cret"),
            ]),
        )
        .unwrap();
        assert!(!grant.exactly_once);
        assert_eq!(grant.policy, OpPolicy { timeout: Duration::from_millis(30_000), retries: 3 });
        assert!(!format!("{grant:?}").contains("s3cret"), "the password shows in Debug: {grant:?}");
        let client = grant.client_settings();
        assert!(client.contains(&("sasl.password".into(), "s3cret".into())), "{client:?}");
        assert!(client.contains(&("bootstrap.servers".into(), "b1:9092,b2:9092".into())), "{client:?}");
        assert_eq!(grant.offset_syncs_topic("m1"), "spillway-offset-syncs.m1.internal");
        for (pairs, expected) in [
            (vec![], "plugin.grant.kafka.target.bootstrap.servers: Missing required configuration"),
            (vec![("bootstrap.servers", "b:1"), ("acks", "0")], "plugin.grant.kafka.target.acks: unknown setting"),
            (vec![("bootstrap.servers", "b:1"), ("exactly.once", "yes")], "plugin.grant.kafka.target.exactly.once"),
            (vec![("bootstrap.servers", "b:1"), ("security.protocol", "tls")], "is not plaintext"),
        ] {
            let err = KafkaGrant::from_settings("target", &settings(&pairs)).unwrap_err().to_string();
            assert!(err.contains(expected), "{pairs:?}: {err}");
        }
    }
}
