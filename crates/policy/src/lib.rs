//! The operator's ceilings over what a connector config may grant, set in
//! the worker config (`policy.*`): where directory grants may point, which
//! addresses a plugin may connect to, and the largest memory, call time and
//! task count. A config that asks for more is refused at validation, on the
//! key that asks, naming the ceiling. Whatever the policy says, the worker's
//! own files (its state file, compiled-plugin cache, plugin directory,
//! config and secret files) and the kernel's (`/proc`, `/sys`, `/dev`) are
//! never granted: a plugin that could write them could change what the host
//! loads, or read its secrets. Link-local addresses (the cloud's instance
//! metadata among them) are reached only where the policy names them.

mod bounds;
mod client_overrides;
mod metadata;
mod targets;
mod topics;

pub use bounds::{InstanceBounds, RequestBounds};
pub use client_overrides::{ClientOverrides, SettingKind};
pub use targets::{Target, TargetPolicy};
pub use topics::internal_topic;

use ipnet::IpNet;
use spillway_config::{Problem, Values};
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The ceilings; `None` (or an empty list) leaves a dimension open.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GrantPolicy {
    /// `policy.fs.dirs`: directory grants must lie under one of these.
    pub fs_dirs: Vec<PathBuf>,
    /// `policy.net.connect`: each granted address must match one.
    pub net_connect: Vec<AddrPattern>,
    /// `policy.plugin.memory.max.bytes`.
    pub memory_max_bytes: Option<u64>,
    /// `policy.plugin.call.timeout.ms`.
    pub call_timeout_max: Option<Duration>,
    /// `policy.tasks.max`.
    pub tasks_max: Option<u32>,
    /// `policy.sql.pool.size.max`.
    pub sql_pool_size_max: Option<u32>,
    /// `policy.plugin.log.*`, `policy.plugin.tables.max`, ...: set for
    /// every instance, not asked for by a connector.
    pub bounds: InstanceBounds,
    /// `policy.plugin.validate.timeout.ms`, `policy.plugin.validations.max`,
    /// `policy.connector.config.keys.max`: what one REST request may make
    /// the worker do.
    pub requests: RequestBounds,
    /// `policy.object-store.*`, `policy.sql.urls`, `policy.kafka.bootstrap.servers`.
    pub targets: TargetPolicy,
    /// `policy.client.overrides`.
    pub client_overrides: ClientOverrides,
    /// The worker's own files and directories, never granted.
    protected: Vec<(PathBuf, &'static str)>,
    /// The worker's own topics, never a connector's.
    worker_topics: Vec<String>,
}

/// An address a plugin may be granted: an IP network, and one port or any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrPattern {
    net: IpNet,
    port: Option<u16>,
}

impl AddrPattern {
    /// `IP[/PREFIX]:PORT` or `IP[/PREFIX]:*`; an IPv6 address in brackets
    /// (`[::1]:*`, `[fd00::/8]:443`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not IP[/PREFIX]:PORT or IP[/PREFIX]:* (IPv6 in brackets)");
        let (host, port) = text.trim().rsplit_once(':').ok_or_else(bad)?;
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let net = match host.parse::<IpNet>() {
            Ok(net) => net,
            Err(_) => IpNet::from(host.parse::<std::net::IpAddr>().map_err(|_| bad())?),
        };
        let port = match port {
            "*" => None,
            p => Some(p.parse().map_err(|_| bad())?),
        };
        Ok(AddrPattern { net, port })
    }

    pub fn matches(&self, addr: &SocketAddr) -> bool {
        self.net.contains(&addr.ip()) && self.port.is_none_or(|p| p == addr.port())
    }

    /// Whether this pattern admits the link-local `addr` by naming link-local
    /// addresses: `0.0.0.0/0:*` admits everything but names none of them.
    fn names_link_local(&self, addr: &SocketAddr) -> bool {
        self.matches(addr) && metadata::is_link_local(&self.net.network())
    }
}

impl std::fmt::Display for AddrPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let net = match self.net {
            IpNet::V6(net) => format!("[{net}]"),
            IpNet::V4(net) => net.to_string(),
        };
        match self.port {
            Some(port) => write!(f, "{net}:{port}"),
            None => write!(f, "{net}:*"),
        }
    }
}

