#![allow(dead_code)] // each test binary uses a part of the proxy
//! A fault-injecting Kafka-protocol proxy, for tests of how the share consumer
//! recovers. It stands between the client and a real broker and forwards every
//! frame. Started [secured](FaultProxy::start_secured), it also plays a
//! broker's TLS and SASL, which the test broker lacks. Broker addresses in replies (Metadata, FindCoordinator, share
//! node endpoints) are rewritten to more proxy ports, so the client keeps
//! talking through it. Armed with a [`Fault`], it answers the next matching
//! request itself, the way a broker whose leadership or coordinator moved
//! would, without the broker ever seeing that request. It can also drop every
//! open connection at once.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::describe_configs_response::{DescribeConfigsResourceResult, DescribeConfigsResult};
use kafka_protocol::messages::share_fetch_response::{PartitionData, ShareFetchableTopicResponse};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsResponse, DescribeConfigsRequest, DescribeConfigsResponse, FindCoordinatorResponse,
    MetadataResponse, RequestHeader, ResponseHeader, ShareAcknowledgeResponse, ShareFetchRequest, ShareFetchResponse,
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
#[path = "secured.rs"]
pub mod secured;

use secured::{SaslState, SaslUser};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast;

/// What the proxy does to the next request it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer the next ShareFetch that names partitions and carries no
    /// acknowledgements with NOT_LEADER_OR_FOLLOWER on each partition.
    ShareFetchNotLeader,
    /// Answer the next ShareGroupHeartbeat with this error.
    Heartbeat(ResponseError),
    /// Damage the first record batch of the next ShareFetch reply that
    /// carries records (one byte of its payload: its CRC no longer matches).
    CorruptRecordBatch,
}

/// What passed through, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    Connected,
    /// A request forwarded to the broker; heartbeats carry their member epoch.
    Forwarded(ApiKey, Option<i32>),
    Injected(Fault),
    DroppedConnections,
    /// A SASL exchange ended: with the user, or why it failed.
    Authenticated(Result<String, String>),
    /// A request other than ApiVersions or SASL came before
    /// authentication; the connection was closed, as a broker closes it.
    Unauthenticated(ApiKey),
    /// A TLS handshake failed.
    TlsFailed(String),
    /// The client hung up before its TLS handshake ended (a short-lived
    /// client dropped mid-connect): not a refusal.
    HungUpInHandshake,
    /// Requests are held from this one on (see `FaultProxy::stall_from`).
    Stalled(ApiKey),
}

/// What a secured proxy asks of every connection.
#[derive(Clone, Default)]
pub struct Secured {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub sasl: Option<SaslUser>,
}

#[derive(Clone)]
pub struct FaultProxy {
    inner: Arc<Inner>,
    /// The proxy's address for the broker the client bootstraps from.
    pub bootstrap: String,
}

struct Inner {
    /// Broker "host:port" to the proxy port that stands for it.
    routes: Mutex<HashMap<String, u16>>,
    armed: Mutex<VecDeque<Fault>>,
    /// Acquisition lock duration to announce in every ShareFetch reply.
    lock_timeout_ms: Mutex<Option<i32>>,
    /// Delivery count limits to answer DescribeConfigs with, as a Kafka 4.2
    /// broker would: (the group's, the broker's).
    delivery_limits: Mutex<Option<(Option<u16>, Option<u16>)>>,
    events: Mutex<Vec<Event>>,
    drop_all: broadcast::Sender<()>,
    secured: Secured,
    /// The request that starts a stall, when one is armed.
    stall_on: Mutex<Option<ApiKey>>,
    /// While true, no request is forwarded, on any connection.
    stalled: tokio::sync::watch::Sender<bool>,
}

impl FaultProxy {
    /// A proxy in front of `bootstrap` (the first address, if several).
    pub fn start(bootstrap: &str) -> FaultProxy {
        Self::start_secured(bootstrap, Secured::default())
    }

