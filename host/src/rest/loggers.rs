//! `/admin/loggers`: Connect's logger-level endpoints over `tracing`.
//!
//! A logger is a `tracing` target (a module path such as `spillway_task::run`);
//! `root` is the default level. As Connect lists every logger log4j has
//! created, Spillway lists every target that has logged (its callsites
//! registered), each at the level it inherits unless one was set. Levels are changed by rebuilding the
//! `EnvFilter` behind a `tracing_subscriber::reload` layer, so a change takes
//! effect at once without restarting anything.

use super::AppState;
use super::error::{ApiError, ApiResult, JsonBody, PathParams, QueryParams};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::reload;

pub const ROOT_LOGGER: &str = "root";

/// One logger's level as Connect reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoggerLevel {
    /// A log4j level name: OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE, ALL.
    pub level: String,
    /// Epoch milliseconds of the last change through the API; null if the
    /// level is still the one the process started with.
    pub last_modified: Option<u64>,
}

type Apply = dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync;

/// The current per-target levels and the means to apply them.
#[derive(Clone)]
pub struct LogLevels {
    inner: Arc<Mutex<Levels>>,
    apply: Arc<Apply>,
    seen: SeenTargets,
}

/// A layer that notes the target of each callsite the process registers:
/// the loggers that exist, as log4j's are those some class created.
#[derive(Clone, Default)]
pub struct SeenTargets(Arc<Mutex<BTreeSet<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SeenTargets {
    fn register_callsite(&self, metadata: &'static tracing::Metadata<'static>) -> tracing::subscriber::Interest {
        self.0.lock().unwrap().insert(metadata.target().to_string());
        // Whether it is enabled is the filter's to say.
        tracing::subscriber::Interest::always()
    }
}

struct Levels {
    root: LoggerLevel,
    targets: BTreeMap<String, LoggerLevel>,
    /// Directives this API does not manage (span or field filters), kept
    /// verbatim so that a level change does not drop them.
    other: Vec<String>,
}

/// How log lines are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// For people: one line per event, coloured on a terminal.
    #[default]
    Text,
    /// For log shippers: one JSON object per line.
    Json,
}

