//! Admission: fetched records become the task's, then each is converted
//! and transformed, in Connect's order, before any is put. A record that
//! cannot be read at a stage is rejected there; one a transform drops is
//! done.

use super::{Failure, TaskLoop};
use crate::dead_letter::Stage as ErrorStage;
use crate::in_flight::Stage;
use crate::transforms::Transformed;
use spillway_kafka::{AckType, ConsumedRecord};
use std::sync::atomic::Ordering::Relaxed;

impl TaskLoop {
    /// Takes fetched records into the task at `stage`; one that could not be
    /// decoded goes straight to rejection, as no plugin could write it.
    pub(super) async fn admit(&mut self, records: Vec<ConsumedRecord>, stage: Stage) -> Result<Vec<u64>, Failure> {
        // All are the task's before any is converted: a converter that
        // fails the task leaves none outside the set, which releases them.
        let admitted: Vec<(u64, Option<String>)> = records
            .into_iter()
            .map(|record| {
                let unreadable = record.undecodable.clone();
                (self.records.admit(record, stage.clone()), unreadable)
            })
            .collect();
        let mut converted = Vec::with_capacity(admitted.len());
        for (id, unreadable) in admitted {
            if let Some(reason) = unreadable {
                self.reject(id, reason, ErrorStage::Consume).await?;
                continue;
            }
            match self.converters.convert(&mut self.records, id).await? {
                Ok(()) => converted.push(id),
                Err((stage, reason)) => self.reject(id, reason, stage).await?,
            }
        }
        let fates = self
            .transforms
            .apply(&mut self.records, &converted)
            .await
            .map_err(|e| Failure(format!("transform: {e}")))?;
        let mut ids = Vec::with_capacity(fates.len());
        for (id, fate) in fates {
            match fate {
                Transformed::Put => ids.push(id),
                Transformed::Dropped => {
                    self.acknowledge(id, AckType::Accept);
                    self.metrics.dropped_by_transforms.fetch_add(1, Relaxed);
                }
                Transformed::Failed(f) => self.reject(id, f.message, ErrorStage::Transformation(f.class)).await?,
            }
        }
        Ok(ids)
    }
}
