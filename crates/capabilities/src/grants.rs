//! The grammar of grants: what a connector config gives its plugin.
//!
//! Every grant key reads `plugin.grant.<capability>.<name>.<key>`, where
//! `<name>` (`[a-z0-9-]+`, no dots) is how the plugin refers to the grant:
//! `Bucket::open("archive")` opens `plugin.grant.object-store.archive.*`.
//! The WASI grants follow the same grammar; their older spellings
//! (`plugin.grant.fs.dirs`, `plugin.grant.net.connect`,
//! `plugin.grant.env.NAME`, `plugin.grant.clock`, `plugin.grant.random`) are
//! still accepted, and reported so that validation can suggest the new one.

use super::kafka::{KafkaGrant, TaskScope};
use super::object_store::ObjectStoreGrant;
use super::registry::{grant_kind, grant_kinds};
use super::sql::SqlGrant;
use anyhow::{Result, anyhow, bail};
use spillway_config::{ConfigDef, Values};
use spillway_policy::InstanceBounds;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

pub const GRANT_PREFIX: &str = "plugin.grant.";
/// Not a grant: reproducible clocks and randomness, for tests.
pub const DETERMINISTIC_KEY: &str = "plugin.deterministic";

/// Everything one connector's plugin instances may reach.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grants {
    pub wasi: WasiGrants,
    /// `plugin.grant.object-store.<name>.*`, by name.
    pub object_stores: BTreeMap<String, ObjectStoreGrant>,
    /// `plugin.grant.sql.<name>.*`, by name.
    pub sql: BTreeMap<String, SqlGrant>,
    /// `plugin.grant.kafka.<name>.*`, by name.
    pub kafka: BTreeMap<String, KafkaGrant>,
    /// The task the grants are for, set when a task instantiates its
    /// plugin: whose producer (transactional id) and which source topics.
    pub task: Option<TaskScope>,
    /// Old spellings this config used, with their replacement.
    pub deprecated: Vec<(String, String)>,
    /// How much of the host each instance may take: the worker's, not the
    /// config's.
    pub bounds: InstanceBounds,
}

/// What the WASI context holds: directories, sockets, environment, and
/// whether clocks and randomness are real.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WasiGrants {
    pub dirs: Vec<DirGrant>,
    pub connect: Vec<SocketAddr>,
    pub env: BTreeMap<String, String>,
    /// Clocks read 0 and random bytes are a fixed stream (`plugin.deterministic`).
    pub deterministic: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DirGrant {
    pub path: PathBuf,
    pub read_only: bool,
}

impl Grants {
    /// Reads the grants (and `plugin.deterministic`) of a connector config.
    /// The first problem is the error, naming its key.
    pub fn from_config<'a>(config: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut grants = Grants::default();
        let mut named: BTreeMap<(String, String), BTreeMap<String, String>> = BTreeMap::new();
        for (key, value) in config {
            if key == DETERMINISTIC_KEY {
                grants.wasi.deterministic = parse_bool(key, value)?;
                continue;
            }
            let Some(grant) = key.strip_prefix(GRANT_PREFIX) else { continue };
            let list = || value.split(',').map(str::trim).filter(|s| !s.is_empty());
            match grant {
                "fs.dirs" => {
                    grants.deprecate(key, "plugin.grant.fs.<name>.path");
                    for dir in list() {
                        grants.wasi.dirs.push(DirGrant { path: absolute(key, dir)?, read_only: false });
                    }
                }
                "net.connect" => {
                    grants.deprecate(key, "plugin.grant.net.<name>.connect");
                    for addr in list() {
                        grants.wasi.connect.push(socket_addr(key, addr)?);
                    }
                }
                // Real clocks and entropy are the default now.
                "clock" | "random" => {
                    parse_bool(key, value)?;
                    grants.deprecate(key, "nothing: real clocks and randomness are the default");
                }
                _ => {
                    let (capability, rest) = grant.split_once('.').ok_or_else(|| unknown(key))?;
                    match rest.split_once('.') {
                        Some((name, setting)) => {
                            check_name(key, name)?;
                            let settings = named.entry((capability.to_string(), name.to_string())).or_default();
                            settings.insert(setting.to_string(), value.to_string());
                        }
                        // `plugin.grant.env.NAME`, the old spelling.
                        None if capability == "env" && !rest.is_empty() => {
                            grants.deprecate(key, "plugin.grant.env.<name>.value");
                            grants.wasi.env.insert(rest.to_string(), value.to_string());
                        }
                        None => return Err(unknown(key)),
                    }
                }
            }
        }
        for ((capability, name), settings) in named {
            let key = |setting: &str| format!("{GRANT_PREFIX}{capability}.{name}.{setting}");
            let take = |setting: &str| settings.get(setting).map(|v| v.trim().to_string());
            match capability.as_str() {
                "fs" => {
                    let path = take("path").ok_or_else(|| anyhow!("{}: missing for this grant", key("path")))?;
                    let read_only = match take("read-only") {
                        Some(v) => parse_bool(&key("read-only"), &v)?,
                        None => false,
                    };
                    only_settings(&capability, &name, &settings, &["path", "read-only"])?;
                    grants.wasi.dirs.push(DirGrant { path: absolute(&key("path"), &path)?, read_only });
                }
                "net" => {
                    let list = take("connect").ok_or_else(|| anyhow!("{}: missing for this grant", key("connect")))?;
                    only_settings(&capability, &name, &settings, &["connect"])?;
                    for addr in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        grants.wasi.connect.push(socket_addr(&key("connect"), addr)?);
                    }
                }
                "env" => {
                    let value =
                        settings.get("value").ok_or_else(|| anyhow!("{}: missing for this grant", key("value")))?;
                    only_settings(&capability, &name, &settings, &["value"])?;
                    grants.wasi.env.insert(name.to_uppercase().replace('-', "_"), value.clone());
                }
                other => match grant_kind(other) {
                    Some(kind) => (kind.parse)(&mut grants, &name, &settings)?,
                    None => {
                        let kinds: Vec<&str> = grant_kinds().map(|k| k.name).collect();
                        bail!(
                            "{}: unknown capability '{capability}' (this host grants fs, net, env, {})",
                            key("…"),
                            kinds.join(", ")
                        )
                    }
                },
            }
        }
        for kind in grant_kinds() {
            (kind.check)(&grants)?;
        }
        Ok(grants)
    }

    fn deprecate(&mut self, key: &str, instead: &str) {
        self.deprecated.push((key.to_string(), instead.to_string()));
    }
}

