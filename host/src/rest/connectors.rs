//! `/connectors/…`: Kafka Connect's connector resource, path for path and
//! status code for status code.

use super::AppState;
use super::config_body::{check_and_put_name, check_connector_name, config_map, config_patch};
use super::error::{ApiError, ApiResult, JsonBody, PathParams, QueryParams};
use crate::herder::{ConnectorOffsets, PartitionOffset, TargetState};
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use serde::Deserialize;
use serde_json::{Map, Value, json};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/connectors", get(list).post(create))
        .route("/connectors/{name}", get(info).delete(delete))
        .route("/connectors/{name}/config", get(config).put(put_config).patch(patch_config))
        .route("/connectors/{name}/status", get(status))
        .route("/connectors/{name}/tasks", get(tasks))
        .route("/connectors/{name}/tasks/{task}/status", get(task_status))
        .route("/connectors/{name}/tasks/{task}/restart", post(restart_task))
        .route("/connectors/{name}/restart", post(restart))
        .route("/connectors/{name}/pause", put(pause))
        .route("/connectors/{name}/resume", put(resume))
        .route("/connectors/{name}/stop", put(stop))
        .route("/connectors/{name}/topics", get(topics))
        .route("/connectors/{name}/topics/reset", put(reset_topics))
        .route("/connectors/{name}/offsets", get(offsets).patch(alter_offsets).delete(reset_offsets))
}

fn json_response(status: StatusCode, body: impl serde::Serialize) -> Response {
    (status, axum::Json(body)).into_response()
}

/// `Location: /connectors/<name>` with the name percent-encoded.
fn created(name: &str, body: impl serde::Serialize) -> Response {
    let mut response = json_response(StatusCode::CREATED, body);
    let mut location = String::from("/connectors/");
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            location.push(b as char);
        } else {
            location.push_str(&format!("%{b:02X}"));
        }
    }
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

/// A task id from the path. Like Jersey, a value that is not a task number
/// names no task: 404.
fn task_id(name: &str, raw: &str) -> ApiResult<u32> {
    raw.parse().map_err(|_| ApiError::not_found(format!("Task {name}-{raw} not found")))
}

/// `GET /connectors`: names, or with `expand=status|info` (repeatable) a map
/// from name to the expansions asked for. Unknown expansions are ignored and a
/// connector deleted mid-listing is left out, as in Connect.
async fn list(State(s): State<AppState>, query: QueryParams) -> ApiResult<Response> {
    let names = s.herder.connectors().await?;
    let expand: Vec<&str> = query.all("expand").collect();
    if expand.is_empty() {
        return Ok(json_response(StatusCode::OK, names));
    }
    let mut out = Map::new();
    'connectors: for name in names {
        let mut expansions = Map::new();
        for kind in &expand {
            let value = match *kind {
                "status" => s.herder.status(name.clone()).await.map(|v| json!(v)),
                "info" => s.herder.info(name.clone()).await.map(|v| json!(v)),
                _ => continue,
            };
            match value {
                Ok(v) => expansions.insert(kind.to_string(), v),
                Err(crate::herder::HerderError::NotFound(_)) => continue 'connectors,
                Err(e) => return Err(e.into()),
            };
        }
        out.insert(name, Value::Object(expansions));
    }
    Ok(json_response(StatusCode::OK, out))
}

#[derive(Deserialize)]
struct CreateRequest {
    name: Option<String>,
    config: Option<Value>,
    initial_state: Option<String>,
}

fn initial_state(raw: &str) -> ApiResult<TargetState> {
    match raw.to_ascii_uppercase().as_str() {
        "RUNNING" => Ok(TargetState::Started),
        "PAUSED" => Ok(TargetState::Paused),
        "STOPPED" => Ok(TargetState::Stopped),
        _ => Err(ApiError::bad_request(format!(
            "Invalid initial_state '{raw}': expected one of RUNNING, PAUSED, STOPPED"
        ))),
    }
}

async fn create(State(s): State<AppState>, JsonBody(request): JsonBody<CreateRequest>) -> ApiResult<Response> {
    let name = request.name.as_deref().unwrap_or("").trim().to_string();
    check_connector_name(&name)?;
    let Some(config) = request.config.filter(|c| !c.is_null()) else {
        return Err(ApiError::bad_request("Connector configuration must be provided in 'config'"));
    };
    let mut config = config_map(config)?;
    check_and_put_name(&name, &mut config)?;
    let state = request.initial_state.as_deref().map(initial_state).transpose()?;
    let info = s.herder.create(name.clone(), config, state).await?;
    Ok(created(&name, info))
}

async fn info(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    Ok(json_response(StatusCode::OK, s.herder.info(name).await?))
}

