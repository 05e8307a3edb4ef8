//! The S3 sink: Kafka records into objects in a granted bucket, laid out as
//! Confluent's S3 sink lays them out (`<topics.dir>/<topic>/<partition
//! directory>/<name>`), as JSON lines, raw bytes, CSV or Parquet.
//!
//! A record is held (`Outcome::Hold`) while the object it went into is
//! open, and settled `Accept` only once that object is written. Objects
//! close on `flush.size`, on record-time and wall-clock rotation, on the
//! host's flushes, and early when the task's memory bound is reached. See
//! the README for the whole behaviour.

pub mod compress;
pub mod config;
pub mod format;
pub mod objects;
pub mod partition;
pub mod storage;

use config::{OnNull, Settings};
use format::{Admit, Body, FormatKind, Item, lines};
use objects::{Ctx, Object, ObjectKey, Stream};
use serde_json::Value as Json;
use spillway_sdk::data::{Data, Decoded, Field, Schema, Type, envelope, read_json};
use spillway_sdk::object_store::Bucket;
use spillway_sdk::{
    Config, ConfigError, ConnectNames, FlushScope, Outcome, PluginMetadata, PutReport, Settlement, Sink, SinkRecord,
    TaskError,
};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use storage::{BucketStore, Store};

/// Closed objects whose `create`s may go on in the host while the sink
/// encodes the next: encoding and uploading overlap, and the memory they
/// hold stays within the task's bound (they count in it).
const WRITES_AHEAD: usize = 2;

pub struct S3Sink {
    settings: Settings,
    store: Box<dyn Store>,
    clock: Box<dyn Fn() -> i64>,
    marker_dir: String,
    open: HashMap<ObjectKey, Object>,
    /// Closed objects being written, their `create`s going on in the host
    /// while the sink encodes on; their records stay held until written.
    writing: Vec<Object>,
    /// Closed objects whose write failed (retriably): written again on the
    /// next put or flush; their records stay held until then.
    closing: Vec<Object>,
    /// Records whose objects are written, not yet reported to the host.
    settled: Vec<Settlement>,
    last_error: Option<String>,
    /// A write failed retriably during this call: try no more until the next.
    store_failing: bool,
    tokens: u64,
}

/// A value that can be a JSON line as it is: valid JSON on one line, and
/// not a Connect envelope (whose payload is what gets written).
fn is_plain_line(bytes: &[u8]) -> bool {
    !bytes.contains(&b'\n')
        && !bytes.windows(8).any(|w| w == b"\"schema\"")
        && serde_json::from_slice::<serde::de::IgnoredAny>(bytes).is_ok()
}

/// A random token for object names, so that names stay unique across tasks
/// sharing a partition and across restarts (std's hasher keys come from the
/// system's entropy).
fn random_token(counter: u64) -> String {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(counter);
    hasher.write_i64(wall_clock());
    format!("{:016x}", hasher.finish())
}

