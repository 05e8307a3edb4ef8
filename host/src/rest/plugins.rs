//! `/connector-plugins/…`: the installed plugins, their config keys, and
//! validation (200 with the problems listed, even for an invalid config).

use super::AppState;
use super::config_body::config_map;
use super::error::{ApiError, ApiResult, JsonBody, PathParams};
use axum::extract::State;
use axum::routing::{get, put};
use axum::{Json, Router};
use serde_json::Value;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/connector-plugins", get(list))
        .route("/connector-plugins/{plugin}/config", get(config))
        .route("/connector-plugins/{plugin}/config/validate", put(validate))
}

async fn list(State(s): State<AppState>) -> ApiResult<Json<Vec<crate::herder::PluginInfo>>> {
    Ok(Json(s.herder.plugins().await?))
}

async fn config(
    State(s): State<AppState>,
    PathParams(plugin): PathParams<String>,
) -> ApiResult<Json<Vec<crate::herder::ConfigKeyInfo>>> {
    Ok(Json(s.herder.plugin_config(plugin).await?))
}

/// `connector.class` may be left out of the body (the path names the
/// plugin); if given it must name the same plugin, as Connect requires.
async fn validate(
    State(s): State<AppState>,
    PathParams(plugin): PathParams<String>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Json<crate::herder::ConfigInfos>> {
    let mut config = config_map(body)?;
    match config.get("connector.class") {
        Some(class) if *class != plugin => {
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