async fn delete(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    s.herder.delete(name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn config(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    Ok(json_response(StatusCode::OK, s.herder.info(name).await?.config))
}

/// 201 when this created the connector, 200 when it replaced a config.
async fn put_config(
    State(s): State<AppState>,
    PathParams(name): PathParams<String>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    check_connector_name(&name)?;
    let mut config = config_map(body)?;
    check_and_put_name(&name, &mut config)?;
    let (was_created, info) = s.herder.put_config(name.clone(), config).await?;
    Ok(if was_created { created(&name, info) } else { json_response(StatusCode::OK, info) })
}

async fn patch_config(
    State(s): State<AppState>,
    PathParams(name): PathParams<String>,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    let patch = config_patch(body)?;
    match patch.get("name") {
        Some(Some(n)) if *n != name => {
            return Err(ApiError::bad_request(format!(
                "Connector name configuration ({n}) doesn't match connector name in the URL ({name})"
            )));
        }
        Some(None) => return Err(ApiError::bad_request("The connector's 'name' cannot be removed")),
        _ => {}
    }
    Ok(json_response(StatusCode::OK, s.herder.patch_config(name, patch).await?))
}

async fn status(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    Ok(json_response(StatusCode::OK, s.herder.status(name).await?))
}

async fn tasks(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    Ok(json_response(StatusCode::OK, s.herder.tasks(name).await?))
}

async fn task_status(
    State(s): State<AppState>,
    PathParams((name, task)): PathParams<(String, String)>,
) -> ApiResult<Response> {
    let task = task_id(&name, &task)?;
    Ok(json_response(StatusCode::OK, s.herder.task_status(name, task).await?))
}

async fn restart_task(
    State(s): State<AppState>,
    PathParams((name, task)): PathParams<(String, String)>,
) -> ApiResult<StatusCode> {
    let task = task_id(&name, &task)?;
    s.herder.restart_task(name, task).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// KIP-745: only the Connector instance (both flags false) → 204 without a
/// body; otherwise 202 with the status, targeted instances RESTARTING.
async fn restart(
    State(s): State<AppState>,
    PathParams(name): PathParams<String>,
    query: QueryParams,
) -> ApiResult<Response> {
    let include_tasks = query.flag("includeTasks", false)?;
    let only_failed = query.flag("onlyFailed", false)?;
    Ok(match s.herder.restart(name, include_tasks, only_failed).await? {
        None => StatusCode::NO_CONTENT.into_response(),
        Some(status) => json_response(StatusCode::ACCEPTED, status),
    })
}

async fn pause(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    s.herder.pause(name).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn resume(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    s.herder.resume(name).await?;
    Ok(StatusCode::ACCEPTED)
}

/// Connect answers a stop with 204 (KIP-875), unlike pause and resume.
async fn stop(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    s.herder.stop(name).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn topics(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    let topics = s.herder.topics(name.clone()).await?;
    let mut body = Map::new();
    body.insert(name, json!({ "topics": topics }));
    Ok(json_response(StatusCode::OK, body))
}

async fn reset_topics(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<StatusCode> {
    s.herder.reset_topics(name).await?;
    Ok(StatusCode::ACCEPTED)
}

async fn offsets(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    Ok(json_response(StatusCode::OK, s.herder.offsets(name).await?))
}

#[derive(Deserialize)]
struct AlterOffsetsRequest {
    offsets: Option<Vec<PartitionOffset>>,
}

async fn alter_offsets(
    State(s): State<AppState>,
    PathParams(name): PathParams<String>,
    JsonBody(request): JsonBody<AlterOffsetsRequest>,
) -> ApiResult<Response> {
    let offsets = request.offsets.unwrap_or_default();
    if offsets.is_empty() {
        return Err(ApiError::bad_request("Partitions / offsets need to be provided for an alter offsets request"));
    }
    for o in &offsets {
        if o.partition.kafka_topic.is_empty() || o.partition.kafka_partition < 0 {
            return Err(ApiError::bad_request(
                "Each partition needs a non-empty 'kafka_topic' and a non-negative 'kafka_partition'",
            ));
        }
        if o.offset.as_ref().is_some_and(|v| v.kafka_offset < 0) {
            return Err(ApiError::bad_request("'kafka_offset' must be non-negative"));
        }
    }
    s.herder.alter_offsets(name, Some(ConnectorOffsets { offsets })).await?;
    Ok(json_response(
        StatusCode::OK,
        json!({"message": "The offsets for this connector have been altered successfully"}),
    ))
}

async fn reset_offsets(State(s): State<AppState>, PathParams(name): PathParams<String>) -> ApiResult<Response> {
    s.herder.alter_offsets(name, None).await?;
    Ok(json_response(StatusCode::OK, json!({"message": "The offsets for this connector have been reset successfully"})))
}
