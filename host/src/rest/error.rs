//! Connect's error shape, `{"error_code": N, "message": "…"}`, for every
//! failure, and the extractors that turn axum's own rejections (plain text,
//! 415/422) into it.

use crate::herder::HerderError;
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::de::DeserializeOwned;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }
}

impl From<HerderError> for ApiError {
    fn from(e: HerderError) -> Self {
        let status = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        ApiError::new(status, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error_code": self.status.as_u16(), "message": self.message });
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A handler that panicked: Connect's 500 instead of a dropped connection.
/// The worker keeps serving; the panic itself is logged.
pub fn handler_panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let what = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic without a message");
    tracing::error!("REST handler panicked: {what}");
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("Internal error: {what}")).into_response()
}

/// Fallback for paths no route matches; Jersey's wording.
pub async fn route_not_found() -> ApiError {
    ApiError::not_found("HTTP 404 Not Found")
}

/// Fallback for a known path with a method it does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "HTTP 405 Method Not Allowed")
}

/// A JSON request body. Unlike `axum::Json` it does not insist on a
/// `Content-Type` (`curl -d` sends a form type, and Connect users rely on
/// that working), and every failure is a 400 in Connect's shape.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| ApiError::new(e.status(), e.body_text()))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(ApiError::bad_request("Request body is missing: a JSON document is required"));
        }
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("Invalid JSON in request body: {e}")))
    }
}

/// Path parameters; percent-decoding failures become a 400.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathParams(p.0))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

/// The query string as ordered pairs, so that a parameter may repeat
/// (`?expand=status&expand=info`).
pub struct QueryParams(pub Vec<(String, String)>);

impl QueryParams {
    pub fn all<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// A boolean flag: `true`/`false` in any case; absent means `default`.
    /// Anything else is refused rather than read as false, so that a typo
    /// does not silently do less than asked.
    pub fn flag(&self, key: &str, default: bool) -> ApiResult<bool> {
        match self.all(key).last() {
            None => Ok(default),
            Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
            Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!("Query parameter '{key}' must be true or false, not '{v}'"))),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map(|q| QueryParams(q.0))
            .map_err(|e| ApiError::bad_request(e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_of(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn a_panicking_handler_answers_connects_500_with_the_panic_message() {
        let response = handler_panicked(Box::new(String::from("index out of bounds")));
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = body_of(response).await;
        assert_eq!(body["error_code"], 500);
        assert_eq!(body["message"], "Internal error: index out of bounds");

        let body = body_of(handler_panicked(Box::new("static message"))).await;
        assert_eq!(body["message"], "Internal error: static message");
        let body = body_of(handler_panicked(Box::new(42_u8))).await;
        assert_eq!(body["message"], "Internal error: a panic without a message");
    }
}
