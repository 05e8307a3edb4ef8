//! Object storage the operator granted (`spillway:object-store`).
//!
//! A plugin opens a bucket by the name of its grant, never by a URL or
//! credentials: with `plugin.grant.object-store.archive.url=s3://bucket/prefix`
//! in the connector config, `Bucket::open("archive")` reaches that prefix and
//! nothing else. Paths are relative to the granted prefix. Errors are the
//! one [`TaskError`](crate::TaskError) classification, so `?` in `put` turns a
//! timeout into a retry of the batch and a denial into a failed task.
//!
//! A plugin that calls nothing here does not import the capability and
//! needs no grant for it.

pub use crate::__private::bindings::spillway::object_store::buckets::{Bucket, ObjectMeta, PendingWrite, Upload};