/// Things a config asks for, each with the key that asks.
pub type Asked<'a, T> = Vec<(&'a str, T)>;

/// What a connector config asks for, as the policy checks it.
pub struct Requested<'a> {
    pub dirs: Asked<'a, PathBuf>,
    pub connect: Asked<'a, SocketAddr>,
    /// What capability grants name: buckets, endpoints, databases, clusters.
    pub targets: Asked<'a, Target>,
    /// The effective values, and whether the config gave them (a default
    /// above a ceiling is lowered to it, not refused).
    pub memory_bytes: (u64, bool),
    pub call_timeout: (Duration, bool),
    pub tasks_max: (u32, bool),
}

/// What the policy lowered: defaults above a ceiling.
#[derive(Debug, Default, PartialEq)]
pub struct Lowered {
    pub memory_bytes: Option<u64>,
    pub call_timeout: Option<Duration>,
    pub tasks_max: Option<u32>,
}

impl GrantPolicy {
    /// The worker's own `path` (`what` names it in errors) is never granted,
    /// nor any directory that holds it.
    pub fn protect(&mut self, path: &Path, what: &'static str) {
        self.protected.push((normalized(path), what));
    }

    /// Checks `requested`; returns the problems, each on its key, and the
    /// defaults lowered to a ceiling.
    pub fn check(&self, requested: &Requested) -> (Vec<Problem>, Lowered) {
        let mut problems = Vec::new();
        let mut problem = |key: &str, message: String| problems.push(Problem::new(key, message));
        let system = SYSTEM_DIRS.map(|(dir, what)| (PathBuf::from(dir), what));
        for (key, dir) in &requested.dirs {
            let dir = resolved(dir);
            let mut never = self.protected.iter().chain(&system);
            if let Some((path, what)) = never.find(|(p, _)| p.starts_with(&dir) || dir.starts_with(p)) {
                problem(
                    key,
                    format!(
                        "{} cannot be granted: it is or holds the worker's {what} ({}), which no plugin may reach",
                        dir.display(),
                        path.display()
                    ),
                );
            } else if !self.fs_dirs.is_empty() && !self.fs_dirs.iter().any(|allowed| dir.starts_with(allowed)) {
                let allowed: Vec<String> = self.fs_dirs.iter().map(|d| d.display().to_string()).collect();
                problem(
                    key,
                    format!(
                        "{} is outside what the worker's policy.fs.dirs allows ({})",
                        dir.display(),
                        allowed.join(", ")
                    ),
                );
            }
        }
        for (key, addr) in &requested.connect {
            if metadata::is_link_local(&addr.ip()) && !self.net_connect.iter().any(|p| p.names_link_local(addr)) {
                problem(key, metadata::refusal(&addr.to_string(), "policy.net.connect"));
            }
        }
        if !self.net_connect.is_empty() {
            for (key, addr) in &requested.connect {
                if !self.net_connect.iter().any(|p| p.matches(addr)) {
                    let allowed: Vec<String> = self.net_connect.iter().map(|p| p.to_string()).collect();
                    problem(
                        key,
                        format!(
                            "{addr} is outside what the worker's policy.net.connect allows ({})",
                            allowed.join(", ")
                        ),
                    );
                }
            }
        }
        // A given value above its ceiling is refused; a default, lowered.
        let mut capped = |key: &str, value: u64, given: bool, ceiling: Option<u64>| match ceiling {
            Some(max) if value > max && given => {
                problem(key, format!("{value} is above the worker's policy.{key} ({max})"));
                None
            }
            Some(max) if value > max => Some(max),
            _ => None,
        };
        let (memory, given) = requested.memory_bytes;
        let (timeout, timeout_given) = requested.call_timeout;
        let (tasks, tasks_given) = requested.tasks_max;
        let lowered = Lowered {
            memory_bytes: capped("plugin.memory.max.bytes", memory, given, self.memory_max_bytes),
            call_timeout: capped(
                "plugin.call.timeout.ms",
                timeout.as_millis() as u64,
                timeout_given,
                self.call_timeout_max.map(|d| d.as_millis() as u64),
            )
            .map(Duration::from_millis),
            tasks_max: capped("tasks.max", u64::from(tasks), tasks_given, self.tasks_max.map(u64::from))
                .map(|t| t as u32),
        };
        problems.extend(self.targets.check(&requested.targets));
        (problems, lowered)
    }
}

