//! `spillway:log`: plugin log lines into `tracing`, under the target
//! `spillway::plugin` with the connector and task as a field. Always linked:
//! it reaches nothing outside the host. Bounded by the instance's
//! [`LogBudget`], which its stderr shares.

mod budget;

pub use budget::{LINE_MAX_BYTES, LogBudget, emit};

use crate::{Capability, ContextsView};
use std::sync::Arc;
use wasmtime::component::{HasData, Linker};

pub const PACKAGE: &str = "spillway:log";
pub const VERSION: &str = "0.1.0";

/// Every plugin gets it: it reaches nothing outside the host.
pub const CAPABILITY: Capability = Capability { package: PACKAGE, version: VERSION, interfaces: &["log"], grant: None };

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spillway:log/imports",
    });
}

use bindings::spillway::log::log::{Host, Level};

/// The log capability's state: whose lines these are.
pub struct LogCtx {
    task: Arc<str>,
    budget: LogBudget,
}

impl LogCtx {
    /// Lines logged by `task`, at most `lines_per_second` and
    /// `bytes_per_second`.
    pub fn new(task: &str, lines_per_second: u32, bytes_per_second: usize) -> Self {
        LogCtx { task: task.into(), budget: LogBudget::new(lines_per_second, bytes_per_second) }
    }

    /// The instance's log budget, for its stderr to share.
    pub fn budget(&self) -> &LogBudget {
        &self.budget
    }
}

struct HasLog;

impl HasData for HasLog {
    type Data<'a> = &'a mut LogCtx;
}

fn ctx<T: ContextsView>(data: &mut T) -> &mut LogCtx {
    &mut data.contexts().log
}

pub fn add_to_linker<T: ContextsView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    bindings::spillway::log::log::add_to_linker::<T, HasLog>(linker, ctx::<T>)?;
    Ok(())
}

impl Host for LogCtx {
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
        if !self.enabled(level) {
            return; // costs no budget
        }
        let task = &*self.task;
        emit(&self.budget, task, &message, |message| match level {
            Level::Trace => tracing::trace!(target: "spillway::plugin", task, "{message}"),
            Level::Debug => tracing::debug!(target: "spillway::plugin", task, "{message}"),
            Level::Info => tracing::info!(target: "spillway::plugin", task, "{message}"),
            Level::Warn => tracing::warn!(target: "spillway::plugin", task, "{message}"),
            Level::Error => tracing::error!(target: "spillway::plugin", task, "{message}"),
        });
    }
}
