//! Ceilings over what a capability grant may reach: the object-store URLs
//! and endpoints, the database URLs and the Kafka clusters that
//! `plugin.grant.<capability>.<name>.*` may name (`policy.object-store.*`,
//! `policy.sql.urls`, `policy.kafka.bootstrap.servers`). A URL is compared
//! part by part (scheme, host, port, leading path segments), never as a
//! string prefix, so that `postgres://db:5432` does not admit
//! `postgres://db:54321`, nor `postgres://db` `postgres://db.evil.example`.

use super::Asked;
use spillway_config::{Problem, Values};

/// What a grant names, as the policy checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    ObjectStoreUrl(String),
    /// `None`: no endpoint, so AWS itself.
    ObjectStoreEndpoint(Option<String>),
    SqlUrl(String),
    /// One server of a kafka grant's `bootstrap.servers`.
    KafkaServer(String),
    /// A converter's Schema Registry, which the host itself reaches.
    SchemaRegistryUrl(String),
}

impl Target {
    /// The hosts it connects to: a URL's, and those its query names.
    fn hosts(&self) -> Vec<String> {
        let of_url = |text: &str| -> Vec<String> {
            let Ok(url) = url::Url::parse(text.trim()) else { return Vec::new() };
            let queried = url.query_pairs().filter(|(k, _)| matches!(k.as_ref(), "host" | "hostaddr"));
            let queried = queried.flat_map(|(_, v)| v.split(',').map(String::from).collect::<Vec<_>>());
            url.host_str().map(String::from).into_iter().chain(queried).collect()
        };
        match self {
            Target::ObjectStoreEndpoint(Some(endpoint)) => of_url(endpoint),
            Target::SqlUrl(url) | Target::SchemaRegistryUrl(url) => of_url(url),
            Target::KafkaServer(server) => {
                server.rsplit_once(':').map(|(host, _)| host).into_iter().map(String::from).collect()
            }
            Target::ObjectStoreUrl(_) | Target::ObjectStoreEndpoint(None) => Vec::new(),
        }
    }
}

/// The query parameters of a database URL that choose where, or as whom,
/// it connects (PostgreSQL's and MySQL's): a target may give one only with
/// the value its pattern gives.
const WHERE_PARAMETERS: [&str; 10] =
    ["host", "hostaddr", "port", "dbname", "user", "socket", "service", "passfile", "options", "database"];

/// The four lists; an empty one leaves its kind of target open.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TargetPolicy {
    pub object_store_urls: Vec<UrlPattern>,
    /// Normalized endpoints; `aws` admits a grant without one.
    pub object_store_endpoints: Vec<String>,
    pub sql_urls: Vec<UrlPattern>,
    pub kafka_servers: Vec<ServerPattern>,
    pub schema_registry_urls: Vec<UrlPattern>,
}

