//! What a plugin may reach: one room per capability, each owning its
//! context, its host functions and its grant settings, as wasmtime-wasi does.
//!
//! The shape every capability keeps (`docs/capabilities.md` has the whole
//! rule):
//! - a WIT package of its own under `wit/deps/`, versioned;
//! - one registration ([`Capability`], listed in [`CAPABILITIES`]): its
//!   package, version and interfaces, and for a granted capability its
//!   grant's settings, parser, checks and reach, which the runtime, the
//!   policy, the connector's key table and the grant parser iterate;
//! - a context (`…Ctx`) built from the connector's [`Grants`], one field of
//!   [`Contexts`], which the store's data lends out ([`ContextsView`]); the
//!   runtime links a capability only when the connector grants it.
//!   Capabilities never import the runtime;
//! - every operation through [`op::run`]: its own timeout, nested in what is
//!   left of the plugin call ([`CallBudget`]), retries with backoff, metrics;
//! - every failure as the one [`errors::Error`]: retriable or fatal.

mod contexts;
pub mod errors;
mod grants;
pub mod kafka;
pub mod log;
pub mod object_store;
pub mod op;
mod pending;
pub mod reach;
mod registry;
pub mod sql;
pub mod tls;
pub mod wasi;

pub use contexts::{Contexts, ContextsView, add_to_linker};
pub use grants::{DETERMINISTIC_KEY, DirGrant, GRANT_PREFIX, Grants, WasiGrants};
pub use op::{CallBudget, CapabilityMetrics};
pub use registry::{CAPABILITIES, Capability, GrantKind, grant_kind, grant_kinds};
pub use spillway_policy::InstanceBounds;
