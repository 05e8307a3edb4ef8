//! Requests a web page could make the browser of someone near the worker
//! send, refused before they reach a handler. While REST authentication is
//! off, anyone who can reach the listener may create connectors; a page the
//! worker's neighbour opens can reach it too, in two ways:
//! - a "simple" cross-origin request, which the browser sends without
//!   asking first: a body typed `text/plain` or as a form, or untyped.
//!   Connect answers 415 to the typed ones; we answer 415 to all three,
//!   since JSON bodies always say so;
//! - DNS rebinding: the page's own name made to resolve to the worker, so
//!   the browser treats the worker as same-origin. Its requests name the
//!   page's host in `Host`, which must be an IP address, `localhost`, the
//!   advertised host, or one of `rest.host.names`.

use super::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;
use std::sync::Arc;

/// The names a request's `Host` may give besides IP addresses and
/// `localhost`.
#[derive(Clone, Debug, Default)]
pub struct HostNames(Vec<String>);

impl HostNames {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        HostNames(names.into_iter().map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase()).collect())
    }

    fn admits(&self, host: &str) -> bool {
        // `host[:port]`, `[v6]:port`.
        let name = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => {
                host.rsplit_once(':').map_or(host, |(name, port)| if port.parse::<u16>().is_ok() { name } else { host })
            }
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        name.parse::<IpAddr>().is_ok() || name == "localhost" || self.0.contains(&name)
    }
}

/// The middleware: 421 for a `Host` not admitted, 415 for a body a browser
/// could send across origins unasked.
pub async fn guard(State(hosts): State<Arc<HostNames>>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).and_then(|h| h.to_str().ok()).or(request.uri().host());
    if let Some(host) = host
        && !hosts.admits(host)
    {
        let message = format!(
            "Host '{host}' is not one of this worker's names: add it to rest.host.names (a guard against DNS \
             rebinding)"
        );
        return ApiError::new(StatusCode::MISDIRECTED_REQUEST, message).into_response();
    }
    if matches!(*request.method(), Method::POST | Method::PUT | Method::PATCH) && has_body(&request) {
        let content_type = request.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
        let essence = content_type.map(|ct| ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase());
        let simple = match essence.as_deref() {
            None => true,
            Some(ct) => matches!(ct, "text/plain" | "application/x-www-form-urlencoded" | "multipart/form-data"),
        };
        if simple {
            let message = format!(
                "HTTP 415 Unsupported Media Type: send the body as application/json (got {})",
                content_type.unwrap_or("no Content-Type")
            );
            return ApiError::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, message).into_response();
        }
    }
    next.run(request).await
}

fn has_body(request: &Request) -> bool {
    let headers = request.headers();
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    length.is_some_and(|n| n > 0) || headers.contains_key(header::TRANSFER_ENCODING)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_localhost_and_named_hosts_are_admitted() {
        let names = HostNames::new(["connect.internal".to_string()]);
        for host in ["127.0.0.1:8083", "10.1.2.3", "[::1]:8083", "localhost:8083", "Connect.Internal.:8083"] {
            assert!(names.admits(host), "{host}");
        }
        for host in ["evil.example:8083", "localhost.evil.example", "connect.internal.evil.example:8083"] {
            assert!(!names.admits(host), "{host}");
        }
    }
}
