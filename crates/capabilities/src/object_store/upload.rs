//! Multipart uploads: the resource behind `upload`.
//!
//! On S3 an upload is the store's (its id outlives the plugin instance, so
//! a restarted task can abort what a killed one left open); on a local
//! directory it is `object_store`'s streaming upload, which lives as long as
//! the instance.

use super::{classify, not_found_is_ok};
use crate::errors::Error;
use crate::op::OpPolicy;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::multipart::{MultipartStore, PartId};
use object_store::path::Path;
use object_store::{MultipartUpload, ObjectStore, ObjectStoreExt, PutPayload};
use std::sync::Arc;

/// Where a bucket's uploads go.
#[derive(Clone)]
pub(super) enum Uploads {
    /// The store keeps uploads by id (S3); `root` is the granted prefix,
    /// which the plugin's paths go under.
    Resumable { store: Arc<dyn MultipartStore>, root: Path },
    /// Streaming uploads through the store itself (local files).
    Streaming(Arc<dyn ObjectStore>),
}

pub struct OpenUpload {
    /// The plugin's path, for messages.
    pub(super) path: String,
    pub(super) policy: OpPolicy,
    state: State,
    /// Completed or aborted: nothing more goes to the store.
    finished: bool,
    /// Its place among the instance's open uploads, given back when the
    /// resource goes.
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
}

enum State {
    Resumable { store: Arc<dyn MultipartStore>, location: Path, id: String, parts: Vec<PartId> },
    Streaming { upload: Option<Box<dyn MultipartUpload>>, id: String },
}

impl Uploads {
    /// Starts an upload to `location` (relative to the grant's prefix).
    pub(super) async fn start(&self, location: &Path, path: &str, policy: &OpPolicy) -> Result<OpenUpload, Error> {
        let state = match self {
            Uploads::Resumable { store, root } => {
                let location = under(root, location);
                let id = store.create_multipart(&location).await.map_err(classify)?;
                State::Resumable { store: store.clone(), location, id, parts: Vec::new() }
            }
            Uploads::Streaming(store) => {
                let upload = store.put_multipart(location).await.map_err(classify)?;
                State::Streaming { upload: Some(upload), id: uuid::Uuid::new_v4().to_string() }
            }
        };
        let policy = match state {
            // A streaming part cannot be sent twice: a retry would be another part.
            State::Streaming { .. } => OpPolicy { retries: 0, ..policy.clone() },
            State::Resumable { .. } => policy.clone(),
        };
        Ok(OpenUpload { path: path.to_string(), policy, state, finished: false, slot: None })
    }

    /// Aborts the upload `id` that an earlier instance left open.
    pub(super) fn abort(&self, location: &Path, id: &str) -> BoxFuture<'static, Result<(), Error>> {
        match self {
            Uploads::Resumable { store, root } => {
                let (store, location, id) = (store.clone(), under(root, location), id.to_string());
                async move { not_found_is_ok(store.abort_multipart(&location, &id).await) }.boxed()
            }
            // A streaming upload ended with the instance that held it.
            Uploads::Streaming(_) => futures::future::ready(Ok(())).boxed(),
        }
    }
}

impl OpenUpload {
    /// The upload, holding `slot` until it goes.
    pub(super) fn holding(mut self, slot: tokio::sync::OwnedSemaphorePermit) -> Self {
        self.slot = Some(slot);
        self
    }

    pub(super) fn id(&self) -> &str {
        match &self.state {
            State::Resumable { id, .. } | State::Streaming { id, .. } => id,
        }
    }

    /// Sends the next part; answers the part's id, to be [`recorded`](Self::record_part).
    pub(super) fn send_part(&mut self, data: PutPayload) -> BoxFuture<'static, Result<Option<PartId>, Error>> {
        if self.finished {
            return futures::future::ready(Err(ended())).boxed();
        }
        match &mut self.state {
            State::Resumable { store, location, id, parts } => {
                let (store, location, id, index) = (store.clone(), location.clone(), id.clone(), parts.len());
                async move { store.put_part(&location, &id, index, data).await.map(Some).map_err(classify) }.boxed()
            }
            State::Streaming { upload: Some(upload), .. } => {
                upload.put_part(data).map(|r| r.map(|()| None).map_err(classify)).boxed()
            }
            State::Streaming { upload: None, .. } => futures::future::ready(Err(ended())).boxed(),
        }
    }

    pub(super) fn record_part(&mut self, part: Option<PartId>) {
        if let (State::Resumable { parts, .. }, Some(part)) = (&mut self.state, part) {
            parts.push(part);
        }
    }

    /// Ends the upload with the object in place; its e-tag if the store gives one.
    pub(super) fn complete(&mut self) -> BoxFuture<'static, Result<Option<String>, Error>> {
        if self.finished {
            return futures::future::ready(Err(ended())).boxed();
        }
        match &mut self.state {
            State::Resumable { store, location, id, parts } => {
                let (store, location, id, parts) = (store.clone(), location.clone(), id.clone(), parts.clone());
                async move { store.complete_multipart(&location, &id, parts).await.map(|r| r.e_tag).map_err(classify) }
                    .boxed()
            }
            State::Streaming { upload, .. } => match upload.take() {
                Some(mut upload) => async move { upload.complete().await.map(|r| r.e_tag).map_err(classify) }.boxed(),
                None => futures::future::ready(Err(ended())).boxed(),
            },
        }
    }

    pub(super) fn finish(&mut self) {
        self.finished = true;
    }

    pub(super) fn is_finished(&self) -> bool {
        self.finished
    }

    pub(super) fn abort(&mut self) -> BoxFuture<'static, Result<(), Error>> {
        if self.finished {
            return futures::future::ready(Ok(())).boxed();
        }
        match &mut self.state {
            State::Resumable { store, location, id, .. } => {
                let (store, location, id) = (store.clone(), location.clone(), id.clone());
                async move { not_found_is_ok(store.abort_multipart(&location, &id).await) }.boxed()
            }
            State::Streaming { upload, .. } => match upload.take() {
                Some(mut upload) => async move { upload.abort().await.map_err(classify) }.boxed(),
                None => futures::future::ready(Ok(())).boxed(),
            },
        }
    }
}

fn under(root: &Path, location: &Path) -> Path {
    Path::from_iter(root.parts().chain(location.parts()))
}

fn ended() -> Error {
    Error::fatal("this upload has already been completed or aborted")
}
