//! The Kafka Connect-compatible REST API on top of the [`Herder`].
//!
//! Paths, bodies and status codes follow Kafka Connect 4.x so that Connect's
//! tooling works unchanged; every error is Connect's
//! `{"error_code": N, "message": "…"}`, including malformed JSON, unknown
//! paths and wrong methods. Beyond Connect: `GET /metrics` (Prometheus) and
//! `GET /openapi.json`.

mod browser;
mod config_body;
mod connectors;
mod deadline;
pub mod error;
mod forward;
mod loggers;
pub mod metrics;
mod plugins;
pub mod security;

pub use browser::HostNames;
pub use error::ApiError;
pub use loggers::{LogFormat, LogLevels, LoggerLevel};
pub use security::{Credentials, RestSecurity};

use crate::herder::{Herder, Leadership};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Router, ServiceExt};
use serde_json::json;
use std::future::Future;
use std::net::SocketAddr;
use tower_http::normalize_path::NormalizePath;

/// The OpenAPI 3.0 document of every endpoint, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

#[derive(Clone)]
pub struct AppState {
    herder: Herder,
    loggers: LogLevels,
}

pub fn router(herder: Herder, loggers: LogLevels) -> Router {
    let state = AppState { herder, loggers };
    Router::new()
        .route("/", get(server_info))
        .route("/health", get(health))
        .route("/metrics", get(metrics::handler))
        .route("/openapi.json", get(openapi))
        .merge(connectors::routes())
        .merge(plugins::routes())
        .merge(loggers::routes())
        .fallback(error::route_not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(state.clone(), forward::to_leader))
        .layer(axum::middleware::from_fn(deadline::bound))
        .with_state(state)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(error::handler_panicked))
}

/// Serves the API on `addr` until Ctrl-C. Stopping the herder is left to the
/// caller, which may have more to shut down.
pub async fn serve(addr: SocketAddr, herder: Herder, loggers: LogLevels) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!("REST API listening on http://{}", listener.local_addr()?);
    serve_on(listener, herder, loggers, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}

/// Serves on an already bound listener until `shutdown` completes (for
/// callers that bind port 0, or stop on something other than Ctrl-C).
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    herder: Herder,
    loggers: LogLevels,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    serve_secured(listener, herder, loggers, RestSecurity::default(), shutdown).await
}

/// As [`serve_on`], with TLS and authentication as `security` says.
pub async fn serve_secured(
    listener: tokio::net::TcpListener,
    herder: Herder,
    loggers: LogLevels,
    security: RestSecurity,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut app = router(herder, loggers);
    if let Some(credentials) = security.auth {
        app = app.layer(axum::middleware::from_fn_with_state(credentials, security::authenticate));
    }
    // Outermost: a browser's request on a page's behalf is refused before
    // anything else, authentication included.
    app = app.layer(axum::middleware::from_fn_with_state(security.host_names, browser::guard));
    // Connect's JAX-RS routes match with or without a trailing slash, and
    // clients rely on it (`GET /connectors/NAME/`): trim it before routing.
    let app = NormalizePath::trim_trailing_slash(app);
    match security.tls {
        None => {
            axum::serve(listener, ServiceExt::<axum::extract::Request>::into_make_service(app))
                .with_graceful_shutdown(shutdown)
                .await?
        }
        Some(tls) => serve_tls(listener, tls, app, shutdown).await,
    }
    Ok(())
}

/// HTTPS: each accepted connection shakes hands, then hyper serves it with
/// the same app. A failed handshake ends that connection only.
async fn serve_tls(
    listener: tokio::net::TcpListener,
    tls: std::sync::Arc<tokio_rustls::rustls::ServerConfig>,
    app: NormalizePath<Router>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((tcp, _)) => tcp,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a REST connection");
                    continue;
                }
            },
            _ = &mut shutdown => return,
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let Ok(stream) = acceptor.accept(tcp).await else { return };
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                tower::ServiceExt::oneshot(app.clone(), request)
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

/// `GET /`.
async fn server_info(State(s): State<AppState>) -> impl IntoResponse {
    axum::Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "commit": option_env!("SPILLWAY_GIT_COMMIT").unwrap_or("unknown"),
        "kafka_cluster_id": s.herder.kafka_cluster_id(),
    }))
}

/// `GET /health` (KIP-1017): 200 once the herder answers requests and, in
/// a group, knows who leads (until then writes are answered 409).
async fn health(State(s): State<AppState>) -> impl IntoResponse {
    let (status, body) = match s.herder.leadership().await {
        Ok(Leadership::Unknown) => (
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "starting", "message": "Worker is still starting up: it has not joined its group yet."}),
        ),
        Ok(_) => (
            StatusCode::OK,
            json!({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}),
        ),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, json!({"status": "unhealthy", "message": e.to_string()})),
    };
    (status, axum::Json(body))
}

/// The document with this build's version filled in.
async fn openapi() -> impl IntoResponse {
    match serde_json::from_str::<serde_json::Value>(OPENAPI) {
        Ok(mut doc) => {
            doc["info"]["version"] = json!(env!("CARGO_PKG_VERSION"));
            axum::Json(doc).into_response()
        }
        Err(_) => ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn openapi_document_is_valid_json_of_version_3_0() {
        let doc: serde_json::Value = serde_json::from_str(super::OPENAPI).expect("openapi.json parses");
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.0."));
        assert!(doc["paths"].as_object().unwrap().len() >= 20);
    }
}
