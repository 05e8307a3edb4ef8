//! Objects being written: their streams (values, keys, headers), the
//! multipart upload a stream starts once it has a part's worth of bytes,
//! the upload markers that let a restarted task abort what a killed one
//! left, and the one write that makes an object durable.

use crate::format::{Admit, Body, Item};
use crate::storage::{MultipartUpload, PendingWrite, Store};
use spillway_sdk::TaskError;

/// What the store calls need to know.
pub struct Ctx<'a> {
    pub store: &'a dyn Store,
    pub part_size: usize,
    /// Where this task's upload markers live (`<topics.dir>/_uploads/task-<id>`).
    pub marker_dir: &'a str,
    /// The store failed during this call: keep bytes, send no part.
    pub defer: bool,
}

/// Which open object a record joins.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    pub topic: String,
    pub partition: i32,
    /// The partitioner's directory.
    pub encoded: String,
}

/// One stream of an object: one object in the store.
pub struct Stream {
    /// After the object's base name: `.json.gz`, `.keys.json.gz`, ...
    suffix: String,
    body: Option<Body>,
    /// Encoded bytes not yet sent.
    out: Vec<u8>,
    upload: Option<Multipart>,
    /// Its `create`, going on in the host while the sink works on.
    pending: Option<Box<dyn PendingWrite>>,
    done: bool,
    /// A write of the whole object was tried and failed: if the object is
    /// there now, that write may have landed after all.
    tried: bool,
}

struct Multipart {
    upload: Box<dyn MultipartUpload>,
    marker: String,
}

impl Stream {
    pub fn new(suffix: String, body: Body) -> Stream {
        Stream { suffix, body: Some(body), out: Vec::new(), upload: None, pending: None, done: false, tried: false }
    }

    fn buffered(&self) -> usize {
        self.out.len() + self.body.as_ref().map_or(0, Body::buffered)
    }

    /// Moves encoded bytes out of the encoder, and sends a part once a
    /// part's worth is there (starting the upload, and its marker, first).
    fn pump(&mut self, path: &str, ctx: &Ctx) -> Result<(), TaskError> {
        if let Some(body) = &mut self.body
            && body.ready() > 0
        {
            self.out.extend(body.take());
        }
        if self.out.len() >= ctx.part_size && !ctx.defer {
            self.send_part(path, ctx)?;
        }
        Ok(())
    }

    fn send_part(&mut self, path: &str, ctx: &Ctx) -> Result<(), TaskError> {
        if self.upload.is_none() {
            let mut upload = ctx.store.start_upload(path)?;
            // The marker names the upload so that a restarted task can abort
            // it if this one dies before completing it.
            let marker = format!("{}/{}", ctx.marker_dir, path.rsplit('/').next().unwrap_or(path));
            let written = ctx.store.create(&marker, format!("{path}\n{}", upload.id()).as_bytes());
            if !matches!(written, Ok(true)) {
                let _ = upload.abort();
                return Err(written
                    .err()
                    .unwrap_or_else(|| TaskError::Fatal(format!("upload marker {marker} exists"))));
            }
            self.upload = Some(Multipart { upload, marker });
        }
        let multipart = self.upload.as_mut().expect("started above");
        multipart.upload.put_part(&self.out)?;
        self.out.clear();
        Ok(())
    }

    /// Ends the encoding: every byte of the stream is in `out` or sent.
    fn close(&mut self) -> Result<(), TaskError> {
        if let Some(body) = self.body.take() {
            self.out.extend(body.finish()?);
        }
        Ok(())
    }