/// The wall clock, in ms since the epoch.
fn wall_clock() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Sink for S3Sink {
    fn metadata() -> PluginMetadata {
        config::keys().into_iter().fold(
            PluginMetadata::new(
                "s3-sink",
                env!("CARGO_PKG_VERSION"),
                "Writes records to objects in a granted S3 bucket as JSON lines, bytes, CSV or Parquet, \
                 partitioned and rotated as Confluent's S3 sink does.",
            ),
            PluginMetadata::key,
        )
    }

    /// Confluent's S3 sink: its class, and the keys of its bucket and
    /// credentials, which become the object-store grant `s3` (the default
    /// `s3.grant`), the whole bucket (Confluent writes under `topics.dir`
    /// at the bucket's root, as this sink does).
    fn connect_names() -> ConnectNames {
        let grant = |names: ConnectNames, key: &str, setting: &str, template: &str| {
            names.grant(key, "object-store", "s3", setting, template)
        };
        let names = ConnectNames::default().class("io.confluent.connect.s3.S3SinkConnector");
        let names = grant(names, "s3.bucket.name", "url", "s3://{}");
        let names = grant(names, "s3.region", "region", "{}");
        let names = grant(names, "store.url", "endpoint", "{}");
        let names = grant(names, "aws.access.key.id", "access.key.id", "{}");
        grant(names, "aws.secret.access.key", "secret.access.key", "{}")
    }

    fn validate(config: &Config) -> Vec<ConfigError> {
        Settings::parse(config).err().unwrap_or_default()
    }

    fn start(config: Config) -> Result<Self, TaskError> {
        let settings = Settings::parse(&config)?;
        let bucket = Bucket::open(&settings.grant)?;
        S3Sink::with_store(settings, Box::new(BucketStore(bucket)), Box::new(wall_clock))
    }

    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
        let now = (self.clock)();
        self.store_failing = false;
        self.poll_writes(|_| false)?;
        self.retry_closing()?;
        self.rotate_scheduled(now)?;
        let mut outcomes = Vec::with_capacity(batch.len());
        let mut in_batch = HashMap::with_capacity(batch.len());
        for record in &batch {
            in_batch.insert(record.id, outcomes.len());
            outcomes.push(self.put_record(record, now)?);
        }
        self.poll_writes(|_| false)?;
        // Records of this batch already written are accepted outright.
        let mut settled = Vec::new();
        for settlement in self.settled.drain(..) {
            match in_batch.get(&settlement.id) {
                Some(&i) => outcomes[i] = settlement.outcome,
                None => settled.push(settlement),
            }
        }
        Ok(PutReport { outcomes, settled })
    }

    fn flush(&mut self, scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        let now = (self.clock)();
        self.store_failing = false;
        self.retry_closing()?;
        self.rotate_scheduled(now)?;
        let wanted: Option<HashSet<u64>> = match scope {
            FlushScope::All => None,
            FlushScope::Records(ids) => Some(ids.into_iter().collect()),
        };
        let holds =
            |object: &Object| wanted.as_ref().is_none_or(|ids| object.records.iter().any(|id| ids.contains(id)));
        let keys: Vec<ObjectKey> = self.open.values().filter(|o| holds(o)).map(|o| o.key.clone()).collect();
        for key in keys {
            self.close_object(&key)?;
        }
        self.poll_writes(holds)?;
        if self.closing.iter().chain(&self.writing).any(holds) {
            // Settlements made so far wait for the next call.
            let error = self.last_error.clone().unwrap_or_else(|| "writing failed".into());
            return Err(TaskError::Retriable(format!("objects could not be written yet: {error}")));
        }
        Ok(std::mem::take(&mut self.settled))
    }

    fn stop(&mut self) {
        let ctx = Ctx {
            store: self.store.as_ref(),
            part_size: self.settings.part_size,
            marker_dir: &self.marker_dir,
            defer: false,
        };
        for object in self.open.values_mut().chain(self.closing.iter_mut()) {
            object.abort(&ctx);
        }
        // Writes still going on end in the host; their records were never
        // acknowledged, so they come again.
        self.open.clear();
        self.writing.clear();
        self.closing.clear();
    }
}

impl S3Sink {
    /// A sink on any store and clock (tests use memory and a fake clock).
    /// Aborts the multipart uploads an earlier run of this task left open.
    pub fn with_store(
        settings: Settings,
        store: Box<dyn Store>,
        clock: Box<dyn Fn() -> i64>,
    ) -> Result<S3Sink, TaskError> {
        let marker_dir = format!("{}/_uploads/task-{}", settings.topics_dir, settings.task_id);
        let ctx = Ctx { store: store.as_ref(), part_size: settings.part_size, marker_dir: &marker_dir, defer: false };
        let aborted = objects::abort_leftovers(&ctx)?;
        if aborted > 0 {
            spillway_sdk::log::info(&format!("aborted {aborted} multipart uploads left by an earlier run"));
        }
        Ok(S3Sink {
            settings,
            store,
            clock,
            marker_dir,
            open: HashMap::new(),
            writing: Vec::new(),
            closing: Vec::new(),
            settled: Vec::new(),
            last_error: None,
            store_failing: false,
            tokens: 0,
        })
    }

    /// Most bytes the task buffers before it writes objects early.
    fn budget(&self) -> usize {
        self.settings.memory_budget
    }

    fn buffered(&self) -> usize {
        self.open.values().chain(&self.writing).chain(&self.closing).map(Object::buffered).sum()
    }

    fn token(&mut self) -> String {
        self.tokens += 1;
        random_token(self.tokens)
    }

