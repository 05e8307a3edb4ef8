//! How far each connector's group is behind the end of its topics, per
//! partition. A classic group: the committed offset's distance from the
//! log end. A share group: the broker's own count (KIP-1226,
//! DescribeShareGroupOffsets v1), from the share-partition start offset to
//! the end, less what was acknowledged beyond it, so records in flight
//! count until they are acknowledged. Measured every
//! `metrics.lag.interval.ms` by a task of its own, off the herder's loop;
//! the status and `/metrics` show the last measure and never wait for the
//! broker.

use super::offsets::OffsetsTarget;
use super::types::{ConnectorLag, PartitionLag};
use super::{HerderError, HerderResult, WeakHerder};
use crate::connector::GroupProtocol;
use crate::kafka::groups;
use crate::kafka::share::ShareLag;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::MissedTickBehavior;

/// The last measure of each connector's lag; the monitor is its one writer.
#[derive(Clone, Default)]
pub struct LagView(Arc<RwLock<BTreeMap<String, ConnectorLag>>>);

impl LagView {
    pub fn of(&self, connector: &str) -> Option<ConnectorLag> {
        self.0.read().expect("lag view poisoned").get(connector).cloned()
    }

    pub fn all(&self) -> BTreeMap<String, ConnectorLag> {
        self.0.read().expect("lag view poisoned").clone()
    }
}

/// Measures every connector's lag each `every`, until the herder stops. A
/// connector whose measure fails keeps its last one (its `measured_at_ms`
/// says how old); a deleted connector's is dropped.
pub(super) async fn monitor(herder: WeakHerder, view: LagView, every: Duration) {
    let mut ticker = tokio::time::interval(every);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let Some(handle) = herder.upgrade() else { return };
        let Ok(names) = handle.connectors().await else { return };
        let mut measured = BTreeMap::new();
        for name in names {
            let last = view.of(&name);
            let target = handle.offsets_target(name.clone()).await;
            match target.map(measure) {
                Ok(measuring) => match measuring.await {
                    Ok(lag) => {
                        measured.insert(name, lag);
                    }
                    Err(e) => {
                        tracing::debug!(connector = %name, error = %e, "lag not measured");
                        measured.extend(last.map(|lag| (name, lag)));
                    }
                },
                Err(_) => continue, // deleted, or its config invalid
            }
        }
        drop(handle);
        *view.0.write().expect("lag view poisoned") = measured;
    }
}

/// One connector's lag now: its group's positions, then its partitions'
/// ends (a position read first can only make the lag look larger).
pub(super) async fn measure(target: OffsetsTarget) -> HerderResult<ConnectorLag> {
    let partitions: Vec<PartitionLag> = match target.protocol {
        GroupProtocol::Classic => {
            let positions = target.clone().read().await?;
            let at: BTreeMap<(String, i32), i64> = positions
                .offsets
                .into_iter()
                .filter_map(|p| Some(((p.partition.kafka_topic, p.partition.kafka_partition), p.offset?.kafka_offset)))
                .collect();
            let ends = ends(&target).await?;
            ends.into_iter()
                .map(|(topic, partition, low, high)| {
                    let offset = at.get(&(topic.clone(), partition)).copied();
                    behind(topic, partition, offset, None, low, high)
                })
                .collect()
        }
        GroupProtocol::Share => {
            let lags: BTreeMap<(String, i32), ShareLag> =
                target.read_share_lag().await?.into_iter().map(|l| ((l.topic.clone(), l.partition), l)).collect();
            let ends = ends(&target).await?;
            ends.into_iter()
                .map(|(topic, partition, low, high)| {
                    let lag = lags.get(&(topic.clone(), partition));
                    let (start, counted) = (lag.and_then(|l| l.start_offset), lag.and_then(|l| l.records));
                    behind(topic, partition, start, counted, low, high)
                })
                .collect()
        }
    };
    let measured_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    Ok(ConnectorLag { records: partitions.iter().map(|p| p.records).sum(), partitions, measured_at_ms })
}

/// One partition's lag: what the broker counted (a share group's), else
/// the distance from the group's position to the end; with no position
/// yet, every record from the first (the group reads from the earliest, as
/// Connect's sinks do).
fn behind(
    topic: String,
    partition: i32,
    offset: Option<i64>,
    counted: Option<i64>,
    low: i64,
    high: i64,
) -> PartitionLag {
    let from = offset.unwrap_or(low).max(low);
    let records = counted.unwrap_or((high - from).max(0));
    PartitionLag { topic, partition, offset, log_end: high, records }
}

/// Each of the connector's partitions, with its first offset and its end.
async fn ends(target: &OffsetsTarget) -> HerderResult<Vec<(String, i32, i64, i64)>> {
    let (cluster, topics, pattern) = (target.cluster.clone(), target.topics.clone(), target.topics_pattern.clone());
    tokio::task::spawn_blocking(move || {
        let topics = groups::connector_topics(&cluster, &topics, pattern.as_ref())?;
        groups::watermarks(&cluster, &topics)
    })
    .await
    .map_err(|e| HerderError::Internal(e.to_string()))?
    .map_err(|e| HerderError::Internal(format!("reading the topics' ends: {e:#}")))
}