    /// Writes a closed stream: the last part and `complete` for an upload,
    /// else `create` in one request, which goes on in the host: with `wait`
    /// this waits for it, else it answers [`Progress::Going`] until it ended.
    fn write(&mut self, path: &str, ctx: &Ctx, wait: bool) -> Result<Progress, TaskError> {
        if self.done {
            return Ok(Progress::Written);
        }
        if self.upload.is_none() && self.pending.is_none() && !self.tried {
            self.tried = true;
            self.pending = Some(ctx.store.begin_create(path, &self.out)?);
        }
        if let Some(pending) = &mut self.pending {
            let ended = if wait { Some(pending.wait()) } else { pending.ready() };
            let Some(ended) = ended else { return Ok(Progress::Going) };
            // Over, whatever the answer: a failure is retried with `create`,
            // which finds the object if the write landed after all.
            self.pending = None;
            if ended? || ctx.store.get(path)?.as_deref() == Some(self.out.as_slice()) {
                self.done = true;
                return Ok(Progress::Written);
            }
            return Ok(Progress::Taken);
        }
        if let Some(multipart) = &mut self.upload {
            if !self.out.is_empty() {
                multipart.upload.put_part(&self.out)?;
                self.out.clear();
            }
            multipart.upload.complete()?;
            // A marker left behind only costs an abort of a finished upload
            // (which succeeds) at the next start.
            if let Err(TaskError::Retriable(e) | TaskError::Fatal(e)) = ctx.store.delete(&multipart.marker) {
                spillway_sdk::log::warn(&format!("could not delete upload marker {}: {e}", multipart.marker));
            }
            self.upload = None;
            self.done = true;
            return Ok(Progress::Written);
        }
        // A retry after a failed write.
        if ctx.store.create(path, &self.out)? {
            self.done = true;
            return Ok(Progress::Written);
        }
        // Our own earlier attempt may have landed before its answer was lost.
        if ctx.store.get(path)?.as_deref() == Some(self.out.as_slice()) {
            self.done = true;
            return Ok(Progress::Written);
        }
        Ok(Progress::Taken)
    }

    fn abort(&mut self, ctx: &Ctx) {
        if let Some(mut multipart) = self.upload.take() {
            let aborted = multipart.upload.abort().and_then(|()| ctx.store.delete(&multipart.marker));
            if let Err(TaskError::Retriable(e) | TaskError::Fatal(e)) = aborted {
                spillway_sdk::log::warn(&format!("could not abort the upload of {}: {e}", multipart.marker));
            }
        }
    }
}

/// Where a stream's write stands.
enum Progress {
    Written,
    /// Going on in the host.
    Going,
    /// Another object has the name.
    Taken,
}

/// An object: open (taking records), then closed (encoded whole, waiting
/// for its write to succeed).
pub struct Object {
    pub key: ObjectKey,
    /// `<topics.dir>/<topic>/<encoded>/`, delimiters included.
    dir: String,
    /// `<topic>+<partition>+<offset>+<task>-<token>`.
    base: String,
    streams: Vec<Stream>,
    /// The records it holds, in order.
    pub records: Vec<u64>,
    /// Time of its first record (timestamp.extractor), for rotate.interval.ms.
    pub first_time: Option<i64>,
    /// When rotate.schedule.interval.ms closes it.
    pub deadline: Option<i64>,
    closed: bool,
}

impl Object {
    pub fn new(key: ObjectKey, dir: String, base: String, streams: Vec<Stream>, deadline: Option<i64>) -> Object {
        Object { key, dir, base, streams, records: Vec::new(), first_time: None, deadline, closed: false }
    }

    fn path(&self, stream: &Stream) -> String {
        format!("{}{}{}", self.dir, self.base, stream.suffix)
    }

    /// The object's (values') path.
    pub fn name(&self) -> String {
        self.path(&self.streams[0])
    }

    /// Whether the record's items can join; `items` are in stream order.
    pub fn admit(&self, items: &[Item]) -> Admit {
        for (stream, item) in self.streams.iter().zip(items) {
            match stream.body.as_ref().map_or(Admit::Rotate, |b| b.admit(item)) {
                Admit::Fits => {}
                other => return other,
            }
        }
        Admit::Fits
    }

