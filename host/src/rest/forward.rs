//! In a group, what changes connectors is done by the leader, as Connect's
//! followers forward to theirs: a write that reaches another worker is sent
//! on to the leader's REST API and its answer passed back. The config topic
//! orders every write whoever makes it; what the leader adds is that the
//! checks before a write (a name already taken, the config a PATCH applies
//! to) see one view. A request that was forwarded once is served where it
//! lands, so a leadership that moves mid-way cannot bounce it around; one
//! the leader cannot be reached for is served here. While no leader is
//! known (before the worker's first assignment), a write is answered 409,
//! as Connect answers it (KIP-745's restarts included): the client retries.

use super::AppState;
use super::error::ApiError;
use crate::herder::Leadership;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// Connect's words for a write that no leader can take now.
pub const NO_LEADER: &str = "Cannot complete request because of a conflicting operation (e.g. worker rebalance)";

/// Marks a request one worker forwarded to another.
const FORWARDED: HeaderName = HeaderName::from_static("x-spillway-forwarded");
/// Connector bodies are small; uploads go elsewhere.
const MAX_BODY: usize = 4 << 20;

/// Whether the leader carries `request` out: a write to connectors that
/// was not forwarded once already.
fn for_the_leader(request: &Request) -> bool {
    let write = !matches!(*request.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    write && request.uri().path().starts_with("/connectors") && !request.headers().contains_key(FORWARDED)
}

pub async fn to_leader(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !for_the_leader(&request) {
        return next.run(request).await;
    }
    let leadership = state.herder.leadership().await.ok();
    forward(leadership, request, next).await
}

/// Carries out a write for the leader: here, by the leader, or 409 while
/// none is known. A herder that has stopped (`None`) leaves the request to
/// fail where it is served.
async fn forward(leadership: Option<Leadership>, request: Request, next: Next) -> Response {
    let leader = match leadership {
        Some(Leadership::Elsewhere(leader)) => leader,
        Some(Leadership::Unknown) => return ApiError::new(StatusCode::CONFLICT, NO_LEADER).into_response(),
        Some(Leadership::Here) | None => return next.run(request).await,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, path: &str, forwarded: bool) -> Request {
        let mut request = Request::builder().method(method).uri(path);
        if forwarded {
            request = request.header(FORWARDED, "1");
        }
        request.body(Body::empty()).unwrap()
    }

    /// KIP-745: a restart (as any write) while no leader is known is a 409
    /// in Connect's shape, and never reaches the handler.
    #[tokio::test]
    async fn a_write_with_no_known_leader_is_a_409() {
        let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = served.clone();
        let app = axum::Router::new()
            .route(
                "/connectors/{name}/restart",
                axum::routing::post(move || async move {
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    StatusCode::ACCEPTED
                }),
            )
            .layer(axum::middleware::from_fn(|request: Request, next: Next| {
                forward(Some(Leadership::Unknown), request, next)
            }));
        let response = tower::ServiceExt::oneshot(app, restart()).await.unwrap();
        assert_eq!(response.status(), StatusCode::CONFLICT);
        let body = axum::body::to_bytes(response.into_body(), 1 << 10).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body, serde_json::json!({"error_code": 409, "message": NO_LEADER}));
        assert_eq!(served.load(std::sync::atomic::Ordering::Relaxed), 0);

        let here = axum::Router::new()
            .route("/connectors/{name}/restart", axum::routing::post(|| async { StatusCode::ACCEPTED }))
            .layer(axum::middleware::from_fn(|request: Request, next: Next| {
                forward(Some(Leadership::Here), request, next)
            }));
        assert_eq!(tower::ServiceExt::oneshot(here, restart()).await.unwrap().status(), StatusCode::ACCEPTED);
    }

    fn restart() -> Request {
        request(Method::POST, "/connectors/c/restart?includeTasks=true&onlyFailed=false", false)
    }

    #[test]
    fn writes_to_connectors_go_to_the_leader_once() {
        assert!(for_the_leader(&request(Method::POST, "/connectors/c/restart?includeTasks=true", false)));
        assert!(for_the_leader(&request(Method::DELETE, "/connectors/c", false)));
        for served_here in [
            request(Method::GET, "/connectors/c/status", false),
            request(Method::PUT, "/admin/loggers/x", false),
            request(Method::POST, "/connectors/c/restart", true),
        ] {
            assert!(!for_the_leader(&served_here), "{} {}", served_here.method(), served_here.uri());
        }
    }
}
