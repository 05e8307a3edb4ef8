//! Write a Spillway sink connector, or a transform, in Rust.
//!
//! A plugin is a type that implements [`Sink`], exported with [`export_sink!`]:
//!
//! ```
//! use spillway_sdk::{Config, PluginMetadata, PutReport, Sink, SinkRecord, TaskError};
//!
//! /// Counts the bytes it is given and writes nothing.
//! pub struct CountingSink {
//!     bytes: usize,
//! }
//!
//! impl Sink for CountingSink {
//!     fn metadata() -> PluginMetadata {
//!         PluginMetadata::new("counting-sink", env!("CARGO_PKG_VERSION"), "Counts bytes.")
//!     }
//!
//!     fn start(_config: Config) -> Result<Self, TaskError> {
//!         Ok(CountingSink { bytes: 0 })
//!     }
//!
//!     fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError> {
//!         self.bytes += batch.iter().map(|r| r.value.as_ref().map_or(0, Vec::len)).sum::<usize>();
//!         Ok(PutReport::accept_all(batch.len()))
//!     }
//! }
//!
//! spillway_sdk::export_sink!(CountingSink);
//! ```
//!
//! Build it as a `cdylib` for `wasm32-wasip2` (see the repository's
//! `scripts/build-plugins.sh`) and give the `.wasm` to the host.
//!
//! Records the sink buffers instead of writing at once get [`Outcome::Hold`];
//! the host acknowledges them only once a later [`Sink::put`] or [`Sink::flush`]
//! settles them, so a crash in between means redelivery, never loss. Under a
//! share group each record carries its lock deadline
//! ([`SinkRecord::lock_deadline`]); the host asks for the records whose locks
//! near it with a scoped flush ([`FlushScope::Records`]).
//!
//! A plugin reaches the outside through capabilities the connector grants by
//! name, one module each: [`object_store`] (`Bucket::open("out")` opens
//! `plugin.grant.object-store.out.*`) and [`sql`] (`Database::open("db")`
//! opens `plugin.grant.sql.db.*`). A plugin imports only the
//! capabilities it calls, and needs grants for just those. Every capability
//! fails with the same [`TaskError`] (retriable or fatal), so `?` passes its
//! error on from `put`. Clocks and `getrandom` are real.
//!
//! A transform ([`Transform`], exported with [`export_transform!`]) is a
//! plugin too: records pass through it before a sink, as through Connect's
//! transformations (see [`transform`]).
//!
//! [`data`] reads record values as Kafka Connect data: a schema'd JSON
//! envelope or plain JSON with an inferred schema.

// The generated bindings name this crate by its public path, also from inside.
extern crate self as spillway_sdk;

mod batch;
mod config;
pub mod data;
pub mod kafka;
pub mod log;
pub mod object_store;
pub mod sql;
pub mod transform;

pub use config::{Config, ConfigReader, markdown_key_table, readme_key_table};
pub use transform::{Transform, Transformed};

#[doc(hidden)]
pub mod __private {
    // The generated bindings are an implementation detail: plugin authors see
    // only the re-exports at the crate root.
    pub mod bindings {
        wit_bindgen::generate!({
            path: ["../wit", "wit"],
            world: "spillway:rust-sdk/base",
            generate_all,
            additional_derives: [PartialEq],
            pub_export_macro: true,
            export_macro_name: "export_base",
            default_bindings_module: "spillway_sdk::__private::bindings",
            runtime_path: "spillway_sdk::__private::wit_bindgen::rt",
        });
    }
    /// `sink-task`, for [`crate::export_sink!`].
    pub mod sink_bindings {
        wit_bindgen::generate!({
            path: ["../wit", "wit"],
            world: "spillway:rust-sdk/sink",
            with: {
                "spillway:connector/types@0.4.1": crate::__private::bindings::spillway::connector::types,
                "spillway:types/errors@0.1.0": crate::__private::bindings::spillway::types::errors,
            },
            pub_export_macro: true,
            export_macro_name: "export_sink_task",
            default_bindings_module: "spillway_sdk::__private::sink_bindings",
            runtime_path: "spillway_sdk::__private::wit_bindgen::rt",
        });
    }
    /// `transformation`, for [`crate::export_transform!`].
    pub mod transform_bindings {
        wit_bindgen::generate!({
            path: ["../wit", "wit"],
            world: "spillway:rust-sdk/transform",
            with: {
                "spillway:connector/types@0.4.1": crate::__private::bindings::spillway::connector::types,
                "spillway:types/errors@0.1.0": crate::__private::bindings::spillway::types::errors,
            },
            pub_export_macro: true,
            export_macro_name: "export_transformation",
            default_bindings_module: "spillway_sdk::__private::transform_bindings",
            runtime_path: "spillway_sdk::__private::wit_bindgen::rt",
        });
    }
    pub use crate::__private::bindings::exports::spillway::connect::names::Guest as NamesGuest;
    pub use crate::__private::bindings::exports::spillway::connector::plugin::Guest as PluginGuest;
    pub use crate::__private::sink_bindings::exports::spillway::connector::sink_task::Guest as SinkTaskGuest;
    pub use crate::__private::transform_bindings::exports::spillway::connector::transformation::Guest as TransformationGuest;
    pub use wit_bindgen;

