//! The settings of the host's clients to the worker's Kafka cluster, as
//! Connect layers them: the worker config's own keys for every client
//! (security first of all), its `consumer.*`, `producer.*` and `admin.*` keys
//! for one kind of client, then a connector's `consumer.override.*`,
//! `producer.override.*` and `admin.override.*`. librdkafka names throughout;
//! each setting is checked by librdkafka itself when the config is parsed,
//! so a Java client's key is refused at validation, not at task start. A
//! connector's override reaches librdkafka only once the worker's
//! `policy.client.overrides` allows its kind.

use super::security::{self, ClientSecurity};
use spillway_config::Problem;
use spillway_policy::{ClientOverrides, SettingKind};
use std::collections::BTreeMap;
use std::fmt;

/// librdkafka settings, in order (later win).
type Settings = Vec<(String, String)>;

/// The host's kinds of client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The tasks' consumers, share or classic.
    Consumer,
    /// The dead-letter queue's producer.
    Producer,
    /// Offsets, groups and metadata, for the REST API.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Consumer, Role::Producer, Role::Admin];

    /// `consumer`, `producer` or `admin`: the prefix of its keys.
    pub fn name(self) -> &'static str {
        match self {
            Role::Consumer => "consumer",
            Role::Producer => "producer",
            Role::Admin => "admin",
        }
    }
}

/// librdkafka settings for each kind of client, secrets included (`Debug`
/// shows the keys only).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ClientSettings {
    common: Vec<(String, String)>,
    per_role: [Vec<(String, String)>; 3],
}

impl fmt::Debug for ClientSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = |settings: &[(String, String)]| settings.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        f.debug_struct("ClientSettings")
            .field("common", &keys(&self.common))
            .field("consumer", &keys(&self.per_role[0]))
            .field("producer", &keys(&self.per_role[1]))
            .field("admin", &keys(&self.per_role[2]))
            .finish()
    }
}

/// Where the worker's cluster is and how a client talks to it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterAccess {
    pub bootstrap: String,
    pub settings: ClientSettings,
}

impl ClusterAccess {
    pub fn new(bootstrap: &str, settings: &ClientSettings) -> Self {
        ClusterAccess { bootstrap: bootstrap.to_string(), settings: settings.clone() }
    }

    pub fn rdkafka(&self, role: Role) -> rdkafka::ClientConfig {
        self.settings.rdkafka(&self.bootstrap, role)
    }

    /// Our own protocol client's TLS and SASL as `role`.
    pub fn security(&self, role: Role) -> Result<ClientSecurity, super::share::ShareError> {
        self.settings.security(role).map_err(super::share::ShareError::Config)
    }
}

/// `group.protocol` is the host's to read (the connector table checks it);
/// librdkafka is given `classic` and `consumer` (KIP-848), never `share`.
fn is_host_setting(role: Role, setting: &str, value: &str) -> bool {
    role == Role::Consumer && setting == "group.protocol" && !matches!(value.trim(), "classic" | "consumer")
}

impl ClientSettings {
    /// From the worker config: its security keys ([`security::SECURITY_SETTINGS`])
    /// for every client, and `consumer.*`, `producer.*`, `admin.*`.
    pub fn from_worker(raw: &BTreeMap<String, String>) -> Result<Self, Vec<Problem>> {
        let mut settings = ClientSettings::default();
        let mut problems = Vec::new();
        for (key, value) in raw {
            if security::is_security_setting(key) || key == "sasl.jaas.config" {
                settings.add(None, key, key, value, &mut problems);
                continue;
            }
            let Some((role, setting)) =
                Role::ALL.iter().find_map(|r| Some((*r, key.strip_prefix(r.name())?.strip_prefix('.')?)))
            else {
                continue;
            };
            if is_host_setting(role, setting, value) {
                continue;
            }
            settings.add(Some(role), key, setting, value, &mut problems);
        }
        problems.extend(settings.security_problems(|role, setting| match settings.per_role_has(role, setting) {
            true => format!("{}.{setting}", role.name()),
            false => setting.to_string(),
        }));
        match problems.is_empty() {
            true => Ok(settings),
            false => Err(problems),
        }
    }

