//! `spillway:object-store`: buckets the operator granted, opened by the
//! grant's name, on the `object_store` crate: S3 and S3-compatible stores,
//! and local directories.
//!
//! The grant (`plugin.grant.object-store.<name>.*`, [`grant`]) holds the
//! URL, endpoint and credentials; the plugin names objects relative to the
//! granted prefix, and `..` and empty segments are refused, so it reaches
//! nothing past the prefix. Each operation runs under the grant's timeout
//! and retries and is counted ([`op`](super::op)).

mod grant;
mod upload;
mod write;

pub use grant::{Location, ObjectStoreGrant};

use super::errors::Error;
use super::op::{self, CallBudget, CapabilityMetrics, OpKey, OpPolicy};
use super::pending::room;
use super::{Capability, ContextsView, GrantKind};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use spillway_policy::InstanceBounds;
use std::collections::BTreeMap;
use std::sync::Arc;
use upload::{OpenUpload, Uploads};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use write::PendingWrite;

pub const PACKAGE: &str = "spillway:object-store";
pub const VERSION: &str = "0.1.1";
/// The grants' capability segment and the metrics' label.
const NAME: &str = "object-store";

pub const CAPABILITY: Capability = Capability {
    package: PACKAGE,
    version: VERSION,
    interfaces: &["buckets"],
    grant: Some(GrantKind {
        name: NAME,
        setting_keys: grant::setting_keys,
        parse: grant::parse,
        check: |_| Ok(()),
        reach: grant::reach,
        granted: |grants| !grants.object_stores.is_empty(),
    }),
};

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spillway:object-store/imports",
        imports: { default: async | trappable },
        with: {
            "spillway:types/errors": crate::errors::bindings::spillway::types::errors,
            "spillway:object-store/buckets.bucket": super::OpenBucket,
            "spillway:object-store/buckets.upload": super::upload::OpenUpload,
            "spillway:object-store/buckets.pending-write": super::write::PendingWrite,
        },
    });
}

use bindings::spillway::object_store::buckets::{Host, HostBucket, HostPendingWrite, HostUpload, ObjectMeta};

/// A bucket the plugin opened: the resource behind `bucket`.
pub struct OpenBucket {
    grant: String,
    store: Arc<dyn ObjectStore>,
    uploads: Uploads,
    policy: OpPolicy,
}

/// The capability's state in one plugin instance.
pub struct ObjectStoreCtx {
    grants: BTreeMap<String, ObjectStoreGrant>,
    table: ResourceTable,
    budget: CallBudget,
    metrics: Arc<CapabilityMetrics>,
    /// Room for writes going on in the host (`work_in_flight`).
    writes: Arc<tokio::sync::Semaphore>,
    /// Room for open multipart uploads (`uploads_open`): each holds the
    /// store's upload (and S3 bills for its parts) until it is completed or
    /// aborted, and a plugin that forgets to would pile them up.
    uploads: Arc<tokio::sync::Semaphore>,
    bounds: InstanceBounds,
}

impl ObjectStoreCtx {
    pub fn new(
        grants: &BTreeMap<String, ObjectStoreGrant>,
        bounds: &InstanceBounds,
        budget: CallBudget,
        metrics: Arc<CapabilityMetrics>,
    ) -> Self {
        let writes = Arc::new(tokio::sync::Semaphore::new(bounds.work_in_flight));
        let uploads = Arc::new(tokio::sync::Semaphore::new(bounds.uploads_open));
        let (grants, bounds) = (grants.clone(), bounds.clone());
        ObjectStoreCtx { grants, table: ResourceTable::new(), budget, metrics, writes, uploads, bounds }
    }

