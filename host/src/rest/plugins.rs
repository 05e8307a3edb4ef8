//! `/connector-plugins/…`: the installed plugins (every version of each, as
//! KIP-891 lists them), their config keys, validation (200 with the problems
//! listed, even for an invalid config), and installing: a reload of the
//! plugin directory, or an upload of a component.

use super::AppState;
use super::config_body::config_map;
use super::error::{ApiError, ApiResult, JsonBody, PathParams, QueryParams};
use crate::herder::PLUGIN_UPLOAD_MAX_BYTES;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde_json::Value;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/connector-plugins", get(list))
        .route("/connector-plugins/{plugin}/config", get(config))
        .route("/connector-plugins/{plugin}/config/validate", put(validate))
        .route("/connector-plugins/reload", post(reload))
        // A little over the limit, so that the herder's check answers with a
        // message that says what the limit is.
        .route("/connector-plugins/{plugin}", put(upload).layer(DefaultBodyLimit::max(PLUGIN_UPLOAD_MAX_BYTES + 1)))
}

/// Scans the plugin directory again and says what changed.
async fn reload(State(s): State<AppState>) -> ApiResult<Json<crate::herder::ScanReport>> {
    Ok(Json(s.herder.reload_plugins().await?))
}

/// The component is the body. 201 when installed, 200 when this very build
/// was installed already.
async fn upload(
    State(s): State<AppState>,
    PathParams(plugin): PathParams<String>,
    body: Result<Bytes, axum::extract::rejection::BytesRejection>,
) -> ApiResult<(StatusCode, Json<crate::herder::PluginInfo>)> {
    let body = body.map_err(|e| {
        ApiError::bad_request(format!(
            "reading the component: {} (the largest upload is {PLUGIN_UPLOAD_MAX_BYTES} bytes)",
            e.body_text()
        ))
    })?;
    if body.is_empty() {
        return Err(ApiError::bad_request("the body must be the plugin's component (a .wasm file)"));
    }
    let (created, info) = s.herder.install_plugin(plugin, body.to_vec()).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(info)))
}

/// As Connect: connectors only, unless `?connectorsOnly=false` asks for
/// the transforms too: the installed plugins, then the built-in transforms
/// and predicates.
async fn list(State(s): State<AppState>, query: QueryParams) -> ApiResult<Json<Vec<crate::herder::PluginInfo>>> {
    let connectors_only = query.flag("connectorsOnly", true)?;
    let mut plugins = s.herder.plugins().await?;
    if connectors_only {
        plugins.retain(|p| p.kind == "sink");
    } else {
        plugins.extend(crate::herder::builtin_plugin_infos());
    }
    Ok(Json(plugins))
}

/// `?version=` (KIP-891) picks a version: a semver range, the newest it admits.
async fn config(
    State(s): State<AppState>,
    PathParams(plugin): PathParams<String>,
    query: QueryParams,
) -> ApiResult<Json<Vec<crate::herder::ConfigKeyInfo>>> {
    let version = query.all("version").last().map(String::from);
    Ok(Json(s.herder.plugin_config(plugin, version).await?))
}

/// `connector.class` may be left out of the body (the path names the
/// plugin); if given it must name the same plugin, by Connect's rule: the
/// class ends with the path's name, each without a trailing `Connector`
/// (`io.confluent.connect.s3.S3SinkConnector` for `S3Sink`).
async fn validate(
    State(s): State<AppState>,
    PathParams(plugin): PathParams<String>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Json<crate::herder::ConfigInfos>> {
    let mut config = config_map(body)?;
    match config.get("connector.class") {
        Some(class) if !normalized(class).ends_with(normalized(&plugin)) => {
            return Err(ApiError::bad_request(format!(
                "Included connector type {class} does not match request type {plugin}"
            )));
        }
        Some(_) => {}
        None => {
            config.insert("connector.class".into(), plugin.clone());
        }
    }
    Ok(Json(s.herder.validate(plugin, config).await?))
}

/// A class or plugin name without a trailing `Connector`, as Connect compares them.
fn normalized(name: &str) -> &str {
    name.strip_suffix("Connector").filter(|n| !n.is_empty()).unwrap_or(name)
}
