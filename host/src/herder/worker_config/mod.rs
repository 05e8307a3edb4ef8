//! The worker's own configuration, as Connect's
//! `connect-standalone.properties`: `spillway serve --config worker.properties`
//! reads it, and the command's flags override what it says. Its keys live in
//! one table, [`worker_keys`], which drives parsing, validation and README's
//! table (`spillway config-keys --worker`).

use super::distributed::GroupConfig;
use super::store::{ConfigTopic, StatusTopic};
use crate::config::{ConfigDef, ConfigProviders, Importance, KeyDef, Problem, Type, Validator, providers};
use crate::connector::{GroupProtocol, WorkerDefaults};
use crate::kafka::clients::ClientSettings;
use crate::kafka::security::SECURITY_SETTINGS;
use crate::policy::{GrantPolicy, InstanceBounds, RequestBounds};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// The worker's configuration (Connect's `WorkerConfig`): what the file and
/// the flags over it say, checked. The herder starts from it; its
/// `defaults` are what every connector config is parsed against.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// `listeners`: where the REST API listens; [`WorkerConfig::bind`]
    /// puts the bound address here once the port is known.
    pub listener: SocketAddr,
    /// An `https://` listener's certificate chain and key (PEM).
    pub listener_tls: Option<(PathBuf, PathBuf)>,
    /// `rest.auth.basic.users.file`, `rest.auth.bearer.tokens.file`.
    pub rest_users: Option<PathBuf>,
    pub rest_tokens: Option<PathBuf>,
    /// `rest.host.names`, with `rest.advertised.url`'s host.
    pub rest_host_names: Vec<String>,
    /// `rest.advertised.url`; the listener's URL when not set.
    rest_advertised_url: Option<String>,
    /// `bootstrap.servers`; `None` until the embedded broker is started.
    pub bootstrap_servers: Option<String>,
    /// Whether `bootstrap_servers` is the embedded broker's.
    embedded_broker: bool,
    /// `plugin.path`.
    pub plugin_dir: PathBuf,
    /// `config.storage.file`.
    pub state_file: PathBuf,
    /// `config.storage.topic`, `config.storage.replication.factor`.
    pub config_topic: Option<ConfigTopic>,
    /// `status.storage.*`.
    pub status_topic: Option<StatusTopic>,
    /// `group.id` and membership: distributed mode.
    pub group: Option<GroupConfig>,
    /// `metrics.lag.interval.ms`: how often each connector's lag is measured.
    pub lag_interval: std::time::Duration,
    /// What the worker decides for its connectors: `policy.*`,
    /// `config.providers*`, its clients' keys, with the worker's own
    /// secret files protected from grants and providers.
    pub defaults: WorkerDefaults,
}

impl WorkerConfig {
    /// Reads `path` (a Java properties file) if given, then `overrides`
    /// (key to value, from flags) over it. Every problem is reported, each
    /// on its key; a key the table lacks is one too, since a typo in the
    /// operator's policy must not silently grant more.
    pub fn load(path: Option<&Path>, overrides: &BTreeMap<String, String>) -> Result<Self, Vec<Problem>> {
        let mut raw = match path {
            Some(path) => read_properties(path)?,
            None => BTreeMap::new(),
        };
        raw.extend(overrides.iter().map(|(k, v)| (k.clone(), v.clone())));
        Self::parse_from(&raw, path)
    }

    /// A worker config from keys and values alone, with no file.
    pub fn parse(raw: &BTreeMap<String, String>) -> Result<Self, Vec<Problem>> {
        Self::parse_from(raw, None)
    }

    /// Shown as `worker_id` in statuses: the listener's host:port, as
    /// Connect shows the REST host and port.
    pub fn worker_id(&self) -> String {
        self.listener.to_string()
    }

    /// Where other workers and clients reach this one's REST API.
    pub fn advertised_url(&self) -> String {
        let scheme = if self.listener_tls.is_some() { "https" } else { "http" };
        self.rest_advertised_url.clone().unwrap_or_else(|| format!("{scheme}://{}", self.listener))
    }

    /// The REST listener is bound at `address`: a port 0 is a real one now.
    pub fn bind(&mut self, address: SocketAddr) {
        self.listener = address;
    }