impl LogLevels {
    /// `directives` must be what the reloadable filter was built from (e.g.
    /// `RUST_LOG`). The handle may belong to any subscriber, global or not.
    pub fn new<S: 'static>(handle: reload::Handle<EnvFilter, S>, directives: &str) -> Self {
        Self::with_apply(directives, Arc::new(move |filter| handle.reload(filter).map_err(|e| e.to_string())))
    }

    /// Installs the process-wide subscriber (stderr, filtered by `RUST_LOG`
    /// or else `default_directives`) behind a reload layer, and returns the
    /// levels that `/admin/loggers` changes. For `main`; call once.
    pub fn install(default_directives: &str, format: LogFormat) -> Self {
        use tracing_subscriber::layer::SubscriberExt;
        use tracing_subscriber::util::SubscriberInitExt;
        let directives = std::env::var("RUST_LOG").unwrap_or_else(|_| default_directives.to_string());
        let (filter, handle) = reload::Layer::new(EnvFilter::new(&directives));
        let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        let seen = SeenTargets::default();
        // Outside the filter: a callsite it disables is a logger all the same.
        let registry = tracing_subscriber::registry().with(filter).with(seen.clone());
        match format {
            // Colour only on a terminal: not in files, pipes or log shippers.
            LogFormat::Text => {
                registry.with(lines.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))).init()
            }
            // One object per line; a task's lines carry its span, with the
            // connector and task as fields.
            LogFormat::Json => registry.with(lines.json().with_current_span(true).with_span_list(false)).init(),
        }
        Self::new(handle, &directives).seeing(seen)
    }

    /// Lists the targets `seen` has noted as loggers too.
    pub fn seeing(mut self, seen: SeenTargets) -> Self {
        self.seen = seen;
        self
    }

    fn with_apply(directives: &str, apply: Arc<Apply>) -> Self {
        let mut levels = Levels {
            root: LoggerLevel { level: "ERROR".into(), last_modified: None },
            targets: BTreeMap::new(),
            other: Vec::new(),
        };
        for directive in directives.split(',').map(str::trim).filter(|d| !d.is_empty()) {
            let managed = !directive.contains(['[', '{']);
            match directive.split_once('=') {
                _ if !managed => levels.other.push(directive.to_string()),
                Some((target, level)) => match from_tracing(level) {
                    Some(level) => {
                        levels.targets.insert(target.to_string(), LoggerLevel { level, last_modified: None });
                    }
                    None => levels.other.push(directive.to_string()),
                },
                // A bare level sets the default; a bare target enables all of it.
                None => match from_tracing(directive) {
                    Some(level) => levels.root = LoggerLevel { level, last_modified: None },
                    None => {
                        let all = LoggerLevel { level: "TRACE".into(), last_modified: None };
                        levels.targets.insert(directive.to_string(), all);
                    }
                },
            }
        }
        LogLevels { inner: Arc::new(Mutex::new(levels)), apply, seen: SeenTargets::default() }
    }

    /// Every logger: `root`, those with a level set, and every target seen,
    /// at the level it inherits.
    pub fn all(&self) -> BTreeMap<String, LoggerLevel> {
        let levels = self.inner.lock().unwrap();
        let seen = self.seen.0.lock().unwrap();
        let mut all: BTreeMap<String, LoggerLevel> =
            seen.iter().map(|target| (target.clone(), levels.effective(target))).collect();
        all.extend(levels.targets.clone());
        all.insert(ROOT_LOGGER.into(), levels.root.clone());
        all
    }

    pub fn get(&self, logger: &str) -> Option<LoggerLevel> {
        let levels = self.inner.lock().unwrap();
        if logger.eq_ignore_ascii_case(ROOT_LOGGER) {
            return Some(levels.root.clone());
        }
        let known = levels.targets.contains_key(logger) || self.seen.0.lock().unwrap().contains(logger);
        known.then(|| levels.effective(logger))
    }

    /// Sets `logger` and every logger below it (`root`: every logger) to
    /// `level`, as Connect does, and returns the names changed, sorted.
    pub fn set(&self, logger: &str, level: &str) -> ApiResult<Vec<String>> {
        let level = log4j_level(level).ok_or_else(|| ApiError::not_found(format!("invalid log level '{level}'.")))?;
        let is_root = logger.eq_ignore_ascii_case(ROOT_LOGGER);
        if !is_root && !valid_target(logger) {
            return Err(ApiError::bad_request(format!(
                "Invalid logger name '{logger}': use a module path such as spillway_task::run (letters, digits, _ - . :)"
            )));
        }
        let entry = LoggerLevel { level: level.to_string(), last_modified: Some(now_millis()) };
        let mut levels = self.inner.lock().unwrap();
        let mut next_targets = levels.targets.clone();
        let mut affected = Vec::new();
        if !is_root {
            next_targets.entry(logger.to_string()).or_insert_with(|| entry.clone());
        }
        for (name, current) in next_targets.iter_mut() {
            if is_root || name == logger || is_below(name, logger) {
                *current = entry.clone();
                affected.push(name.clone());
            }
        }
        let next_root = if is_root {
            affected.push(ROOT_LOGGER.into());
            entry
        } else {
            levels.root.clone()
        };
        let directives = render(&next_root, &next_targets, &levels.other);
        let filter = EnvFilter::try_new(&directives)
            .map_err(|e| ApiError::bad_request(format!("Cannot apply log levels '{directives}': {e}")))?;
        (self.apply)(filter).map_err(|e| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("Cannot change the log filter: {e}"))
        })?;
        levels.root = next_root;
        levels.targets = next_targets;
        // Seen loggers below it inherit the level: Connect names them too.
        let seen = self.seen.0.lock().unwrap();
        affected.extend(seen.iter().filter(|t| is_root || is_below(t, logger)).cloned());
        affected.sort();
        affected.dedup();
        Ok(affected)
    }

    /// The `EnvFilter` directives in force, e.g. `info,spillway::task=debug`.
    pub fn directives(&self) -> String {
        let levels = self.inner.lock().unwrap();
        render(&levels.root, &levels.targets, &levels.other)
    }
}