    fn put_record(&mut self, record: &SinkRecord, now: i64) -> Result<Outcome, TaskError> {
        if record.value.is_none() {
            match self.settings.on_null {
                OnNull::Ignore => return Ok(Outcome::Accept),
                OnNull::Fail => {
                    return Err(TaskError::Fatal(format!(
                        "a null value at topic {} partition {} offset {} (behavior.on.null.values=fail)",
                        record.topic, record.partition, record.offset
                    )));
                }
                OnNull::Write => {}
            }
        }
        // While writes fail, buffer no further than the bound: the host puts
        // these records again after a backoff.
        if !self.closing.is_empty() && self.buffered() >= self.budget() {
            let error = self.last_error.as_deref().unwrap_or("writes fail");
            return Ok(Outcome::Retry(format!("objects wait to be written ({error})")));
        }
        let (items, value) = match self.items(record) {
            Ok(parsed) => parsed,
            Err(reason) => return Ok(Outcome::Reject(reason)),
        };
        let settings = &self.settings;
        let time = || settings.extractor.time(record.timestamp, value.as_ref(), now);
        let encoded = match settings.partitioner.encode(record.partition, value.as_ref(), time, &settings.delim) {
            Ok(encoded) => encoded,
            Err(reason) => return Ok(Outcome::Reject(reason)),
        };
        let record_time = match settings.rotate_interval_ms > 0 {
            false => None,
            true => match time() {
                Ok(t) => Some(t),
                Err(reason) => return Ok(Outcome::Reject(reason)),
            },
        };
        let key = ObjectKey { topic: record.topic.clone(), partition: record.partition, encoded };

        if let Some(object) = self.open.get(&key) {
            let too_late = match (record_time, object.first_time) {
                (Some(t), Some(first)) => t >= first.saturating_add(self.settings.rotate_interval_ms),
                _ => false,
            };
            match object.admit(&items) {
                Admit::Reject(reason) => return Ok(Outcome::Reject(reason)),
                Admit::Rotate => self.close_object(&key)?,
                Admit::Fits if too_late => self.close_object(&key)?,
                Admit::Fits => {}
            }
        }
        if !self.open.contains_key(&key) {
            let object = self.new_object(key.clone(), record, now);
            if let Admit::Reject(reason) = object.admit(&items) {
                return Ok(Outcome::Reject(reason));
            }
            self.make_room()?;
            self.open.insert(key.clone(), object);
        }

        let ctx = Ctx {
            store: self.store.as_ref(),
            part_size: self.settings.part_size,
            marker_dir: &self.marker_dir,
            defer: self.store_failing,
        };
        let object = self.open.get_mut(&key).expect("opened above");
        match object.push(record.id, items, record_time, &ctx) {
            Ok(()) => {}
            Err(TaskError::Retriable(e)) => {
                self.store_failing = true;
                self.last_error = Some(e);
            }
            Err(fatal) => return Err(fatal),
        }
        if object.record_count() as u64 >= self.settings.flush_size {
            self.close_object(&key)?;
        }
        self.enforce_budget()?;
        Ok(Outcome::Hold)
    }

    fn new_object(&mut self, key: ObjectKey, record: &SinkRecord, now: i64) -> Object {
        let token = self.token();
        let s = &self.settings;
        let dir = format!("{}{d}{}{d}{}{d}", s.topics_dir, key.topic, key.encoded, d = s.delim);
        let offset = format!("{:0width$}", record.offset, width = s.offset_pad);
        let base = format!("{}+{}+{offset}+{}-{}", key.topic, key.partition, s.task_id, token);
        let ext = s.extension();
        let inserts = self.insert_fields();
        let body = || Body::new(s.format, s.compression, s.parquet_codec, inserts.clone());
        let mut streams = vec![Stream::new(format!(".{ext}"), body())];
        if s.store_keys {
            streams
                .push(Stream::new(format!(".keys.{ext}"), Body::new(s.format, s.compression, s.parquet_codec, vec![])));
        }
        if s.store_headers {
            streams.push(Stream::new(
                format!(".headers.{ext}"),
                Body::new(s.format, s.compression, s.parquet_codec, vec![]),
            ));
        }
        let deadline = (s.rotate_schedule_interval_ms > 0)
            .then(|| partition::next_scheduled(now, s.rotate_schedule_interval_ms, s.timezone));
        Object::new(key, dir, base, streams, deadline)
    }

