//! Connect's bound on a request: an answer within 90 seconds
//! (`ConnectResource.DEFAULT_REST_REQUEST_TIMEOUT_MS`), else 500 "Request
//! timed out". What the request started (a config check, a job on the
//! herder's loop) runs on; only the caller stops waiting, as in Connect.

use super::error::ApiError;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::time::Duration;

pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(90);

pub async fn bound(request: Request, next: Next) -> Response {
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            tracing::warn!(%method, path, "no answer within {REQUEST_TIMEOUT:?}: 500");
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "Request timed out").into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::routing::get;

    /// With time paused, the clock jumps to the deadline at once.
    #[tokio::test(start_paused = true)]
    async fn a_request_with_no_answer_in_ninety_seconds_is_a_500_in_connects_shape() {
        let app = Router::new()
            .route("/stuck", get(std::future::pending::<&'static str>))
            .route("/quick", get(|| async { "ok" }))
            .layer(axum::middleware::from_fn(bound));
        let started = tokio::time::Instant::now();
        let request = Request::get("/stuck").body(Body::empty()).unwrap();
        let response = tower::ServiceExt::oneshot(app.clone(), request).await.unwrap();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(started.elapsed(), REQUEST_TIMEOUT);
        let body = axum::body::to_bytes(response.into_body(), 1 << 10).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body, serde_json::json!({"error_code": 500, "message": "Request timed out"}));

        let request = Request::get("/quick").body(Body::empty()).unwrap();
        assert_eq!(tower::ServiceExt::oneshot(app, request).await.unwrap().status(), StatusCode::OK);
    }
}
