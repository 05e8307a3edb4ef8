//! The few object-store operations the sink uses, behind a trait: the
//! granted [`Bucket`] in a plugin, [`MemoryStore`] in native tests (where
//! the host's imports cannot be called).

use spillway_sdk::TaskError;
use spillway_sdk::object_store::{Bucket, PendingWrite as BucketWrite, Upload};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

pub trait Store {
    /// Writes an object only if none is at `path`; false when one is.
    fn create(&self, path: &str, data: &[u8]) -> Result<bool, TaskError>;
    /// Starts a `create` that goes on while the sink works on.
    fn begin_create(&self, path: &str, data: &[u8]) -> Result<Box<dyn PendingWrite>, TaskError>;
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, TaskError>;
    fn delete(&self, path: &str) -> Result<(), TaskError>;
    /// Paths of the objects under `prefix` (a directory).
    fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError>;
    fn start_upload(&self, path: &str) -> Result<Box<dyn MultipartUpload>, TaskError>;
    /// Aborts an upload a previous instance left; an unknown id succeeds.
    fn abort_upload(&self, path: &str, id: &str) -> Result<(), TaskError>;
}

/// A `create` going on.
pub trait PendingWrite {
    /// How it ended, or none while it goes on.
    fn ready(&mut self) -> Option<Result<bool, TaskError>>;
    /// Waits for the end (as long as the call allows: past that, retriable).
    fn wait(&mut self) -> Result<bool, TaskError>;
}

pub trait MultipartUpload {
    fn id(&self) -> String;
    fn put_part(&mut self, data: &[u8]) -> Result<(), TaskError>;
    fn complete(&mut self) -> Result<(), TaskError>;
    fn abort(&mut self) -> Result<(), TaskError>;
}

/// The bucket granted to the connector.
pub struct BucketStore(pub Bucket);

impl Store for BucketStore {
    fn create(&self, path: &str, data: &[u8]) -> Result<bool, TaskError> {
        self.0.create(path, data)
    }
    fn begin_create(&self, path: &str, data: &[u8]) -> Result<Box<dyn PendingWrite>, TaskError> {
        Ok(Box::new(self.0.begin_create(path, data)?))
    }
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, TaskError> {
        self.0.get(path)
    }
    fn delete(&self, path: &str) -> Result<(), TaskError> {
        self.0.delete(path)
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError> {
        Ok(self.0.list(prefix)?.into_iter().map(|m| m.path).collect())
    }
    fn start_upload(&self, path: &str) -> Result<Box<dyn MultipartUpload>, TaskError> {
        Ok(Box::new(BucketUpload(self.0.start_upload(path)?)))
    }
    fn abort_upload(&self, path: &str, id: &str) -> Result<(), TaskError> {
        self.0.abort_upload(path, id)
    }
}

impl PendingWrite for BucketWrite {
    fn ready(&mut self) -> Option<Result<bool, TaskError>> {
        BucketWrite::ready(self)
    }
    fn wait(&mut self) -> Result<bool, TaskError> {
        BucketWrite::wait(self)
    }
}

struct BucketUpload(Upload);

impl MultipartUpload for BucketUpload {
    fn id(&self) -> String {
        self.0.id()
    }
    fn put_part(&mut self, data: &[u8]) -> Result<(), TaskError> {
        self.0.put_part(data)
    }
    fn complete(&mut self) -> Result<(), TaskError> {
        self.0.complete().map(drop)
    }
    fn abort(&mut self) -> Result<(), TaskError> {
        self.0.abort()
    }
}

/// An object store in memory, shared by clones: tests keep one clone to
/// look at what the sink wrote, and can make writes fail.
#[derive(Clone, Default)]
pub struct MemoryStore(Rc<RefCell<Memory>>);

#[derive(Default)]
pub struct Memory {
    pub objects: BTreeMap<String, Vec<u8>>,
    /// Uploads in progress by id: their path and the parts so far.
    pub uploads: BTreeMap<String, (String, Vec<Vec<u8>>)>,
    /// Every completed upload: path and the size of each part.
    pub completed: Vec<(String, Vec<usize>)>,
    /// Uploads aborted: path and id.
    pub aborted: Vec<(String, String)>,
    /// While set, every write (create, part, complete, delete) fails with it.
    pub fail_writes: Option<TaskError>,
    /// While set, a `begin_create` takes effect only when waited for, as a
    /// slow store's would.
    pub defer_writes: bool,
    /// Parts but the last smaller than this are refused, as S3 refuses them.
    pub min_part: usize,
    /// Requests that write, in order: `create path`, `part path`, ...
    pub log: Vec<String>,
    next_id: u64,
}

impl MemoryStore {
    pub fn inspect<T>(&self, f: impl FnOnce(&mut Memory) -> T) -> T {
        f(&mut self.0.borrow_mut())
    }

