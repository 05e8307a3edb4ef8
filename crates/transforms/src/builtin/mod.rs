//! The transforms the host runs, by the class names Connect users write:
//! Apache Kafka's (`org.apache.kafka.connect.transforms.*`) and Debezium's
//! ExtractNewRecordState. Each is a [`Class`]: its name, its keys (a
//! ConfigDef, as Connect's `Transformation.config()`), and how to build it.

mod fields;
mod records;
mod shape;
mod timestamps;

pub use records::header_bytes;

use super::data::Data;
use super::{Record, Transform};
use spillway_config::{ConfigDef, Values};
use std::sync::LazyLock;

/// What building from a class's keys can refuse: the key (relative to the
/// stage's prefix; `None` for the stage as a whole) and why.
pub type BuildError = (Option<&'static str>, String);
type Build<T> = Box<dyn Fn(&Values) -> Result<Box<T>, BuildError> + Send + Sync>;
/// How a `$Key`/`$Value` transform is built for its side.
type BuildForSide = fn(Side, &Values) -> Result<Box<dyn Transform>, BuildError>;

/// A transform's or predicate's class.
pub struct Class<T: ?Sized> {
    pub name: &'static str,
    pub def: ConfigDef,
    pub build: Build<T>,
}

impl<T: ?Sized> Class<T> {
    pub fn new(
        name: &'static str,
        def: ConfigDef,
        build: impl Fn(&Values) -> Result<Box<T>, BuildError> + Send + Sync + 'static,
    ) -> Self {
        Class { name, def, build: Box::new(build) }
    }
}

/// Apache Kafka's package of transforms.
pub const KAFKA: &str = "org.apache.kafka.connect.transforms.";

/// Which of a record's two sides a `$Key` or `$Value` transform works on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Key,
    Value,
}

impl Side {
    pub fn read(self, record: &Record) -> Data {
        Data::read(match self {
            Side::Key => record.key.as_ref(),
            Side::Value => record.value.as_ref(),
        })
    }

    pub fn write(self, record: &mut Record, data: Data) {
        let bytes = data.write();
        match self {
            Side::Key => record.key = bytes,
            Side::Value => record.value = bytes,
        }
    }

    pub fn suffix(self) -> &'static str {
        match self {
            Side::Key => "$Key",
            Side::Value => "$Value",
        }
    }
}

/// Every transform class, built once.
static CLASSES: LazyLock<Vec<Class<dyn Transform>>> = LazyLock::new(|| {
    let mut classes = Vec::new();
    classes.extend(fields::classes());
    classes.extend(records::classes());
    classes.extend(shape::classes());
    classes.extend(timestamps::classes());
    classes.push(super::debezium::class());
    classes
});

/// Every built-in transform class.
pub fn all() -> &'static [Class<dyn Transform>] {
    &CLASSES
}

/// The class named `name`, or Connect's reason it cannot be used.
pub fn find(name: &str) -> Result<&'static Class<dyn Transform>, String> {
    if let Some(class) = CLASSES.iter().find(|c| c.name == name) {
        return Ok(class);
    }
    let variants: Vec<&str> =
        CLASSES.iter().map(|c| c.name).filter(|c| c.strip_prefix(name).is_some_and(|s| s.starts_with('$'))).collect();
    if !variants.is_empty() {
        return Err(format!("This class is abstract and cannot be created. Did you mean {}?", variants.join(", ")));
    }
    Err(format!("Class {name} could not be found. {}", known_classes()))
}

/// What the refusal of an unknown class lists.
fn known_classes() -> String {
    let names: Vec<&str> = CLASSES.iter().map(|c| c.name).collect();
    format!("The transforms Spillway runs: {}", names.join(", "))
}

/// The class's `$Key` and `$Value` variants, each built for its side.
pub fn both_sides(base: &'static str, def: fn() -> ConfigDef, build: BuildForSide) -> [Class<dyn Transform>; 2] {
    let name = |side: Side| -> &'static str { Box::leak(format!("{KAFKA}{base}{}", side.suffix()).into_boxed_str()) };
    [
        Class::new(name(Side::Key), def(), move |v| build(Side::Key, v)),
        Class::new(name(Side::Value), def(), move |v| build(Side::Value, v)),
    ]
}