    /// Adds an admitted record and sends any part that filled. A failed part
    /// stays buffered (the error returned) and goes with the next one.
    pub fn push(&mut self, id: u64, items: Vec<Item>, time: Option<i64>, ctx: &Ctx) -> Result<(), TaskError> {
        for (stream, item) in self.streams.iter_mut().zip(items) {
            stream.body.as_mut().expect("an open object").push(item, ctx.part_size)?;
        }
        self.records.push(id);
        if self.first_time.is_none() {
            self.first_time = time;
        }
        self.pump(ctx)
    }

    fn pump(&mut self, ctx: &Ctx) -> Result<(), TaskError> {
        let mut result = Ok(());
        for i in 0..self.streams.len() {
            let path = self.path(&self.streams[i]);
            if let Err(e) = self.streams[i].pump(&path, ctx) {
                result = Err(e);
            }
        }
        result
    }

    /// Bytes held in memory.
    pub fn buffered(&self) -> usize {
        self.streams.iter().map(Stream::buffered).sum()
    }

    pub fn record_count(&self) -> usize {
        self.records.len()
    }

    /// Ends encoding; the object takes no more records.
    pub fn close(&mut self) -> Result<(), TaskError> {
        self.closed = true;
        self.streams.iter_mut().try_for_each(Stream::close)
    }

    /// Writes every stream not yet written; true once all are. A stream's
    /// `create` goes on in the host: without `wait` this starts or looks at
    /// it and answers false while it goes on. A name taken by another
    /// object (a clash of random tokens, or a leftover) gets a new token
    /// while no stream has been written under the old one.
    pub fn write(&mut self, ctx: &Ctx, mut new_token: impl FnMut() -> String, wait: bool) -> Result<bool, TaskError> {
        debug_assert!(self.closed);
        let mut renames = 0;
        let mut all_written = true;
        let mut i = 0;
        while i < self.streams.len() {
            let path = self.path(&self.streams[i]);
            match self.streams[i].write(&path, ctx, wait)? {
                Progress::Written => {
                    i += 1;
                    continue;
                }
                Progress::Going => {
                    all_written = false;
                    i += 1;
                    continue;
                }
                Progress::Taken => {}
            }
            let untouched = self.streams.iter().all(|s| !s.done && s.upload.is_none() && s.pending.is_none());
            if !untouched || renames == 3 {
                return Err(TaskError::Fatal(format!("{path} exists, and this object's name cannot change now")));
            }
            renames += 1;
            let (head, _) = self.base.rsplit_once('-').expect("a base name ends with -<token>");
            self.base = format!("{head}-{}", new_token());
            self.streams.iter_mut().for_each(|s| s.tried = false);
            // Start over: every stream goes under the new name.
            (i, all_written) = (0, true);
        }
        Ok(all_written)
    }

    /// Aborts the object's uploads in progress (a task stopping).
    pub fn abort(&mut self, ctx: &Ctx) {
        self.streams.iter_mut().for_each(|s| s.abort(ctx));
    }
}

/// Aborts the uploads that an earlier instance of this task left (their
/// markers still there) and deletes the markers.
pub fn abort_leftovers(ctx: &Ctx) -> Result<usize, TaskError> {
    let markers = ctx.store.list(ctx.marker_dir)?;
    for marker in &markers {
        let path =
            if marker.starts_with(ctx.marker_dir) { marker.clone() } else { format!("{}/{marker}", ctx.marker_dir) };
        if let Some(body) = ctx.store.get(&path)? {
            let text = String::from_utf8_lossy(&body);
            if let Some((object, id)) = text.split_once('\n') {
                ctx.store.abort_upload(object, id.trim())?;
                spillway_sdk::log::info(&format!("aborted the upload of {object} that an earlier run left"));
            }
        }
        ctx.store.delete(&path)?;
    }
    Ok(markers.len())
}
