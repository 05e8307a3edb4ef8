//! Errors of the share consumer.

use kafka_protocol::ResponseError;
use std::fmt;

/// A failure of a share-consumer call.
#[derive(Debug, thiserror::Error)]
pub enum ShareError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("connection to {addr} failed: {source}")]
    Io {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("request {api} to {addr} timed out")]
    Timeout { addr: String, api: i16 },
    /// TLS or SASL failed: retrying with the same settings will not help.
    #[error("authenticating to {addr} failed: {message}")]
    Authentication { addr: String, message: String },
    #[error("connection to {addr} is closed")]
    Disconnected { addr: String },
    #[error("protocol error: {0}")]
    Protocol(String),
    #[error("{context}: {error}")]
    Broker { error: ResponseError, context: String },
    #[error("{topic}-{partition}@{offset} is not acquired by this consumer")]
    NotAcquired { topic: String, partition: i32, offset: i64 },
    /// The acquisition lock ran out (or the broker released it with the share
    /// session); the record was or will be delivered again, so no ack is sent.
    #[error("acquisition lock on {topic}-{partition}@{offset} expired; it will be redelivered")]
    LockExpired { topic: String, partition: i32, offset: i64 },
    #[error("acknowledgements failed on close: {0:?}")]
    CommitFailed(Vec<(super::TopicPartition, AckFailure)>),
    #[error("the group membership task stopped: {0}")]
    Membership(String),
}

impl ShareError {
    pub(crate) fn broker(code: i16, context: impl Into<String>) -> Option<Self> {
        ResponseError::try_from_code(code).map(|error| ShareError::Broker { error, context: context.into() })
    }

    /// A reply, or the error it failed with: its sending's, or the broker's
    /// top-level error code (`code` reads it) when that is not NONE.
    pub(crate) fn top_level<R>(reply: Result<R, ShareError>, code: fn(&R) -> i16, context: &str) -> Result<R, Self> {
        let reply = reply?;
        match ShareError::broker(code(&reply), context) {
            Some(e) => Err(e),
            None => Ok(reply),
        }
    }

    /// The broker error code behind this error, if any.
    pub fn response_error(&self) -> Option<ResponseError> {
        match self {
            ShareError::Broker { error, .. } => Some(*error),
            _ => None,
        }
    }

    /// Whether the broker said the group's coordinator is moving or not yet
    /// ready: the call may succeed once the coordinator is found again.
    pub fn coordinator_moving(&self) -> bool {
        self.response_error().is_some_and(coordinator_moving)
    }

    /// A transport failure: the connection is gone and so is every share
    /// session that lived on it.
    pub(crate) fn is_transport(&self) -> bool {
        matches!(self, ShareError::Io { .. } | ShareError::Timeout { .. } | ShareError::Disconnected { .. })
    }
}

/// Why the acknowledgements of one partition did not take effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckFailure {
    /// The broker answered with this error code.
    Broker(ResponseError),
    /// Locks ran out before the acks could be sent; not sent.
    LockExpired,
    /// The connection broke; the broker released the records with the session.
    Disconnected(String),
    /// The broker's reply did not mention the partition.
    NoResponse,
}

impl fmt::Display for AckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AckFailure::Broker(e) => write!(f, "{e}"),
            AckFailure::LockExpired => f.write_str("acquisition lock expired"),
            AckFailure::Disconnected(why) => write!(f, "connection lost: {why}"),
            AckFailure::NoResponse => f.write_str("no result for the partition in the reply"),
        }
    }
}

impl From<&ShareError> for AckFailure {
    fn from(e: &ShareError) -> Self {
        match e.response_error() {
            Some(code) => AckFailure::Broker(code),
            None => AckFailure::Disconnected(e.to_string()),
        }
    }
}

/// Whether `error` means the group's coordinator is elsewhere or not ready
/// yet (a broker starting, a partition of `__consumer_offsets` or
/// `__share_group_state` loading or moving): worth finding it again and
/// retrying, unlike any other group error.
pub fn coordinator_moving(error: ResponseError) -> bool {
    matches!(
        error,
        ResponseError::NotCoordinator
            | ResponseError::CoordinatorNotAvailable
            | ResponseError::CoordinatorLoadInProgress
    )
}
