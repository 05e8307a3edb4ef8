//! `spillway:object-store`: buckets the operator granted, opened by the
//! grant's name, on the `object_store` crate.
//!
//! Grant settings (`plugin.grant.object-store.<name>.<setting>`):
//! - `url`: where the objects go, with the prefix the plugin is confined to:
//!   `file:///absolute/dir` for now (S3 and other stores come with the S3
//!   sink);
//! - `timeout.ms` (default 30000): the longest one operation may take,
//!   retries included, and never past the plugin call's own deadline;
//! - `retries` (default 3): further attempts after a retriable failure.
//!
//! The plugin names objects relative to the prefix; `..` and empty segments
//! are refused, so it cannot reach past the prefix.

use super::errors::Error;
use super::op::{self, CallBudget, CapabilityMetrics, OpKey, OpPolicy};
use crate::config::{ConfigDef, Importance, KeyDef, Type, Validator};
use anyhow::{Result, anyhow, bail};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, PutPayload};
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

pub const VERSION: &str = "0.1.0";
const CAPABILITY: &str = "object-store";

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "spillway:object-store/imports",
        imports: { default: async | trappable },
        with: {
            "spillway:types/errors": crate::capabilities::errors::bindings::spillway::types::errors,
            "spillway:object-store/buckets.bucket": super::OpenBucket,
        },
    });
}

use bindings::spillway::object_store::buckets::{Host, HostBucket, ObjectMeta};

/// One `plugin.grant.object-store.<name>.*` grant.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectStoreGrant {
    pub url: url::Url,
    pub policy: OpPolicy,
}

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
            "Where the objects go, with the prefix the plugin is confined to: file:///absolute/dir (S3 and \
             other stores come with the S3 sink).",
        )
        .required(),
        KeyDef::new(
            "timeout.ms",
            Type::Long,
            Importance::Medium,
            "Longest one operation may take, retries included; never past the plugin call's own deadline.",
        )
        .with_default("30000")
        .with_validator(Validator::at_least(1)),
        KeyDef::new("retries", Type::Int, Importance::Low, "Further attempts after a retriable failure.")
            .with_default("3")
            .with_validator(Validator::at_least(0)),
    ]
}

impl ObjectStoreGrant {
    pub(crate) fn from_settings(name: &str, settings: &BTreeMap<String, String>) -> Result<Self> {
        static SETTINGS: LazyLock<ConfigDef> = LazyLock::new(|| ConfigDef::new().group("object-store", setting_keys()));
        let key = |setting: &str| format!("plugin.grant.{CAPABILITY}.{name}.{setting}");
        // A typo must not silently grant less than was meant.
        if let Some(unknown) = settings.keys().find(|k| SETTINGS.find(k).is_none()) {
            bail!("{}: unknown setting (an {CAPABILITY} grant takes url, timeout.ms, retries)", key(unknown));
        }
        let (values, problems) = SETTINGS.parse(settings);
        if let Some(problem) = problems.first() {
            bail!("{}: {}", key(&problem.key), problem.message);
        }
        let raw = values.string("url");
        let url = url::Url::parse(raw).map_err(|e| anyhow!("{}: '{raw}' is not a URL: {e}", key("url")))?;
        if url.scheme() != "file" {
            bail!("{}: '{}' stores are not supported yet (file:///dir is)", key("url"), url.scheme());
        }
        let policy = OpPolicy {
            timeout: Duration::from_millis(values.long("timeout.ms") as u64),
            retries: values.int("retries") as u32,
        };
        Ok(ObjectStoreGrant { url, policy })
    }

    fn open(&self) -> Result<Arc<dyn ObjectStore>> {
        let (store, prefix) = object_store::parse_url(&self.url)?;
        if let Ok(dir) = self.url.to_file_path() {
            // A local store writes under a directory that must exist.
            std::fs::create_dir_all(dir)?;
        }
        Ok(Arc::new(PrefixStore::new(store, prefix)))
    }
}

/// A bucket the plugin opened: the resource behind `bucket`.
pub struct OpenBucket {
    grant: String,
    store: Arc<dyn ObjectStore>,
    policy: OpPolicy,
}

/// The capability's state in one plugin instance.
pub struct ObjectStoreCtx {
    grants: BTreeMap<String, ObjectStoreGrant>,
    table: ResourceTable,
    budget: CallBudget,
    metrics: Arc<CapabilityMetrics>,
}

impl ObjectStoreCtx {
    pub fn new(
        grants: &BTreeMap<String, ObjectStoreGrant>,
        budget: CallBudget,
        metrics: Arc<CapabilityMetrics>,
    ) -> Self {
        ObjectStoreCtx { grants: grants.clone(), table: ResourceTable::new(), budget, metrics }
    }

