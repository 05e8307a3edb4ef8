//! A host-owned idempotent producer: feeds sample data and writes dead-letter
//! records. Every send is awaited: a record counts as written only once the
//! broker acknowledged it.

use anyhow::{Context, Result, anyhow};
use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::time::Duration;

#[derive(Clone)]
pub struct Producer {
    inner: FutureProducer,
}

/// A record to produce.
pub struct OutgoingRecord<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

impl Producer {
    pub fn new(bootstrap: &str, overrides: &[(String, String)]) -> Result<Self> {
        let mut config = ClientConfig::new();
        config
            .set("bootstrap.servers", bootstrap)
            .set("enable.idempotence", "true")
            .set("acks", "all")
            .set("linger.ms", "5");
        for (k, v) in overrides {
            config.set(k, v);
        }
        Ok(Producer { inner: config.create()? })
    }

    /// Creates the producer and waits until it has learnt the cluster's
    /// brokers. librdkafka then drops its bootstrap connection; done before a
    /// share consumer of the same process joins, that cannot end the
    /// consumer's share sessions (librdkafka's mock ends every share session
    /// on a broker whenever any connection to it closes).
    pub async fn connect(bootstrap: &str, overrides: &[(String, String)]) -> Result<Self> {
        let producer = Producer::new(bootstrap, overrides)?;
        let client = producer.inner.clone();
        use rdkafka::producer::Producer as _;
        tokio::task::spawn_blocking(move || client.client().fetch_metadata(None, Duration::from_secs(10)))
            .await?
            .context("reading cluster metadata")?;
        Ok(producer)
    }

    /// Sends one record and waits for the broker's acknowledgement.
    pub async fn send(&self, record: OutgoingRecord<'_>) -> Result<(i32, i64)> {
        let mut headers = OwnedHeaders::new();
        for (key, value) in &record.headers {
            headers = headers.insert(Header { key, value: value.as_deref() });
        }
        let future = future_record(record.topic, record.partition, record.key, record.value, headers, None);
        let delivery = self.inner.send(future, Duration::from_secs(30)).await;
        delivery.map(|d| (d.partition, d.offset)).map_err(|(e, _)| anyhow!("producing to {}: {e}", record.topic))
    }

    /// Sends `count` sample records `key-<i>` / JSON values to `topic`,
    /// keeping up to 1000 sends in flight.
    pub async fn send_samples(&self, topic: &str, start: u64, count: u64) -> Result<()> {
        use futures::stream::{self, StreamExt, TryStreamExt};
        stream::iter(start..start + count)
            .map(|i| async move {
                let key = format!("key-{i}");
                let value = format!(r#"{{"id":{i},"message":"sample record {i}"}}"#);
                self.send(OutgoingRecord {
                    topic,
                    partition: None,
                    key: Some(key.as_bytes()),
                    value: Some(value.as_bytes()),
                    headers: vec![("source".into(), Some(b"spillway-sample".to_vec()))],
                })
                .await
            })
            .buffer_unordered(1000)
            .try_for_each(|_| async { Ok(()) })
            .await
    }
}

/// A record for rdkafka from its optional parts; none of them copied.
pub(crate) fn future_record<'a>(
    topic: &'a str,
    partition: Option<i32>,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: OwnedHeaders,
    timestamp: Option<i64>,
) -> FutureRecord<'a, [u8], [u8]> {
    let mut record: FutureRecord<'a, [u8], [u8]> = FutureRecord::to(topic).headers(headers);
    record.key = key;
    record.payload = value;
    record.partition = partition;
    record.timestamp = timestamp;
    record
}
