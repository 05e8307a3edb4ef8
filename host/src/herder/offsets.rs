//! Reading and changing a connector's offsets (Connect's
//! `/connectors/{name}/offsets`): a classic group's committed offsets, or a
//! share group's start offsets. The main loop checks that a change is
//! allowed; the broker work runs here, off the main loop, so a slow group
//! join never holds up the other requests.

use super::types::{ConnectorOffsets, OffsetPartition, OffsetValue, PartitionOffset};
use super::{HerderError, HerderResult};
use crate::connector::GroupProtocol;
use crate::kafka::clients::ClusterAccess;
use crate::kafka::groups::{self, GroupBusy, GroupDeletion, NoSuchPartition, Position};
use crate::kafka::share::{ShareGroupOffsets, ShareLag, ShareOffsetsError, StartOffset};
use regex::Regex;
use std::collections::BTreeSet;

/// A connector's group and topics.
#[derive(Clone)]
pub struct OffsetsTarget {
    /// The worker's cluster, with the connector's `admin.override.*`.
    pub cluster: ClusterAccess,
    pub group: String,
    pub protocol: GroupProtocol,
    pub topics: Vec<String>,
    /// `topics.regex`, anchored: the topics are those it matches now.
    pub topics_pattern: Option<Regex>,
}

/// What `PATCH` (alter) or `DELETE` (reset) asks for.
pub enum OffsetsChange {
    Alter(Vec<Position>),
    /// Every offset deleted (a classic group: back to the beginning of each
    /// partition where the broker cannot delete).
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
    /// Whether `topic` is one of the connector's: named, or matched.
    pub fn consumes(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic) || self.topics_pattern.as_ref().is_some_and(|p| p.is_match(topic))
    }

    /// The topics as they are now (blocking).
    fn current_topics(&self) -> anyhow::Result<Vec<String>> {
        groups::connector_topics(&self.cluster, &self.topics, self.topics_pattern.as_ref())
    }

    pub async fn read(self) -> HerderResult<ConnectorOffsets> {
        if self.protocol == GroupProtocol::Share {
            return self.read_share().await;
        }
        let positions =
            tokio::task::spawn_blocking(move || groups::committed(&self.cluster, &self.group, &self.current_topics()?))
                .await
                .map_err(|e| HerderError::Internal(e.to_string()))?
                .map_err(|e| HerderError::Internal(format!("reading offsets: {e:#}")))?;
        // As Connect lists a sink's offsets: the partitions the group has
        // committed in, and no others.
        Ok(ConnectorOffsets {
            offsets: positions
                .into_iter()
                .filter_map(|(topic, partition, offset)| {
                    Some(PartitionOffset {
                        partition: OffsetPartition { kafka_topic: topic, kafka_partition: partition },
                        offset: Some(OffsetValue { kafka_offset: offset? }),
                    })
                })
                .collect(),
        })
    }

    pub async fn change(self, change: OffsetsChange) -> HerderResult<()> {
        if self.protocol == GroupProtocol::Share {
            return self.change_share(change).await;
        }
        if let OffsetsChange::Reset = change {
            // As Connect does: delete the group, its offsets with it.
            match groups::delete_group(&self.cluster, &self.group).await.map_err(classic_error)? {
                GroupDeletion::Deleted => return Ok(()),
                GroupDeletion::NotServed => {
                    tracing::info!(group = self.group, "the broker has no DeleteGroups: rewinding the group instead")
                }
            }
        }
        tokio::task::spawn_blocking(move || match change {
            OffsetsChange::Alter(positions) => groups::alter(&self.cluster, &self.group, &positions),
            OffsetsChange::Reset => groups::reset(&self.cluster, &self.group, &self.current_topics()?),
        })
        .await
        .map_err(|e| HerderError::Internal(e.to_string()))?
        .map_err(classic_error)
    }

    async fn admin(&self) -> HerderResult<ShareGroupOffsets> {
        ShareGroupOffsets::connect(&self.cluster, &self.group).await.map_err(share_error)
    }

    /// The share group's start offsets in the connector's topics.
    async fn read_share(self) -> HerderResult<ConnectorOffsets> {
        let offsets = self.admin().await?.describe().await.map_err(share_error)?;
        Ok(ConnectorOffsets {
            offsets: offsets
                .into_iter()
                .filter(|o| self.consumes(&o.topic))
                .map(|o| PartitionOffset {
                    partition: OffsetPartition { kafka_topic: o.topic, kafka_partition: o.partition },
                    offset: Some(OffsetValue { kafka_offset: o.offset }),
                })
                .collect(),
        })
    }

    /// The share group's lag in the connector's topics, as the broker counts it.
    pub async fn read_share_lag(&self) -> HerderResult<Vec<ShareLag>> {
        let lags = self.admin().await?.lag().await.map_err(share_error)?;
        Ok(lags.into_iter().filter(|l| self.consumes(&l.topic)).collect())
    }

    /// Kafka deletes a share group's start offsets a whole topic at a time:
    /// a `null` offset must then come for each partition of that topic that
    /// has one. A reset deletes them in every topic the group has.
    async fn change_share(self, change: OffsetsChange) -> HerderResult<()> {
        let admin = self.admin().await?;
        let (deleted, moved): (Vec<Position>, Vec<Position>) = match change {
            OffsetsChange::Reset => {
                let existing = admin.describe().await.map_err(share_error)?;
                let topics: BTreeSet<String> = existing.into_iter().map(|o| o.topic).collect();
                return admin.delete(&topics.into_iter().collect::<Vec<_>>()).await.map_err(share_error);
            }
            OffsetsChange::Alter(positions) => positions.into_iter().partition(|(_, _, offset)| offset.is_none()),
        };
        let topics: BTreeSet<String> = deleted.iter().map(|(t, _, _)| t.clone()).collect();
        // Only deletions need the group's offsets, to check whole topics.
        let existing = match topics.is_empty() {
            true => Vec::new(),
            false => admin.describe().await.map_err(share_error)?,
        };
        for topic in &topics {
            let kept = existing
                .iter()
                .filter(|o| &o.topic == topic)
                .find(|o| !deleted.iter().any(|(t, p, _)| t == topic && *p == o.partition));
            if let Some(kept) = kept {
                return Err(HerderError::BadRequest(format!(
                    "Cannot alter offsets: a share group's offsets are deleted a whole topic at a time, and \
                     partition {topic}-{} would keep its offset. Give a null offset for every partition of {topic} \
                     that has one, or reset them all with DELETE on the connector's offsets.",
                    kept.partition
                )));
            }
        }
        admin.delete(&topics.into_iter().collect::<Vec<_>>()).await.map_err(share_error)?;
        let moved: Vec<StartOffset> = moved
            .into_iter()
            .filter_map(|(topic, partition, offset)| Some(StartOffset { topic, partition, offset: offset? }))
            .collect();
        admin.alter(&moved).await.map_err(share_error)
    }
}

fn classic_error(e: anyhow::Error) -> HerderError {
    if let Some(missing) = e.downcast_ref::<NoSuchPartition>() {
        HerderError::BadRequest(format!("Cannot alter offsets: {missing}"))
    } else if e.downcast_ref::<GroupBusy>().is_some() {
        // As Connect answers while a rebalance is underway.
        HerderError::Conflict(format!("Cannot alter offsets now: {e}"))
    } else {
        HerderError::Internal(format!("changing offsets: {e:#}"))
    }
}

fn share_error(e: ShareOffsetsError) -> HerderError {
    match e {
        ShareOffsetsError::Unsupported(..) => {
            HerderError::BadRequest(format!("A share-group connector's offsets cannot be read or changed here: {e}"))
        }
        ShareOffsetsError::Refused(_) => HerderError::BadRequest(format!("Cannot alter offsets: {e}")),
        ShareOffsetsError::GroupNotEmpty(_) => HerderError::Conflict(format!("Cannot alter offsets now: {e}")),
        ShareOffsetsError::Broker(_) => HerderError::Internal(format!("share group offsets: {e}")),
    }
}