impl TargetPolicy {
    pub fn from_worker(values: &Values) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut policy = TargetPolicy::default();
        let mut each = |key: &str, parse: &mut dyn FnMut(&str) -> Result<(), String>| {
            for entry in values.list(key) {
                if let Err(e) = parse(entry) {
                    problems.push(Problem::new(key, e));
                }
            }
        };
        each("policy.object-store.urls", &mut |e| {
            policy.object_store_urls.push(UrlPattern::parse(e)?);
            Ok(())
        });
        each("policy.object-store.endpoints", &mut |e| {
            let endpoint = match e {
                "aws" => "aws".to_string(),
                endpoint => normalized_endpoint(endpoint)
                    .ok_or_else(|| format!("'{endpoint}' is not http[s]://host[:port] or aws"))?,
            };
            policy.object_store_endpoints.push(endpoint);
            Ok(())
        });
        each("policy.sql.urls", &mut |e| {
            policy.sql_urls.push(UrlPattern::parse(e)?);
            Ok(())
        });
        each("policy.schema.registry.urls", &mut |e| {
            policy.schema_registry_urls.push(UrlPattern::parse(e)?);
            Ok(())
        });
        each("policy.kafka.bootstrap.servers", &mut |e| {
            policy.kafka_servers.push(ServerPattern::parse(e)?);
            Ok(())
        });
        if problems.is_empty() { Ok(policy) } else { Err(problems) }
    }

    /// A problem on its key for every target outside its list.
    pub fn check(&self, targets: &Asked<Target>) -> Vec<Problem> {
        let mut problems = Vec::new();
        for (key, target) in targets {
            let (admitted, policy_key, allowed): (bool, &str, Vec<String>) = match target {
                Target::ObjectStoreUrl(url) => (
                    self.object_store_urls.is_empty() || self.object_store_urls.iter().any(|p| p.admits(url)),
                    "policy.object-store.urls",
                    self.object_store_urls.iter().map(|p| p.text.clone()).collect(),
                ),
                Target::ObjectStoreEndpoint(endpoint) => {
                    let named = match endpoint {
                        None => Some("aws".to_string()),
                        Some(endpoint) => normalized_endpoint(endpoint),
                    };
                    (
                        self.object_store_endpoints.is_empty()
                            || named.is_some_and(|e| self.object_store_endpoints.contains(&e)),
                        "policy.object-store.endpoints",
                        self.object_store_endpoints.clone(),
                    )
                }
                Target::SqlUrl(url) => (
                    self.sql_urls.is_empty() || self.sql_urls.iter().any(|p| p.admits(url)),
                    "policy.sql.urls",
                    self.sql_urls.iter().map(|p| p.text.clone()).collect(),
                ),
                Target::KafkaServer(server) => (
                    self.kafka_servers.is_empty() || self.kafka_servers.iter().any(|p| p.admits(server)),
                    "policy.kafka.bootstrap.servers",
                    self.kafka_servers.iter().map(|p| p.text.clone()).collect(),
                ),
                Target::SchemaRegistryUrl(url) => (
                    self.schema_registry_urls.is_empty() || self.schema_registry_urls.iter().any(|p| p.admits(url)),
                    "policy.schema.registry.urls",
                    self.schema_registry_urls.iter().map(|p| p.text.clone()).collect(),
                ),
            };
            if let Some(host) = target.hosts().into_iter().find(|h| super::metadata::is_metadata_host(h))
                && allowed.is_empty()
            {
                problems.push(Problem::new(*key, super::metadata::refusal(&host, policy_key)));
                continue;
            }
            if !admitted {
                let what = match target {
                    Target::ObjectStoreUrl(t)
                    | Target::SqlUrl(t)
                    | Target::KafkaServer(t)
                    | Target::SchemaRegistryUrl(t) => t.clone(),
                    Target::ObjectStoreEndpoint(Some(e)) => e.clone(),
                    Target::ObjectStoreEndpoint(None) => "AWS (no endpoint)".to_string(),
                };
                let message =
                    format!("{what} is outside what the worker's {policy_key} allows ({})", allowed.join(", "));
                problems.push(Problem::new(*key, message));
            }
        }
        problems
    }
}

/// A URL whose scheme, host, port (where it gives one) and leading path
/// segments a target must share.
#[derive(Clone, Debug, PartialEq)]
pub struct UrlPattern {
    text: String,
    url: url::Url,
}

