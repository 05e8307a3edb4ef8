//! One `plugin.grant.object-store.<name>.*` grant: its settings, parsed from
//! one table, and the store it opens, confined to the granted prefix.

use super::NAME;
use crate::Grants;
use crate::grants::checked_settings;
use crate::op::OpPolicy;
use crate::reach::{GrantSettings, Reach};
use anyhow::{Result, anyhow, bail};
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::multipart::MultipartStore;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ClientOptions, ObjectStore, RetryConfig};
use spillway_config::{ConfigDef, Importance, KeyDef, Password, Type};
use spillway_policy::Target;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// The settings one grant takes (`plugin.grant.object-store.<name>.<setting>`):
/// the connector's key table lists them under that prefix, and
/// [`ObjectStoreGrant::from_settings`] parses them, so each default is
/// written once.
pub fn setting_keys() -> Vec<KeyDef> {
    vec![
        KeyDef::new(
            "url",
            Type::String,
            Importance::High,
            "The bucket and the prefix in it that the plugin is confined to: s3://bucket/prefix (any \
             S3-compatible store, with endpoint), or file:///absolute/dir.",
        )
        .required(),
        KeyDef::new(
            "endpoint",
            Type::String,
            Importance::Medium,
            "An S3-compatible store's address (http://host:port or https://...); empty for AWS. Requests go \
             path-style.",
        ),
        KeyDef::new("region", Type::String, Importance::Medium, "The S3 region.").with_default("us-east-1"),
        KeyDef::new(
            "access.key.id",
            Type::String,
            Importance::High,
            "S3 access key id. Empty: the worker's own AWS credentials (AWS_ACCESS_KEY_ID, ... in its \
             environment, or the instance's role).",
        ),
        KeyDef::new(
            "secret.access.key",
            Type::Password,
            Importance::High,
            "S3 secret access key, with access.key.id. Stays in the host: the plugin never sees it.",
        ),
    ]
    .into_iter()
    .chain(OpPolicy::setting_keys(
        "Longest one operation may take, retries included; never past the plugin call's own deadline.",
    ))
    .collect()
}

/// Where a grant's objects live.
#[derive(Clone, Debug, PartialEq)]
pub enum Location {
    /// A directory on the worker's disk.
    Local(url::Url),
    /// A bucket in an S3-compatible store; the credentials never leave here.
    S3 {
        bucket: String,
        prefix: String,
        region: String,
        endpoint: Option<String>,
        access_key_id: Option<String>,
        secret_access_key: Option<Password>,
    },
}

/// One parsed grant.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectStoreGrant {
    pub location: Location,
    pub policy: OpPolicy,
}

/// A granted store, opened: every path the plugin names is under the
/// grant's prefix.
pub(super) struct Opened {
    /// The store seen from the prefix.
    pub store: Arc<dyn ObjectStore>,
    /// Where the store keeps uploads that outlive an instance (S3's upload
    /// ids), with the prefix to put before the plugin's paths; none for a
    /// store without them (local files upload through `store`).
    pub uploads: Option<(Arc<dyn MultipartStore>, Path)>,
}

impl ObjectStoreGrant {
    pub(crate) fn from_settings(name: &str, settings: &BTreeMap<String, String>) -> Result<Self> {
        static SETTINGS: LazyLock<ConfigDef> = LazyLock::new(|| ConfigDef::new().group("object-store", setting_keys()));
        let key = |setting: &str| format!("plugin.grant.{NAME}.{name}.{setting}");
        let values = checked_settings(&SETTINGS, NAME, name, settings)?;
        let raw = values.string("url");
        let url = url::Url::parse(raw).map_err(|e| anyhow!("{}: '{raw}' is not a URL: {e}", key("url")))?;
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        let location = match url.scheme() {
            "file" => Location::Local(url),
            "s3" | "s3a" => {
                let bucket = url.host_str().filter(|b| !b.is_empty());
                let bucket =
                    bucket.ok_or_else(|| anyhow!("{}: '{raw}' names no bucket (s3://bucket/prefix)", key("url")))?;
                let access_key_id = non_empty(values.string("access.key.id"));
                let secret = non_empty(values.password("secret.access.key"));
                if access_key_id.is_some() != secret.is_some() {
                    bail!("{}: access.key.id and secret.access.key go together", key("access.key.id"));
                }
                let endpoint = non_empty(values.string("endpoint"));
                if let Some(endpoint) = &endpoint
                    && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
                {
                    bail!("{}: '{endpoint}' is not an http:// or https:// address", key("endpoint"));
                }
                Location::S3 {
                    bucket: bucket.to_string(),
                    prefix: url.path().trim_matches('/').to_string(),
                    region: values.string("region").to_string(),
                    endpoint,
                    access_key_id,
                    secret_access_key: secret.map(Password::new),
                }
            }
            other => {
                bail!("{}: '{other}' stores are not supported (s3://bucket/prefix and file:///dir are)", key("url"))
            }
        };
        let policy = OpPolicy::from_values(&values);
        Ok(ObjectStoreGrant { location, policy })
    }

    /// Where the grant points, for messages: never its credentials.
    pub(super) fn describe(&self) -> String {
        match &self.location {
            Location::Local(url) => url.to_string(),
            Location::S3 { bucket, prefix, endpoint, .. } => {
                let at = endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default();
                format!("s3://{bucket}/{prefix}{at}")
            }
        }
    }