    pub fn objects(&self) -> BTreeMap<String, Vec<u8>> {
        self.0.borrow().objects.clone()
    }

    fn write(&self, what: String) -> Result<std::cell::RefMut<'_, Memory>, TaskError> {
        let mut memory = self.0.borrow_mut();
        if let Some(error) = &memory.fail_writes {
            return Err(error.clone());
        }
        memory.log.push(what);
        Ok(memory)
    }
}

impl Store for MemoryStore {
    fn create(&self, path: &str, data: &[u8]) -> Result<bool, TaskError> {
        let mut memory = self.write(format!("create {path}"))?;
        if memory.objects.contains_key(path) {
            return Ok(false);
        }
        memory.objects.insert(path.to_string(), data.to_vec());
        Ok(true)
    }
    fn begin_create(&self, path: &str, data: &[u8]) -> Result<Box<dyn PendingWrite>, TaskError> {
        let (store, path, data) = (self.clone(), path.to_string(), data.to_vec());
        let mut write = MemoryWrite { run: Some(Box::new(move || store.create(&path, &data))), ended: None };
        if !self.0.borrow().defer_writes {
            write.wait().ok();
        }
        Ok(Box::new(write))
    }
    fn get(&self, path: &str) -> Result<Option<Vec<u8>>, TaskError> {
        Ok(self.0.borrow().objects.get(path).cloned())
    }
    fn delete(&self, path: &str) -> Result<(), TaskError> {
        self.write(format!("delete {path}"))?.objects.remove(path);
        Ok(())
    }
    fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError> {
        let dir = format!("{}/", prefix.trim_end_matches('/'));
        Ok(self.0.borrow().objects.keys().filter(|k| k.starts_with(&dir)).cloned().collect())
    }
    fn start_upload(&self, path: &str) -> Result<Box<dyn MultipartUpload>, TaskError> {
        let mut memory = self.write(format!("start {path}"))?;
        memory.next_id += 1;
        let id = format!("upload-{}", memory.next_id);
        memory.uploads.insert(id.clone(), (path.to_string(), Vec::new()));
        Ok(Box::new(MemoryUpload { store: self.clone(), id }))
    }
    fn abort_upload(&self, path: &str, id: &str) -> Result<(), TaskError> {
        let mut memory = self.write(format!("abort {path}"))?;
        memory.uploads.remove(id);
        memory.aborted.push((path.to_string(), id.to_string()));
        Ok(())
    }
}

/// A write that already ended, for stores that write at once.
pub struct Ended(pub Result<bool, TaskError>);

impl PendingWrite for Ended {
    fn ready(&mut self) -> Option<Result<bool, TaskError>> {
        Some(self.0.clone())
    }
    fn wait(&mut self) -> Result<bool, TaskError> {
        self.0.clone()
    }
}

type Create = Box<dyn FnOnce() -> Result<bool, TaskError>>;

/// A memory `create` that runs at once, or (deferred) when waited for.
struct MemoryWrite {
    run: Option<Create>,
    ended: Option<Result<bool, TaskError>>,
}

impl PendingWrite for MemoryWrite {
    fn ready(&mut self) -> Option<Result<bool, TaskError>> {
        self.ended.clone()
    }
    fn wait(&mut self) -> Result<bool, TaskError> {
        if let Some(run) = self.run.take() {
            self.ended = Some(run());
        }
        self.ended.clone().expect("ran above")
    }
}

struct MemoryUpload {
    store: MemoryStore,
    id: String,
}

impl MultipartUpload for MemoryUpload {
    fn id(&self) -> String {
        self.id.clone()
    }
    fn put_part(&mut self, data: &[u8]) -> Result<(), TaskError> {
        let mut memory = self.store.write(format!("part {}", self.id))?;
        let min_part = memory.min_part;
        let (_, parts) = memory.uploads.get_mut(&self.id).ok_or_else(|| TaskError::Fatal("no such upload".into()))?;
        // S3 checks part sizes on complete; checking the one before this is the same rule.
        if parts.last().is_some_and(|p| p.len() < min_part) {
            return Err(TaskError::Fatal(format!("a part but the last is smaller than {min_part} bytes")));
        }
        parts.push(data.to_vec());
        Ok(())
    }
    fn complete(&mut self) -> Result<(), TaskError> {
        let mut memory = self.store.write(format!("complete {}", self.id))?;
        let (path, parts) = memory.uploads.remove(&self.id).ok_or_else(|| TaskError::Fatal("no such upload".into()))?;
        memory.completed.push((path.clone(), parts.iter().map(Vec::len).collect()));
        memory.objects.insert(path, parts.concat());
        Ok(())
    }
    fn abort(&mut self) -> Result<(), TaskError> {
        let mut memory = self.store.write(format!("abort {}", self.id))?;
        if let Some((path, _)) = memory.uploads.remove(&self.id) {
            memory.aborted.push((path, self.id.clone()));
        }
        Ok(())
    }
}