impl UrlPattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        let url = url::Url::parse(text.trim()).map_err(|e| format!("'{text}' is not a URL: {e}"))?;
        Ok(UrlPattern { text: text.trim().to_string(), url })
    }

    /// Whether `target` lies under this URL. One that does not parse is
    /// left to the grant's own check, which refuses it.
    fn admits(&self, target: &str) -> bool {
        let Ok(target) = url::Url::parse(target.trim()) else { return true };
        let segments =
            |u: &url::Url| -> Vec<String> { u.path().split('/').filter(|s| !s.is_empty()).map(String::from).collect() };
        let (want, got) = (segments(&self.url), segments(&target));
        let where_to = |u: &url::Url| -> Vec<(String, String)> {
            let mut found: Vec<(String, String)> = u
                .query_pairs()
                .filter(|(k, _)| WHERE_PARAMETERS.contains(&k.to_ascii_lowercase().as_str()))
                .map(|(k, v)| (k.to_ascii_lowercase(), v.into_owned()))
                .collect();
            found.sort();
            found
        };
        let user = |u: &url::Url| Some(u.username().to_string()).filter(|u| !u.is_empty());
        scheme(&self.url) == scheme(&target)
            && self.url.host_str().map(str::to_ascii_lowercase) == target.host_str().map(str::to_ascii_lowercase)
            && self.url.port().is_none_or(|port| target.port() == Some(port))
            && got.starts_with(&want)
            && user(&self.url).is_none_or(|u| user(&target) == Some(u))
            && where_to(&target).iter().all(|p| where_to(&self.url).contains(p))
    }
}

/// The scheme, aliases folded as the grants read them.
fn scheme(url: &url::Url) -> &str {
    match url.scheme() {
        "postgresql" => "postgres",
        "mariadb" => "mysql",
        "s3a" => "s3",
        other => other,
    }
}

/// `scheme://host[:port]`, lower-cased, without a path or trailing slash.
fn normalized_endpoint(endpoint: &str) -> Option<String> {
    let url = url::Url::parse(endpoint.trim()).ok()?;
    if !matches!(url.scheme(), "http" | "https") || !url.path().trim_matches('/').is_empty() {
        return None;
    }
    let host = url.host_str()?.to_ascii_lowercase();
    Some(match url.port() {
        Some(port) => format!("{}://{host}:{port}", url.scheme()),
        None => format!("{}://{host}", url.scheme()),
    })
}

/// `host:port` or `host:*`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerPattern {
    text: String,
    host: String,
    port: Option<u16>,
}

impl ServerPattern {
    pub fn parse(text: &str) -> Result<Self, String> {
        let bad = || format!("'{text}' is not host:port or host:*");
        let (host, port) = text.trim().rsplit_once(':').ok_or_else(bad)?;
        let port = match port {
            "*" => None,
            port => Some(port.parse().map_err(|_| bad())?),
        };
        if host.is_empty() {
            return Err(bad());
        }
        Ok(ServerPattern { text: text.trim().to_string(), host: host.to_ascii_lowercase(), port })
    }