/// A named grant's settings read with its capability's table: a setting the
/// table lacks (a typo must not silently grant less than was meant) or a
/// bad value is an error naming the whole key.
pub(crate) fn checked_settings<'d>(
    table: &'d ConfigDef,
    capability: &str,
    name: &str,
    settings: &BTreeMap<String, String>,
) -> Result<Values<'d>> {
    let key = |setting: &str| format!("{GRANT_PREFIX}{capability}.{name}.{setting}");
    if let Some(unknown) = settings.keys().find(|k| table.find(k).is_none()) {
        let known: Vec<&str> = table.keys().iter().map(|k| k.name()).collect();
        bail!("{}: unknown setting (the {capability} grant takes {})", key(unknown), known.join(", "));
    }
    let (values, problems) = table.parse(settings);
    if let Some(problem) = problems.first() {
        bail!("{}: {}", key(&problem.key), problem.message);
    }
    Ok(values)
}

/// Refuses a setting a capability does not take: a typo must not silently
/// grant less than the user meant.
fn only_settings(capability: &str, name: &str, settings: &BTreeMap<String, String>, known: &[&str]) -> Result<()> {
    match settings.keys().find(|k| !known.contains(&k.as_str())) {
        Some(other) => bail!(
            "{GRANT_PREFIX}{capability}.{name}.{other}: unknown setting (a {capability} grant takes {})",
            known.join(", ")
        ),
        None => Ok(()),
    }
}

fn check_name(key: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty() && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok { Ok(()) } else { bail!("{key}: the grant name '{name}' must be lower-case letters, digits and '-'") }
}

fn unknown(key: &str) -> anyhow::Error {
    anyhow!("{key}: not a grant (expected plugin.grant.<capability>.<name>.<setting>)")
}

fn absolute(key: &str, dir: &str) -> Result<PathBuf> {
    let path = PathBuf::from(dir);
    if !path.is_absolute() {
        bail!("{key}: '{dir}' must be an absolute path");
    }
    Ok(path)
}

fn socket_addr(key: &str, addr: &str) -> Result<SocketAddr> {
    addr.parse().map_err(|_| anyhow!("{key}: '{addr}' is not an ip:port address"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => bail!("{key}: expected true or false, got '{other}'"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(pairs: &[(&str, &str)]) -> Result<Grants> {
        Grants::from_config(pairs.iter().copied())
    }

    #[test]
    fn new_and_old_spellings_grant_the_same() {
        let new = grants(&[
            ("plugin.grant.fs.out.path", "/data/out"),
            ("plugin.grant.net.db.connect", "127.0.0.1:5432"),
            ("plugin.grant.env.api-url.value", "http://x"),
        ])
        .unwrap();
        let old = grants(&[
            ("plugin.grant.fs.dirs", "/data/out"),
            ("plugin.grant.net.connect", "127.0.0.1:5432"),
            ("plugin.grant.env.API_URL", "http://x"),
        ])
        .unwrap();
        assert_eq!(new.wasi, old.wasi);
        assert!(new.deprecated.is_empty());
        assert_eq!(old.deprecated.len(), 3, "{:?}", old.deprecated);
    }

    #[test]
    fn bad_grants_name_their_key() {
        for (pairs, names) in [
            (vec![("plugin.grant.fs.Out.path", "/x")], "plugin.grant.fs.Out.path"),
            (vec![("plugin.grant.fs.out.path", "relative")], "plugin.grant.fs.out.path"),
            (vec![("plugin.grant.fs.out.mode", "rw")], "plugin.grant.fs.out.path"),
            (vec![("plugin.grant.fs.out.path", "/x"), ("plugin.grant.fs.out.mode", "rw")], "plugin.grant.fs.out.mode"),
            (vec![("plugin.grant.net.connect", "localhost:1")], "plugin.grant.net.connect"),
            (vec![("plugin.grant.teleport.a.b", "x")], "teleport"),
            (vec![("plugin.grant.clock", "yes")], "plugin.grant.clock"),
        ] {
            let err = grants(&pairs).unwrap_err().to_string();
            assert!(err.contains(names), "{pairs:?}: {err}");
        }
    }

    #[test]
    fn determinism_is_asked_for_not_granted() {
        assert!(!grants(&[]).unwrap().wasi.deterministic);
        assert!(grants(&[("plugin.deterministic", "true")]).unwrap().wasi.deterministic);
        // The old grants are accepted and change nothing.
        let old = grants(&[("plugin.grant.clock", "true"), ("plugin.grant.random", "false")]).unwrap();
        assert_eq!(old.wasi, WasiGrants::default());
    }
}
