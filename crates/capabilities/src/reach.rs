//! What a connector config's grants reach, each with the key that asks:
//! directories, addresses and the targets of capability grants (buckets,
//! endpoints, databases, Kafka servers), and the servers its Kafka clients
//! are pointed at. The worker's policy checks all of it by one rule
//! ([`spillway_policy::GrantPolicy::check`]). Each capability declares its
//! grants' part in its registration ([`crate::GrantKind::reach`]); WASI's
//! grants and the clients' overrides are read here.

use super::GRANT_PREFIX;
use super::registry::grant_kind;
use spillway_policy::{Asked, Target};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// What a config reaches. What does not parse is left out: the grant
/// parser refuses it.
#[derive(Debug, Default)]
pub struct Reach<'a> {
    pub dirs: Asked<'a, PathBuf>,
    pub connect: Asked<'a, SocketAddr>,
    pub targets: Asked<'a, Target>,
}

/// One grant's settings, by setting name, and the config's key for each.
pub struct GrantSettings<'a> {
    settings: BTreeMap<&'a str, (&'a str, &'a str)>,
}

impl<'a> GrantSettings<'a> {
    /// The key that sets `setting`, and its trimmed value.
    pub fn get(&self, setting: &str) -> Option<(&'a str, &'a str)> {
        self.settings.get(setting).map(|(key, value)| (*key, value.trim()))
    }
}

pub fn reach_of(raw: &BTreeMap<String, String>) -> Reach<'_> {
    let mut reach = Reach::default();
    let mut grants: BTreeMap<(&str, &str), GrantSettings> = BTreeMap::new();
    for (key, value) in raw {
        let list = || value.split(',').map(str::trim).filter(|s| !s.is_empty());
        match key.strip_prefix(GRANT_PREFIX) {
            // The old spellings, lists.
            Some("fs.dirs") => reach.dirs.extend(list().map(|dir| (key.as_str(), PathBuf::from(dir)))),
            Some("net.connect") => reach.connect.extend(addresses(key, list())),
            Some(grant) => {
                let Some((capability, rest)) = grant.split_once('.') else { continue };
                let Some((name, setting)) = rest.split_once('.') else { continue };
                let entry =
                    grants.entry((capability, name)).or_insert_with(|| GrantSettings { settings: BTreeMap::new() });
                entry.settings.insert(setting, (key.as_str(), value.as_str()));
            }
            None if key.ends_with(".converter.schema.registry.url") => {
                reach.targets.extend(list().map(|url| (key.as_str(), Target::SchemaRegistryUrl(url.to_string()))))
            }
            None => client_servers(key, value, &mut reach),
        }
    }
    for ((capability, _), settings) in &grants {
        match *capability {
            "fs" => fs(settings, &mut reach),
            "net" => net(settings, &mut reach),
            other => {
                if let Some(kind) = grant_kind(other) {
                    (kind.reach)(settings, &mut reach)
                }
            }
        }
    }
    reach
}

fn addresses<'a>(key: &'a str, list: impl Iterator<Item = &'a str>) -> Asked<'a, SocketAddr> {
    list.filter_map(|addr| addr.parse().ok()).map(|addr| (key, addr)).collect()
}

/// `plugin.grant.fs.<name>.path`: one directory, commas and all, as the
/// grant opens it.
fn fs<'a>(grant: &GrantSettings<'a>, reach: &mut Reach<'a>) {
    if let Some((key, path)) = grant.get("path") {
        reach.dirs.push((key, PathBuf::from(path)));
    }
}

/// `plugin.grant.net.<name>.connect`: a list of `ip:port`.
fn net<'a>(grant: &GrantSettings<'a>, reach: &mut Reach<'a>) {
    if let Some((key, list)) = grant.get("connect") {
        reach.connect.extend(addresses(key, list.split(',').map(str::trim).filter(|s| !s.is_empty())));
    }
}

/// `consumer|producer|admin.override.bootstrap.servers` (and librdkafka's
/// other name for it): Kafka servers, as a kafka grant's are.
fn client_servers<'a>(key: &'a str, value: &'a str, reach: &mut Reach<'a>) {
    let server_key = ["consumer", "producer", "admin"].iter().any(|role| {
        key.strip_prefix(role)
            .and_then(|k| k.strip_prefix(".override."))
            .is_some_and(|setting| matches!(setting, "bootstrap.servers" | "metadata.broker.list"))
    });
    if server_key {
        reach.targets.extend(servers_of(key, value));
    }
}

pub(crate) fn servers_of<'a>(key: &'a str, servers: &'a str) -> Asked<'a, Target> {
    let servers = servers.split(',').map(str::trim).filter(|s| !s.is_empty());
    servers.map(|server| (key, Target::KafkaServer(server.to_string()))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_capability_declares_what_it_reaches() {
        let config = raw(&[
            ("plugin.grant.fs.out.path", "/data/a,b"),
            ("plugin.grant.fs.dirs", "/old/a, /old/b"),
            ("plugin.grant.net.db.connect", "10.0.0.1:5432, 10.0.0.2:5432"),
            ("plugin.grant.object-store.local.url", "file:///srv/out"),
            ("plugin.grant.object-store.s3.url", "s3://bucket/p"),
            ("plugin.grant.object-store.minio.url", "s3://bucket/q"),
            ("plugin.grant.object-store.minio.endpoint", "http://127.0.0.1:9000"),
            ("plugin.grant.sql.lite.url", "sqlite:///srv/db/sink.db"),
            ("plugin.grant.kafka.target.bootstrap.servers", "t1:9092,t2:9092"),
            ("consumer.override.bootstrap.servers", "elsewhere:9092"),
        ]);
        let reach = reach_of(&config);
        let dirs: Vec<(&str, &str)> = reach.dirs.iter().map(|(k, d)| (*k, d.to_str().unwrap())).collect();
        assert_eq!(
            dirs,
            [
                ("plugin.grant.fs.dirs", "/old/a"),
                ("plugin.grant.fs.dirs", "/old/b"),
                ("plugin.grant.fs.out.path", "/data/a,b"),
                ("plugin.grant.object-store.local.url", "/srv/out"),
                ("plugin.grant.sql.lite.url", "/srv/db"),
            ]
        );
        assert_eq!(reach.connect.len(), 2);
        let targets: Vec<String> = reach.targets.iter().map(|(k, t)| format!("{k}={t:?}")).collect();
        assert_eq!(
            targets,
            [
                "consumer.override.bootstrap.servers=KafkaServer(\"elsewhere:9092\")",
                "plugin.grant.kafka.target.bootstrap.servers=KafkaServer(\"t1:9092\")",
                "plugin.grant.kafka.target.bootstrap.servers=KafkaServer(\"t2:9092\")",
                "plugin.grant.object-store.minio.url=ObjectStoreUrl(\"s3://bucket/q\")",
                "plugin.grant.object-store.minio.endpoint=ObjectStoreEndpoint(Some(\"http://127.0.0.1:9000\"))",
                "plugin.grant.object-store.s3.url=ObjectStoreUrl(\"s3://bucket/p\")",
                "plugin.grant.object-store.s3.url=ObjectStoreEndpoint(None)",
                "plugin.grant.sql.lite.url=SqlUrl(\"sqlite:///srv/db/sink.db\")",
            ]
        );
    }
}
