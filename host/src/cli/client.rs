//! A thin HTTP client for the REST API that turns Connect's error body into
//! the error message a user sees, and the HTTP status into the kind of
//! failure the exit code reports.

use super::error::{CliError, ErrorKind};
use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde_json::Value;

pub struct Client {
    base: String,
    http: reqwest::Client,
}

/// A successful answer: its status and its JSON body, if it had one.
pub struct Answer {
    pub status: StatusCode,
    pub body: Option<Value>,
}

impl Answer {
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, CliError> {
        let body = self.body.clone().ok_or_else(|| CliError::new(ErrorKind::Server, "the server sent no body"))?;
        serde_json::from_value(body)
            .map_err(|e| CliError::new(ErrorKind::Server, format!("unexpected answer from the server: {e}")))
    }

    /// The body as the server sent it, pretty-printed; nothing if it had none.
    pub fn pretty(&self) -> String {
        match &self.body {
            Some(body) => format!("{}\n", serde_json::to_string_pretty(body).unwrap_or_else(|_| body.to_string())),
            None => String::new(),
        }
    }
}

impl Client {
    pub fn new(base: &str) -> Result<Self, CliError> {
        crate::capabilities::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| CliError::local(format!("building the HTTP client: {e}")))?;
        Ok(Client { base: base.trim_end_matches('/').to_string(), http })
    }

    pub async fn get(&self, path: &str) -> Result<Answer, CliError> {
        self.send(Method::GET, path, None).await
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer, CliError> {
        self.send_with(method, path, |request| match body {
            Some(body) => request.json(body),
            None => request,
        })
        .await
    }

    /// PUTs `bytes` as the body, as `application/octet-stream`.
    pub async fn put_bytes(&self, path: &str, bytes: Vec<u8>) -> Result<Answer, CliError> {
        self.send_with(Method::PUT, path, |request| {
            request.header(reqwest::header::CONTENT_TYPE, "application/octet-stream").body(bytes)
        })
        .await
    }

    async fn send_with(
        &self,
        method: Method,
        path: &str,
        build: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> Result<Answer, CliError> {
        let url = format!("{}{path}", self.base);
        let request = build(self.http.request(method.clone(), &url));
        let response = request.send().await.map_err(|e| {
            // A builder error is a URL that is not one: ours to fix, not the server's.
            let kind = if e.is_builder() { ErrorKind::Local } else { ErrorKind::Unreachable };
            CliError::new(kind, format!("cannot reach the Spillway REST API at {}: {}", self.base, root_cause(&e)))
        })?;
        let status = response.status();
        let text = response.text().await.map_err(|e| {
            CliError::new(ErrorKind::Unreachable, format!("reading the answer to {method} {path}: {e}"))
        })?;
        let body: Option<Value> = if text.trim().is_empty() { None } else { serde_json::from_str(&text).ok() };
        if status.is_success() {
            return Ok(Answer { status, body });
        }
        let message = body
            .as_ref()
            .and_then(|b| b.get("message"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| text.trim().to_string());
        let kind = if status.is_client_error() { ErrorKind::Refused } else { ErrorKind::Server };
        Err(CliError::new(kind, format!("{message} (HTTP {})", status.as_u16())))
    }
}

/// The innermost error ("Connection refused"), which says more than
/// reqwest's "error sending request".
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// A path segment, percent-encoded (connector names may hold any character).
pub fn segment(raw: &str) -> String {
    let mut out = String::new();
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Answers one request with `response` (status line, headers and body).
    async fn server_answering(response: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            socket.write_all(response.as_bytes()).await.unwrap();
        });
        url
    }

    fn http(status: &str, body: &str) -> &'static str {
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        Box::leak(response.into_boxed_str())
    }

    #[tokio::test]
    async fn statuses_become_kinds_of_failure() {
        let url = server_answering(http("500 Internal Server Error", r#"{"error_code":500,"message":"boom"}"#)).await;
        let e = Client::new(&url).unwrap().get("/").await.err().unwrap();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Server, "boom (HTTP 500)"));

        let url = server_answering(http("409 Conflict", r#"{"error_code":409,"message":"busy"}"#)).await;
        let e = Client::new(&url).unwrap().get("/").await.err().unwrap();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Refused, "busy (HTTP 409)"));

        // A 200 that is not the API's answer is the server's failure too.
        let url = server_answering(http("200 OK", "<html>hello</html>")).await;
        let answer = Client::new(&url).unwrap().get("/").await.unwrap();
        assert_eq!(answer.json::<Vec<String>>().err().unwrap().kind, ErrorKind::Server);
        assert_eq!(answer.pretty(), "", "no JSON body: nothing to print");

        let e = Client::new("not a url").unwrap().get("/").await.err().unwrap();
        assert_eq!(e.kind, ErrorKind::Local, "{e}");
    }
}