    fn admits(&self, server: &str) -> bool {
        let Some((host, port)) = server.trim().rsplit_once(':') else { return false };
        host.eq_ignore_ascii_case(&self.host) && self.port.is_none_or(|p| port.parse() == Ok(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_compared_part_by_part_not_as_strings() {
        let pattern = UrlPattern::parse("postgres://db.internal:5432/orders").unwrap();
        for admitted in ["postgres://db.internal:5432/orders", "postgresql://DB.internal:5432/orders/x"] {
            assert!(pattern.admits(admitted), "{admitted}");
        }
        for refused in [
            "postgres://db.internal:54321/orders",
            "postgres://db.internal.evil.example:5432/orders",
            "postgres://db.internal:5432/orders2",
            "postgres://db.internal:5432/",
            "mysql://db.internal:5432/orders",
        ] {
            assert!(!pattern.admits(refused), "{refused}");
        }
        let any_port = UrlPattern::parse("s3://archive/spillway").unwrap();
        assert!(any_port.admits("s3a://archive/spillway/day=1"));
        assert!(!any_port.admits("s3://archive2/spillway") && !any_port.admits("s3://archive/spill"));
        // The query may not choose another server, socket, database or user.
        for refused in [
            "postgres://db.internal:5432/orders?host=/var/run/postgresql&user=postgres",
            "postgres://db.internal:5432/orders?hostaddr=10.9.9.9",
            "postgres://db.internal:5432/orders?dbname=postgres",
        ] {
            assert!(!pattern.admits(refused), "{refused}");
        }
        assert!(pattern.admits("postgres://db.internal:5432/orders?sslmode=require"));
        let as_user = UrlPattern::parse("postgres://sink@db:5432/orders?user=sink").unwrap();
        assert!(as_user.admits("postgres://sink@db:5432/orders?user=sink"));
        assert!(!as_user.admits("postgres://postgres@db:5432/orders"));
        let sqlite = UrlPattern::parse("sqlite:///srv/db").unwrap();
        assert!(sqlite.admits("sqlite:///srv/db/sink.db") && !sqlite.admits("sqlite:///srv/dbx/sink.db"));
    }

    #[test]
    fn each_target_is_checked_on_the_key_that_names_it() {
        let policy = TargetPolicy {
            object_store_urls: vec![UrlPattern::parse("s3://archive/").unwrap()],
            object_store_endpoints: vec![normalized_endpoint("http://127.0.0.1:9000/").unwrap()],
            sql_urls: vec![UrlPattern::parse("postgres://db:5432/").unwrap()],
            kafka_servers: vec![
                ServerPattern::parse("target-1:9092").unwrap(),
                ServerPattern::parse("target-2:*").unwrap(),
            ],
            schema_registry_urls: vec![UrlPattern::parse("https://registry:8081/").unwrap()],
        };
        let url = |u: &str| Target::ObjectStoreUrl(u.into());
        let server = |s: &str| Target::KafkaServer(s.into());
        let targets = vec![
            ("plugin.grant.kafka.e.bootstrap.servers", server("target-1:9092")),
            ("plugin.grant.kafka.e.bootstrap.servers", server("target-2:9093")),
            ("plugin.grant.kafka.f.bootstrap.servers", server("target-1:9093")),
            ("plugin.grant.object-store.a.url", url("s3://archive/x")),
            ("plugin.grant.object-store.a.endpoint", Target::ObjectStoreEndpoint(Some("HTTP://127.0.0.1:9000".into()))),
            ("plugin.grant.object-store.b.url", url("s3://other/x")),
            ("plugin.grant.object-store.b.url", Target::ObjectStoreEndpoint(None)),
            ("plugin.grant.sql.c.url", Target::SqlUrl("postgres://db:5432/sink".into())),
            ("plugin.grant.sql.d.url", Target::SqlUrl("mysql://db:3306/sink".into())),
            ("value.converter.schema.registry.url", Target::SchemaRegistryUrl("https://registry:8081/ccompat".into())),
            ("key.converter.schema.registry.url", Target::SchemaRegistryUrl("https://registry:80/".into())),
        ];
        let problems = policy.check(&targets);
        let got: Vec<(&str, &str)> =
            problems.iter().map(|p| (p.key.as_str(), p.message.split(" is outside").next().unwrap())).collect();
        assert_eq!(
            got,
            [
                ("plugin.grant.kafka.f.bootstrap.servers", "target-1:9093"),
                ("plugin.grant.object-store.b.url", "s3://other/x"),
                ("plugin.grant.object-store.b.url", "AWS (no endpoint)"),
                ("plugin.grant.sql.d.url", "mysql://db:3306/sink"),
                ("key.converter.schema.registry.url", "https://registry:80/"),
            ]
        );
        // The host itself reaches a registry: never the cloud's metadata
        // service, unless the operator lists it.
        let metadata =
            vec![("value.converter.schema.registry.url", Target::SchemaRegistryUrl("http://169.254.169.254/".into()))];
        let refused = TargetPolicy::default().check(&metadata);
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(problems[0].message.contains("policy.kafka.bootstrap.servers allows (target-1:9092, target-2:*)"));
        assert_eq!(TargetPolicy::default().check(&targets), [], "empty lists leave targets open");
    }
}