    /// A proxy that asks every client connection for TLS and SASL as
    /// `secured` says, and only then relays it.
    pub fn start_secured(bootstrap: &str, secured: Secured) -> FaultProxy {
        let inner = Arc::new(Inner {
            secured,
            routes: Mutex::default(),
            armed: Mutex::default(),
            lock_timeout_ms: Mutex::default(),
            delivery_limits: Mutex::default(),
            events: Mutex::default(),
            drop_all: broadcast::channel(4).0,
            stall_on: Mutex::default(),
            stalled: tokio::sync::watch::channel(false).0,
        });
        let upstream = bootstrap.split(',').next().unwrap().trim().to_string();
        let port = route(&inner, &upstream);
        FaultProxy { inner, bootstrap: format!("127.0.0.1:{port}") }
    }

    pub fn arm(&self, fault: Fault) {
        self.inner.armed.lock().unwrap().push_back(fault);
    }

    /// From now on, tells the client that acquisition locks last `ms`, not
    /// what the broker says: the client's locks run out first, while the
    /// broker still counts the records as the client's. A client that
    /// connects afterwards is told the broker cannot renew locks (no
    /// ShareAcknowledge v2, as before Kafka 4.2): a renewal would tell it
    /// the broker's real lock duration.
    pub fn announce_lock_timeout(&self, ms: i32) {
        *self.inner.lock_timeout_ms.lock().unwrap() = Some(ms);
    }

    /// From now on, lists DescribeConfigs in ApiVersions and answers it
    /// itself, as a Kafka 4.2 broker would: the group resource with
    /// `share.delivery.count.limit` (or, with `None`, the error a broker
    /// without group configs gives), the broker resource with
    /// `group.share.delivery.count.limit`.
    pub fn serve_delivery_limits(&self, group: Option<u16>, broker: Option<u16>) {
        *self.inner.delivery_limits.lock().unwrap() = Some((group, broker));
    }

    /// From the next request of `api` on, holds every request, that one
    /// included, on every connection, until [`Self::release`]: the broker
    /// stops answering at that point of an exchange (a commit, say), as
    /// one in a long pause does, with what came before answered.
    pub fn stall_from(&self, api: ApiKey) {
        *self.inner.stall_on.lock().unwrap() = Some(api);
    }

    /// Forwards the held requests and every later one.
    pub fn release(&self) {
        self.inner.stalled.send_replace(false);
    }

    /// Closes every open connection, both to the client and to the broker.
    pub fn drop_connections(&self) {
        self.inner.events.lock().unwrap().push(Event::DroppedConnections);
        let _ = self.inner.drop_all.send(());
    }

    pub fn events(&self) -> Vec<Event> {
        self.inner.events.lock().unwrap().clone()
    }

    /// The events after the first one `is_mark` picks (empty if none).
    pub fn events_after(&self, is_mark: impl Fn(&Event) -> bool) -> Vec<Event> {
        let events = self.events();
        match events.iter().position(is_mark) {
            Some(i) => events[i + 1..].to_vec(),
            None => Vec::new(),
        }
    }
}

/// The proxy port standing for broker `upstream`, listening from now on.
fn route(inner: &Arc<Inner>, upstream: &str) -> u16 {
    let mut routes = inner.routes.lock().unwrap();
    if let Some(port) = routes.get(upstream) {
        return *port;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("proxy listener");
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    routes.insert(upstream.to_string(), port);
    let listener = TcpListener::from_std(listener).unwrap();
    let (inner, upstream) = (inner.clone(), upstream.to_string());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            inner.events.lock().unwrap().push(Event::Connected);
            tokio::spawn(serve(client, upstream.clone(), inner.clone()));
        }
    });
    port
}

/// One client connection, after its TLS handshake if the proxy is secured.
async fn serve(client: TcpStream, upstream: String, inner: Arc<Inner>) {
    client.set_nodelay(true).ok();
    match inner.secured.tls.clone() {
        None => relay(client, upstream, inner).await,
        Some(tls) => match tokio_rustls::TlsAcceptor::from(tls).accept(client).await {
            Ok(stream) => relay(stream, upstream, inner).await,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                inner.events.lock().unwrap().push(Event::HungUpInHandshake)
            }
            Err(e) => inner.events.lock().unwrap().push(Event::TlsFailed(e.to_string())),
        },
    }
}

