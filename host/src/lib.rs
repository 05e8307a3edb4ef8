//! Spillway: a WebAssembly plugin host for Kafka sink connectors.
//!
//! The data path, top to bottom: [`kafka`] fetches records (a share group or a
//! classic group), [`task`] turns them into sink records and drives a plugin
//! instance from [`runtime`] through put, acknowledge and commit, and the
//! plugin reaches the outside world only through [`capabilities`]. [`config`]
//! is the `ConfigDef` machinery behind every connector config key.

/// What a plugin may reach, its own crate: it imports `config`, `policy`
/// and `kafka`.
pub use spillway_capabilities as capabilities;
pub mod cli;
/// The ConfigDef machinery, its own crate: it imports nothing of Spillway.
pub use spillway_config as config;
/// A connector's config, its own crate: it imports layers 0-4.
pub use spillway_connector as connector;
pub mod herder;
/// Every Kafka client, its own crate: it imports only `config` and `policy`.
pub use spillway_kafka as kafka;
/// The operator's ceilings, its own crate: it imports only `config`.
pub use spillway_policy as policy;
pub mod rest;
/// wasmtime and the plugin contract, its own crate: it imports
/// `capabilities` and `kafka`.
pub use spillway_runtime as runtime;
/// The sink task loop, its own crate: it imports layers 0-5.
pub use spillway_task as task;