    /// Runs one operation on an open bucket under its grant's policy.
    async fn run<T, Fut>(
        &mut self,
        bucket: &Resource<OpenBucket>,
        op: &'static str,
        mut attempt: impl FnMut(Arc<dyn ObjectStore>) -> Fut,
    ) -> wasmtime::Result<Result<T, Error>>
    where
        Fut: Future<Output = Result<T, Error>>,
    {
        let open = self.table.get(bucket)?;
        let (store, policy) = (open.store.clone(), open.policy.clone());
        let key = OpKey { capability: CAPABILITY, op };
        Ok(op::run(&self.metrics, key, &policy, &self.budget, || attempt(store.clone())).await)
    }
}

/// How a store's data lends the runtime its [`ObjectStoreCtx`].
pub trait ObjectStoreView: Send {
    fn object_store(&mut self) -> &mut ObjectStoreCtx;
}

struct HasObjectStore;

impl HasData for HasObjectStore {
    type Data<'a> = &'a mut ObjectStoreCtx;
}

pub fn add_to_linker<T: ObjectStoreView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    bindings::spillway::object_store::buckets::add_to_linker::<T, HasObjectStore>(linker, T::object_store)
}

impl Host for ObjectStoreCtx {}

impl HostBucket for ObjectStoreCtx {
    async fn open(&mut self, grant: String) -> wasmtime::Result<Result<Resource<OpenBucket>, Error>> {
        let Some(granted) = self.grants.get(&grant) else {
            let names: Vec<&str> = self.grants.keys().map(String::as_str).collect();
            return Ok(Err(Error::fatal(format!(
                "no object-store grant named '{grant}' (granted: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ))));
        };
        let store = match granted.open() {
            Ok(store) => store,
            Err(e) => return Ok(Err(Error::fatal(format!("opening object-store grant '{grant}': {e:#}")))),
        };
        let bucket = OpenBucket { grant, store, policy: granted.policy.clone() };
        Ok(Ok(self.table.push(bucket)?))
    }

    async fn put(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Option<String>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let bytes = data.len() as u64;
        let payload = PutPayload::from(data);
        let result = self
            .run(&bucket, "put", |store| {
                let (location, payload) = (location.clone(), payload.clone());
                async move { store.put(&location, payload).await.map(|r| r.e_tag).map_err(classify) }
            })
            .await?;
        if result.is_ok() {
            self.metrics.add_bytes(OpKey { capability: CAPABILITY, op: "put" }, bytes);
        }
        Ok(result)
    }

    async fn get(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let result = self
            .run(&bucket, "get", |store| {
                let location = location.clone();
                async move {
                    match store.get(&location).await {
                        Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())).map_err(classify),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(classify(e)),
                    }
                }
            })
            .await?;
        if let Ok(Some(data)) = &result {
            self.metrics.add_bytes(OpKey { capability: CAPABILITY, op: "get" }, data.len() as u64);
        }
        Ok(result)
    }

    async fn head(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
    ) -> wasmtime::Result<Result<Option<ObjectMeta>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        self.run(&bucket, "head", |store| {
            let location = location.clone();
            async move {
                match store.head(&location).await {
                    Ok(meta) => Ok(Some(meta_of(meta))),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(classify(e)),
                }
            }
        })
        .await
    }

    async fn list(
        &mut self,
        bucket: Resource<OpenBucket>,
        prefix: String,
    ) -> wasmtime::Result<Result<Vec<ObjectMeta>, Error>> {
        let prefix = match prefix.trim_matches('/') {
            "" => None,
            p => match object_path(p) {
                Ok(p) => Some(p),
                Err(_) => return Ok(Err(bad_path(&prefix))),
            },
        };
        self.run(&bucket, "list", |store| {
            let prefix = prefix.clone();
            async move {
                let objects: Vec<_> = store.list(prefix.as_ref()).try_collect().await.map_err(classify)?;
                Ok(objects.into_iter().map(meta_of).collect())
            }
        })
        .await
    }

    async fn delete(&mut self, bucket: Resource<OpenBucket>, path: String) -> wasmtime::Result<Result<(), Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        self.run(&bucket, "delete", |store| {
            let location = location.clone();
            async move {
                match store.delete(&location).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                    Err(e) => Err(classify(e)),
                }
            }
        })
        .await
    }

    async fn drop(&mut self, bucket: Resource<OpenBucket>) -> wasmtime::Result<()> {
        let open = self.table.delete(bucket)?;
        tracing::trace!(grant = open.grant, "object-store bucket closed");
        Ok(())
    }
}

/// A plugin's path, refused if it could reach past the granted prefix.
fn object_path(path: &str) -> Result<Path, object_store::path::Error> {
    Path::parse(path)
}

fn bad_path(path: &str) -> Error {
    Error::fatal(format!("'{path}' is not an object path under the grant (no '..', '.' or empty segments)"))
}

