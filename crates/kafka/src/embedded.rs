//! The embedded default broker: librdkafka's in-process mock cluster, so that
//! Spillway's main job runs with no outside service.
//!
//! The mock speaks the Kafka protocol on 127.0.0.1 with classic consumer
//! groups, idempotent producers and transactions; the librdkafka bundled here
//! has no share groups, so connectors on it use the classic group mode.

use anyhow::{Result, anyhow};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

pub struct EmbeddedBroker {
    cluster: MockCluster<'static, DefaultProducerContext>,
}

impl EmbeddedBroker {
    pub fn start(brokers: i32) -> Result<Self> {
        let cluster = MockCluster::new(brokers).map_err(|e| anyhow!("starting embedded broker: {e}"))?;
        Ok(EmbeddedBroker { cluster })
    }

    pub fn bootstrap_servers(&self) -> String {
        self.cluster.bootstrap_servers()
    }

    pub fn create_topic(&self, topic: &str, partitions: i32) -> Result<()> {
        self.cluster.create_topic(topic, partitions, 1).map_err(|e| anyhow!("creating topic {topic}: {e}"))
    }
}