/// Relays one client connection to its broker until either side closes or
/// the test drops every connection.
async fn relay(client: impl AsyncRead + AsyncWrite + Send + 'static, upstream: String, inner: Arc<Inner>) {
    let mut dropped = inner.drop_all.subscribe();
    let Ok(broker) = TcpStream::connect(&upstream).await else { return };
    broker.set_nodelay(true).ok();
    let (mut client_read, client_write) = tokio::io::split(client);
    let (mut broker_read, mut broker_write) = broker.into_split();
    let client_write = Arc::new(tokio::sync::Mutex::new(client_write));
    // Correlation id to (api, version) of requests awaiting the broker's reply.
    let waiting: Arc<Mutex<HashMap<i32, (ApiKey, i16)>>> = Arc::default();

    let requests = {
        let (inner, client_write, waiting) = (inner.clone(), client_write.clone(), waiting.clone());
        async move {
            let mut sasl = match inner.secured.sasl {
                Some(_) => SaslState::Start,
                None => SaslState::Authenticated,
            };
            while let Some(frame) = read_frame(&mut client_read).await {
                let mut peek = frame.clone();
                let (api, version, correlation) = (peek.get_i16(), peek.get_i16(), peek.get_i32());
                let Ok(api) = ApiKey::try_from(api) else { return };
                if let Some(user) = &inner.secured.sasl
                    && matches!(api, ApiKey::SaslHandshake | ApiKey::SaslAuthenticate)
                {
                    let step = secured::answer(user, &mut sasl, api, version, frame);
                    write_frame(&mut *client_write.lock().await, &step.reply).await.ok();
                    if let Some(outcome) = step.outcome {
                        let failed = outcome.is_err();
                        inner.events.lock().unwrap().push(Event::Authenticated(outcome));
                        if failed {
                            return;
                        }
                    }
                    continue;
                }
                if !matches!(sasl, SaslState::Authenticated) && api != ApiKey::ApiVersions {
                    inner.events.lock().unwrap().push(Event::Unauthenticated(api));
                    return;
                }
                if let Some(reply) = inject(&inner, api, version, frame.clone()) {
                    write_frame(&mut *client_write.lock().await, &reply).await.ok();
                    continue;
                }
                {
                    let mut stall_on = inner.stall_on.lock().unwrap();
                    if *stall_on == Some(api) {
                        *stall_on = None;
                        inner.stalled.send_replace(true);
                        inner.events.lock().unwrap().push(Event::Stalled(api));
                    }
                }
                let _ = inner.stalled.subscribe().wait_for(|stalled| !*stalled).await;
                let epoch = (api == ApiKey::ShareGroupHeartbeat).then(|| heartbeat_epoch(version, frame.clone()));
                inner.events.lock().unwrap().push(Event::Forwarded(api, epoch.flatten()));
                waiting.lock().unwrap().insert(correlation, (api, version));
                if write_frame(&mut broker_write, &frame).await.is_err() {
                    return;
                }
            }
        }
    };
    let replies = {
        let (inner, client_write, waiting) = (inner.clone(), client_write.clone(), waiting.clone());
        async move {
            while let Some(frame) = read_frame(&mut broker_read).await {
                let correlation = frame.clone().get_i32();
                let request = waiting.lock().unwrap().remove(&correlation);
                let frame = match request {
                    Some((api, version)) => rewrite_reply(&inner, api, version, frame),
                    None => frame,
                };
                if write_frame(&mut *client_write.lock().await, &frame).await.is_err() {
                    return;
                }
            }
        }
    };
    tokio::select! {
        _ = requests => {}
        _ = replies => {}
        _ = dropped.recv() => {}
    }
}

