//! KIP-1222 lock renewal on the wire: ShareAcknowledge v2 with `IsRenewAck`,
//! whose batches carry RENEW (acknowledge type 4) for records the
//! application still works on. The broker keeps them acquired, restarts
//! their locks, and answers with the lock duration.
//!
//! kafka-protocol 0.18, the newest on crates.io, stops at v1, so v2 is
//! written here from its v1 parts. Kafka 4.2's schemas differ from v1 in
//! one field each: the request adds `IsRenewAck` (boolean) after
//! `ShareSessionEpoch`, the response `AcquisitionLockTimeoutMs` (int32)
//! after `ErrorMessage`; every nested structure is v1's.

use anyhow::{Context, Result, bail};
use bytes::{Buf, BufMut, BytesMut};
use kafka_protocol::messages::{ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use kafka_protocol::protocol::buf::{ByteBuf, ByteBufMut};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, VersionRange};

/// AcknowledgeType 4 (KIP-1222): keep the record acquired, restart its lock.
pub(crate) const RENEW: i8 = 4;
/// The ShareAcknowledge version that knows RENEW.
pub(crate) const VERSION: i16 = 2;
/// The version kafka-protocol encodes, whose fields v2 keeps.
const V1: i16 = 1;

/// A ShareAcknowledge v2 whose batches all renew.
pub(crate) struct RenewRequest(pub ShareAcknowledgeRequest);

/// The reply: v1's fields and the lock duration the renewed records got.
#[derive(Debug, Default)]
pub(crate) struct RenewResponse {
    pub reply: ShareAcknowledgeResponse,
    pub acquisition_lock_timeout_ms: i32,
}

impl Message for RenewRequest {
    const VERSIONS: VersionRange = VersionRange { min: VERSION, max: VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Message for RenewResponse {
    const VERSIONS: VersionRange = VersionRange { min: VERSION, max: VERSION };
    const DEPRECATED_VERSIONS: Option<VersionRange> = None;
}

impl Request for RenewRequest {
    const KEY: i16 = <ShareAcknowledgeRequest as Request>::KEY;
    type Response = RenewResponse;
}

impl HeaderVersion for RenewRequest {
    fn header_version(version: i16) -> i16 {
        ShareAcknowledgeRequest::header_version(version)
    }
}

impl HeaderVersion for RenewResponse {
    fn header_version(version: i16) -> i16 {
        ShareAcknowledgeResponse::header_version(version)
    }
}

impl RenewRequest {
    fn to_v2(&self) -> Result<BytesMut> {
        let v1 = encode_v1(&self.0)?;
        // Where the topics start: v1 without topics ends with an empty
        // compact array (1 byte) and no tagged fields (1 byte).
        let mut head = self.0.clone();
        head.topics.clear();
        head.unknown_tagged_fields.clear();
        let at = encode_v1(&head)?.len() - 2;
        let mut v2 = BytesMut::with_capacity(v1.len() + 1);
        v2.put_slice(&v1[..at]);
        v2.put_u8(1); // IsRenewAck
        v2.put_slice(&v1[at..]);
        Ok(v2)
    }
}

impl Encodable for RenewRequest {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check(version)?;
        buf.put_slice(&self.to_v2()?);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        check(version)?;
        Ok(self.0.compute_size(V1)? + 1)
    }
}

impl Decodable for RenewRequest {
    fn decode<B: ByteBuf>(_: &mut B, _: i16) -> Result<Self> {
        bail!("a client never decodes requests")
    }
}

impl Decodable for RenewResponse {
    fn decode<B: ByteBuf>(buf: &mut B, version: i16) -> Result<Self> {
        check(version)?;
        let body = buf.copy_to_bytes(buf.remaining());
        let at = lock_timeout_at(&body)?;
        let lock = body.get(at..).context("reply too short")?.try_get_i32().context("AcquisitionLockTimeoutMs")?;
        let mut v1 = BytesMut::with_capacity(body.len() - 4);
        v1.put_slice(&body[..at]);
        v1.put_slice(&body[at + 4..]);
        let reply = ShareAcknowledgeResponse::decode(&mut v1.freeze(), V1)?;
        Ok(RenewResponse { reply, acquisition_lock_timeout_ms: lock })
    }
}

impl Encodable for RenewResponse {
    fn encode<B: ByteBufMut>(&self, buf: &mut B, version: i16) -> Result<()> {
        check(version)?;
        let mut v1 = BytesMut::new();
        self.reply.encode(&mut v1, V1)?;
        let at = lock_timeout_at(&v1)?;
        buf.put_slice(&v1[..at]);
        buf.put_i32(self.acquisition_lock_timeout_ms);
        buf.put_slice(&v1[at..]);
        Ok(())
    }