    /// Runs the worker on the embedded broker at `bootstrap`, which has no
    /// share groups: refused when the worker's connectors default to them.
    pub fn use_embedded_broker(&mut self, bootstrap: String) -> Result<(), String> {
        if self.defaults.group_protocol == GroupProtocol::Share {
            return Err(format!(
                "{GROUP_PROTOCOL_KEY}=share needs share groups (Apache Kafka 4.0+), and the embedded broker has none: \
                 give bootstrap.servers, or leave {GROUP_PROTOCOL_KEY} unset"
            ));
        }
        self.defaults.cluster.clone_from(&bootstrap);
        self.bootstrap_servers = Some(bootstrap);
        self.embedded_broker = true;
        Ok(())
    }

    /// Whether the worker runs on the embedded broker.
    pub fn embedded_broker(&self) -> bool {
        self.embedded_broker
    }

    /// `bootstrap.servers`, once known (see [`WorkerConfig::bootstrap_servers`]).
    pub(super) fn bootstrap(&self) -> &str {
        self.bootstrap_servers.as_deref().unwrap_or_default()
    }

    fn parse_from(raw: &BTreeMap<String, String>, source: Option<&Path>) -> Result<Self, Vec<Problem>> {
        let keys = worker_keys();
        let (values, mut problems) = keys.parse(raw);
        for key in raw.keys().filter(|k| keys.find(k).is_none()) {
            problems
                .push(Problem::new(key.as_str(), "not a worker config key (spillway config-keys --worker lists them)"));
        }
        let (listener, https) = parse_listener(values.string("listeners")).unwrap_or_else(|e| {
            problems.push(Problem::new("listeners", e));
            (SocketAddr::from(([127, 0, 0, 1], 8083)), false)
        });
        let path = |key: &str| Some(PathBuf::from(values.string(key))).filter(|p| !p.as_os_str().is_empty());
        let (certificate, key) =
            (path("listeners.https.ssl.certificate.location"), path("listeners.https.ssl.key.location"));
        let listener_tls = match (https, certificate, key) {
            (true, Some(certificate), Some(key)) => Some((certificate, key)),
            (true, certificate, _) => {
                let missing = if certificate.is_none() { "certificate" } else { "key" };
                problems.push(Problem::new(
                    format!("listeners.https.ssl.{missing}.location"),
                    "an https:// listener needs its certificate and key",
                ));
                None
            }
            (false, None, None) => None,
            (false, ..) => {
                problems.push(Problem::new("listeners", "a certificate is set for an http:// listener"));
                None
            }
        };
        let policy = GrantPolicy::from_worker(&values).unwrap_or_else(|mut more| {
            problems.append(&mut more);
            GrantPolicy::default()
        });
        let providers = ConfigProviders::from_worker(&values).unwrap_or_else(|mut more| {
            problems.append(&mut more);
            ConfigProviders::default()
        });
        // Secrets of the worker's own clients may come from its providers.
        let (resolved, mut unresolved) = providers.resolve(raw);
        problems.append(&mut unresolved);
        let clients = ClientSettings::from_worker(&resolved).unwrap_or_else(|mut more| {
            problems.append(&mut more);
            ClientSettings::default()
        });
        let bootstrap_servers = Some(values.string("bootstrap.servers").to_string()).filter(|b| !b.is_empty());
        let config_topic = Some(values.string("config.storage.topic").trim().to_string())
            .filter(|name| !name.is_empty())
            .map(|name| ConfigTopic { name, replication_factor: values.int("config.storage.replication.factor") });
        let status_topic = Some(values.string("status.storage.topic").trim().to_string())
            .filter(|name| !name.is_empty())
            .map(|name| StatusTopic {
                name,
                partitions: values.int("status.storage.partitions"),
                replication_factor: values.int("status.storage.replication.factor"),
            });
        let group_id = values.string("group.id").trim().to_string();
        let group = (!group_id.is_empty()).then(|| GroupConfig {
            group_id,
            session_timeout: values.millis("session.timeout.ms"),
            heartbeat_interval: values.millis("heartbeat.interval.ms"),
            rebalance_timeout: values.millis("rebalance.timeout.ms"),
            rebalance_delay: values.millis("scheduled.rebalance.max.delay.ms"),
        });
        if group.is_some() {
            for (key, named) in
                [("config.storage.topic", &config_topic.is_some()), ("status.storage.topic", &status_topic.is_some())]
            {
                if !named {
                    problems.push(Problem::new(
                        "group.id",
                        format!("a worker of a group needs {key}: the workers share their state through it"),
                    ));
                }
            }
            if values.int("heartbeat.interval.ms") >= values.int("session.timeout.ms") {
                problems.push(Problem::new("heartbeat.interval.ms", "must be below session.timeout.ms"));
            }
        }
        for (key, named) in
            [("config.storage.topic", config_topic.is_some()), ("status.storage.topic", status_topic.is_some())]
        {
            if named && bootstrap_servers.is_none() {
                problems.push(Problem::new(
                    key,
                    "needs bootstrap.servers: the embedded broker keeps nothing across restarts",
                ));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        // The table admits these three only.
        let group_protocol = match values.string(GROUP_PROTOCOL_KEY) {
            "share" => GroupProtocol::Share,
            _ => GroupProtocol::Classic,
        };
        let defaults = WorkerDefaults {
            group_protocol,
            policy,
            providers,
            clients,
            cluster: bootstrap_servers.clone().unwrap_or_default(),
            connect_names: Default::default(),
        };
        let rest_advertised_url =
            Some(values.string("rest.advertised.url").trim().to_string()).filter(|u| !u.is_empty());
        let mut worker = WorkerConfig {
            listener,
            listener_tls,
            rest_users: path("rest.auth.basic.users.file"),
            rest_tokens: path("rest.auth.bearer.tokens.file"),
            rest_host_names: {
                let advertised = rest_advertised_url.as_deref().and_then(|u| url::Url::parse(u).ok());
                let advertised = advertised.and_then(|u| u.host_str().map(String::from));
                values.list("rest.host.names").iter().cloned().chain(advertised).collect()
            },
            rest_advertised_url,
            bootstrap_servers,
            embedded_broker: false,
            plugin_dir: PathBuf::from(values.string("plugin.path")),
            state_file: PathBuf::from(values.string("config.storage.file")),
            config_topic,
            status_topic,
            group,
            lag_interval: values.millis("metrics.lag.interval.ms"),
            defaults,
        };
        worker.protect_own_secrets(source);
        Ok(worker)
    }

    /// Keeps the worker's files that hold secrets out of every grant and
    /// provider: the config file it was read from (`source`), the REST
    /// API's credentials and key, its clients' keys, and where its
    /// providers read secrets. The state file, cache and plugin directory
    /// the herder adds when it starts.
    fn protect_own_secrets(&mut self, source: Option<&Path>) {
        let defaults = &mut self.defaults;
        let mut files: Vec<(PathBuf, &'static str)> = Vec::new();
        files.extend(source.map(|p| (p.to_path_buf(), "config file")));
        let rest = [&self.rest_users, &self.rest_tokens, &self.listener_tls.as_ref().map(|(_, key)| key.clone())];
        files.extend(rest.into_iter().flatten().map(|p| (p.clone(), "a REST credentials or key file")));
        files.extend(defaults.clients.key_files().into_iter().map(|p| (p, "Kafka client key")));
        for (path, what) in files {
            defaults.policy.protect(&path, what);
            defaults.providers.protect(&path);
        }
        for path in defaults.providers.secret_paths() {
            defaults.policy.protect(&path, "config providers' secrets");
        }
    }
}

/// `http://HOST:PORT` or `https://HOST:PORT`, one listener; true for HTTPS.
fn parse_listener(listeners: &str) -> Result<(SocketAddr, bool), String> {
    let bad = || format!("'{listeners}' is not one http://IP:PORT or https://IP:PORT listener");
    let trimmed = listeners.trim();
    let (rest, https) = match trimmed.strip_prefix("https://") {
        Some(rest) => (rest, true),
        None => (trimmed.strip_prefix("http://").ok_or_else(bad)?, false),
    };
    let addr = rest.strip_suffix('/').unwrap_or(rest);
    let addr = match addr.strip_prefix("localhost:") {
        Some(port) => format!("127.0.0.1:{port}"),
        None => addr.to_string(),
    };
    addr.parse().map(|addr| (addr, https)).map_err(|_| bad())
}

/// A properties file as Java reads one (`key=value`, `key: value`, `#` and
/// `!` comments, `\` continuations and escapes).
fn read_properties(path: &Path) -> Result<BTreeMap<String, String>, Vec<Problem>> {
    let file = std::fs::File::open(path)
        .map_err(|e| vec![Problem::new("--config", format!("cannot read {}: {e}", path.display()))])?;
    let map = java_properties::read(std::io::BufReader::new(file))
        .map_err(|e| vec![Problem::new("--config", format!("{}: {e}", path.display()))])?;
    Ok(map.into_iter().collect())
}

/// Every key of the worker config: names, types, defaults, checks and
/// documentation, in one place.
pub fn worker_keys() -> &'static ConfigDef {
    static KEYS: LazyLock<ConfigDef> = LazyLock::new(|| {
        use Importance::{High, Low, Medium};
        let key = KeyDef::new;
        let minus_one_or_at_least_one = Validator::minus_one_or_at_least_one;
        let no_ceiling = || minus_one_or_at_least_one("no ceiling");
        // `<topic>.storage.replication.factor`, for a topic the worker creates.
        let replication_factor = |topic: &str, importance: Importance| {
            let doc = format!(
                "Replication factor of the {topic} topic when the worker creates it; -1 takes the broker's default."
            );
            key(&format!("{topic}.storage.replication.factor"), Type::Int, importance, &doc)
                .with_default("-1")
                .with_validator(minus_one_or_at_least_one("the broker's default"))
        };
        // The ceiling over a connector key whose default it also lowers.
        let lowering_ceiling = |capped: &str| {
            let doc = format!(
                "Largest {capped} a connector may ask for; a connector that does not ask gets the smaller of its \
                 default and this."
            );
            key(&format!("policy.{capped}"), Type::Long, Medium, &doc).with_default("-1").with_validator(no_ceiling())
        };
        ConfigDef::new()
            .group(
                "Worker",
                [
                    key(
                        "bootstrap.servers",
                        Type::String,
                        High,
                        "Kafka bootstrap servers; empty starts the embedded broker (classic groups only).",
                    )
                    .with_default(""),
                    key(
                        "metrics.lag.interval.ms",
                        Type::Long,
                        Low,
                        "How often each classic-group connector's lag (its group's distance from its topics' ends, per \
                         partition) is measured for its status and /metrics, off the herder's loop.",
                    )
                    .with_default("30000")
                    .with_validator(Validator::at_least(100)),
                    key(
                        "listeners",
                        Type::String,
                        High,
                        "Where the REST API listens: one http://IP:PORT or https://IP:PORT.",
                    )
                    .with_default("http://127.0.0.1:8083"),
                    key("plugin.path", Type::String, High, "Directory of plugin components (*.wasm).")
                        .with_default("target/plugins"),
                    key(
                        "config.storage.file",
                        Type::String,
                        High,
                        "File that keeps connector configs and target states across restarts, unless \
                         config.storage.topic names a topic for them.",
                    )
                    .with_default(".spillway/connectors.json"),
                    key(
                        "config.storage.topic",
                        Type::String,
                        High,
                        "Kafka topic that keeps connector configs, target states and restart requests instead of \
                         config.storage.file, as Kafka Connect's config topic (same keys and values): one partition, \
                         compacted, created so when missing; one that exists otherwise is refused. Empty: the file.",
                    )
                    .with_default(""),
                    replication_factor("config", Medium),
                    key(
                        "status.storage.topic",
                        Type::String,
                        Medium,
                        "Kafka topic the worker also writes connector and task statuses to, as they change, as \
                         Kafka Connect's status topic (same keys and values); compacted, created so when missing. \
                         Empty: statuses are not written anywhere.",
                    )
                    .with_default(""),
                    key(
                        "status.storage.partitions",
                        Type::Int,
                        Low,
                        "Partitions of the status topic when the worker creates it.",
                    )
                    .with_default("5")
                    .with_validator(Validator::at_least(1)),
                    replication_factor("status", Low),
                ],
            )
            .group(
                "Distributed mode",
                [
                    key(
                        "group.id",
                        Type::String,
                        High,
                        "The group of workers this one joins (distributed mode): they share config.storage.topic \
                         and status.storage.topic, which it then needs, and the group's leader assigns connectors \
                         and tasks among them. Empty: standalone.",
                    )
                    .with_default(""),
                    key(
                        "rest.advertised.url",
                        Type::String,
                        Medium,
                        "Where the other workers of the group and clients reach this worker's REST API, e.g. \
                         http://10.0.0.5:8083; empty: the listener's address.",
                    )
                    .with_default(""),
                    key(
                        "session.timeout.ms",
                        Type::Int,
                        Medium,
                        "A worker not heard from for this long leaves the group and its work is assigned again.",
                    )
                    .with_default("10000")
                    .with_validator(Validator::at_least(1000)),
                    key("heartbeat.interval.ms", Type::Int, Low, "How often a worker tells the group it is alive.")
                        .with_default("3000")
                        .with_validator(Validator::at_least(100)),
                    key(
                        "rebalance.timeout.ms",
                        Type::Int,
                        Low,
                        "How long the group waits for every worker to rejoin in a rebalance.",
                    )
                    .with_default("60000")
                    .with_validator(Validator::at_least(1000)),
                    key(
                        "scheduled.rebalance.max.delay.ms",
                        Type::Int,
                        Medium,
                        "How long the work of a worker that left is held back for it to come back (a rolling \
                         restart) before it is assigned to the others, as in Kafka Connect.",
                    )
                    .with_default("300000")
                    .with_validator(Validator::at_least(0)),
                ],
            )
            .group(
                "Grant policy",
                [
                    key(
                        "policy.fs.dirs",
                        Type::List,
                        High,
                        "Absolute directories under which a directory grant (plugin.grant.fs.<name>.path, \
                         plugin.grant.fs.dirs, a file:// object store) may point; empty allows any. The worker's \
                         own files (state, cache, plugins, config, secrets, keys) and /proc, /sys and /dev, and any \
                         directory holding them, are never granted.",
                    )
                    .with_default(""),
                    key(
                        "policy.net.connect",
                        Type::List,
                        High,
                        "Addresses a plugin.grant.net.<name>.connect may name: IP[/PREFIX]:PORT or \
                         IP[/PREFIX]:* (IPv6 in brackets), e.g. 10.0.0.0/8:5432, 127.0.0.1:*; empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.object-store.urls",
                        Type::List,
                        High,
                        "URLs under which a plugin.grant.object-store.<name>.url must lie, e.g. s3://archive/spillway \
                         (scheme, bucket or host, port where given, and leading path segments compared, not the \
                         string); empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.object-store.endpoints",
                        Type::List,
                        High,
                        "Endpoints a plugin.grant.object-store.<name>.endpoint may name (http[s]://host[:port]), and \
                         aws for AWS itself (a grant without an endpoint); empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.sql.urls",
                        Type::List,
                        High,
                        "Database URLs under which a plugin.grant.sql.<name>.url must lie, e.g. \
                         postgres://db.internal:5432, mysql://10.0.0.5:3306/sink, sqlite:///srv/spillway (compared \
                         part by part); empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.schema.registry.urls",
                        Type::List,
                        High,
                        "URLs under which a connector's key.converter.schema.registry.url and \
                         value.converter.schema.registry.url must lie (AvroConverter: the host fetches schemas \
                         there), e.g. https://registry.internal:8081 (compared part by part); empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.kafka.bootstrap.servers",
                        Type::List,
                        High,
                        "host:port or host:* entries that every server of a \
                         plugin.grant.kafka.<name>.bootstrap.servers, and of a connector's \
                         consumer/producer/admin.override.bootstrap.servers, must match; empty allows any.",
                    )
                    .with_default(""),
                    key(
                        "policy.client.overrides",
                        Type::List,
                        High,
                        "The kinds of Kafka client setting a connector may set through consumer.override.*, \
                         producer.override.* and admin.override.* (Connect's connector.client.config.override.policy): \
                         tuning (batching, timeouts, group.id, ...), servers (bootstrap.servers and other addresses), \
                         security (protocol, mechanism, trust stores), credentials (users, passwords, keys), \
                         tls.verification (turning certificate checks off); none alone allows nothing. Settings that \
                         load code, run a command or write files (plugin.library.paths, ssl.engine.location, \
                         sasl.kerberos.kinit.cmd, ...) are never allowed.",
                    )
                    .with_default("tuning"),
                    lowering_ceiling("plugin.memory.max.bytes"),
                    lowering_ceiling("plugin.call.timeout.ms"),
                    key("policy.tasks.max", Type::Int, Medium, "Largest tasks.max a connector may ask for.")
                        .with_default("-1")
                        .with_validator(no_ceiling()),
                    key(
                        "policy.sql.pool.size.max",
                        Type::Int,
                        Medium,
                        "Largest pool.size an SQL grant may ask for: the connections one task holds to its \
                         database. A grant that does not ask gets the smaller of the default and this.",
                    )
                    .with_default("-1")
                    .with_validator(no_ceiling()),
                ],
            )
            .group("Sandbox bounds", InstanceBounds::keys().chain(RequestBounds::keys()))
            .group(
                "REST security",
                [
                    key(
                        "listeners.https.ssl.certificate.location",
                        Type::String,
                        High,
                        "An https:// listener's certificate chain (PEM).",
                    )
                    .with_default(""),
                    key("listeners.https.ssl.key.location", Type::String, High, "Its private key (PEM, unencrypted).")
                        .with_default(""),
                    key(
                        "rest.host.names",
                        Type::List,
                        High,
                        "Host names by which clients reach the REST API (besides IP addresses, localhost and \
                         rest.advertised.url's host): a request whose Host header names another is refused with \
                         421, so that a web page cannot reach the worker by DNS rebinding.",
                    )
                    .with_default(""),
                    key(
                        "rest.auth.basic.users.file",
                        Type::String,
                        High,
                        "A properties file of user=password lines: every request then needs HTTP basic \
                         credentials of one of them (or a bearer token).",
                    )
                    .with_default(""),
                    key(
                        "rest.auth.bearer.tokens.file",
                        Type::String,
                        High,
                        "A file of tokens, one per line: every request then needs Authorization: Bearer with one \
                         of them (or basic credentials).",
                    )
                    .with_default(""),
                ],
            )
            .group("Kafka clients", kafka_client_keys())
            .group("Config providers", providers::keys())
    });
    &KEYS
}

/// The worker's default group protocol, over `consumer.*`: the host reads
/// it; librdkafka is handed `classic` and `consumer` as well.
pub const GROUP_PROTOCOL_KEY: &str = "consumer.group.protocol";

/// The security settings every client of the worker's cluster takes, and
/// Connect's per-client prefixes.
fn kafka_client_keys() -> Vec<KeyDef> {
    let mut keys: Vec<KeyDef> = SECURITY_SETTINGS
        .iter()
        .map(|(name, kind, doc)| {
            KeyDef::new(name, *kind, Importance::Medium, &format!("{doc} For every client of the worker's cluster."))
        })
        .collect();
    keys.push(KeyDef::new(
        "sasl.jaas.config",
        Type::Password,
        Importance::Low,
        "A Java client's PlainLoginModule or ScramLoginModule line, read for its username and password.",
    ));
    keys.push(
        KeyDef::new(
            GROUP_PROTOCOL_KEY,
            Type::String,
            Importance::High,
            "How connectors consume unless their consumer.override.group.protocol says otherwise (KIP-1302): \
             classic or consumer (KIP-848), a consumer group with offset commits, the default; share, a KIP-932 \
             share group (Kafka 4.0+; not on the embedded broker). Connectors stored before share groups became \
             opt-in keep the protocol they ran with (README: Share groups).",
        )
        .with_default("classic")
        .with_validator(Validator::one_of(&["classic", "consumer", "share"])),
    );
    for (role, doc) in [
        ("consumer", "the tasks' consumers (share and classic)"),
        ("producer", "the dead-letter queue's producer"),
        ("admin", "the clients that read and change offsets and groups"),
    ] {
        keys.push(KeyDef::new(
            &format!("{role}.*"),
            Type::String,
            Importance::Low,
            &format!(
                "A librdkafka setting for {doc}, prefix removed, over the keys above; checked by librdkafka at start. \
                 A connector's {role}.override.* goes over it."
            ),
        ));
    }
    keys
}

#[cfg(test)]
mod tests;
