//! Reading and changing a classic-group connector's committed offsets
//! (Connect's `/connectors/{name}/offsets`). The main loop checks that a
//! change is allowed; the broker work runs here, on a blocking thread, so a
//! slow group join never holds up the other requests.

use super::types::{ConnectorOffsets, OffsetPartition, OffsetValue, PartitionOffset};
use super::{HerderError, HerderResult};
use crate::kafka::groups::{self, GroupBusy, NoSuchPartition, Position};

/// A connector's consumer group and topics.
pub struct OffsetsTarget {
    pub bootstrap: String,
    pub group: String,
    pub topics: Vec<String>,
}

/// What `PATCH` (alter) or `DELETE` (reset) asks for.
pub enum OffsetsChange {
    Alter(Vec<Position>),
    /// Back to the beginning of every partition.
    Reset,
}

impl OffsetsChange {
    pub fn alter(offsets: ConnectorOffsets) -> Self {
        OffsetsChange::Alter(
            offsets
                .offsets
                .into_iter()
                .map(|p| (p.partition.kafka_topic, p.partition.kafka_partition, p.offset.map(|v| v.kafka_offset)))
                .collect(),
        )
    }
}

impl OffsetsTarget {
    pub async fn read(self) -> HerderResult<ConnectorOffsets> {
        let positions =
            tokio::task::spawn_blocking(move || groups::committed(&self.bootstrap, &self.group, &self.topics))
                .await
                .map_err(|e| HerderError::Internal(e.to_string()))?
                .map_err(|e| HerderError::Internal(format!("reading offsets: {e:#}")))?;
        Ok(ConnectorOffsets {
            offsets: positions
                .into_iter()
                .map(|(topic, partition, offset)| PartitionOffset {
                    partition: OffsetPartition { kafka_topic: topic, kafka_partition: partition },
                    offset: offset.map(|o| OffsetValue { kafka_offset: o }),
                })
                .collect(),
        })
    }

    pub async fn change(self, change: OffsetsChange) -> HerderResult<()> {
        tokio::task::spawn_blocking(move || match change {
            OffsetsChange::Alter(positions) => groups::alter(&self.bootstrap, &self.group, &positions),
            OffsetsChange::Reset => groups::reset(&self.bootstrap, &self.group, &self.topics),
        })
        .await
        .map_err(|e| HerderError::Internal(e.to_string()))?
        .map_err(|e| {
            if let Some(missing) = e.downcast_ref::<NoSuchPartition>() {
                HerderError::BadRequest(format!("Cannot alter offsets: {missing}"))
            } else if e.downcast_ref::<GroupBusy>().is_some() {
                // As Connect answers while a rebalance is underway.
                HerderError::Conflict(format!("Cannot alter offsets now: {e}"))
            } else {
                HerderError::Internal(format!("changing offsets: {e:#}"))
            }
        })
    }
}
