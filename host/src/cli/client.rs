//! A thin HTTP client for the REST API that turns Connect's error body into
//! the error message a user sees.

use anyhow::{Context, Result, anyhow};
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
    pub fn json<T: DeserializeOwned>(self) -> Result<T> {
        let body = self.body.ok_or_else(|| anyhow!("the server sent no body"))?;
        serde_json::from_value(body).context("unexpected answer from the server")
    }
}

impl Client {
    pub fn new(base: &str) -> Result<Self> {
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder().build().context("building the HTTP client")?;
        Ok(Client { base: base.trim_end_matches('/').to_string(), http })
    }

    pub async fn get(&self, path: &str) -> Result<Answer> {
        self.send(Method::GET, path, None).await
    }

    pub async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> Result<Answer> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response =
            request.send().await.with_context(|| format!("cannot reach the Spillway REST API at {}", self.base))?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("reading the answer to {method} {path}"))?;
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
        Err(anyhow!("{message} (HTTP {})", status.as_u16()))
    }
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
