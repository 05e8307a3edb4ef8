//! Kafka Connect's converters, run by the host between the consumer and the
//! plugin, as Connect's worker runs them. A record's key or value in
//! Confluent's wire format (a zero byte, a four-byte schema id, the Avro
//! datum) is read with its writer's schema, fetched once by id from the
//! Schema Registry, and handed to the plugin as Connect's JsonConverter
//! writes it: `{"schema": ..., "payload": ...}`, which every SDK reads with
//! its logical types. The converters that need no conversion (JSON,
//! String, ByteArray) pass the bytes as they are.

mod avro;
mod registry;

pub use registry::{Registry, RegistryConfig};

use bytes::Bytes;

/// How a converter failed.
#[derive(Debug, PartialEq)]
pub enum ConvertError {
    /// This record cannot be read (not in the wire format, an unknown
    /// schema id, a datum its schema does not read): the dead-letter
    /// queue's, as in Connect.
    Record(String),
    /// The registry could not answer (down, refusing our credentials):
    /// no record's fault; the task fails and its records come again.
    Registry(String),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Record(why) | ConvertError::Registry(why) => f.write_str(why),
        }
    }
}

/// One of a task's converters (its key's or its value's).
pub enum Converter {
    /// Bytes as they are on the topic.
    AsIs,
    /// Confluent's AvroConverter.
    Avro(Registry),
}

impl Converter {
    pub fn avro(config: RegistryConfig) -> Result<Converter, String> {
        Ok(Converter::Avro(Registry::new(config)?))
    }

    /// `bytes` as the plugin is to see them. A null stays null, as a
    /// tombstone must.
    pub async fn convert(&self, bytes: Option<&Bytes>) -> Result<Option<Bytes>, ConvertError> {
        let (Converter::Avro(registry), Some(bytes)) = (self, bytes) else { return Ok(bytes.cloned()) };
        let (id, datum) = wire_format(bytes)?;
        let schema = registry.schema(id).await?;
        let envelope = schema.read(datum).map_err(|e| ConvertError::Record(format!("schema id {id}: {e}")))?;
        Ok(Some(Bytes::from(envelope)))
    }
}

/// Confluent's wire format: a zero byte, the schema id (four bytes, big
/// endian), the datum.
fn wire_format(bytes: &[u8]) -> Result<(u32, &[u8]), ConvertError> {
    match bytes {
        [0, a, b, c, d, datum @ ..] => Ok((u32::from_be_bytes([*a, *b, *c, *d]), datum)),
        [0, ..] => {
            Err(ConvertError::Record("too short for Confluent's wire format (a zero byte and a schema id)".into()))
        }
        [magic, ..] => Err(ConvertError::Record(format!(
            "not in Confluent's wire format: its first byte is {magic}, not 0 (was it written by an Avro serializer?)"
        ))),
        [] => Err(ConvertError::Record("empty, not in Confluent's wire format".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_format_is_a_zero_byte_and_a_schema_id() {
        assert_eq!(wire_format(&[0, 0, 0, 1, 2, 9, 9]), Ok((258, &[9u8, 9][..])));
        assert!(matches!(wire_format(b"{\"a\":1}"), Err(ConvertError::Record(m)) if m.contains("first byte is 123")));
        assert!(matches!(wire_format(&[]), Err(ConvertError::Record(_))));
        assert!(matches!(wire_format(&[0, 0, 1]), Err(ConvertError::Record(_))), "too short for an id");
    }
}
