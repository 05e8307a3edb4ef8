//! The dead-letter queue: a rejected record is copied there, with Connect's
//! `__connect.errors.*` context headers, before it is acknowledged.

use anyhow::Result;
use spillway_kafka::ConsumedRecord;
use spillway_kafka::producer::{OutgoingRecord, Producer};

/// Where a record failed, as Connect's `__connect.errors.stage` names it.
#[derive(Clone, Debug)]
pub enum Stage {
    /// Fetched but undecodable (a corrupt record batch).
    Consume,
    /// Its key or value did not read with the connector's converter.
    KeyConverter,
    ValueConverter,
    /// A transform (its class, or its plugin's name) could not transform it.
    Transformation(String),
    /// Rejected by the plugin, or still failing when retries ran out.
    Put,
}

pub struct DeadLetterQueue {
    pub producer: Producer,
    pub topic: String,
    pub context_headers: bool,
    pub connector: String,
    pub task: u32,
}

impl DeadLetterQueue {
    /// Returns once the broker has the record.
    pub async fn send(&self, record: &ConsumedRecord, reason: &str, stage: &Stage) -> Result<()> {
        let mut headers: Vec<(String, Option<Vec<u8>>)> =
            record.headers.iter().map(|(k, v)| (k.clone(), v.as_ref().map(|b| b.to_vec()))).collect();
        let stage_name = match stage {
            Stage::Consume => "KAFKA_CONSUME",
            Stage::KeyConverter => "KEY_CONVERTER",
            Stage::ValueConverter => "VALUE_CONVERTER",
            Stage::Transformation(_) => "TRANSFORMATION",
            Stage::Put => "TASK_PUT",
        };
        // Connect names the class that failed and its exception; a plugin's
        // rejection has neither.
        let (class, exception) = match stage {
            Stage::Transformation(class) => (class.as_str(), "org.apache.kafka.connect.errors.DataException"),
            _ => ("spillway.plugin.RecordRejected", "spillway.plugin.RecordRejected"),
        };
        if self.context_headers {
            let context = [
                ("__connect.errors.topic", record.topic.clone()),
                ("__connect.errors.partition", record.partition.to_string()),
                ("__connect.errors.offset", record.offset.to_string()),
                ("__connect.errors.connector.name", self.connector.clone()),
                ("__connect.errors.task.id", self.task.to_string()),
                ("__connect.errors.stage", stage_name.into()),
                ("__connect.errors.class.name", class.into()),
                ("__connect.errors.exception.class.name", exception.into()),
                ("__connect.errors.exception.message", reason.to_string()),
            ];
            headers.extend(context.into_iter().map(|(k, v)| (k.to_string(), Some(v.into_bytes()))));
        }
        self.producer
            .send(OutgoingRecord {
                topic: &self.topic,
                partition: None,
                key: record.key.as_deref(),
                value: record.value.as_deref(),
                headers,
            })
            .await?;
        Ok(())
    }
}
