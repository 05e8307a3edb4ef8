//! The REST listener secured, as Connect secures it with HTTPS listeners and
//! a REST extension: TLS from PEM files, and HTTP basic or bearer
//! authentication on every request, since the API starts plugins and takes
//! uploads of them.

use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// How the listener is secured; the default is neither TLS nor
/// authentication.
#[derive(Clone, Default)]
pub struct RestSecurity {
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub auth: Option<Arc<Credentials>>,
    /// What a request's `Host` may name besides IPs and `localhost`.
    pub host_names: Arc<super::HostNames>,
}

/// Who may call: users with passwords (basic), and bearer tokens.
#[derive(Default)]
pub struct Credentials {
    basic: BTreeMap<String, String>,
    bearer: Vec<String>,
}

impl Credentials {
    /// `users`: a properties file of `user=password` lines (as the JAAS
    /// `PropertyFileLoginModule` of Connect's basic-auth extension reads);
    /// `tokens`: one token per line. Either may be absent, not both.
    pub fn load(users: Option<&Path>, tokens: Option<&Path>) -> Result<Self, String> {
        let mut credentials = Credentials::default();
        if let Some(path) = users {
            let file = std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let users =
                java_properties::read(std::io::BufReader::new(file)).map_err(|e| format!("{}: {e}", path.display()))?;
            credentials.basic = users.into_iter().collect();
            if credentials.basic.is_empty() {
                return Err(format!("{} names no user", path.display()));
            }
        }
        if let Some(path) = tokens {
            let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            credentials.bearer = text.lines().map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
            if credentials.bearer.is_empty() {
                return Err(format!("{} holds no token", path.display()));
            }
        }
        Ok(credentials)
    }

    /// Whether an `Authorization` header value names a known user or token.
    fn admits(&self, authorization: &str) -> bool {
        let (scheme, value) = authorization.split_once(' ').unwrap_or((authorization, ""));
        match scheme.to_ascii_lowercase().as_str() {
            "basic" => {
                let decoded = base64::engine::general_purpose::STANDARD.decode(value.trim()).unwrap_or_default();
                let decoded = String::from_utf8_lossy(&decoded);
                let Some((user, password)) = decoded.split_once(':') else { return false };
                self.basic.get(user).is_some_and(|known| same(known.as_bytes(), password.as_bytes()))
            }
            "bearer" => {
                // Every token compared, so that timing tells nothing of which.
                self.bearer.iter().fold(false, |found, token| same(token.as_bytes(), value.trim().as_bytes()) | found)
            }
            _ => false,
        }
    }
}

/// Equal, in time that depends on the lengths only.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Refuses a request without known credentials: 401 with Connect's error
/// body and the challenges the listener accepts.
pub async fn authenticate(State(credentials): State<Arc<Credentials>>, request: Request, next: Next) -> Response {
    let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if given.is_some_and(|value| credentials.admits(value)) {
        return next.run(request).await;
    }
    let message = match given {
        None => "This request needs credentials: HTTP basic or a bearer token",
        Some(_) => "The credentials given are not valid",
    };
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    let challenge = match (credentials.basic.is_empty(), credentials.bearer.is_empty()) {
        (false, false) => "Basic realm=\"spillway\", Bearer realm=\"spillway\"",
        (false, true) => "Basic realm=\"spillway\"",
        _ => "Bearer realm=\"spillway\"",
    };
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    response
}

/// The listener's TLS configuration from a PEM certificate chain and key.
pub fn server_tls(certificate: &Path, key: &Path) -> Result<rustls::ServerConfig, String> {
    let chain = CertificateDer::pem_file_iter(certificate)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("cannot read {}: {e}", certificate.display()))?;
    if chain.is_empty() {
        return Err(format!("{} holds no PEM certificate", certificate.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("cannot read {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("certificate and key: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_users_and_tokens_are_admitted() {
        let credentials = Credentials {
            basic: BTreeMap::from([("ops".to_string(), "s3cret".to_string())]),
            bearer: vec!["t0ken".into()],
        };
        let basic = |pair: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
        assert!(credentials.admits(&basic("ops:s3cret")));
        assert!(credentials.admits("Bearer t0ken") && credentials.admits("bearer t0ken"));
        for refused in [basic("ops:s3cre"), basic("ops:s3cret "), basic("dev:s3cret"), basic("ops")] {
            assert!(!credentials.admits(&refused), "{refused}");
        }
        for refused in ["Bearer t0ke", "Bearer", "t0ken", "Digest t0ken", "Basic !!"] {
            assert!(!credentials.admits(refused), "{refused}");
        }
    }
}