    pub use crate::__private::bindings::spillway::connector::types as wire;
    use crate::{Config, ConfigError, PutReport, Settlement, Sink, TaskError};
    use std::cell::RefCell;
    use std::thread::LocalKey;

    /// The one task a component instance serves.
    pub type Slot<S> = LocalKey<RefCell<Option<S>>>;

    pub fn validate<S: Sink>(config: Vec<(String, String)>) -> Vec<ConfigError> {
        S::validate(&Config::from(config))
    }

    pub fn start<S: Sink>(slot: &'static Slot<S>, config: Vec<(String, String)>) -> Result<(), TaskError> {
        let sink = S::start(Config::from(config))?;
        slot.with(|s| *s.borrow_mut() = Some(sink));
        Ok(())
    }

    pub fn put<S: Sink>(slot: &'static Slot<S>, batch: wire::RecordBatch) -> Result<wire::PutReport, TaskError> {
        let records = crate::batch::records(batch);
        let PutReport { outcomes, settled } = slot.with(|s| match s.borrow_mut().as_mut() {
            Some(sink) => sink.put(records),
            None => Err(TaskError::Fatal("put before start".into())),
        })?;
        Ok(wire::PutReport {
            outcomes: crate::batch::outcome_runs(outcomes),
            settled: crate::batch::settlement_ranges(settled),
        })
    }

    pub fn flush<S: Sink>(slot: &'static Slot<S>, scope: wire::FlushScope) -> Result<Vec<wire::Settlement>, TaskError> {
        let scope = crate::batch::scope(scope);
        let settled: Vec<Settlement> = slot.with(|s| match s.borrow_mut().as_mut() {
            Some(sink) => sink.flush(scope),
            None => Ok(Vec::new()),
        })?;
        Ok(crate::batch::settlement_ranges(settled))
    }

    pub fn stop<S: Sink>(slot: &'static Slot<S>) {
        if let Some(mut sink) = slot.with(|s| s.borrow_mut().take()) {
            sink.stop();
        }
    }
}

pub use __private::bindings::exports::spillway::connect::names::{ConnectNames, GrantSource};
pub use __private::bindings::spillway::connector::types::{
    ConfigError, ConfigKey, ConfigType, Importance, PluginMetadata,
};
/// The one retriable / fatal classification: what a call into the plugin
/// returns, and what every capability returns, so `?` passes a capability's
/// error on unchanged.
pub use __private::bindings::spillway::types::errors::Error as TaskError;
pub use spillway_record::{FlushScope, Header, Outcome, PutReport, Settlement, SinkRecord, TimestampType};

/// The version of the WIT contract (`spillway:connector`) this SDK builds
/// plugins against; a host refuses a plugin built against another 0.minor
/// track or a newer one.
pub const CONTRACT_VERSION: &str = "0.4.1";

/// A sink connector. One value serves one task; the host creates it with
/// [`Sink::start`] and drops it after [`Sink::stop`].
pub trait Sink: Sized + 'static {
    /// Name, version and configuration keys. Called without a task.
    fn metadata() -> PluginMetadata;

    /// Checks a configuration beyond what the host already checks from
    /// [`Sink::metadata`] (required keys, value types). Empty means valid.
    fn validate(_config: &Config) -> Vec<ConfigError> {
        Vec::new()
    }

    fn start(config: Config) -> Result<Self, TaskError>;

    /// Writes a batch and says, per record, what became of it.
    fn put(&mut self, batch: Vec<SinkRecord>) -> Result<PutReport, TaskError>;

    /// Makes at least the held records that `scope` names durable and
    /// settles them ([`FlushScope::All`]: every held record). Settling more
    /// than asked is fine: say, the rest of an object being closed.
    fn flush(&mut self, _scope: FlushScope) -> Result<Vec<Settlement>, TaskError> {
        Ok(Vec::new())
    }

    fn stop(&mut self) {}

    /// The Kafka Connect connector classes this plugin runs the configs of,
    /// and the Connect keys from which the host derives its grants
    /// (`spillway:connect`). None by default: the plugin answers to its own
    /// name only.
    fn connect_names() -> ConnectNames {
        ConnectNames::default()
    }
}