    /// The schemas of the fields added to each value (all optional, as
    /// Connect's InsertField adds them).
    fn insert_fields(&self) -> Vec<Field> {
        let s = &self.settings;
        let mut fields = Vec::new();
        if let Some(name) = &s.insert_topic {
            fields.push(Field::new(name, Schema::new(Type::String).into_optional()));
        }
        if let Some(name) = &s.insert_partition {
            fields.push(Field::new(name, Schema::new(Type::Int32).into_optional()));
        }
        if let Some(name) = &s.insert_offset {
            fields.push(Field::new(name, Schema::new(Type::Int64).into_optional()));
        }
        fields
    }

    fn insert_values(&self, record: &SinkRecord) -> Vec<(String, Data)> {
        let s = &self.settings;
        let mut values = Vec::new();
        if let Some(name) = &s.insert_topic {
            values.push((name.clone(), Data::String(record.topic.clone())));
        }
        if let Some(name) = &s.insert_partition {
            values.push((name.clone(), Data::Int32(record.partition)));
        }
        if let Some(name) = &s.insert_offset {
            values.push((name.clone(), Data::Int64(record.offset)));
        }
        values
    }

    /// What the record adds to each stream, and its value as Connect data
    /// when something needs it. An error is the reason to reject it.
    fn items(&self, record: &SinkRecord) -> Result<(Vec<Item>, Option<Data>), String> {
        let s = &self.settings;
        // The value as Connect data, for the partitioner or the time of a record.
        let needs_value = s.partitioner.needs_value() || matches!(s.extractor, partition::Extractor::RecordField(_));
        let inserts = self.insert_values(record);
        let (value_item, data) = match &record.value {
            None => {
                let item = match s.format {
                    FormatKind::Json => Item::Line(b"null\n".to_vec()),
                    FormatKind::Bytes => Item::Line(s.separator.clone()),
                    FormatKind::Csv | FormatKind::Parquet => Item::NullRow { inserts, size: 64 },
                };
                (item, None)
            }
            Some(bytes) if s.format == FormatKind::Bytes => {
                let data = match needs_value {
                    true => Some(decode(&parse_json(bytes)?)?.data),
                    false => None,
                };
                (Item::Line([bytes.as_slice(), &s.separator].concat()), data)
            }
            Some(bytes)
                if s.format == FormatKind::Json && inserts.is_empty() && !needs_value && is_plain_line(bytes) =>
            {
                // Nothing to add or read: the value goes as it came, once
                // known to be JSON (the common case, and the fast one).
                (Item::Line([bytes.as_slice(), b"\n"].concat()), None)
            }
            Some(bytes) if s.format == FormatKind::Json => {
                let json = parse_json(bytes)?;
                let data = match needs_value {
                    true => Some(decode(&json)?.data),
                    false => None,
                };
                // What JsonConverter without schemas writes: the payload.
                let mut payload = match envelope(&json) {
                    Some((_, payload)) => payload.clone(),
                    None => json,
                };
                if let Json::Object(object) = &mut payload {
                    for (name, value) in &inserts {
                        object.insert(name.clone(), value.to_json());
                    }
                }
                (Item::Line(lines::json_line(&payload)), data)
            }
            Some(bytes) => {
                let Decoded { schema, mut data, declared } = decode(&parse_json(bytes)?)?;
                // Inferred fields may be missing from later records.
                let mut schema = if declared { schema } else { schema.with_optional_fields() };
                if let (Type::Struct(fields), Data::Struct(values)) = (&mut schema.ty, &mut data) {
                    // As InsertField does; a field of the same name is replaced.
                    for (field, (name, value)) in self.insert_fields().into_iter().zip(inserts) {
                        fields.retain(|f| f.name != name);
                        fields.push(field);
                        values.retain(|(n, _)| *n != name);
                        values.push((name, value));
                    }
                }
                let size = bytes.len() + 64;
                let kept = needs_value.then(|| data.clone());
                (Item::Row { schema, declared, data, size }, kept)
            }
        };
        let mut items = vec![value_item];
        if s.store_keys {
            items.push(lines::key_item(s.format, &s.separator, record.key.as_deref()));
        }
        if s.store_headers {
            items.push(lines::headers_item(s.format, &s.separator, &record.headers));
        }
        Ok((items, data))
    }