fn meta_of(meta: object_store::ObjectMeta) -> ObjectMeta {
    ObjectMeta {
        path: meta.location.to_string(),
        size: meta.size,
        last_modified: meta.last_modified.timestamp_millis(),
        e_tag: meta.e_tag,
    }
}

/// The one classification: what trying again cannot fix is fatal.
fn classify(error: object_store::Error) -> Error {
    use object_store::Error as E;
    match error {
        E::Generic { .. } | E::JoinError { .. } => Error::retriable(error.to_string()),
        E::NotFound { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::AlreadyExists { .. }
        | E::Precondition { .. }
        | E::NotModified { .. }
        | E::NotImplemented
        | E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::UnknownConfigurationKey { .. } => Error::fatal(error.to_string()),
        _ => Error::retriable(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::throttle::{ThrottleConfig, ThrottledStore};
    use tokio::time::Instant;

    /// A context with one bucket open on `store`, as `open` would leave it.
    fn open_on(store: Arc<dyn ObjectStore>, policy: OpPolicy) -> (ObjectStoreCtx, Resource<OpenBucket>) {
        let mut ctx = ObjectStoreCtx::new(&BTreeMap::new(), CallBudget::default(), Arc::default());
        let bucket = ctx.table.push(OpenBucket { grant: "test".into(), store, policy }).unwrap();
        (ctx, Resource::new_borrow(bucket.rep()))
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_store_is_cut_short_by_the_plugin_calls_budget_as_a_retriable_error() {
        let slow = ThrottledStore::new(
            InMemory::new(),
            ThrottleConfig { wait_put_per_call: Duration::from_secs(600), ..ThrottleConfig::default() },
        );
        let policy = OpPolicy { timeout: Duration::from_secs(60), retries: 3 };
        let (mut ctx, bucket) = open_on(Arc::new(slow), policy);
        // The runtime leaves the operation 2 s of the call.
        ctx.budget.set(Some(Instant::now() + Duration::from_secs(2)));
        let started = Instant::now();
        let err = ctx.put(bucket, "a/b".into(), b"x".to_vec()).await.unwrap().unwrap_err();
        assert!(err.is_retriable(), "{err:?}");
        assert!(err.message().contains("object-store put timed out after 2000 ms (the time left in the plugin call)"));
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        let (key, stats) = &ctx.metrics.snapshot()[0];
        assert_eq!((key.op, stats.retriable_errors, stats.bytes), ("put", 1, 0));
    }

    #[tokio::test]
    async fn objects_round_trip_and_misses_are_answers_not_errors() {
        let policy = OpPolicy { timeout: Duration::from_secs(5), retries: 0 };
        let (mut ctx, bucket) = open_on(Arc::new(InMemory::new()), policy);
        let b = || Resource::<OpenBucket>::new_borrow(bucket.rep());
        assert_eq!(ctx.get(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap(), None);
        assert!(ctx.head(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap().is_none());
        ctx.put(b(), "t/0/1.jsonl".into(), b"hello".to_vec()).await.unwrap().unwrap();
        assert_eq!(ctx.get(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap(), Some(b"hello".to_vec()));
        assert_eq!(ctx.head(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap().unwrap().size, 5);
        let listed = ctx.list(b(), "t".into()).await.unwrap().unwrap();
        assert_eq!(listed.iter().map(|m| m.path.as_str()).collect::<Vec<_>>(), ["t/0/1.jsonl"]);
        ctx.delete(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap();
        ctx.delete(b(), "t/0/1.jsonl".into()).await.unwrap().unwrap();
        assert!(ctx.list(b(), "".into()).await.unwrap().unwrap().is_empty());
        // A path that could reach past the prefix never reaches the store.
        let err = ctx.put(b(), "../x".into(), b"x".to_vec()).await.unwrap().unwrap_err();
        assert!(matches!(err, Error::Fatal(_)), "{err:?}");
    }

    #[test]
    fn grant_settings_are_checked_and_defaulted_from_one_table() {
        let settings = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let grant = ObjectStoreGrant::from_settings("out", &settings(&[("url", "file:///data/out")])).unwrap();
        assert_eq!(grant.policy, OpPolicy { timeout: Duration::from_millis(30_000), retries: 3 });
        for (pairs, expected) in [
            (vec![], "plugin.grant.object-store.out.url: Missing required configuration"),
            (vec![("url", "file:///d"), ("retry", "1")], "plugin.grant.object-store.out.retry: unknown setting"),
            (
                vec![("url", "file:///d"), ("timeout.ms", "0")],
                "plugin.grant.object-store.out.timeout.ms: Invalid value",
            ),
            (vec![("url", "s3://bucket/p")], "'s3' stores are not supported yet"),
        ] {
            let err = ObjectStoreGrant::from_settings("out", &settings(&pairs)).unwrap_err().to_string();
            assert!(err.contains(expected), "{pairs:?}: {err}");
        }
    }
}
