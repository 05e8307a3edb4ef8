//! `spillway loggers …`: the worker's log levels (`/admin/loggers`).

use super::client::segment;
use super::error::CliError;
use super::{ClientArgs, Session, table};
use reqwest::{Method, StatusCode};
use serde::Deserialize;
use serde_json::json;
use std::collections::BTreeMap;

#[derive(clap::Subcommand, Clone, Debug)]
pub enum LoggersCommand {
    /// Lists every logger with a level set (`root` included), or shows one.
    Get { name: Option<String> },
    /// Sets a logger's level (OFF, ERROR, WARN, INFO, DEBUG, TRACE…) and that
    /// of every logger below it; `root` sets them all.
    Set {
        /// A module path such as spillway_task::run, or root.
        name: String,
        level: String,
        /// This worker only, or every worker of the cluster.
        #[arg(long, value_enum, default_value_t)]
        scope: Scope,
    },
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    #[default]
    Worker,
    Cluster,
}

/// One logger as the server reports it.
#[derive(Deserialize)]
struct LoggerLevel {
    level: String,
    last_modified: Option<i64>,
}

/// Runs one `loggers` command and returns what to print.
pub async fn loggers(args: &ClientArgs, command: LoggersCommand) -> Result<String, CliError> {
    let s = Session::new(args)?;
    match command {
        LoggersCommand::Get { name: None } => {
            let answer = s.get("/admin/loggers").await?;
            s.show(answer, |a| Ok(levels_table(a.json()?)))
        }
        LoggersCommand::Get { name: Some(name) } => {
            let answer = s.get(&format!("/admin/loggers/{}", segment(&name))).await?;
            s.show(answer, |a| Ok(levels_table(BTreeMap::from([(name.clone(), a.json()?)]))))
        }
        LoggersCommand::Set { name, level, scope } => {
            let scope_name = match scope {
                Scope::Worker => "worker",
                Scope::Cluster => "cluster",
            };
            let path = format!("/admin/loggers/{}?scope={scope_name}", segment(&name));
            let answer = s.send(Method::PUT, &path, Some(&json!({ "level": level }))).await?;
            s.show(answer, |a| {
                // Connect answers a cluster-wide change with 204 and no list.
                if a.status == StatusCode::NO_CONTENT {
                    return Ok(format!("set {name} to {level} on every worker\n"));
                }
                let changed: Vec<String> = a.json()?;
                Ok(format!("set {name} to {level}; changed {}\n", changed.join(", ")))
            })
        }
    }
}

fn levels_table(levels: BTreeMap<String, LoggerLevel>) -> String {
    let rows: Vec<Vec<String>> = levels
        .into_iter()
        .map(|(name, l)| {
            // Never changed through the API: still the level the worker started with.
            let modified = l
                .last_modified
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map_or("-".to_string(), |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            vec![name, l.level, modified]
        })
        .collect();
    table::render(&["LOGGER", "LEVEL", "LAST MODIFIED"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_table_shows_when_a_level_was_changed() {
        let levels = BTreeMap::from([
            ("root".to_string(), LoggerLevel { level: "INFO".into(), last_modified: None }),
            (
                "spillway::task".to_string(),
                LoggerLevel { level: "DEBUG".into(), last_modified: Some(1_796_083_200_000) },
            ),
        ]);
        assert_eq!(
            levels_table(levels),
            "LOGGER          LEVEL  LAST MODIFIED\n\
             root            INFO   -\n\
             spillway::task  DEBUG  2026-12-01T00:00:00Z\n"
        );
    }
}
