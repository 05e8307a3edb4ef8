//! Kafka clusters the operator granted (`spillway:kafka`).
//!
//! A plugin opens a cluster by the name of its grant, never by its
//! bootstrap servers or credentials: with
//! `plugin.grant.kafka.target.bootstrap.servers=broker:9092` (and the target
//! cluster's client settings) in the connector config, `Cluster::open("target")`
//! reaches it through a producer that the host owns.
//!
//! [`Cluster::send`] produces [`OutputRecord`]s and returns one [`Delivery`]
//! per record, in order: accept a source record only once its output was
//! delivered. Name the source record (`source: Some(record.id)`) so that the
//! host can write offset syncs ([`Cluster::offset_syncs`]). Under a classic
//! group with `plugin.grant.kafka.<name>.exactly.once=true`, every send joins
//! the task's transaction, committed by the host with the source offsets.
//!
//! [`Cluster::ensure_topic`] creates a target topic once, from any task;
//! [`source`] reads the source cluster's description of the connector's own
//! topics and its consumer groups' offsets, for translating them.

pub use crate::__private::bindings::spillway::kafka::producer::{
    Cluster, Delivered, Delivery, GroupOffset, Header, OffsetSync, OutputRecord, PendingSend, TopicDescription,
    TopicEnsured,
};

/// The cluster the connector consumes from, read only.
pub mod source {
    pub use crate::__private::bindings::spillway::kafka::source::{describe_topic, group_offsets, list_groups};
}