async fn read_frame(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Bytes> {
    let len = stream.read_u32().await.ok()? as usize;
    let mut frame = vec![0; len];
    stream.read_exact(&mut frame).await.ok()?;
    Some(Bytes::from(frame))
}

async fn write_frame(stream: &mut (impl AsyncWriteExt + Unpin), frame: &[u8]) -> std::io::Result<()> {
    stream.write_u32(frame.len() as u32).await?;
    stream.write_all(frame).await
}

/// The reply frame for a request the armed fault matches.
fn inject(inner: &Inner, api: ApiKey, version: i16, mut frame: Bytes) -> Option<Bytes> {
    if api == ApiKey::DescribeConfigs
        && let Some(limits) = *inner.delivery_limits.lock().unwrap()
    {
        return describe_configs(limits, version, frame);
    }
    let mut armed = inner.armed.lock().unwrap();
    let fault = *armed.front()?;
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version)).ok()?;
    let mut body = BytesMut::new();
    match (fault, api) {
        (Fault::ShareFetchNotLeader, ApiKey::ShareFetch) => {
            let request = ShareFetchRequest::decode(&mut frame, version).ok()?;
            let partitions = request.topics.iter().flat_map(|t| &t.partitions);
            if partitions.clone().next().is_none() || partitions.clone().any(|p| !p.acknowledgement_batches.is_empty())
            {
                return None;
            }
            let mut reply = ShareFetchResponse::default();
            for topic in &request.topics {
                let mut answer = ShareFetchableTopicResponse::default();
                answer.topic_id = topic.topic_id;
                for p in &topic.partitions {
                    let mut partition = PartitionData::default();
                    partition.partition_index = p.partition_index;
                    partition.error_code = ResponseError::NotLeaderOrFollower.code();
                    answer.partitions.push(partition);
                }
                reply.responses.push(answer);
            }
            reply.encode(&mut body, version).ok()?;
        }
        (Fault::Heartbeat(error), ApiKey::ShareGroupHeartbeat) => {
            let mut reply = ShareGroupHeartbeatResponse::default();
            reply.error_code = error.code();
            reply.error_message = Some(StrBytes::from_static_str("injected by the test's fault proxy"));
            reply.encode(&mut body, version).ok()?;
        }
        _ => return None,
    }
    armed.pop_front();
    drop(armed);
    inner.events.lock().unwrap().push(Event::Injected(fault));
    Some(with_header(api, version, header.correlation_id, &body))
}

/// DescribeConfigs answered from `(group, broker)` delivery limits.
fn describe_configs((group, broker): (Option<u16>, Option<u16>), version: i16, mut frame: Bytes) -> Option<Bytes> {
    let api = ApiKey::DescribeConfigs;
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version)).ok()?;
    let request = DescribeConfigsRequest::decode(&mut frame, version).ok()?;
    let mut reply = DescribeConfigsResponse::default();
    for resource in &request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        // Each with the config_source Kafka gives it: the group's own
        // config (8), the broker's static config (4).
        let (key, value, source) = match resource.resource_type {
            32 => ("share.delivery.count.limit", group, 8),
            _ => ("group.share.delivery.count.limit", broker, 4),
        };
        match value {
            Some(limit) => {
                let mut config = DescribeConfigsResourceResult::default();
                config.name = StrBytes::from_static_str(key);
                config.value = Some(StrBytes::from_string(limit.to_string()));
                config.config_source = source;
                result.configs.push(config);
            }
            None => result.error_code = ResponseError::InvalidRequest.code(),
        }
        reply.results.push(result);
    }
    let mut body = BytesMut::new();
    reply.encode(&mut body, version).ok()?;
    Some(with_header(api, version, header.correlation_id, &body))
}

/// Flips one byte inside the first record batch of a partition that carries
/// records; false if none does.
fn corrupt_first_batch(reply: &mut ShareFetchResponse) -> bool {
    for partition in reply.responses.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
        let Some(records) = partition.records.as_ref().filter(|r| r.len() > 61) else { continue };
        let length = i32::from_be_bytes(records[8..12].try_into().unwrap()) as usize;
        let mut damaged = BytesMut::from(&records[..]);
        // The batch's last byte: inside what its CRC covers.
        damaged[12 + length - 1] ^= 0xff;
        partition.records = Some(damaged.freeze());
        return true;
    }
    false
}

/// A reply frame (without its length prefix): header, then `body`.
fn with_header(api: ApiKey, version: i16, correlation_id: i32, body: &[u8]) -> Bytes {
    let mut frame = BytesMut::new();
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation_id;
    header.encode(&mut frame, api.response_header_version(version)).expect("response header");
    frame.put_slice(body);
    frame.freeze()
}

fn heartbeat_epoch(version: i16, mut frame: Bytes) -> Option<i32> {
    RequestHeader::decode(&mut frame, ApiKey::ShareGroupHeartbeat.request_header_version(version)).ok()?;
    Some(ShareGroupHeartbeatRequest::decode(&mut frame, version).ok()?.member_epoch)
}

