//! One connection to one broker (TCP, or TLS over it, authenticated with
//! SASL when the settings say so): length-prefixed request/response frames
//! with correlation ids, one request in flight at a time.

use super::error::ShareError;
use crate::security::scram::{ScramClient, ScramHash};
use crate::security::{ClientSecurity, Mechanism, SaslCredentials};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use std::collections::HashMap;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tokio_rustls::rustls::pki_types::ServerName;

/// Refuse absurd frame sizes instead of allocating them.
const MAX_FRAME: usize = 256 * 1024 * 1024;
/// UNSUPPORTED_VERSION: the broker answers ApiVersions with a v0 body then.
const UNSUPPORTED_VERSION: i16 = 35;

pub(crate) struct Connection {
    addr: String,
    client_id: StrBytes,
    state: Mutex<State>,
}

/// A plain or a TLS stream.
trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send> Stream for S {}

struct State {
    /// Taken out for the duration of a request: a request future dropped
    /// half-way leaves `None`, so a stream with an unread reply is never reused.
    stream: Option<Box<dyn Stream>>,
    next_correlation_id: i32,
}

impl Connection {
    /// Connects, shakes hands over TLS and authenticates with SASL as
    /// `security` says; the connection is ready for requests.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        timeout: Duration,
        security: &ClientSecurity,
    ) -> Result<Self, ShareError> {
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| ShareError::Timeout { addr: addr.to_string(), api: -1 })?
            .map_err(|source| ShareError::Io { addr: addr.to_string(), source })?;
        tcp.set_nodelay(true).ok();
        let stream: Box<dyn Stream> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
                let host = host.trim_start_matches('[').trim_end_matches(']');
                let name = ServerName::try_from(host.to_string()).map_err(|e| ShareError::Authentication {
                    addr: addr.to_string(),
                    message: format!("'{host}' is not a TLS server name: {e}"),
                })?;
                let handshake = tokio_rustls::TlsConnector::from(tls.clone()).connect(name, tcp);
                let stream = tokio::time::timeout(timeout, handshake)
                    .await
                    .map_err(|_| ShareError::Timeout { addr: addr.to_string(), api: -1 })?
                    .map_err(|e| ShareError::Authentication {
                        addr: addr.to_string(),
                        message: format!("TLS handshake: {e}"),
                    })?;
                Box::new(stream)
            }
        };
        let connection = Connection {
            addr: addr.to_string(),
            client_id: StrBytes::from_string(client_id.to_string()),
            state: Mutex::new(State { stream: Some(stream), next_correlation_id: 1 }),
        };
        if let Some(credentials) = &security.sasl {
            connection.authenticate(credentials, timeout).await?;
        }
        Ok(connection)
    }

    /// SaslHandshake v1, then SaslAuthenticate v1 rounds: one for PLAIN,
    /// two for SCRAM, whose server-final message proves the broker knew
    /// the password.
    async fn authenticate(&self, credentials: &SaslCredentials, timeout: Duration) -> Result<(), ShareError> {
        let failed = |message: String| ShareError::Authentication { addr: self.addr.clone(), message };
        let mechanism = credentials.mechanism.name();
        let handshake = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
        let reply = self.send(&handshake, 1, timeout).await?;
        if reply.error_code != 0 {
            let offered: Vec<&str> = reply.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(format!("the broker does not enable {mechanism}; it offers {offered:?}")));
        }
        let (username, password) = (credentials.username.as_str(), credentials.password.value());
        let hash = match credentials.mechanism {
            Mechanism::Plain => {
                self.sasl_round(format!("\0{username}\0{password}").into_bytes(), timeout).await?;
                return Ok(());
            }
            Mechanism::ScramSha256 => ScramHash::Sha256,
            Mechanism::ScramSha512 => ScramHash::Sha512,
        };
        let mut scram = ScramClient::new(hash, username, password);
        let server_first = self.sasl_round(scram.client_first().into_bytes(), timeout).await?;
        let server_first = String::from_utf8_lossy(&server_first);
        let client_final = scram.client_final(&server_first).map_err(|e| failed(e.to_string()))?;
        let server_final = self.sasl_round(client_final.into_bytes(), timeout).await?;
        scram.verify_server_final(&String::from_utf8_lossy(&server_final)).map_err(|e| failed(e.to_string()))
    }

    async fn sasl_round(&self, auth_bytes: Vec<u8>, timeout: Duration) -> Result<Bytes, ShareError> {
        let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(auth_bytes));
        let reply = self.send(&request, 1, timeout).await?;
        match reply.error_code {
            0 => Ok(reply.auth_bytes),
            code => Err(ShareError::Authentication {
                addr: self.addr.clone(),
                message: match reply.error_message {
                    Some(message) => format!("{message} (error {code})"),
                    None => format!("error {code}"),
                },
            }),
        }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// False once a request on it failed or was abandoned.
    pub fn is_alive(&self) -> bool {
        match self.state.try_lock() {
            Ok(state) => state.stream.is_some(),
            Err(_) => true, // busy with a request, so still in use
        }
    }

    /// Send `req` at `version` and decode the reply.
    pub async fn send<R: Request>(&self, req: &R, version: i16, timeout: Duration) -> Result<R::Response, ShareError> {
        let mut body = self.send_raw(req, version, timeout).await?;
        // Decoding from the body stops at the schema's end: any trailing
        // bytes (the mock adds a tagged-field byte to some replies) are ignored.
        R::Response::decode(&mut body, version)
            .map_err(|e| ShareError::Protocol(format!("decoding reply to api {}: {e}", R::KEY)))
    }

    /// Send `req` and return the reply body after its header.
    pub async fn send_raw<R: Request>(&self, req: &R, version: i16, timeout: Duration) -> Result<Bytes, ShareError> {
        let mut state = self.state.lock().await;
        let correlation_id = state.next_correlation_id;
        state.next_correlation_id = state.next_correlation_id.wrapping_add(1).max(1);
        let frame = self.encode(req, version, correlation_id)?;
        let Some(mut stream) = state.stream.take() else {
            return Err(ShareError::Disconnected { addr: self.addr.clone() });
        };
        let reply = tokio::time::timeout(timeout, roundtrip(&mut stream, &frame))
            .await
            .map_err(|_| ShareError::Timeout { addr: self.addr.clone(), api: R::KEY })?
            .map_err(|source| ShareError::Io { addr: self.addr.clone(), source })?;
        let mut reply = Bytes::from(reply);
        let header = ResponseHeader::decode(&mut reply, R::Response::header_version(version))
            .map_err(|e| ShareError::Protocol(format!("response header: {e}")))?;
        if header.correlation_id != correlation_id {
            return Err(ShareError::Protocol(format!(
                "correlation id {} in reply to {correlation_id} from {}",
                header.correlation_id, self.addr
            )));
        }
        state.stream = Some(stream);
        Ok(reply)
    }

    fn encode<R: Request>(&self, req: &R, version: i16, correlation_id: i32) -> Result<BytesMut, ShareError> {
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation_id)
            .with_client_id(Some(self.client_id.clone()));
        let mut frame = BytesMut::new();
        frame.put_i32(0); // length, patched below
        let encoded =
            header.encode(&mut frame, R::header_version(version)).and_then(|_| req.encode(&mut frame, version));
        encoded.map_err(|e| ShareError::Protocol(format!("encoding api {}: {e}", R::KEY)))?;
        let len = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&len.to_be_bytes());
        Ok(frame)
    }
}