    fn compute_size(&self, version: i16) -> Result<usize> {
        check(version)?;
        Ok(self.reply.compute_size(V1)? + 4)
    }
}

fn encode_v1(request: &ShareAcknowledgeRequest) -> Result<BytesMut> {
    let mut buf = BytesMut::new();
    request.encode(&mut buf, V1)?;
    Ok(buf)
}

/// Where a reply's AcquisitionLockTimeoutMs goes: after ThrottleTimeMs (4
/// bytes), ErrorCode (2) and ErrorMessage (a compact nullable string).
fn lock_timeout_at(body: &[u8]) -> Result<usize> {
    let mut rest = body.get(6..).context("reply too short")?;
    let before = rest.len();
    let length_plus_one = unsigned_varint(&mut rest)?;
    let varint = before - rest.len();
    Ok(6 + varint + length_plus_one.saturating_sub(1) as usize)
}

fn unsigned_varint(buf: &mut &[u8]) -> Result<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        let byte = buf.try_get_u8().context("truncated varint")?;
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

fn check(version: i16) -> Result<()> {
    if version != VERSION {
        bail!("ShareAcknowledge with RENEW is v{VERSION}, not v{version}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::GroupId;
    use kafka_protocol::messages::share_acknowledge_request::{
        AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch,
    };
    use kafka_protocol::messages::share_acknowledge_response::{PartitionData, ShareAcknowledgeTopicResponse};
    use kafka_protocol::protocol::StrBytes;

    fn request() -> ShareAcknowledgeRequest {
        let batch = AcknowledgementBatch::default()
            .with_first_offset(10)
            .with_last_offset(11)
            .with_acknowledge_types(vec![RENEW]);
        let partition =
            AcknowledgePartition::default().with_partition_index(3).with_acknowledgement_batches(vec![batch]);
        let topic =
            AcknowledgeTopic::default().with_topic_id(uuid::Uuid::from_u128(7)).with_partitions(vec![partition]);
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(StrBytes::from_static_str("g"))))
            .with_member_id(Some(StrBytes::from_static_str("m")))
            .with_share_session_epoch(8)
            .with_topics(vec![topic])
    }

    #[test]
    fn the_request_is_v1_with_is_renew_ack_after_the_epoch() {
        let v1 = request();
        let mut old = bytes::BytesMut::new();
        v1.encode(&mut old, 1).unwrap();
        let mut new = bytes::BytesMut::new();
        RenewRequest(v1.clone()).encode(&mut new, VERSION).unwrap();
        // group "g" (2 bytes), member "m" (2 bytes), the epoch (4 bytes).
        let at = 2 + 2 + 4;
        assert_eq!(new.len(), old.len() + 1);
        assert_eq!(&new[..at], &old[..at]);
        assert_eq!(new[at], 1, "IsRenewAck is true");
        assert_eq!(&new[at + 1..], &old[at..]);
        assert_eq!(RenewRequest(v1).compute_size(VERSION).unwrap(), new.len());
    }

    #[test]
    fn the_response_reads_the_lock_duration_between_the_error_and_the_topics() {
        let partition = PartitionData::default().with_partition_index(3).with_error_code(0);
        let topic = ShareAcknowledgeTopicResponse::default()
            .with_topic_id(uuid::Uuid::from_u128(7))
            .with_partitions(vec![partition]);
        let sent = RenewResponse {
            reply: ShareAcknowledgeResponse::default().with_responses(vec![topic]),
            acquisition_lock_timeout_ms: 15_000,
        };
        let mut wire = bytes::BytesMut::new();
        sent.encode(&mut wire, VERSION).unwrap();
        // throttle (4), error code (2), null message (1), then the lock.
        assert_eq!(&wire[7..11], &15_000i32.to_be_bytes());
        assert_eq!(sent.compute_size(VERSION).unwrap(), wire.len());
        let read = RenewResponse::decode(&mut wire.freeze(), VERSION).unwrap();
        assert_eq!(read.acquisition_lock_timeout_ms, 15_000);
        assert_eq!(read.reply.responses[0].partitions[0].partition_index, 3);
        assert!(RenewResponse::decode(&mut bytes::Bytes::new(), 1).is_err(), "only v2");
        // A message longer than the reply is an error, not a panic.
        let lying = bytes::Bytes::from_static(b"\0\0\0\0\0\0\x7f");
        assert!(RenewResponse::decode(&mut lying.clone(), VERSION).is_err());

        // With an error message, the lock follows the message.
        let failed = RenewResponse {
            reply: ShareAcknowledgeResponse::default()
                .with_error_code(124)
                .with_error_message(Some(StrBytes::from_static_str("oops"))),
            acquisition_lock_timeout_ms: 0,
        };
        let mut wire = bytes::BytesMut::new();
        failed.encode(&mut wire, VERSION).unwrap();
        assert_eq!(&wire[6..11], b"\x05oops");
        let read = RenewResponse::decode(&mut wire.freeze(), VERSION).unwrap();
        assert_eq!((read.reply.error_code, read.reply.error_message.as_deref()), (124, Some("oops")));
    }
}