// The type is generated, so its Default cannot be derived.
#[allow(clippy::derivable_impls)]
impl Default for ConnectNames {
    fn default() -> Self {
        ConnectNames { classes: Vec::new(), grant_sources: Vec::new(), worker_cluster_keys: Vec::new() }
    }
}

impl ConnectNames {
    /// Answers to Connect's connector `class` (and its short forms).
    pub fn class(mut self, class: &str) -> Self {
        self.classes.push(class.into());
        self
    }

    /// Derives `plugin.grant.<capability>.<grant>.<setting>` from the Connect
    /// key `connect_key`, its value put where `template` says `{}`.
    pub fn grant(mut self, connect_key: &str, capability: &str, grant: &str, setting: &str, template: &str) -> Self {
        self.grant_sources.push(GrantSource {
            connect_key: connect_key.into(),
            capability: capability.into(),
            grant: grant.into(),
            setting: setting.into(),
            template: template.into(),
        });
        self
    }

    /// A Connect key naming the cluster consumed from: accepted only where it
    /// names the worker's own.
    pub fn worker_cluster_key(mut self, connect_key: &str) -> Self {
        self.worker_cluster_keys.push(connect_key.into());
        self
    }
}

impl PluginMetadata {
    pub fn new(name: &str, version: &str, description: &str) -> Self {
        PluginMetadata {
            name: name.into(),
            version: version.into(),
            description: description.into(),
            config: Vec::new(),
        }
    }

    /// Adds a configuration key.
    pub fn key(mut self, key: ConfigKey) -> Self {
        self.config.push(key);
        self
    }
}

impl ConfigKey {
    /// An optional key with a default value.
    pub fn optional(name: &str, ty: ConfigType, default: &str, documentation: &str) -> Self {
        ConfigKey {
            name: name.into(),
            type_: ty,
            default_value: Some(default.into()),
            documentation: documentation.into(),
            required: false,
            importance: Importance::Medium,
        }
    }

    /// A key the user must give.
    pub fn required(name: &str, ty: ConfigType, documentation: &str) -> Self {
        ConfigKey {
            name: name.into(),
            type_: ty,
            default_value: None,
            documentation: documentation.into(),
            required: true,
            importance: Importance::High,
        }
    }
}

/// Exports a [`Sink`] implementation as the component's `plugin` and
/// `sink-task`. Use once per plugin crate.
#[macro_export]
macro_rules! export_sink {
    ($sink:ty) => {
        const _: () = {
            ::std::thread_local! {
                static TASK: ::std::cell::RefCell<::std::option::Option<$sink>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            struct Export;

            impl $crate::__private::PluginGuest for Export {
                fn metadata() -> $crate::PluginMetadata {
                    <$sink as $crate::Sink>::metadata()
                }
                fn validate(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::vec::Vec<$crate::ConfigError> {
                    $crate::__private::validate::<$sink>(config)
                }
            }

            impl $crate::__private::NamesGuest for Export {
                fn names() -> $crate::ConnectNames {
                    <$sink as $crate::Sink>::connect_names()
                }
            }

            impl $crate::__private::SinkTaskGuest for Export {
                fn start(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), $crate::TaskError> {
                    $crate::__private::start::<$sink>(&TASK, config)
                }
                fn put(
                    batch: $crate::__private::wire::RecordBatch,
                ) -> ::std::result::Result<$crate::__private::wire::PutReport, $crate::TaskError> {
                    $crate::__private::put::<$sink>(&TASK, batch)
                }
                fn flush(
                    scope: $crate::__private::wire::FlushScope,
                ) -> ::std::result::Result<::std::vec::Vec<$crate::__private::wire::Settlement>, $crate::TaskError>
                {
                    $crate::__private::flush::<$sink>(&TASK, scope)
                }
                fn stop() {
                    $crate::__private::stop::<$sink>(&TASK)
                }
            }

            // Only a wasm build exports: a native build (tests, benchmarks)
            // links the plugin as an ordinary library.
            #[cfg(target_family = "wasm")]
    $crate::__private::bindings::export_base!(Export with_types_in $crate::__private::bindings);
            #[cfg(target_family = "wasm")]
    $crate::__private::sink_bindings::export_sink_task!(Export with_types_in $crate::__private::sink_bindings);
        };
    };
}
