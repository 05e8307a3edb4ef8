//! KIP-1226's share-group lag on the wire: DescribeShareGroupOffsets v1,
//! whose partitions carry the broker's `Lag` (records not yet finished:
//! the share-partition's end minus its start offset, less what was
//! acknowledged beyond it) after `LeaderEpoch`.
//!
//! kafka-protocol 0.18 stops at v0. The v1 request is v0's; the reply is
//! read here, field by field, as Kafka 4.4's schema lists it.

use anyhow::{Context, Result, bail};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::{DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, VersionRange};

/// The version with `Lag`.
pub(crate) const VERSION: i16 = 1;

/// A DescribeShareGroupOffsets v1 request: v0's fields.
pub(crate) struct DescribeLag(pub DescribeShareGroupOffsetsRequest);

/// The reply, as far as lag needs it.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct LagReply {
    pub groups: Vec<GroupLag>,
}

#[derive(Debug, Default, PartialEq)]
pub(crate) struct GroupLag {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub partitions: Vec<PartitionLag>,
}

#[derive(Debug, Default, PartialEq)]
pub(crate) struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// -1: the group has no start offset there yet.
    pub start_offset: i64,
    /// -1: the broker does not know it.
    pub lag: i64,
    pub error_code: i16,
    pub error_message: Option<String>,
}

impl Message for DescribeLag {
    const VERSIONS: VersionRange = VersionRange { min: VERSION, max: VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for LagReply {
    const VERSIONS: VersionRange = VersionRange { min: VERSION, max: VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Request for DescribeLag {
    const KEY: i16 = <DescribeShareGroupOffsetsRequest as Request>::KEY;
    type Response = LagReply;
}

impl HeaderVersion for DescribeLag {
    fn header_version(_: i16) -> i16 {
        DescribeShareGroupOffsetsRequest::header_version(0)
    }
}

impl HeaderVersion for LagReply {
    fn header_version(_: i16) -> i16 {
        DescribeShareGroupOffsetsResponse::header_version(0)
    }
}

impl Encodable for DescribeLag {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check(version)?;
        self.0.encode(buf, 0)
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        check(version)?;
        self.0.compute_size(0)
    }
}

impl Decodable for DescribeLag {
    fn decode<B: ByteBuf>(_: &mut B, _: i16) -> Result<Self> {
        bail!("a client never decodes requests")
    }
}

impl Decodable for LagReply {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check(version)?;
        let mut r = Reader(buf.copy_to_bytes(buf.remaining()));
        r.i32()?; // ThrottleTimeMs
        let mut groups = Vec::new();
        for _ in 0..r.array()? {
            r.string()?; // GroupId
            let mut partitions = Vec::new();
            for _ in 0..r.array()? {
                let topic = r.string()?.unwrap_or_default();
                r.bytes(16).context("TopicId")?;
                for _ in 0..r.array()? {
                    partitions.push(PartitionLag {
                        topic: topic.clone(),
                        partition: r.i32()?,
                        start_offset: r.i64()?,
                        lag: {
                            r.i32()?; // LeaderEpoch
                            r.i64()?
                        },
                        error_code: r.i16()?,
                        error_message: r.string()?,
                    });
                    r.tagged_fields()?;
                }
                r.tagged_fields()?;
            }
            groups.push(GroupLag { error_code: r.i16()?, error_message: r.string()?, partitions });
            r.tagged_fields()?;
        }
        r.tagged_fields()?;
        Ok(LagReply { groups })
    }
}

impl Encodable for LagReply {
    fn encode<B: ByteBufMut>(&self, _: &mut B, _: i16) -> Result<()> {
        bail!("a client never encodes replies")
    }

    fn compute_size(&self, _: i16) -> Result<usize> {
        bail!("a client never encodes replies")
    }
}

fn check(version: i16) -> Result<()> {
    if version != VERSION {
        bail!("DescribeShareGroupOffsets with lag is v{VERSION}, not v{version}");
    }
    Ok(())
}

/// The flexible versions' primitives, as far as this reply uses them.
struct Reader(Bytes);

impl Reader {
    fn i16(&mut self) -> Result<i16> {
        Ok(self.0.try_get_i16()?)
    }

    fn i32(&mut self) -> Result<i32> {
        Ok(self.0.try_get_i32()?)
    }

    fn i64(&mut self) -> Result<i64> {
        Ok(self.0.try_get_i64()?)
    }

    fn bytes(&mut self, n: usize) -> Result<Bytes> {
        Ok(self.0.try_get_bytes(n)?)
    }

    fn uvarint(&mut self) -> Result<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.0.try_get_u8()?;
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        bail!("varint longer than 5 bytes")
    }

    /// A compact array's length (null reads as empty).
    fn array(&mut self) -> Result<u32> {
        Ok(self.uvarint()?.saturating_sub(1))
    }

    /// A compact (nullable) string.
    fn string(&mut self) -> Result<Option<String>> {
        match self.uvarint()? {
            0 => Ok(None),
            n => {
                let bytes = self.bytes(n as usize - 1)?;
                Ok(Some(String::from_utf8(bytes.to_vec()).context("string not UTF-8")?))
            }
        }
    }

    fn tagged_fields(&mut self) -> Result<()> {
        for _ in 0..self.uvarint()? {
            self.uvarint()?; // tag
            let size = self.uvarint()? as usize;
            self.bytes(size)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::{BufMut, BytesMut};

    /// A v1 reply for group "g", as a broker writes it: one topic per
    /// `(topic, partition, start offset, lag)`, for brevity.
    fn encode_reply(partitions: &[(&str, i32, i64, i64)]) -> Bytes {
        let mut b = BytesMut::new();
        let string = |b: &mut BytesMut, s: &str| {
            b.put_u8(s.len() as u8 + 1);
            b.put_slice(s.as_bytes());
        };
        b.put_i32(0); // throttle
        b.put_u8(2); // one group
        string(&mut b, "g");
        b.put_u8(partitions.len() as u8 + 1);
        for (topic, partition, start, lag) in partitions {
            string(&mut b, topic);
            b.put_u128(7); // topic id
            b.put_u8(2); // one partition
            b.put_i32(*partition);
            b.put_i64(*start);
            b.put_i32(0); // leader epoch
            b.put_i64(*lag);
            b.put_i16(0); // error code
            b.put_u8(0); // null message
            b.put_u8(0); // partition's tagged fields
            b.put_u8(0); // topic's tagged fields
        }
        b.put_i16(0); // group's error code
        b.put_u8(0); // null message
        b.put_u8(0); // group's tagged fields
        b.put_u8(0); // reply's tagged fields
        b.freeze()
    }

    #[test]
    fn reads_each_partitions_start_offset_and_lag() {
        let wire = encode_reply(&[("orders", 0, 40, 0), ("orders", 1, -1, 12)]);
        let reply = LagReply::decode(&mut wire.clone(), VERSION).unwrap();
        let p = |partition, start_offset, lag| PartitionLag {
            topic: "orders".into(),
            partition,
            start_offset,
            lag,
            error_code: 0,
            error_message: None,
        };
        assert_eq!(
            reply.groups,
            vec![GroupLag { error_code: 0, error_message: None, partitions: vec![p(0, 40, 0), p(1, -1, 12)] }]
        );
        assert!(LagReply::decode(&mut wire.slice(..wire.len() - 3), VERSION).is_err(), "a short reply is an error");
        assert!(LagReply::decode(&mut wire.clone(), 0).is_err(), "only v1");
    }
}