    /// These settings under a connector's `consumer.override.*`,
    /// `producer.override.*` and `admin.override.*` (the host's own keys
    /// left out), each first checked against what the worker `allows`;
    /// every problem reported on its key.
    pub fn with_overrides(&self, raw: &BTreeMap<String, String>, allows: &ClientOverrides) -> (Self, Vec<Problem>) {
        let mut settings = self.clone();
        let mut problems = Vec::new();
        for role in Role::ALL {
            let prefix = format!("{}.override.", role.name());
            for (key, value) in raw.range(prefix.clone()..).take_while(|(k, _)| k.starts_with(&prefix)) {
                let setting = &key[prefix.len()..];
                if is_host_setting(role, setting, value) {
                    continue;
                }
                // Before librdkafka sees the value: some settings load code.
                if let Err(refusal) = allows.check(key, setting) {
                    problems.push(Problem::new(key, refusal));
                    continue;
                }
                settings.add(Some(role), key, setting, value, &mut problems);
            }
        }
        problems.extend(settings.security_problems(|role, setting| format!("{}.override.{setting}", role.name())));
        (settings, problems)
    }

    /// What a client of `role` is configured with, in order (later win).
    pub fn for_role(&self, role: Role) -> Vec<(String, String)> {
        self.common.iter().chain(&self.per_role[role as usize]).cloned().collect()
    }

    /// librdkafka's configuration for a client of `role` to `bootstrap`.
    pub fn rdkafka(&self, bootstrap: &str, role: Role) -> rdkafka::ClientConfig {
        let mut config = rdkafka::ClientConfig::new();
        config.set("bootstrap.servers", bootstrap);
        for (k, v) in self.for_role(role) {
            config.set(k, v);
        }
        config
    }

