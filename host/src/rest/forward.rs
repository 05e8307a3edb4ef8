//! In a group, what changes connectors is done by the leader, as Connect's
//! followers forward to theirs: a write that reaches another worker is sent
//! on to the leader's REST API and its answer passed back. The config topic
//! orders every write whoever makes it; what the leader adds is that the
//! checks before a write (a name already taken, the config a PATCH applies
//! to) see one view. A request that was forwarded once is served where it
//! lands, so a leadership that moves mid-way cannot bounce it around; one
//! the leader cannot be reached for is served here.

use super::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Marks a request one worker forwarded to another.
const FORWARDED: HeaderName = HeaderName::from_static("x-spillway-forwarded");
/// Connector bodies are small; uploads go elsewhere.
const MAX_BODY: usize = 4 << 20;

pub async fn to_leader(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let write = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !write || !request.uri().path().starts_with("/connectors") || request.headers().contains_key(FORWARDED) {
        return next.run(request).await;
    }
    let Ok(Some(leader)) = state.herder.leader_url().await else { return next.run(request).await };
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_BODY).await else {
        return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response();
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path}", leader.trim_end_matches('/'));
    let mut forwarded = client().request(parts.method.clone(), &url).header(FORWARDED, "1");
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION, header::ACCEPT] {
        if let Some(value) = parts.headers.get(&name) {
            forwarded = forwarded.header(name, value);
        }
    }
    match forwarded.body(body.clone()).send().await {
        Ok(answer) => {
            tracing::info!(method = %parts.method, path, leader, "forwarded to the leader");
            let status = answer.status();
            let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
            let bytes = answer.bytes().await.unwrap_or_default();
            let mut response = Response::new(Body::from(bytes));
            *response.status_mut() = status;
            if let Some(content_type) = content_type {
                response.headers_mut().insert(header::CONTENT_TYPE, content_type);
            }
            response
        }
        Err(e) => {
            tracing::warn!(leader, error = %e, "the leader could not be reached: served here");
            next.run(Request::from_parts(parts, Body::from(body))).await
        }
    }
}

/// One client for every forward, with the crypto provider it needs.
fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::LazyLock<reqwest::Client> = std::sync::LazyLock::new(|| {
        crate::capabilities::tls::install_crypto_provider();
        reqwest::Client::new()
    });
    &CLIENT
}
