//! What a secured Kafka broker does when a connection starts, played by the
//! fault proxy in front of a test broker that does neither: TLS with
//! certificates made here by rcgen (client certificates required), and SASL
//! PLAIN or SCRAM checked as Kafka checks them (RFC 5802, server side,
//! written apart from the host's client side).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::{Bytes, BytesMut};
use hmac::{Mac, SimpleHmac};
use kafka_protocol::messages::{
    ApiKey, RequestHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::Digest;
use std::path::PathBuf;
use std::sync::Arc;

/// A CA, a server certificate for 127.0.0.1 and localhost, and a client
/// certificate, as PEM files in a temporary directory.
pub struct TestPki {
    pub dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub client_certificate: PathBuf,
    pub client_key: PathBuf,
    /// The server's certificate and key, as files too.
    pub server_certificate: PathBuf,
    pub server_key_file: PathBuf,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: String,
}

impl TestPki {
    pub fn new() -> TestPki {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "spillway test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, &ca_key);
        let leaf = |names: Vec<String>| {
            let key = KeyPair::generate().unwrap();
            let cert = CertificateParams::new(names).unwrap().signed_by(&key, &issuer).unwrap();
            (cert, key)
        };
        let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
        let (client_cert, client_key) = leaf(vec!["spillway-client".into()]);
        let write = |name: &str, pem: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).unwrap();
            path
        };
        TestPki {
            ca: write("ca.pem", ca_cert.pem()),
            client_certificate: write("client.pem", client_cert.pem()),
            client_key: write("client.key", client_key.serialize_pem()),
            server_certificate: write("server.pem", server_cert.pem()),
            server_key_file: write("server.key", server_key.serialize_pem()),
            server_chain: vec![server_cert.der().clone()],
            server_key: server_key.serialize_pem(),
            dir,
        }
    }

    /// The broker side: this PKI's server certificate, and client
    /// certificates signed by its CA required.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&self.ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let clients = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(clients)
            .with_single_cert(
                self.server_chain.clone(),
                PrivateKeyDer::from_pem_slice(self.server_key.as_bytes()).unwrap(),
            )
            .unwrap();
        Arc::new(config)
    }
}

/// The one user a secured proxy knows.
#[derive(Clone, Debug)]
pub struct SaslUser {
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    pub mechanism: &'static str,
    pub user: String,
    pub password: String,
}

/// Where one connection is in its SASL exchange.
#[derive(Default)]
pub enum SaslState {
    #[default]
    Start,
    Handshaken,
    ScramFirstAnswered {
        client_first_bare: String,
        server_first: String,
        nonce: String,
        salted: Vec<u8>,
    },
    Authenticated,
}

/// What a SASL request did: the reply, and `Some` once the exchange ended
/// (`Ok` with the user, or why it failed).
pub struct SaslStep {
    pub reply: Bytes,
    pub outcome: Option<Result<String, String>>,
}

/// Answers a SaslHandshake or SaslAuthenticate request as a broker with
/// `user` would.
pub fn answer(user: &SaslUser, state: &mut SaslState, api: ApiKey, version: i16, mut frame: Bytes) -> SaslStep {
    let header = RequestHeader::decode(&mut frame, api.request_header_version(version)).unwrap();
    let mut body = BytesMut::new();
    let mut outcome = None;
    if api == ApiKey::SaslHandshake {
        let request = SaslHandshakeRequest::decode(&mut frame, version).unwrap();
        let mut reply = SaslHandshakeResponse::default();
        reply.mechanisms = vec![StrBytes::from_static_str(user.mechanism)];
        if request.mechanism.as_str() == user.mechanism {
            *state = SaslState::Handshaken;
        } else {
            reply.error_code = 33; // UNSUPPORTED_SASL_MECHANISM
            outcome = Some(Err(format!("mechanism {} asked for", request.mechanism.as_str())));
        }
        reply.encode(&mut body, version).unwrap();
    } else {
        let request = SaslAuthenticateRequest::decode(&mut frame, version).unwrap();
        let step = authenticate(user, state, &request.auth_bytes);
        let mut reply = SaslAuthenticateResponse::default();
        match step {
            Ok((bytes, done)) => {
                reply.auth_bytes = Bytes::from(bytes);
                if done {
                    *state = SaslState::Authenticated;
                    outcome = Some(Ok(user.user.clone()));
                }
            }
            Err(why) => {
                reply.error_code = 58; // SASL_AUTHENTICATION_FAILED
                reply.error_message = Some(StrBytes::from_string(format!(
                    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}",
                    user.mechanism
                )));
                outcome = Some(Err(why));
            }
        }
        reply.encode(&mut body, version).unwrap();
    }
    SaslStep { reply: super::with_header(api, version, header.correlation_id, &body), outcome }
}