impl Levels {
    /// The level `target` has: its own, else its nearest parent's (a module
    /// path parent: `a` of `a::b`), else root's.
    fn effective(&self, target: &str) -> LoggerLevel {
        let mut name = target;
        loop {
            if let Some(level) = self.targets.get(name) {
                let own = name == target;
                return LoggerLevel { level: level.level.clone(), last_modified: level.last_modified.filter(|_| own) };
            }
            match name.rsplit_once("::") {
                Some((parent, _)) => name = parent,
                None => return LoggerLevel { level: self.root.level.clone(), last_modified: None },
            }
        }
    }
}

/// Whether `name` is a module path below `parent`.
fn is_below(name: &str, parent: &str) -> bool {
    name.strip_prefix(parent).is_some_and(|rest| rest.starts_with("::"))
}

fn render(root: &LoggerLevel, targets: &BTreeMap<String, LoggerLevel>, other: &[String]) -> String {
    let mut parts = vec![to_tracing(&root.level).to_string()];
    parts.extend(targets.iter().map(|(t, l)| format!("{t}={}", to_tracing(&l.level))));
    parts.extend(other.iter().cloned());
    parts.join(",")
}

/// Targets that survive a round trip through an `EnvFilter` directive.
fn valid_target(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.:".contains(c))
}

/// A log4j level name, case-insensitively, in its canonical spelling.
fn log4j_level(name: &str) -> Option<&'static str> {
    const LEVELS: [&str; 8] = ["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "ALL"];
    LEVELS.into_iter().find(|l| l.eq_ignore_ascii_case(name))
}

fn to_tracing(log4j: &str) -> &'static str {
    match log4j {
        "OFF" => "off",
        "FATAL" | "ERROR" => "error",
        "WARN" => "warn",
        "INFO" => "info",
        "DEBUG" => "debug",
        _ => "trace",
    }
}

fn from_tracing(level: &str) -> Option<String> {
    let name = match level.to_ascii_lowercase().as_str() {
        "off" | "0" => "OFF",
        "error" | "1" => "ERROR",
        "warn" | "2" => "WARN",
        "info" | "3" => "INFO",
        "debug" | "4" => "DEBUG",
        "trace" | "5" => "TRACE",
        _ => return None,
    };
    Some(name.into())
}

fn now_millis() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/admin/loggers", get(list)).route("/admin/loggers/{logger}", get(get_one).put(set))
}

async fn list(State(s): State<AppState>) -> Json<BTreeMap<String, LoggerLevel>> {
    Json(s.loggers.all())
}

async fn get_one(State(s): State<AppState>, PathParams(logger): PathParams<String>) -> ApiResult<Json<LoggerLevel>> {
    s.loggers.get(&logger).map(Json).ok_or_else(|| ApiError::not_found(format!("Logger {logger} not found.")))
}