    /// How our own protocol client (share groups, group admin) connects as
    /// `role`.
    pub fn security(&self, role: Role) -> Result<ClientSecurity, String> {
        let settings = self.for_role(role);
        ClientSecurity::from_settings(settings.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(|problems| {
            problems.into_iter().map(|p| format!("{}: {}", p.key, p.message)).collect::<Vec<_>>().join("; ")
        })
    }

    /// The files these settings read keys or credentials from.
    pub fn key_files(&self) -> Vec<std::path::PathBuf> {
        let all = self.common.iter().chain(self.per_role.iter().flatten());
        let files = all.filter(|(k, v)| {
            SettingKind::of(k) == SettingKind::Credentials
                && (k.ends_with(".location") || k.ends_with(".file") || k.ends_with(".keytab"))
                && !v.trim().is_empty()
        });
        files.map(|(_, v)| std::path::PathBuf::from(v.trim())).collect()
    }

    fn per_role_has(&self, role: Role, setting: &str) -> bool {
        self.per_role[role as usize].iter().any(|(k, _)| k == setting)
    }

    /// Adds `setting` for `role`, or for every client (a Java client's
    /// `sasl.jaas.config` translated) once librdkafka accepts it.
    fn add(&mut self, role: Option<Role>, key: &str, setting: &str, value: &str, problems: &mut Vec<Problem>) {
        let translated = match setting {
            "sasl.jaas.config" => match jaas_credentials(value) {
                Ok((username, password)) => {
                    vec![("sasl.username".to_string(), username), ("sasl.password".to_string(), password)]
                }
                Err(message) => return problems.push(Problem::new(key, message)),
            },
            _ => vec![(setting.to_string(), value.to_string())],
        };
        for (setting, value) in translated {
            if let Err(message) = check_with_librdkafka(&setting, &value) {
                return problems.push(Problem::new(key, message));
            }
            match role {
                Some(role) => self.per_role[role as usize].push((setting, value)),
                None => self.common.push((setting, value)),
            }
        }
    }

    /// The security settings of each role, checked as our own client reads
    /// them (certificate and key files loaded), named by `key_of`. Roles
    /// with the same settings (most often all three) are checked once:
    /// each check reads files, the system's CA store among them.
    fn security_problems(&self, key_of: impl Fn(Role, &str) -> String) -> Vec<Problem> {
        let mut problems: Vec<Problem> = Vec::new();
        let mut checked: Vec<(Settings, Vec<security::SettingProblem>)> = Vec::new();
        for role in Role::ALL {
            let settings = self.for_role(role);
            let found = match checked.iter().find(|(s, _)| *s == settings) {
                Some((_, found)) => found.clone(),
                None => {
                    let pairs = settings.iter().map(|(k, v)| (k.as_str(), v.as_str()));
                    let found = ClientSecurity::from_settings(pairs).err().unwrap_or_default();
                    checked.push((settings, found.clone()));
                    found
                }
            };
            for problem in found {
                let problem = Problem::new(key_of(role, &problem.key), problem.message);
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
        }
        problems
    }
}

/// Whether librdkafka takes `key` = `value`; its reason if not, with the
/// librdkafka name where a Java client's key was given.
fn check_with_librdkafka(key: &str, value: &str) -> Result<(), String> {
    let mut config = rdkafka::ClientConfig::new();
    config.set(key, value);
    match config.create_native_config() {
        Ok(_) => Ok(()),
        Err(e) => {
            let hint = match key {
                "ssl.truststore.location" => " (librdkafka's is ssl.ca.location, a PEM file)",
                "ssl.keystore.location" => " (librdkafka's are ssl.certificate.location and ssl.key.location, PEM)",
                "max.poll.records" => " (the connector's batch.max.records caps a batch)",
                "key.deserializer" | "value.deserializer" => " (the host hands the plugin raw bytes)",
                _ => "",
            };
            let message = e.to_string();
            // Never repeat a secret value back.
            let message = match security::is_secret_setting(key) {
                true => message.replace(value, "[hidden]"),
                false => message,
            };
            Err(format!("{message}{hint}"))
        }
    }
}

/// The user and password of a Java client's `sasl.jaas.config` for PLAIN or
/// SCRAM: `...LoginModule required username="u" password="p";`.
fn jaas_credentials(jaas: &str) -> Result<(String, String), String> {
    let option = |name: &str| {
        let start = jaas.find(&format!("{name}=\""))? + name.len() + 2;
        let end = start + jaas[start..].find('"')?;
        Some(jaas[start..end].to_string())
    };
    let module_known = ["PlainLoginModule", "ScramLoginModule"].iter().any(|m| jaas.contains(m));
    match (module_known, option("username"), option("password")) {
        (true, Some(user), Some(password)) => Ok((user, password)),
        _ => Err("only a PlainLoginModule or ScramLoginModule with username=\"...\" and password=\"...\" is \
                  understood; or give sasl.username and sasl.password"
            .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn worker_settings_reach_every_client_and_role_settings_one() {
        let worker = ClientSettings::from_worker(&raw(&[
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanism", "PLAIN"),
            ("sasl.username", "worker"),
            ("sasl.password", "w"),
            ("producer.linger.ms", "20"),
            ("consumer.group.protocol", "share"),
            ("listeners", "http://127.0.0.1:1"),
        ]))
        .unwrap();
        let producer = worker.for_role(Role::Producer);
        assert!(producer.contains(&("linger.ms".into(), "20".into())), "{producer:?}");
        assert!(producer.contains(&("sasl.username".into(), "worker".into())));
        assert!(!worker.for_role(Role::Consumer).iter().any(|(k, _)| k == "linger.ms" || k == "group.protocol"));
        assert!(!format!("{worker:?}").contains("\"w\""), "a secret shows in Debug: {worker:?}");

        let everything = ClientOverrides::parse(&["tuning".into(), "credentials".into()]).unwrap();
        let (connector, problems) = worker.with_overrides(&raw(&[
            (
                "consumer.override.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required username=\"sink\" password=\"s\";",
            ),
            ("consumer.override.group.protocol", "share"),
            ("admin.override.client.id", "ops"),
        ]), &everything);
        assert_eq!(problems, []);
        let consumer = connector.for_role(Role::Consumer);
        assert_eq!(consumer.iter().rev().find(|(k, _)| k == "sasl.username").unwrap().1, "sink", "the override wins");
        let sasl = connector.security(Role::Consumer).unwrap().sasl.unwrap();
        assert_eq!((sasl.username.as_str(), sasl.password.value()), ("sink", "s"));
        assert_eq!(connector.security(Role::Admin).unwrap().sasl.unwrap().username, "worker");
    }

    #[test]
    fn librdkafka_checks_each_setting_at_validation() {
        let (_, problems) = ClientSettings::default().with_overrides(
            &raw(&[
                ("consumer.override.max.poll.records", "10"),
                ("producer.override.acks", "most"),
                ("admin.override.security.protocol", "SASL_SSL"),
                ("consumer.override.sasl.jaas.config", "GssapiLoginModule required;"),
            ]),
            &ClientOverrides::parse(&["tuning".into(), "security".into(), "credentials".into()]).unwrap(),
        );
        let mut got: Vec<String> = problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect();
        got.sort();
        assert_eq!(got.len(), 5, "{got:#?}");
        assert!(got[0].starts_with("admin.override.sasl.password: sasl_ssl needs"), "{got:#?}");
        assert!(got[1].starts_with("admin.override.sasl.username: sasl_ssl needs"), "{got:#?}");
        assert!(got[2].contains("max.poll.records") && got[2].contains("batch.max.records"), "{got:#?}");
        assert!(got[3].starts_with("consumer.override.sasl.jaas.config: only a PlainLoginModule"), "{got:#?}");
        assert!(got[4].starts_with("producer.override.acks: ") && got[4].contains("most"), "{got:#?}");

        let problems =
            ClientSettings::from_worker(&raw(&[("producer.sasl.password", "x"), ("ssl.ca.location", "/ca")]))
                .unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["ssl.ca.location"], "{problems:?}");
    }
}
