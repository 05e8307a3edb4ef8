//! `spillway:connector/log`: plugin log lines into `tracing`, under the target
//! `spillway::plugin` with the connector and task as a field.

use super::PluginState;
use crate::runtime::bindings::spillway::connector::log::{Host, Level};

impl Host for PluginState {
    fn enabled(&mut self, level: Level) -> bool {
        match level {
            Level::Trace => tracing::enabled!(target: "spillway::plugin", tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(target: "spillway::plugin", tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(target: "spillway::plugin", tracing::Level::INFO),
            Level::Warn => tracing::enabled!(target: "spillway::plugin", tracing::Level::WARN),
            Level::Error => tracing::enabled!(target: "spillway::plugin", tracing::Level::ERROR),
        }
    }

    fn log(&mut self, level: Level, message: String) {
        let task = self.name.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "spillway::plugin", task, "{message}"),
            Level::Debug => tracing::debug!(target: "spillway::plugin", task, "{message}"),
            Level::Info => tracing::info!(target: "spillway::plugin", task, "{message}"),
            Level::Warn => tracing::warn!(target: "spillway::plugin", task, "{message}"),
            Level::Error => tracing::error!(target: "spillway::plugin", task, "{message}"),
        }
    }
}

impl crate::runtime::bindings::spillway::connector::types::Host for PluginState {}
