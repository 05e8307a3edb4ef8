//! Following a topic: one consumer on its own thread, assigned to given
//! partitions from their beginning and never committing, hands every record
//! to a callback as it arrives, until the follower is dropped. The config
//! and status topics are read this way by every worker, so that each sees
//! what the others write. The consumer stays open for the worker's life: on
//! librdkafka's mock every connection closed to a broker ends the share
//! sessions on it.

use crate::kafka::clients::{ClusterAccess, Role};
use anyhow::{Context, Result, anyhow};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// One record: its offset, key and value (`None`: a tombstone).
pub struct Followed<'a> {
    pub offset: i64,
    pub key: String,
    pub value: Option<&'a [u8]>,
}

/// Stops its thread when dropped.
pub struct Follower {
    stop: Arc<AtomicBool>,
}

impl Drop for Follower {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The end offsets (high watermarks) the partitions had when following
/// began, so a caller can wait until it has read that far.
pub type Ends = Vec<(i32, i64)>;

/// Starts following `partitions` of `topic` (`None`: all it has) from
/// their beginning. Blocks until the topic is readable (a topic made on
/// first use appears a moment after it is asked for).
pub fn follow(
    cluster: &ClusterAccess,
    topic: &str,
    partitions: Option<&[i32]>,
    timeout: Duration,
    mut on_record: impl FnMut(Followed<'_>) + Send + 'static,
) -> Result<(Follower, Ends)> {
    let consumer: BaseConsumer = cluster
        .rdkafka(Role::Consumer)
        .set("group.id", format!("spillway-follower-{}", uuid::Uuid::new_v4()))
        .set("enable.auto.commit", "false")
        .set("allow.auto.create.topics", "true")
        .create()
        .with_context(|| format!("a consumer for {topic}"))?;
    let deadline = Instant::now() + timeout;
    let wanted: Vec<i32> = loop {
        // Asking for its metadata makes a topic made on first use.
        let known = consumer
            .fetch_metadata(Some(topic), timeout)
            .ok()
            .and_then(|m| m.topics().first().map(|t| t.partitions().iter().map(|p| p.id()).collect::<Vec<_>>()))
            .unwrap_or_default();
        let wanted: Vec<i32> = match partitions {
            Some(p) => p.iter().copied().filter(|p| known.contains(p)).collect(),
            None => known,
        };
        let ready = !wanted.is_empty() && wanted.iter().all(|p| consumer.fetch_watermarks(topic, *p, timeout).is_ok());
        if ready && partitions.is_none_or(|p| p.len() == wanted.len()) {
            break wanted;
        }
        if Instant::now() >= deadline {
            return Err(anyhow!("{topic} did not become readable within {timeout:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut ends = Vec::new();
    let mut list = TopicPartitionList::new();
    for partition in &wanted {
        let (low, high) = consumer
            .fetch_watermarks(topic, *partition, timeout)
            .map_err(|e| anyhow!("reading the end of {topic}-{partition}: {e}"))?;
        ends.push((*partition, high));
        list.add_partition_offset(topic, *partition, Offset::Offset(low))?;
    }
    consumer.assign(&list)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopped = stop.clone();
    let name = topic.to_string();
    std::thread::Builder::new().name(format!("follow-{topic}")).spawn(move || {
        while !stopped.load(Ordering::Relaxed) {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let Some(key) = message.key().map(|k| String::from_utf8_lossy(k).into_owned()) else { continue };
                    on_record(Followed { offset: message.offset(), key, value: message.payload() });
                }
                Some(Err(e)) => tracing::warn!(topic = name, error = %e, "following the topic"),
                None => {}
            }
        }
    })?;
    Ok((Follower { stop }, ends))
}