/// One SaslAuthenticate round: the bytes to answer and whether that ends it.
fn authenticate(user: &SaslUser, state: &mut SaslState, bytes: &[u8]) -> Result<(Vec<u8>, bool), String> {
    let text = String::from_utf8(bytes.to_vec()).map_err(|_| "not UTF-8".to_string())?;
    match (std::mem::take(state), user.mechanism) {
        (SaslState::Handshaken, "PLAIN") => {
            let parts: Vec<&str> = text.split('\0').collect();
            match parts[..] {
                [_, name, password] if name == user.user && password == user.password => Ok((vec![], true)),
                _ => Err("wrong PLAIN credentials".into()),
            }
        }
        (SaslState::Handshaken, _) => {
            let bare = text.strip_prefix("n,,").ok_or("no GS2 header n,,")?.to_string();
            let name = attribute(&bare, "n").ok_or("no n=")?;
            let client_nonce = attribute(&bare, "r").ok_or("no r=")?;
            if name != user.user {
                return Err(format!("unknown user {name}"));
            }
            let mut salt = [0u8; 16];
            getrandom::fill(&mut salt).unwrap();
            let nonce = format!("{client_nonce}{}", BASE64.encode(salt));
            let server_first = format!("r={nonce},s={},i=4096", BASE64.encode(salt));
            let salted = salted_password(user.mechanism, &user.password, &salt);
            *state = SaslState::ScramFirstAnswered {
                client_first_bare: bare,
                server_first: server_first.clone(),
                nonce,
                salted,
            };
            Ok((server_first.into_bytes(), false))
        }
        (SaslState::ScramFirstAnswered { client_first_bare, server_first, nonce, salted }, mechanism) => {
            let (without_proof, proof) = text.rsplit_once(",p=").ok_or("no proof")?;
            if attribute(without_proof, "r") != Some(nonce.as_str()) || attribute(without_proof, "c") != Some("biws") {
                return Err("wrong nonce or channel binding".into());
            }
            let proof = BASE64.decode(proof).map_err(|e| e.to_string())?;
            let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
            let stored_key = digest(mechanism, &mac(mechanism, &salted, b"Client Key"));
            let signature = mac(mechanism, &stored_key, auth_message.as_bytes());
            let client_key: Vec<u8> = proof.iter().zip(&signature).map(|(p, s)| p ^ s).collect();
            if proof.len() != signature.len() || digest(mechanism, &client_key) != stored_key {
                return Err("wrong SCRAM proof".into());
            }
            let server_key = mac(mechanism, &salted, b"Server Key");
            let verifier = BASE64.encode(mac(mechanism, &server_key, auth_message.as_bytes()));
            Ok((format!("v={verifier}").into_bytes(), true))
        }
        _ => Err("SaslAuthenticate out of turn".into()),
    }
}

fn attribute<'a>(message: &'a str, name: &str) -> Option<&'a str> {
    message.split(',').find_map(|part| part.strip_prefix(name)?.strip_prefix('='))
}

fn salted_password(mechanism: &str, password: &str, salt: &[u8]) -> Vec<u8> {
    match mechanism {
        "SCRAM-SHA-256" => pbkdf2::pbkdf2_hmac_array::<sha2::Sha256, 32>(password.as_bytes(), salt, 4096).to_vec(),
        _ => pbkdf2::pbkdf2_hmac_array::<sha2::Sha512, 64>(password.as_bytes(), salt, 4096).to_vec(),
    }
}

fn mac(mechanism: &str, key: &[u8], message: &[u8]) -> Vec<u8> {
    fn with<D: Digest + hmac::digest::core_api::BlockSizeUser + Clone>(key: &[u8], message: &[u8]) -> Vec<u8> {
        let mut mac = <SimpleHmac<D> as Mac>::new_from_slice(key).unwrap();
        mac.update(message);
        mac.finalize().into_bytes().to_vec()
    }
    match mechanism {
        "SCRAM-SHA-256" => with::<sha2::Sha256>(key, message),
        _ => with::<sha2::Sha512>(key, message),
    }
}

fn digest(mechanism: &str, bytes: &[u8]) -> Vec<u8> {
    match mechanism {
        "SCRAM-SHA-256" => sha2::Sha256::digest(bytes).to_vec(),
        _ => sha2::Sha512::digest(bytes).to_vec(),
    }
}
