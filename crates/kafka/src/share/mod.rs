//! A KIP-932 share-group consumer on the `kafka-protocol` codec.
//!
//! Layout: [`connection`] frames requests on one TCP connection per broker,
//! [`cluster`] keeps metadata and the connection pool, [`membership`]
//! heartbeats in a background task (and matches a pattern subscription
//! again, through [`subscription`]), [`session`] tracks the share session
//! with each partition leader, [`fetch`] decodes acquired records, and
//! [`acks`] holds the records we own until they are acknowledged. The
//! consumer itself ([`consumer`]) drives ShareFetch and ShareAcknowledge.
//! [`offsets`] reads and changes a group's start offsets from outside it;
//! [`renew`] and [`lag`] encode KIP-1222's lock renewal and KIP-1226's lag,
//! which kafka-protocol lacks.

mod acks;
mod cluster;
mod configs;
mod connection;
mod consumer;
mod error;
mod fetch;
mod lag;
mod membership;
mod offsets;
mod renew;
mod session;
mod subscription;

/// Our kafka-protocol client, for group RPCs librdkafka lacks or mishandles.
pub use cluster::Cluster;
pub use configs::{DeliveryLimit, KAFKA_DEFAULT_DELIVERY_LIMIT};
pub(crate) use connection::Connection;
pub use consumer::ShareConsumer;
pub use error::{AckFailure, ShareError};
pub use offsets::{ShareGroupOffsets, ShareLag, ShareOffsetsError, StartOffset, is_share_group};

use crate::security::ClientSecurity;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// How often a `topics_regex` subscription is matched against the cluster's
/// topics again, to pick up topics created (or deleted) since. The Java
/// consumer's `metadata.max.age.ms` (5 min) and librdkafka's
/// `topic.metadata.refresh.interval.ms` play this part there; shorter here,
/// so that a new topic is not left unread for minutes, while a Metadata
/// request this often costs a cluster nothing.
pub const TOPICS_REGEX_REFRESH: Duration = Duration::from_secs(30);

/// Settings of a [`ShareConsumer`].
#[derive(Clone, Debug)]
pub struct ShareConsumerConfig {
    /// Comma-separated `host:port` list.
    pub bootstrap_servers: String,
    pub group_id: String,
    pub topics: Vec<String>,
    /// Instead of `topics`: every topic whose whole name matches this regex
    /// (Connect's `topics.regex`), found in the cluster's metadata.
    pub topics_regex: Option<String>,
    /// How often `topics_regex` is matched again after the join; `None`:
    /// never.
    pub topics_refresh: Option<Duration>,
    pub client_id: String,
    /// How long a ShareFetch may wait on the broker for records.
    pub max_wait: Duration,
    /// Records per ShareFetch (a hint to the broker).
    pub max_records: i32,
    /// Deadline of a single request, on top of `max_wait` for fetches.
    pub request_timeout: Duration,
    /// TLS and SASL, from the consumer's client settings.
    pub security: ClientSecurity,
    /// Where a new group starts (`earliest`, `latest`, `by_duration:..`),
    /// set as the group's `share.auto.offset.reset` unless the group has its
    /// own; `None` leaves it to the broker (latest by default).
    pub auto_offset_reset: Option<String>,
    /// Group configs to set on the group before the join (KIP-932's
    /// `share.*` names), as the connector gives them.
    pub group_configs: BTreeMap<String, String>,
}

impl ShareConsumerConfig {
    /// A configuration with the usual defaults for the rest.
    pub fn new(bootstrap_servers: &str, group_id: &str, topics: &[&str]) -> Self {
        ShareConsumerConfig {
            bootstrap_servers: bootstrap_servers.to_string(),
            group_id: group_id.to_string(),
            topics: topics.iter().map(|t| t.to_string()).collect(),
            topics_regex: None,
            topics_refresh: Some(TOPICS_REGEX_REFRESH),
            client_id: "spillway".to_string(),
            max_wait: Duration::from_millis(500),
            max_records: 500,
            request_timeout: Duration::from_secs(30),
            security: ClientSecurity::default(),
            auto_offset_reset: None,
            group_configs: BTreeMap::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: &str, partition: i32) -> Self {
        TopicPartition { topic: topic.to_string(), partition }
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

/// Outcome of the acknowledgements sent since the previous commit (by
/// `commit_sync` itself or piggybacked on fetches): per partition, `None` when
/// the broker applied them, the failure otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CommitResult {
    pub partitions: BTreeMap<TopicPartition, Option<AckFailure>>,
}

impl CommitResult {
    /// True when every partition's acknowledgements took effect.
    pub fn is_ok(&self) -> bool {
        self.partitions.values().all(Option::is_none)
    }

    pub fn failures(&self) -> Vec<(TopicPartition, AckFailure)> {
        self.partitions.iter().filter_map(|(tp, f)| f.clone().map(|f| (tp.clone(), f))).collect()
    }

    fn record(&mut self, tp: TopicPartition, outcome: Option<AckFailure>) {
        // A failure is never overwritten by a later success.
        let slot = self.partitions.entry(tp).or_insert(None);
        if slot.is_none() {
            *slot = outcome;
        }
    }
}
