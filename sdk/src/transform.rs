//! Write a transform: Kafka Connect's `Transformation` as a component. The
//! host runs it on each record between the converters and the sink, as a
//! stage of a connector's chain (`transforms.<alias>.type=<plugin name>`).
//!
//! ```
//! use spillway_sdk::{Config, PluginMetadata, SinkRecord, TaskError, Transform, Transformed};
//!
//! /// Drops records without a value; upper-cases the others' topics.
//! pub struct ShoutingTopics;
//!
//! impl Transform for ShoutingTopics {
//!     fn metadata() -> PluginMetadata {
//!         PluginMetadata::new("shouting-topics", env!("CARGO_PKG_VERSION"), "Upper-cases topics.")
//!     }
//!
//!     fn start(_config: Config) -> Result<Self, TaskError> {
//!         Ok(ShoutingTopics)
//!     }
//!
//!     fn apply(&mut self, mut record: SinkRecord) -> Transformed {
//!         if record.value.is_none() {
//!             return Transformed::Drop;
//!         }
//!         record.topic = record.topic.to_uppercase();
//!         Transformed::Keep(record)
//!     }
//! }
//!
//! spillway_sdk::export_transform!(ShoutingTopics);
//! ```

use crate::__private::bindings::spillway::connector::types as wire;
use crate::{Config, ConfigError, ConnectNames, PluginMetadata, SinkRecord, TaskError};

/// What a transform made of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum Transformed {
    /// The record goes on as this: its topic, key, value, timestamp and
    /// headers are taken; its partition, offset and delivery stay the
    /// consumed record's (the host acknowledges by those).
    Keep(SinkRecord),
    /// Filtered out: done, without reaching the sink (Connect commits a
    /// record a transform drops).
    Drop,
    /// This record cannot be transformed: to the dead-letter queue at stage
    /// TRANSFORMATION, or the task fails under `errors.tolerance=none`.
    Fail(String),
}

/// A transform. One value serves one stage of one task; the host creates
/// it with [`Transform::start`] and drops it after [`Transform::stop`].
pub trait Transform: Sized + 'static {
    /// Name, version and configuration keys (the keys under
    /// `transforms.<alias>.`, prefix off). Called without a task.
    fn metadata() -> PluginMetadata;

    /// Checks a stage's settings beyond what the host checks from
    /// [`Transform::metadata`]. Empty means valid.
    fn validate(_config: &Config) -> Vec<ConfigError> {
        Vec::new()
    }

    /// Connect's `configure`, with the stage's settings.
    fn start(config: Config) -> Result<Self, TaskError>;

    /// One record in, its fate out.
    fn apply(&mut self, record: SinkRecord) -> Transformed;

    /// A batch, one fate per record in order: [`Transform::apply`] on each
    /// unless overridden. An error fails the task (the records are
    /// redelivered): for what no single record is to blame for.
    fn apply_batch(&mut self, records: Vec<SinkRecord>) -> Result<Vec<Transformed>, TaskError> {
        Ok(records.into_iter().map(|r| self.apply(r)).collect())
    }

    /// Connect's `close`.
    fn stop(&mut self) {}

    /// The Connect transformation classes this plugin stands in for.
    fn connect_names() -> ConnectNames {
        ConnectNames::default()
    }
}

#[doc(hidden)]
pub mod glue {
    use super::*;
    use crate::__private::Slot;

    pub fn validate<T: Transform>(config: Vec<(String, String)>) -> Vec<ConfigError> {
        T::validate(&Config::from(config))
    }

    pub fn start<T: Transform>(slot: &'static Slot<T>, config: Vec<(String, String)>) -> Result<(), TaskError> {
        let transform = T::start(Config::from(config))?;
        slot.with(|s| *s.borrow_mut() = Some(transform));
        Ok(())
    }

    pub fn apply<T: Transform>(
        slot: &'static Slot<T>,
        batch: wire::RecordBatch,
    ) -> Result<Vec<wire::Transformed>, TaskError> {
        let records = crate::batch::records(batch);
        let out = slot.with(|s| match s.borrow_mut().as_mut() {
            Some(transform) => transform.apply_batch(records),
            None => Err(TaskError::Fatal("apply before start".into())),
        })?;
        Ok(out.into_iter().map(wire_of).collect())
    }

    pub fn stop<T: Transform>(slot: &'static Slot<T>) {
        if let Some(mut transform) = slot.with(|s| s.borrow_mut().take()) {
            transform.stop();
        }
    }

    fn wire_of(out: Transformed) -> wire::Transformed {
        match out {
            Transformed::Keep(r) => wire::Transformed::Keep(wire::TransformedRecord {
                topic: r.topic,
                key: r.key,
                value: r.value,
                timestamp: r.timestamp,
                headers: r.headers.into_iter().map(|h| (h.key, h.value)).collect(),
            }),
            Transformed::Drop => wire::Transformed::Drop,
            Transformed::Fail(why) => wire::Transformed::Fail(why),
        }
    }
}

/// Exports a [`Transform`] implementation as the component's `plugin` and
/// `transformation`. Use once per plugin crate.
#[macro_export]
macro_rules! export_transform {
    ($transform:ty) => {
        const _: () = {
            ::std::thread_local! {
                static STAGE: ::std::cell::RefCell<::std::option::Option<$transform>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }

            struct Export;

            impl $crate::__private::PluginGuest for Export {
                fn metadata() -> $crate::PluginMetadata {
                    <$transform as $crate::Transform>::metadata()
                }
                fn validate(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::vec::Vec<$crate::ConfigError> {
                    $crate::transform::glue::validate::<$transform>(config)
                }
            }

            impl $crate::__private::NamesGuest for Export {
                fn names() -> $crate::ConnectNames {
                    <$transform as $crate::Transform>::connect_names()
                }
            }

            impl $crate::__private::TransformationGuest for Export {
                fn start(
                    config: ::std::vec::Vec<(::std::string::String, ::std::string::String)>,
                ) -> ::std::result::Result<(), $crate::TaskError> {
                    $crate::transform::glue::start::<$transform>(&STAGE, config)
                }
                fn apply(
                    batch: $crate::__private::wire::RecordBatch,
                ) -> ::std::result::Result<::std::vec::Vec<$crate::__private::wire::Transformed>, $crate::TaskError>
                {
                    $crate::transform::glue::apply::<$transform>(&STAGE, batch)
                }
                fn stop() {
                    $crate::transform::glue::stop::<$transform>(&STAGE)
                }
            }

            // Only a wasm build exports: a native build links the transform
            // as an ordinary library.
            #[cfg(target_family = "wasm")]
    $crate::__private::bindings::export_base!(Export with_types_in $crate::__private::bindings);
            #[cfg(target_family = "wasm")]
            $crate::__private::transform_bindings::export_transformation!(
                Export with_types_in $crate::__private::transform_bindings
            );
        };
    };
}