/// Connect's answers: 200 with the loggers changed for `scope=worker` (the
/// default, and what an unknown scope falls back to); 204 for
/// `scope=cluster`, which on a single worker means the same change.
async fn set(
    State(s): State<AppState>,
    PathParams(logger): PathParams<String>,
    query: QueryParams,
    JsonBody(body): JsonBody<Value>,
) -> ApiResult<Response> {
    let level = match body.get("level") {
        Some(Value::String(level)) => level.clone(),
        Some(Value::Null) | None => {
            return Err(ApiError::bad_request("Desired 'level' parameter was not specified in request."));
        }
        Some(other) => return Err(ApiError::bad_request(format!("'level' must be a string, not {other}"))),
    };
    let affected = s.loggers.set(&logger, &level)?;
    let cluster = query.all("scope").last().is_some_and(|scope| scope.eq_ignore_ascii_case("cluster"));
    Ok(if cluster { StatusCode::NO_CONTENT.into_response() } else { Json(affected).into_response() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    fn levels(directives: &str) -> (LogLevels, reload::Handle<EnvFilter, tracing_subscriber::Registry>, impl Sized) {
        let (layer, handle) = reload::Layer::new(EnvFilter::new(directives));
        // Not installed globally: the handle works while the subscriber lives.
        let subscriber = tracing_subscriber::registry().with(layer);
        (LogLevels::new(handle.clone(), directives), handle, subscriber)
    }

    #[test]
    fn initial_directives_are_listed_with_root() {
        let (levels, _, _s) = levels("info,librdkafka=warn,spillway::task=debug,h2[conn]=trace");
        let all = levels.all();
        assert_eq!(all["root"].level, "INFO");
        assert_eq!(all["librdkafka"].level, "WARN");
        assert_eq!(all["spillway::task"].level, "DEBUG");
        assert!(all.values().all(|l| l.last_modified.is_none()));
        assert!(!all.contains_key("h2[conn]"), "span directives are kept but not listed");
        assert!(levels.directives().ends_with("h2[conn]=trace"));
    }

    #[test]
    fn setting_a_parent_sets_its_children_and_reloads_the_filter() {
        let (levels, handle, _s) = levels("warn,spillway::task=debug,spillway_other=info");
        assert_eq!(levels.set("spillway", "trace").unwrap(), vec!["spillway", "spillway::task"]);
        assert_eq!(levels.get("spillway::task").unwrap().level, "TRACE");
        assert!(levels.get("spillway").unwrap().last_modified.is_some());
        assert_eq!(levels.get("spillway_other").unwrap().level, "INFO", "a name prefix is not a parent");
        let current = handle.with_current(|f| f.to_string()).unwrap();
        assert!(current.contains("spillway=trace") && current.contains("spillway::task=trace"), "{current}");
    }

    #[test]
    fn root_sets_everything_and_bad_input_is_refused() {
        let (levels, _, _s) = levels("info,a=debug");
        assert_eq!(levels.set("ROOT", "error").unwrap(), vec!["a", "root"]);
        assert_eq!(levels.get("root").unwrap().level, "ERROR");
        assert_eq!(levels.set("a", "LOUD").unwrap_err().status, StatusCode::NOT_FOUND);
        assert_eq!(levels.set("a=b", "INFO").unwrap_err().status, StatusCode::BAD_REQUEST);
        assert_eq!(levels.get("a").unwrap().level, "ERROR", "a refused change leaves levels alone");
    }

    #[test]
    fn targets_that_logged_are_loggers_at_the_level_they_inherit() {
        use tracing_subscriber::util::SubscriberInitExt;
        let (layer, handle) = reload::Layer::new(EnvFilter::new("info,app=warn,lib=error"));
        let seen = SeenTargets::default();
        let _guard = tracing_subscriber::registry().with(layer).with(seen.clone()).set_default();
        let levels = LogLevels::new(handle, "info,app=warn,lib=error").seeing(seen);
        assert!(levels.get("app::db").is_none(), "no logger before its target logs");
        tracing::warn!(target: "app::db", "seen");
        tracing::info!(target: "lib::quiet", "filtered out, and still a logger");
        tracing::info!(target: "other", "at root's level");
        assert_eq!(levels.get("app::db").unwrap().level, "WARN");
        assert_eq!(levels.get("lib::quiet").unwrap(), LoggerLevel { level: "ERROR".into(), last_modified: None });
        assert_eq!(levels.get("other").unwrap().level, "INFO");
        assert!(levels.all().contains_key("app::db"));
        assert_eq!(levels.set("app", "debug").unwrap(), vec!["app", "app::db"]);
        assert_eq!(levels.get("app::db").unwrap().level, "DEBUG");
        assert!(levels.get("app::db").unwrap().last_modified.is_none(), "inherited, not set");
    }
}
