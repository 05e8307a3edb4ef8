//! Every capability's context, composed into one that a plugin store's data
//! lends out through [`ContextsView`], and linked by its registration: the
//! runtime holds and links capabilities without naming any.

use super::registry::Capability;
use super::{CallBudget, CapabilityMetrics, Grants, errors, kafka, log, object_store, sql};
use std::sync::Arc;
use wasmtime::component::Linker;

/// What one plugin instance's capabilities hold.
pub struct Contexts {
    pub log: log::LogCtx,
    pub object_store: object_store::ObjectStoreCtx,
    pub sql: sql::SqlCtx,
    pub kafka: kafka::KafkaCtx,
}

impl Contexts {
    /// Each capability's context for plugin instance `name`, holding only
    /// what `grants` give, within their bounds; operations run within `budget`.
    pub fn new(name: &str, grants: &Grants, budget: &CallBudget, metrics: &Arc<CapabilityMetrics>) -> Self {
        let bounds = &grants.bounds;
        Contexts {
            log: log::LogCtx::new(name, bounds.log_lines_per_second, bounds.log_bytes_per_second),
            object_store: object_store::ObjectStoreCtx::new(
                &grants.object_stores,
                bounds,
                budget.clone(),
                metrics.clone(),
            ),
            sql: sql::SqlCtx::new(&grants.sql, bounds, budget.clone(), metrics.clone()),
            kafka: kafka::KafkaCtx::new(&grants.kafka, grants.task.as_ref(), bounds, budget.clone(), metrics.clone()),
        }
    }
}

/// How a store's data lends its capabilities their contexts.
pub trait ContextsView: Send {
    fn contexts(&mut self) -> &mut Contexts;
}

/// Links `capability`'s interfaces into `linker`.
pub fn add_to_linker<T: ContextsView + 'static>(linker: &mut Linker<T>, capability: &Capability) -> anyhow::Result<()> {
    match capability.package {
        errors::PACKAGE => errors::add_to_linker(linker),
        log::PACKAGE => log::add_to_linker(linker),
        object_store::PACKAGE => object_store::add_to_linker(linker),
        sql::PACKAGE => sql::add_to_linker(linker),
        kafka::PACKAGE => kafka::add_to_linker(linker),
        other => unreachable!("{other} is in CAPABILITIES but has no linker"),
    }
}