/// The kernel's directories: never granted, whatever the policy says.
const SYSTEM_DIRS: [(&str, &str); 3] =
    [("/proc", "kernel's process view"), ("/sys", "kernel's device view"), ("/dev", "device directory")];

/// The path a grant reaches: symlinks resolved where it exists (a link to
/// the cache is the cache), else made absolute and normalized.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| normalized(path))
}

/// Absolute, `.` and `..` folded, symlinks resolved for the part that exists.
fn normalized(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for part in absolute.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    // The deepest existing ancestor, canonical: `/tmp/link/new` under a
    // symlinked `/tmp/link` is where the link points.
    let mut existing = out.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match existing.file_name() {
            Some(name) => rest.push(name.to_os_string()),
            None => break,
        }
        existing.pop();
    }
    match std::fs::canonicalize(&existing) {
        Ok(mut canonical) => {
            canonical.extend(rest.iter().rev());
            canonical
        }
        Err(_) => out,
    }
}

impl GrantPolicy {
    /// The `policy.*` keys of the worker config (see `worker_keys`).
    pub fn from_worker(values: &Values) -> Result<GrantPolicy, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut policy = GrantPolicy::default();
        for dir in values.list("policy.fs.dirs") {
            match Path::new(dir).is_absolute() {
                true => policy.fs_dirs.push(normalized(Path::new(dir))),
                false => problems.push(Problem::new("policy.fs.dirs", format!("'{dir}' must be an absolute path"))),
            }
        }
        for pattern in values.list("policy.net.connect") {
            match AddrPattern::parse(pattern) {
                Ok(pattern) => policy.net_connect.push(pattern),
                Err(e) => problems.push(Problem::new("policy.net.connect", e)),
            }
        }
        // -1 (the default) sets no ceiling.
        let ceiling = |key: &str| u64::try_from(values.long(key)).ok();
        policy.memory_max_bytes = ceiling("policy.plugin.memory.max.bytes");
        policy.call_timeout_max = ceiling("policy.plugin.call.timeout.ms").map(Duration::from_millis);
        policy.tasks_max = u32::try_from(values.int("policy.tasks.max")).ok();
        policy.sql_pool_size_max = u32::try_from(values.int("policy.sql.pool.size.max")).ok();
        policy.bounds = InstanceBounds::from_worker(values);
        policy.requests = RequestBounds::from_worker(values);
        match ClientOverrides::parse(values.list("policy.client.overrides")) {
            Ok(allowed) => policy.client_overrides = allowed,
            Err(e) => problems.push(Problem::new("policy.client.overrides", e)),
        }
        match TargetPolicy::from_worker(values) {
            Ok(targets) => policy.targets = targets,
            Err(mut more) => problems.append(&mut more),
        }
        if problems.is_empty() { Ok(policy) } else { Err(problems) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requested<'a>(dirs: &[(&'a str, &str)], connect: &[(&'a str, &str)]) -> Requested<'a> {
        Requested {
            dirs: dirs.iter().map(|(k, d)| (*k, PathBuf::from(d))).collect(),
            connect: connect.iter().map(|(k, a)| (*k, a.parse().unwrap())).collect(),
            targets: Vec::new(),
            memory_bytes: (64 << 20, false),
            call_timeout: (Duration::from_secs(30), false),
            tasks_max: (1, false),
        }
    }

    fn keys(problems: &[Problem]) -> Vec<&str> {
        problems.iter().map(|p| p.key.as_str()).collect()
    }

    #[test]
    fn directories_must_lie_under_an_allowed_root() {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("data");
        std::fs::create_dir_all(allowed.join("a")).unwrap();
        let policy = GrantPolicy { fs_dirs: vec![normalized(&allowed)], ..Default::default() };
        let inside = allowed.join("a");
        let sneaky = allowed.join("a/../../elsewhere");
        let (problems, _) = policy.check(&requested(
            &[
                ("plugin.grant.fs.in.path", inside.to_str().unwrap()),
                ("plugin.grant.fs.out.path", sneaky.to_str().unwrap()),
            ],
            &[],
        ));
        assert_eq!(keys(&problems), ["plugin.grant.fs.out.path"], "{problems:?}");
        assert!(problems[0].message.contains("policy.fs.dirs"), "{}", problems[0].message);
        assert!(
            problems[0].message.contains(&allowed.display().to_string()),
            "names the ceiling: {}",
            problems[0].message
        );
    }

    #[test]
    fn the_workers_own_files_are_never_granted_nor_what_holds_them() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("state/cache");
        std::fs::create_dir_all(&cache).unwrap();
        let link = root.path().join("link");
        std::os::unix::fs::symlink(&cache, &link).unwrap();
        let mut policy = GrantPolicy::default();
        policy.protect(&cache, "compiled-plugin cache");
        let sibling = root.path().join("state/out");
        let (problems, _) = policy.check(&requested(
            &[
                ("plugin.grant.fs.inside.path", cache.join("sub").to_str().unwrap()),
                ("plugin.grant.fs.holder.path", root.path().to_str().unwrap()),
                ("plugin.grant.fs.link.path", link.to_str().unwrap()),
                ("plugin.grant.fs.sibling.path", sibling.to_str().unwrap()),
            ],
            &[],
        ));
        assert_eq!(
            keys(&problems),
            ["plugin.grant.fs.inside.path", "plugin.grant.fs.holder.path", "plugin.grant.fs.link.path"],
            "{problems:?}"
        );
        assert!(problems.iter().all(|p| p.message.contains("compiled-plugin cache")), "{problems:?}");
    }

    #[test]
    fn addresses_must_match_a_pattern() {
        let patterns = ["127.0.0.1:*", "10.0.0.0/8:5432", "[::1]:9092"];
        let policy = GrantPolicy {
            net_connect: patterns.iter().map(|p| AddrPattern::parse(p).unwrap()).collect(),
            ..Default::default()
        };
        let (problems, _) = policy.check(&requested(
            &[],
            &[
                ("a", "127.0.0.1:1"),
                ("b", "10.1.2.3:5432"),
                ("c", "10.1.2.3:5433"),
                ("d", "[::1]:9092"),
                ("e", "192.168.0.1:80"),
            ],
        ));
        assert_eq!(keys(&problems), ["c", "e"], "{problems:?}");
        assert!(
            problems[0].message.contains("127.0.0.1/32:*, 10.0.0.0/8:5432, [::1/128]:9092"),
            "{}",
            problems[0].message
        );
        assert!(AddrPattern::parse("localhost:80").is_err(), "names are not patterns: grants take IPs");
        assert!(AddrPattern::parse("10.0.0.1").is_err(), "a port or * is required");
    }

    #[test]
    fn a_given_value_above_a_ceiling_is_refused_and_a_default_above_it_lowered() {
        let policy = GrantPolicy {
            memory_max_bytes: Some(32 << 20),
            call_timeout_max: Some(Duration::from_secs(10)),
            tasks_max: Some(4),
            ..Default::default()
        };
        let mut asked = requested(&[], &[]);
        let (problems, lowered) = policy.check(&asked);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            lowered,
            Lowered { memory_bytes: Some(32 << 20), call_timeout: Some(Duration::from_secs(10)), tasks_max: None }
        );
        asked.memory_bytes = (64 << 20, true);
        asked.call_timeout = (Duration::from_secs(11), true);
        asked.tasks_max = (5, true);
        let (problems, _) = policy.check(&asked);
        assert_eq!(keys(&problems), ["plugin.memory.max.bytes", "plugin.call.timeout.ms", "tasks.max"]);
        assert!(problems[2].message.contains("policy.tasks.max (4)"), "{}", problems[2].message);
        asked.tasks_max = (4, true);
        assert_eq!(keys(&policy.check(&asked).0), ["plugin.memory.max.bytes", "plugin.call.timeout.ms"]);
    }
}