    /// Opens the store. Nothing is sent yet: [`super::ObjectStoreCtx`] checks
    /// that the bucket answers before the plugin gets it.
    pub(super) fn open(&self) -> Result<Opened> {
        match &self.location {
            Location::Local(url) => {
                let (store, prefix) = object_store::parse_url(url)?;
                if let Ok(dir) = url.to_file_path() {
                    // A local store writes under a directory that must exist.
                    std::fs::create_dir_all(dir)?;
                }
                Ok(Opened { store: Arc::new(PrefixStore::new(store, prefix)), uploads: None })
            }
            Location::S3 { bucket, prefix, region, endpoint, access_key_id, secret_access_key } => {
                let mut builder = match access_key_id {
                    // Explicit keys only: nothing from the worker's environment mixes in.
                    Some(id) => AmazonS3Builder::new()
                        .with_access_key_id(id)
                        .with_secret_access_key(secret_access_key.as_ref().map(Password::value).unwrap_or_default()),
                    None => AmazonS3Builder::from_env(),
                };
                builder = builder
                    .with_bucket_name(bucket)
                    .with_region(region)
                    // The capability retries, within the plugin call's time: the
                    // client's own retries would outlast it.
                    .with_retry(RetryConfig { max_retries: 0, ..RetryConfig::default() })
                    .with_client_options(ClientOptions::new().with_connect_timeout(Duration::from_secs(5)));
                if let Some(endpoint) = endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"))
                        .with_virtual_hosted_style_request(false);
                }
                crate::tls::install_crypto_provider();
                let s3: Arc<AmazonS3> = Arc::new(builder.build()?);
                let root = Path::from(prefix.as_str());
                let store: Arc<dyn ObjectStore> = Arc::new(PrefixStore::new(s3.clone(), root.clone()));
                Ok(Opened { store, uploads: Some((s3, root)) })
            }
        }
    }
}

/// Reads grant `name` into the connector's grants.
pub(super) fn parse(grants: &mut Grants, name: &str, settings: &BTreeMap<String, String>) -> Result<()> {
    grants.object_stores.insert(name.to_string(), ObjectStoreGrant::from_settings(name, settings)?);
    Ok(())
}

/// A `file://` store is a directory grant; an S3 one reaches its bucket at
/// its endpoint (AWS without one).
pub(super) fn reach<'a>(grant: &GrantSettings<'a>, reach: &mut Reach<'a>) {
    let endpoint = grant.get("endpoint").filter(|(_, e)| !e.is_empty());
    if let Some((key, url)) = grant.get("url") {
        match url::Url::parse(url) {
            Ok(parsed) if parsed.scheme() == "file" => {
                if let Ok(dir) = parsed.to_file_path() {
                    reach.dirs.push((key, dir));
                }
            }
            _ => {
                reach.targets.push((key, Target::ObjectStoreUrl(url.to_string())));
                if url.starts_with("s3") && endpoint.is_none() {
                    reach.targets.push((key, Target::ObjectStoreEndpoint(None)));
                }
            }
        }
    }
    if let Some((key, endpoint)) = endpoint {
        reach.targets.push((key, Target::ObjectStoreEndpoint(Some(endpoint.to_string()))));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn grant_settings_are_checked_and_defaulted_from_one_table() {
        let grant = ObjectStoreGrant::from_settings("out", &settings(&[("url", "file:///data/out")])).unwrap();
        assert_eq!(grant.policy, OpPolicy { timeout: Duration::from_millis(30_000), retries: 3 });
        let s3 = ObjectStoreGrant::from_settings(
            "out",
            &settings(&[
                ("url", "s3://bucket/a/b/"),
                ("endpoint", "http://127.0.0.1:9000"),
                ("access.key.id", "AK"),
                ("secret.access.key", "SK"),
            ]),
        )
        .unwrap();
        let Location::S3 { bucket, prefix, region, secret_access_key, .. } = &s3.location else { panic!("{s3:?}") };
        assert_eq!((bucket.as_str(), prefix.as_str(), region.as_str()), ("bucket", "a/b", "us-east-1"));
        assert_eq!(secret_access_key.as_ref().map(Password::value), Some("SK"));
        assert!(!format!("{s3:?}").contains("SK"), "the secret shows in Debug: {s3:?}");
        for (pairs, expected) in [
            (vec![], "plugin.grant.object-store.out.url: Missing required configuration"),
            (vec![("url", "file:///d"), ("retry", "1")], "plugin.grant.object-store.out.retry: unknown setting"),
            (
                vec![("url", "file:///d"), ("timeout.ms", "0")],
                "plugin.grant.object-store.out.timeout.ms: Invalid value",
            ),
            (vec![("url", "gs://bucket/p")], "'gs' stores are not supported"),
            (vec![("url", "s3:///p")], "names no bucket"),
            (vec![("url", "s3://b"), ("access.key.id", "AK")], "access.key.id and secret.access.key go together"),
            (vec![("url", "s3://b"), ("endpoint", "127.0.0.1:9000")], "is not an http:// or https:// address"),
        ] {
            let err = ObjectStoreGrant::from_settings("out", &settings(&pairs)).unwrap_err().to_string();
            assert!(err.contains(expected), "{pairs:?}: {err}");
        }
    }
}
