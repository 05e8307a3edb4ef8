//! Kafka Connect's single message transforms (SMTs) and predicates, which
//! the host runs on each record between its converters and the sink's
//! `put()`, in Connect's order: convert, transform, put.
//!
//! A connector config names them in Connect's grammar (`transforms=a,b`,
//! `transforms.a.type=<class>`, `transforms.a.predicate=p`,
//! `transforms.a.negate`, `predicates=p`, `predicates.p.type=<class>`), by
//! the class names Connect users know (`config.rs`), or names a transform
//! plugin, which the task runs ([`Step::Plugin`]). A key or value is read
//! as Connect's data in JSON (`data.rs`): with its schema when it is
//! JsonConverter's envelope (`{"schema":…,"payload":…}`, what the host's
//! AvroConverter hands on too), schemaless otherwise.
//!
//! A leaf crate beside the host's layers: it knows Spillway's config table
//! machinery and nothing else.

mod builtin;
mod config;
mod data;
mod debezium;
mod predicates;

pub use config::{Chain, PluginStep, Problem, Stage, Step};
pub use data::Data;

use bytes::Bytes;
use spillway_config::ConfigDef;

/// A built-in class as Connect's `GET /connector-plugins?connectorsOnly=false`
/// lists it: its type there, its class name, and its keys.
pub struct Builtin {
    /// `transformation` or `predicate`.
    pub kind: &'static str,
    pub class: &'static str,
    pub def: &'static ConfigDef,
}

/// Every built-in transform, then every built-in predicate.
pub fn builtins() -> impl Iterator<Item = Builtin> {
    let transforms = builtin::all().iter().map(|c| Builtin { kind: "transformation", class: c.name, def: &c.def });
    let predicates = predicates::all().iter().map(|c| Builtin { kind: "predicate", class: c.name, def: &c.def });
    transforms.chain(predicates)
}

/// A record as the transforms see it: a sink record's fields, with its key
/// and value as bytes (each transform reads and writes them as [`Data`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Record {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// Milliseconds since the Unix epoch; -1 when there is none.
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<(String, Option<Bytes>)>,
}

/// One transform, as Connect's `Transformation`: a record in, the record
/// changed or `None` (dropped: acknowledged without reaching the sink), or
/// an error naming why it cannot be transformed.
pub trait Transform: Send + Sync {
    fn apply(&self, record: Record) -> Result<Option<Record>, String>;
}

/// A condition on a record, as Connect's `Predicate`.
pub trait Predicate: Send + Sync {
    fn test(&self, record: &Record) -> bool;
}

/// A record one stage of the chain could not transform: the stage's class
/// (for the dead-letter queue's `__connect.errors.class.name`) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub class: String,
    pub message: String,
}

#[cfg(test)]
mod tests;
