//! Where a task's records come from: a share group or a classic group, behind
//! one face of poll, acknowledge and commit.

use crate::kafka::classic::ClassicSource;
use crate::kafka::{AckType, ConsumedRecord};
use anyhow::Result;
use std::time::Duration;

pub enum Source {
    Classic(ClassicSource),
}

impl Source {
    pub async fn poll(&mut self, timeout: Duration) -> Result<Vec<ConsumedRecord>> {
        match self {
            Source::Classic(s) => s.poll(timeout).await,
        }
    }

    /// Refused when the record is no longer ours (its lock expired, its
    /// partition moved): the broker will deliver it again.
    pub fn acknowledge(&mut self, record: &ConsumedRecord, ack: AckType) -> Result<()> {
        match self {
            Source::Classic(s) => s.acknowledge(record, ack),
        }
    }

    pub async fn commit(&mut self) -> Result<()> {
        match self {
            Source::Classic(s) => s.commit().await,
        }
    }

    pub async fn close(self) -> Result<()> {
        match self {
            Source::Classic(mut s) => s.commit().await,
        }
    }
}