    /// Runs one operation under `policy`: timeout, retries, metrics. The
    /// future borrows only the metrics and the budget (the table is not
    /// `Sync`).
    fn run<'a, T, Fut>(
        &'a self,
        policy: &'a OpPolicy,
        op: &'static str,
        attempt: impl FnMut() -> Fut + 'a,
    ) -> impl Future<Output = Result<T, Error>> + 'a
    where
        Fut: Future<Output = Result<T, Error>> + 'a,
        T: 'a,
    {
        let (metrics, budget) = (&self.metrics, &self.budget);
        async move { op::run(metrics, key(op), policy, budget, attempt).await }
    }

    /// Runs one operation on an open bucket under its grant's policy.
    async fn on_bucket<T, Fut>(
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
        Ok(self.run(&policy, op, || attempt(store.clone())).await)
    }

    fn count_bytes(&self, op: &'static str, bytes: u64) {
        self.metrics.add_bytes(key(op), bytes);
    }
}

struct HasObjectStore;

impl HasData for HasObjectStore {
    type Data<'a> = &'a mut ObjectStoreCtx;
}

fn ctx<T: ContextsView>(data: &mut T) -> &mut ObjectStoreCtx {
    &mut data.contexts().object_store
}

pub fn add_to_linker<T: ContextsView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    bindings::spillway::object_store::buckets::add_to_linker::<T, HasObjectStore>(linker, ctx::<T>)?;
    Ok(())
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
        let opened = match granted.open() {
            Ok(opened) => opened,
            Err(e) => return Ok(Err(Error::fatal(format!("opening object-store grant '{grant}': {e:#}")))),
        };
        // Ask the store once, so that a missing bucket or refused credentials
        // fail the task at start with a clear message, not every write later.
        // Listing a prefix nothing uses costs one request and reads nothing.
        let probe = Path::from(".spillway-open-check");
        let store = opened.store.clone();
        let answered = self
            .run(&granted.policy, "open", || {
                let (store, probe) = (store.clone(), probe.clone());
                async move { store.list_with_delimiter(Some(&probe)).await.map_err(classify) }
            })
            .await;
        if let Err(e) = answered {
            let message = format!("object-store grant '{grant}' ({}): {}", granted.describe(), e.message());
            return Ok(Err(match e {
                Error::Retriable(_) => Error::retriable(message),
                Error::Fatal(_) => Error::fatal(message),
            }));
        }
        let uploads = match opened.uploads {
            Some((store, root)) => Uploads::Resumable { store, root },
            None => Uploads::Streaming(opened.store.clone()),
        };
        let bucket = OpenBucket { grant, store: opened.store, uploads, policy: granted.policy.clone() };
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
            .on_bucket(&bucket, "put", |store| {
                let (location, payload) = (location.clone(), payload.clone());
                async move { store.put(&location, payload).await.map(|r| r.e_tag).map_err(classify) }
            })
            .await?;
        if result.is_ok() {
            self.count_bytes("put", bytes);
        }
        Ok(result)
    }

    async fn create(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<bool, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let bytes = data.len() as u64;
        let payload = PutPayload::from(data);
        let result =
            self.on_bucket(&bucket, "create", |store| create_once(store, location.clone(), payload.clone())).await?;
        if let Ok(true) = result {
            self.count_bytes("create", bytes);
        }
        Ok(result)
    }

    async fn begin_create(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
        data: Vec<u8>,
    ) -> wasmtime::Result<Result<Resource<PendingWrite>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let open = self.table.get(&bucket)?;
        let (store, policy) = (open.store.clone(), open.policy.clone());
        let permit = match room(&self.writes, &self.budget, self.bounds.work_in_flight, "writes").await {
            Ok(permit) => permit,
            Err(e) => return Ok(Err(e)),
        };
        let (metrics, bytes, payload) = (self.metrics.clone(), data.len() as u64, PutPayload::from(data));
        // Outside any plugin call: the grant's own timeout bounds it.
        let task = tokio::spawn(async move {
            let budget = CallBudget::default();
            let attempt = || create_once(store.clone(), location.clone(), payload.clone());
            let result = op::run(&metrics, key("create"), &policy, &budget, attempt).await;
            if let Ok(true) = result {
                metrics.add_bytes(key("create"), bytes);
            }
            drop(permit);
            result
        });
        Ok(Ok(self.table.push(PendingWrite::new(path, task))?))
    }

    async fn start_upload(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
    ) -> wasmtime::Result<Result<Resource<OpenUpload>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        // Not waited for: only the plugin can close the uploads it holds.
        let Ok(slot) = self.uploads.clone().try_acquire_owned() else {
            let message = format!(
                "{} uploads are open already (policy.plugin.uploads.open.max): complete or abort one before \
                 starting {path}",
                self.bounds.uploads_open
            );
            return Ok(Err(Error::fatal(message)));
        };
        let open = self.table.get(&bucket)?;
        let (uploads, policy) = (open.uploads.clone(), open.policy.clone());
        let started = self
            .run(&policy, "start-upload", || {
                let (uploads, location, path, policy) =
                    (uploads.clone(), location.clone(), path.clone(), policy.clone());
                async move { uploads.start(&location, &path, &policy).await }
            })
            .await;
        Ok(match started {
            Ok(upload) => Ok(self.table.push(upload.holding(slot))?),
            Err(e) => Err(e),
        })
    }

    async fn abort_upload(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
        id: String,
    ) -> wasmtime::Result<Result<(), Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let open = self.table.get(&bucket)?;
        let (uploads, policy) = (open.uploads.clone(), open.policy.clone());
        Ok(self.run(&policy, "abort-upload", || uploads.abort(&location, &id)).await)
    }

    async fn get(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
    ) -> wasmtime::Result<Result<Option<Vec<u8>>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        let max_bytes = self.bounds.return_bytes as u64;
        let result = self
            .on_bucket(&bucket, "get", |store| {
                let location = location.clone();
                async move {
                    match store.get(&location).await {
                        Ok(got) if got.meta.size > max_bytes => Err(Error::fatal(format!(
                            "{location} is {} bytes, more than one get returns ({max_bytes} bytes, \
                             policy.plugin.return.bytes.max)",
                            got.meta.size,
                        ))),
                        Ok(got) => got.bytes().await.map(|b| Some(b.to_vec())).map_err(classify),
                        Err(object_store::Error::NotFound { .. }) => Ok(None),
                        Err(e) => Err(classify(e)),
                    }
                }
            })
            .await?;
        if let Ok(Some(data)) = &result {
            self.count_bytes("get", data.len() as u64);
        }
        Ok(result)
    }

    async fn head(
        &mut self,
        bucket: Resource<OpenBucket>,
        path: String,
    ) -> wasmtime::Result<Result<Option<ObjectMeta>, Error>> {
        let Ok(location) = object_path(&path) else { return Ok(Err(bad_path(&path))) };
        self.on_bucket(&bucket, "head", |store| {
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
        self.on_bucket(&bucket, "list", |store| {
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
        self.on_bucket(&bucket, "delete", |store| {
            let location = location.clone();
            async move { not_found_is_ok(store.delete(&location).await) }
        })
        .await
    }

    async fn drop(&mut self, bucket: Resource<OpenBucket>) -> wasmtime::Result<()> {
        let open = self.table.delete(bucket)?;
        tracing::trace!(grant = open.grant, "object-store bucket closed");
        Ok(())
    }
}

impl HostPendingWrite for ObjectStoreCtx {
    async fn ready(&mut self, write: Resource<PendingWrite>) -> wasmtime::Result<Option<Result<bool, Error>>> {
        Ok(self.table.get_mut(&write)?.ready().await)
    }

    async fn wait(&mut self, write: Resource<PendingWrite>) -> wasmtime::Result<Result<bool, Error>> {
        let until = self.budget.until();
        Ok(self.table.get_mut(&write)?.wait(until).await)
    }

    async fn drop(&mut self, write: Resource<PendingWrite>) -> wasmtime::Result<()> {
        // The write goes on; only the plugin's handle on it ends.
        self.table.delete(write)?;
        Ok(())
    }
}

impl HostUpload for ObjectStoreCtx {
    async fn id(&mut self, upload: Resource<OpenUpload>) -> wasmtime::Result<String> {
        Ok(self.table.get(&upload)?.id().to_string())
    }

    async fn put_part(&mut self, upload: Resource<OpenUpload>, data: Vec<u8>) -> wasmtime::Result<Result<(), Error>> {
        let bytes = data.len() as u64;
        let payload = PutPayload::from(data);
        let open = self.table.get_mut(&upload)?;
        let policy = open.policy.clone();
        let sent =
            op::run(&self.metrics, key("upload-part"), &policy, &self.budget, || open.send_part(payload.clone())).await;
        let Ok(part) = sent else { return Ok(sent.map(drop)) };
        open.record_part(part);
        self.count_bytes("upload-part", bytes);
        Ok(Ok(()))
    }

    async fn complete(&mut self, upload: Resource<OpenUpload>) -> wasmtime::Result<Result<Option<String>, Error>> {
        let open = self.table.get_mut(&upload)?;
        let policy = open.policy.clone();
        let completed = op::run(&self.metrics, key("complete-upload"), &policy, &self.budget, || open.complete()).await;
        if completed.is_ok() {
            open.finish();
        }
        Ok(completed)
    }

    async fn abort(&mut self, upload: Resource<OpenUpload>) -> wasmtime::Result<Result<(), Error>> {
        let open = self.table.get_mut(&upload)?;
        let policy = open.policy.clone();
        let aborted = op::run(&self.metrics, key("abort-upload"), &policy, &self.budget, || open.abort()).await;
        if aborted.is_ok() {
            open.finish();
        }
        Ok(aborted)
    }

    async fn drop(&mut self, upload: Resource<OpenUpload>) -> wasmtime::Result<()> {
        let mut open = self.table.delete(upload)?;
        // An upload dropped unfinished is aborted, so that the store frees
        // its parts (a finished one has nothing left to abort).
        if open.is_finished() {
            return Ok(());
        }
        let policy = open.policy.clone();
        if let Err(e) = op::run(&self.metrics, key("abort-upload"), &policy, &self.budget, || open.abort()).await {
            tracing::warn!(path = open.path, error = e.message(), "an upload dropped unfinished could not be aborted");
        }
        Ok(())
    }
}

fn key(op: &'static str) -> OpKey {
    OpKey { capability: NAME, op }
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

/// The HTTP status in an S3 client error's message. `object_store` maps a
/// status to its own error kinds on some requests (get, head, put) and not
/// on others (list, multipart), where only the message carries it.
fn http_status(message: &str) -> Option<u16> {
    let (_, rest) = message.split_once("status code: ")?;
    rest.get(..3)?.parse().ok()
}

/// Writes `payload` at `location` unless an object is there: false then. A
/// retry after a lost answer finds its own object: an answer, not an error.
async fn create_once(store: Arc<dyn ObjectStore>, location: Path, payload: PutPayload) -> Result<bool, Error> {
    match store.put_opts(&location, payload, PutOptions::from(PutMode::Create)).await {
        Ok(_) => Ok(true),
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => Ok(false),
        Err(e) => Err(classify(e)),
    }
}

/// Deleting what is not there is done.
fn not_found_is_ok(result: object_store::Result<()>) -> Result<(), Error> {
    match result {
        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(classify(e)),
    }
}

/// The one classification: what trying again cannot fix is fatal.
fn classify(error: object_store::Error) -> Error {
    use object_store::Error as E;
    match error {
        E::Generic { .. } => match http_status(&error.to_string()) {
            // Refused credentials, a missing bucket, a malformed request:
            // the same request fails the same way. Throttling and timeouts
            // do not.
            Some(status) if (400..500).contains(&status) && status != 408 && status != 429 => {
                Error::fatal(error.to_string())
            }
            _ => Error::retriable(error.to_string()),
        },
        E::JoinError { .. } => Error::retriable(error.to_string()),
        E::NotFound { .. }
        | E::InvalidPath { .. }
        | E::NotSupported { .. }
        | E::AlreadyExists { .. }
        | E::Precondition { .. }
        | E::NotModified { .. }
        | E::NotImplemented { .. }
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
    use object_store::multipart::MultipartStore;
    use object_store::throttle::{ThrottleConfig, ThrottledStore};
    use std::time::Duration;
    use tokio::time::Instant;

    /// A context with one bucket open on `store`, as `open` would leave it.
    fn open_on(store: Arc<dyn ObjectStore>, policy: OpPolicy) -> (ObjectStoreCtx, Resource<OpenBucket>) {
        open_within(store, policy, &InstanceBounds::default())
    }

    fn open_within(
        store: Arc<dyn ObjectStore>,
        policy: OpPolicy,
        bounds: &InstanceBounds,
    ) -> (ObjectStoreCtx, Resource<OpenBucket>) {
        let mut ctx = ObjectStoreCtx::new(&BTreeMap::new(), bounds, CallBudget::default(), Arc::default());
        let bucket = ctx
            .table
            .push(OpenBucket { grant: "test".into(), store: store.clone(), uploads: Uploads::Streaming(store), policy })
            .unwrap();
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
    fn http_refusals_are_fatal_and_throttling_is_not() {
        let generic = |status: &str| object_store::Error::Generic {
            store: "S3",
            source: format!("Error performing list request: Server returned non-2xx status code: {status}: <Error/>")
                .into(),
        };
        for (status, retriable) in [
            ("403 Forbidden", false),
            ("404 Not Found", false),
            ("429 Too Many Requests", true),
            ("503 Slow Down", true),
        ] {
            assert_eq!(classify(generic(status)).is_retriable(), retriable, "{status}");
        }
        let no_status = object_store::Error::Generic { store: "S3", source: "connection refused".into() };
        assert!(classify(no_status).is_retriable());
    }

    #[tokio::test]
    async fn create_never_overwrites_and_uploads_appear_whole_on_complete() {
        let policy = OpPolicy { timeout: Duration::from_secs(5), retries: 1 };
        let memory = Arc::new(InMemory::new());
        let root = Path::from("granted");
        let mut ctx =
            ObjectStoreCtx::new(&BTreeMap::new(), &InstanceBounds::default(), CallBudget::default(), Arc::default());
        let prefixed: Arc<dyn ObjectStore> =
            Arc::new(object_store::prefix::PrefixStore::new(memory.clone(), root.clone()));
        let uploads = Uploads::Resumable { store: memory.clone(), root };
        let bucket = ctx.table.push(OpenBucket { grant: "t".into(), store: prefixed, uploads, policy }).unwrap();
        let b = || Resource::<OpenBucket>::new_borrow(bucket.rep());

        assert!(ctx.create(b(), "a.json".into(), b"first".to_vec()).await.unwrap().unwrap());
        assert!(!ctx.create(b(), "a.json".into(), b"second".to_vec()).await.unwrap().unwrap());
        assert_eq!(ctx.get(b(), "a.json".into()).await.unwrap().unwrap(), Some(b"first".to_vec()));

        let upload = ctx.start_upload(b(), "big.json".into()).await.unwrap().unwrap();
        let u = || Resource::<OpenUpload>::new_borrow(upload.rep());
        let id = ctx.id(u()).await.unwrap();
        ctx.put_part(u(), b"part one,".to_vec()).await.unwrap().unwrap();
        ctx.put_part(u(), b"part two".to_vec()).await.unwrap().unwrap();
        // Nothing shows before complete, and under the grant's root after.
        assert_eq!(ctx.get(b(), "big.json".into()).await.unwrap().unwrap(), None);
        ctx.complete(u()).await.unwrap().unwrap();
        assert_eq!(ctx.get(b(), "big.json".into()).await.unwrap().unwrap(), Some(b"part one,part two".to_vec()));
        assert!(memory.head(&Path::from("granted/big.json")).await.is_ok());
        // A write that goes on in the host, then answers as create does.
        let pending = ctx.begin_create(b(), "later.json".into(), b"later".to_vec()).await.unwrap().unwrap();
        let p = || Resource::<PendingWrite>::new_borrow(pending.rep());
        assert!(ctx.wait(p()).await.unwrap().unwrap());
        assert_eq!(ctx.ready(p()).await.unwrap().map(|r| r.unwrap()), Some(true));
        assert_eq!(ctx.get(b(), "later.json".into()).await.unwrap().unwrap(), Some(b"later".to_vec()));
        let again = ctx.begin_create(b(), "later.json".into(), b"other".to_vec()).await.unwrap().unwrap();
        assert!(!ctx.wait(Resource::new_borrow(again.rep())).await.unwrap().unwrap(), "create overwrote");

        // The upload is over: another part is a fatal error.
        assert!(matches!(ctx.put_part(u(), b"late".to_vec()).await.unwrap(), Err(Error::Fatal(_))));
        assert!(!id.is_empty());

        // An upload left open is aborted by its id, as a restarted task does.
        let left = ctx.start_upload(b(), "left.json".into()).await.unwrap().unwrap();
        let left_id = ctx.id(Resource::new_borrow(left.rep())).await.unwrap();
        ctx.put_part(Resource::new_borrow(left.rep()), b"orphan".to_vec()).await.unwrap().unwrap();
        ctx.abort_upload(b(), "left.json".into(), left_id.clone()).await.unwrap().unwrap();
        let err = memory.put_part(&Path::from("granted/left.json"), &left_id, 1, b"x".to_vec().into()).await;
        assert!(err.is_err(), "the upload is still open after abort-upload");
        let bytes: u64 =
            ctx.metrics.snapshot().iter().filter(|(k, _)| k.op == "upload-part").map(|(_, s)| s.bytes).sum();
        assert_eq!(bytes, 17 + 6);
    }

    #[tokio::test]
    async fn open_uploads_and_the_bytes_a_get_returns_are_bounded() {
        let memory = Arc::new(InMemory::new());
        // The worker's policy.plugin.* keys, not the defaults.
        let bounds = InstanceBounds { uploads_open: 3, return_bytes: 1000, ..InstanceBounds::default() };
        let policy = OpPolicy { timeout: Duration::from_secs(5), retries: 0 };
        let (mut ctx, bucket) = open_within(memory.clone(), policy, &bounds);
        let b = || Resource::<OpenBucket>::new_borrow(bucket.rep());
        let mut open = Vec::new();
        for n in 0..bounds.uploads_open {
            open.push(ctx.start_upload(b(), format!("u{n}")).await.unwrap().unwrap());
        }
        let err = ctx.start_upload(b(), "one-more".into()).await.unwrap().unwrap_err();
        assert!(matches!(&err, Error::Fatal(m) if m.contains("uploads are open already")), "{err:?}");
        // An upload the plugin lets go of gives its place back.
        HostUpload::drop(&mut ctx, open.pop().unwrap()).await.unwrap();
        assert!(ctx.start_upload(b(), "one-more".into()).await.unwrap().is_ok());

        let big = vec![7u8; bounds.return_bytes + 1];
        memory.put(&Path::from("big"), big.into()).await.unwrap();
        let err = ctx.get(b(), "big".into()).await.unwrap().unwrap_err();
        assert!(matches!(&err, Error::Fatal(m) if m.contains("more than one get returns")), "{err:?}");
        let fits = vec![7u8; bounds.return_bytes];
        memory.put(&Path::from("fits"), fits.clone().into()).await.unwrap();
        assert_eq!(ctx.get(b(), "fits".into()).await.unwrap().unwrap(), Some(fits));
    }
}