    /// Closes an open object and writes it; if the write fails retriably,
    /// it waits in `closing` with its records held.
    fn close_object(&mut self, key: &ObjectKey) -> Result<(), TaskError> {
        let Some(mut object) = self.open.remove(key) else { return Ok(()) };
        object.close()?;
        self.write_object(object)
    }

    fn write_object(&mut self, object: Object) -> Result<(), TaskError> {
        // Encoding runs ahead of the store by a few objects at most.
        if self.writing.len() >= WRITES_AHEAD {
            let oldest = self.writing.remove(0);
            self.advance(oldest, true)?;
        }
        self.advance(object, false)
    }

    /// Writes of objects in `writing` that ended are settled; with `wait`
    /// true for an object, its write is waited for.
    fn poll_writes(&mut self, wait: impl Fn(&Object) -> bool) -> Result<(), TaskError> {
        for object in std::mem::take(&mut self.writing) {
            let wait = wait(&object);
            self.advance(object, wait)?;
        }
        Ok(())
    }

    /// Takes a closed object's write one step: written (its records
    /// settled), still going on (`writing`), or failed retriably (`closing`).
    fn advance(&mut self, mut object: Object, wait: bool) -> Result<(), TaskError> {
        let ctx = Ctx {
            store: self.store.as_ref(),
            part_size: self.settings.part_size,
            marker_dir: &self.marker_dir,
            defer: false,
        };
        let mut tokens = self.tokens;
        let result = if self.store_failing {
            // One failure per call: each may have waited out a timeout.
            Err(TaskError::Retriable(self.last_error.clone().unwrap_or_default()))
        } else {
            object.write(
                &ctx,
                || {
                    tokens += 1;
                    random_token(tokens)
                },
                wait,
            )
        };
        self.tokens = tokens;
        match result {
            Ok(false) => {
                self.writing.push(object);
                Ok(())
            }
            Ok(true) => {
                spillway_sdk::log::debug(&format!("wrote {} ({} records)", object.name(), object.record_count()));
                self.settled.extend(object.records.iter().map(|&id| Settlement { id, outcome: Outcome::Accept }));
                Ok(())
            }
            Err(TaskError::Retriable(e)) => {
                if !self.store_failing {
                    spillway_sdk::log::warn(&format!("writing {} failed, will retry: {e}", object.name()));
                }
                self.store_failing = true;
                self.last_error = Some(e);
                self.closing.push(object);
                Ok(())
            }
            Err(fatal) => Err(fatal),
        }
    }

    fn retry_closing(&mut self) -> Result<(), TaskError> {
        for object in std::mem::take(&mut self.closing) {
            self.write_object(object)?;
        }
        Ok(())
    }

    /// Closes the objects whose scheduled rotation is due.
    fn rotate_scheduled(&mut self, now: i64) -> Result<(), TaskError> {
        let due: Vec<ObjectKey> =
            self.open.values().filter(|o| o.deadline.is_some_and(|d| d <= now)).map(|o| o.key.clone()).collect();
        for key in due {
            self.close_object(&key)?;
        }
        Ok(())
    }

    fn largest_open(&self) -> Option<ObjectKey> {
        self.open.values().max_by_key(|o| o.buffered()).map(|o| o.key.clone())
    }

    /// Makes room for one more open object under `max.open.objects`.
    fn make_room(&mut self) -> Result<(), TaskError> {
        while self.open.len() >= self.settings.max_open {
            let Some(key) = self.largest_open() else { break };
            self.close_object(&key)?;
        }
        Ok(())
    }

    /// Writes the largest open objects while the task buffers more than its bound.
    fn enforce_budget(&mut self) -> Result<(), TaskError> {
        while self.buffered() > self.budget() {
            let Some(key) = self.largest_open() else { break };
            self.close_object(&key)?;
        }
        Ok(())
    }
}

fn parse_json(bytes: &[u8]) -> Result<Json, String> {
    serde_json::from_slice(bytes).map_err(|e| format!("the value is not JSON: {e}"))
}

fn decode(json: &Json) -> Result<Decoded, String> {
    read_json(json).map_err(|e| format!("the value is not valid Connect data: {e}"))
}

spillway_sdk::export_sink!(S3Sink);

#[cfg(test)]
mod tests;