/// Points every broker address in a reply at the proxy port standing for
/// it, and announces the lock timeout the test asked for.
fn rewrite_reply(inner: &Arc<Inner>, api: ApiKey, version: i16, frame: Bytes) -> Bytes {
    let header_version = api.response_header_version(version);
    let mut reader = frame.clone();
    let Ok(header) = ResponseHeader::decode(&mut reader, header_version) else { return frame };
    let proxied = |host: &mut StrBytes, port: &mut i32| {
        let local = route(inner, &format!("{}:{}", host.as_str(), port));
        *host = StrBytes::from_static_str("127.0.0.1");
        *port = local as i32;
    };
    let mut body = BytesMut::new();
    let encoded = match api {
        ApiKey::Metadata => MetadataResponse::decode(&mut reader, version).and_then(|mut r| {
            r.brokers.iter_mut().for_each(|b| proxied(&mut b.host, &mut b.port));
            r.encode(&mut body, version)
        }),
        ApiKey::FindCoordinator => FindCoordinatorResponse::decode(&mut reader, version).and_then(|mut r| {
            if version < 4 {
                proxied(&mut r.host, &mut r.port);
            }
            r.coordinators.iter_mut().for_each(|c| proxied(&mut c.host, &mut c.port));
            r.encode(&mut body, version)
        }),
        ApiKey::ShareFetch => ShareFetchResponse::decode(&mut reader, version).and_then(|mut r| {
            r.node_endpoints.iter_mut().for_each(|n| proxied(&mut n.host, &mut n.port));
            if let Some(ms) = *inner.lock_timeout_ms.lock().unwrap() {
                r.acquisition_lock_timeout_ms = ms;
            }
            let mut armed = inner.armed.lock().unwrap();
            if armed.front() == Some(&Fault::CorruptRecordBatch) && corrupt_first_batch(&mut r) {
                armed.pop_front();
                inner.events.lock().unwrap().push(Event::Injected(Fault::CorruptRecordBatch));
            }
            r.encode(&mut body, version)
        }),
        // A broker that offers DescribeConfigs or SASL says so.
        ApiKey::ApiVersions
            if inner.delivery_limits.lock().unwrap().is_some()
                || inner.secured.sasl.is_some()
                || inner.lock_timeout_ms.lock().unwrap().is_some() =>
        {
            match ApiVersionsResponse::decode(&mut reader, version) {
                Ok(mut r) if r.error_code == 0 => {
                    let mut offer = |api: ApiKey, max_version: i16| {
                        let mut key = ApiVersion::default();
                        key.api_key = api as i16;
                        key.min_version = 0;
                        key.max_version = max_version;
                        r.api_keys.push(key);
                    };
                    if inner.delivery_limits.lock().unwrap().is_some() {
                        offer(ApiKey::DescribeConfigs, 4);
                    }
                    if inner.secured.sasl.is_some() {
                        offer(ApiKey::SaslHandshake, 1);
                        offer(ApiKey::SaslAuthenticate, 2);
                    }
                    if inner.lock_timeout_ms.lock().unwrap().is_some() {
                        for key in r.api_keys.iter_mut().filter(|k| k.api_key == ApiKey::ShareAcknowledge as i16) {
                            key.max_version = key.max_version.min(1);
                        }
                    }
                    r.encode(&mut body, version)
                }
                _ => return frame,
            }
        }
        // v2 (KIP-1222's renewals) is beyond kafka-protocol: passed on as it is.
        ApiKey::ShareAcknowledge if version > 1 => return frame,
        ApiKey::ShareAcknowledge => ShareAcknowledgeResponse::decode(&mut reader, version).and_then(|mut r| {
            r.node_endpoints.iter_mut().for_each(|n| proxied(&mut n.host, &mut n.port));
            r.encode(&mut body, version)
        }),
        _ => return frame,
    };
    match encoded {
        Ok(()) => with_header(api, version, header.correlation_id, &body),
        Err(e) => panic!("fault proxy could not re-encode a {api:?} v{version} reply: {e}"),
    }
}
