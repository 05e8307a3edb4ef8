//! What a plugin may reach: one room per capability, each owning its
//! context, its host functions and its grant settings, as wasmtime-wasi does.
//!
//! The shape every capability keeps (`docs/capabilities.md` has the whole
//! rule):
//! - a WIT package of its own under `wit/deps/`, versioned;
//! - a context (`…Ctx`) built from the connector's [`Grants`], and a view
//!   trait (`…View`) through which the store's data lends it out; the
//!   runtime composes the contexts into its store and links a capability
//!   only when the connector grants it. Capabilities never import the
//!   runtime;
//! - every operation through [`op::run`]: its own timeout, nested in what is
//!   left of the plugin call ([`CallBudget`]), retries with backoff, metrics;
//! - every failure as the one [`errors::Error`]: retriable or fatal.

pub mod errors;
mod grants;
pub mod kafka;
pub mod log;
pub mod object_store;
pub mod op;
mod pending;
pub mod reach;
pub mod sql;
pub mod tls;
pub mod wasi;

pub use grants::{DETERMINISTIC_KEY, DirGrant, GRANT_PREFIX, Grants, WasiGrants};
pub use op::{CallBudget, CapabilityMetrics};

/// An interface a plugin may import, and what grants it.
pub struct Capability {
    /// The WIT interface, without its version: `spillway:object-store/buckets`.
    pub interface: &'static str,
    /// The version of the interface's package this host implements.
    pub version: &'static str,
    /// The grant's capability segment (`plugin.grant.<grant>.<name>.*`);
    /// `None` for what every plugin gets.
    pub grant: Option<&'static str>,
    /// Whether a connector's grants include it.
    pub granted: fn(&Grants) -> bool,
}

/// Every `spillway:*` interface this host implements.
pub const CAPABILITIES: &[Capability] = &[
    Capability { interface: "spillway:types/errors", version: errors::VERSION, grant: None, granted: |_| true },
    Capability { interface: "spillway:log/log", version: log::VERSION, grant: None, granted: |_| true },
    Capability {
        interface: "spillway:object-store/buckets",
        version: object_store::VERSION,
        grant: Some("object-store"),
        granted: |g| !g.object_stores.is_empty(),
    },
    Capability {
        interface: "spillway:kafka/producer",
        version: kafka::VERSION,
        grant: Some("kafka"),
        granted: |g| !g.kafka.is_empty(),
    },
    Capability {
        interface: "spillway:kafka/source",
        version: kafka::VERSION,
        grant: Some("kafka"),
        granted: |g| !g.kafka.is_empty(),
    },
    Capability {
        interface: "spillway:sql/databases",
        version: sql::VERSION,
        grant: Some("sql"),
        granted: |g| !g.sql.is_empty(),
    },
];
