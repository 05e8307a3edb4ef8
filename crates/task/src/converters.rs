//! The converters a task runs between its source and its plugin, in
//! Connect's order (convert, then put): a record's key and value as the
//! connector's `key.converter` and `value.converter` read them.

use super::dead_letter::Stage as ErrorStage;
use super::in_flight::InFlight;
use super::run::Failure;
use anyhow::{Result, anyhow};
use spillway_connector::Converters;
use spillway_converters::{ConvertError, Converter};
use spillway_kafka::ConsumedRecord;

pub(super) struct Converting {
    key: Converter,
    value: Converter,
}

impl Converting {
    pub fn new(config: &Converters) -> Result<Self> {
        let converter = |registry: &Option<spillway_connector::RegistryConfig>| match registry {
            Some(registry) => {
                // A registry's client is reqwest's, which needs the process's TLS provider.
                spillway_capabilities::tls::install_crypto_provider();
                Converter::avro(registry.clone()).map_err(|e| anyhow!(e))
            }
            None => Ok(Converter::AsIs),
        };
        Ok(Converting { key: converter(&config.key)?, value: converter(&config.value)? })
    }

    /// Converts record `id` in place. `Ok(Err(..))`: the record does not
    /// read, and is rejected at the stage named (to the dead-letter queue,
    /// as Connect routes it). `Err`: the registry could not answer, which
    /// is no record's fault: the task fails, releasing its records.
    pub async fn convert(&self, records: &mut InFlight, id: u64) -> Result<Result<(), (ErrorStage, String)>, Failure> {
        if matches!((&self.key, &self.value), (Converter::AsIs, Converter::AsIs)) {
            return Ok(Ok(()));
        }
        let Some(tracked) = records.get(id) else { return Ok(Ok(())) };
        let record = &tracked.record;
        let read = |result: Result<_, ConvertError>, stage: ErrorStage, role: &str| match result {
            Ok(bytes) => Ok(Ok(bytes)),
            Err(ConvertError::Record(why)) => Ok(Err((stage, format!("{role} converter: {why}")))),
            Err(ConvertError::Registry(why)) => Err(Failure(format!("{role} converter: {why}"))),
        };
        let key = match read(self.key.convert(record.key.as_ref()).await, ErrorStage::KeyConverter, "key")? {
            Ok(key) => key,
            Err(rejected) => return Ok(Err(rejected)),
        };
        let value = match read(self.value.convert(record.value.as_ref()).await, ErrorStage::ValueConverter, "value")? {
            Ok(value) => value,
            Err(rejected) => return Ok(Err(rejected)),
        };
        records.put_as(id, ConsumedRecord { key, value, ..record.clone() });
        Ok(Ok(()))
    }
}