async fn roundtrip(stream: &mut Box<dyn Stream>, frame: &[u8]) -> std::io::Result<Vec<u8>> {
    stream.write_all(frame).await?;
    stream.flush().await?; // TLS buffers what it writes
    let len = stream.read_u32().await? as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!("frame of {len} bytes")));
    }
    let mut reply = vec![0; len];
    stream.read_exact(&mut reply).await?;
    Ok(reply)
}

/// Highest version of each API key the broker serves.
#[derive(Clone, Debug, Default)]
pub(crate) struct ApiVersions(HashMap<i16, i16>);

impl ApiVersions {
    /// The version to use for `R`: the highest both sides know, or `preferred`
    /// when the broker does not list the key (the mock omits the share APIs).
    pub fn pick<R: Request>(&self, preferred: i16) -> i16 {
        match self.0.get(&R::KEY) {
            Some(&max) => max.min(R::VERSIONS.max).max(R::VERSIONS.min),
            None => preferred,
        }
    }

    /// The version to use for `R`, or `None` when the broker does not list it.
    pub fn served<R: Request>(&self) -> Option<i16> {
        let max = *self.0.get(&R::KEY)?;
        (max >= R::VERSIONS.min).then(|| max.min(R::VERSIONS.max))
    }

    /// The highest version of API `key` the broker serves, whether or not
    /// kafka-protocol knows it.
    pub fn max_version(&self, key: i16) -> Option<i16> {
        self.0.get(&key).copied()
    }

    /// Ask the broker. Start at v3; a broker that knows less answers with an
    /// UNSUPPORTED_VERSION v0 body listing what it knows, and we retry lower.
    pub async fn fetch(conn: &Connection, timeout: Duration) -> Result<Self, ShareError> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("spillway"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let mut version = 3;
        loop {
            let body = conn.send_raw(&req, version, timeout).await?;
            let error_code = body.clone().try_get_i16().unwrap_or(-1);
            if error_code == UNSUPPORTED_VERSION && version > 0 {
                let fallback = ApiVersionsResponse::decode(&mut body.clone(), 0)
                    .ok()
                    .and_then(|r| {
                        r.api_keys.iter().find(|k| k.api_key == ApiVersionsRequest::KEY).map(|k| k.max_version)
                    })
                    .unwrap_or(version - 1);
                tracing::debug!(version, fallback, "broker refused ApiVersions version");
                version = fallback.min(version - 1);
                continue;
            }
            let reply = ApiVersionsResponse::decode(&mut body.clone(), version)
                .map_err(|e| ShareError::Protocol(format!("ApiVersions v{version}: {e}")))?;
            if let Some(e) = ShareError::broker(reply.error_code, "ApiVersions") {
                return Err(e);
            }
            let max = reply.api_keys.iter().map(|k| (k.api_key, k.max_version)).collect();
            return Ok(ApiVersions(max));
        }
    }
}
