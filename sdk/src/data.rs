//! Kafka Connect's data model, read from record bytes.
//!
//! A record value arrives as bytes. When a producer (or Kafka Connect's
//! `JsonConverter` with `schemas.enable=true`) wrote it as an envelope,
//! `{"schema": {...}, "payload": ...}`, [`read_value`] reads the declared
//! [`Schema`] and converts the payload to [`Data`] under it, logical types
//! included (dates, times, timestamps, decimals). Plain JSON gets a schema
//! inferred from the value itself ([`infer_schema`]), and schemas inferred
//! from several records can be merged into one that fits them all
//! ([`Schema::merge`], then [`Data::conform`] to move each value onto it).
//!
//! The model is Connect's: a sink that writes typed columns (Parquet, SQL)
//! maps [`Type`] and [`Schema::logical`] to its column types, and [`Data`]
//! variants to typed parameters, one to one:
//!
//! ```
//! use spillway_sdk::data::{Data, Logical, Type, read_value};
//!
//! let bytes = br#"{"schema": {"type": "struct", "fields": [
//!         {"field": "id", "type": "int64"},
//!         {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date", "optional": true}]},
//!     "payload": {"id": 7, "day": 19000}}"#;
//! let value = read_value(bytes).unwrap();
//! let Type::Struct(fields) = &value.schema.ty else { unreachable!() };
//! assert_eq!(fields[1].schema.logical(), Some(Logical::Date));
//! assert_eq!(value.data.get("day"), Some(&Data::Date(19000)));
//!
//! // Plain JSON: the schema is inferred.
//! let plain = read_value(br#"{"id": 7, "price": 9.5}"#).unwrap();
//! assert!(!plain.declared);
//! assert_eq!(plain.data.get("price"), Some(&Data::Float64(9.5)));
//! ```
//!
//! Plain JSON objects become structs whose fields are in the order of their
//! names (serde_json keeps object keys sorted).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value as Json};
use std::collections::BTreeMap;
use std::fmt;

/// The name of Connect's `Date` logical type: an `int32`, days since the Unix epoch.
pub const DATE: &str = "org.apache.kafka.connect.data.Date";
/// The name of Connect's `Time` logical type: an `int32`, milliseconds since midnight (UTC).
pub const TIME: &str = "org.apache.kafka.connect.data.Time";
/// The name of Connect's `Timestamp` logical type: an `int64`, milliseconds since the Unix epoch.
pub const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
/// The name of Connect's `Decimal` logical type: `bytes`, the big-endian two's
/// complement unscaled value, with the scale in the parameter [`DECIMAL_SCALE`].
pub const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";
/// The parameter of a [`DECIMAL`] schema that holds its scale.
pub const DECIMAL_SCALE: &str = "scale";
/// The parameter some converters add to a [`DECIMAL`] schema with its precision.
pub const DECIMAL_PRECISION: &str = "connect.decimal.precision";

/// A schema's type: Connect's `Schema.Type`, plus [`Type::Null`] for a value
/// that inference has only seen as `null`.
#[derive(Clone, Debug, PartialEq)]
pub enum Type {
    /// Only from inference: every value seen was `null`, so nothing says
    /// what the type is. Always optional; merging with any other schema
    /// gives that schema, optional. A column sink may map it to a nullable
    /// text column.
    Null,
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
    Bytes,
    /// Elements of one schema.
    Array(Box<Schema>),
    /// Keys and values, each of one schema.
    Map(Box<Schema>, Box<Schema>),
    /// Named fields, in order.
    Struct(Vec<Field>),
}

impl Type {
    /// Connect's name for the type (`int8` ... `float64`, `struct`); `null` for [`Type::Null`].
    pub fn name(&self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Int8 => "int8",
            Type::Int16 => "int16",
            Type::Int32 => "int32",
            Type::Int64 => "int64",
            Type::Float32 => "float32",
            Type::Float64 => "float64",
            Type::Boolean => "boolean",
            Type::String => "string",
            Type::Bytes => "bytes",
            Type::Array(_) => "array",
            Type::Map(..) => "map",
            Type::Struct(_) => "struct",
        }
    }

    /// The rank of an integer type (int8 = 1 ... int64 = 4), for widening.
    fn int_rank(&self) -> Option<u8> {
        match self {
            Type::Int8 => Some(1),
            Type::Int16 => Some(2),
            Type::Int32 => Some(3),
            Type::Int64 => Some(4),
            _ => None,
        }
    }
}

/// A Connect logical type: a primitive schema with one of the well-known names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logical {
    /// `int32` days since 1970-01-01.
    Date,
    /// `int32` milliseconds since midnight, UTC.
    Time,
    /// `int64` milliseconds since the Unix epoch, UTC.
    Timestamp,
    /// `bytes` holding an unscaled integer; `precision` when the schema
    /// carries [`DECIMAL_PRECISION`].
    Decimal { scale: i32, precision: Option<u32> },
}

/// A Connect schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Schema {
    pub ty: Type,
    /// Whether the value may be null.
    pub optional: bool,
    /// A logical type's name ([`DATE`], [`DECIMAL`], ...) or a record name.
    pub name: Option<String>,
    pub version: Option<i32>,
    pub doc: Option<String>,
    /// String parameters, such as a decimal's [`DECIMAL_SCALE`].
    pub parameters: BTreeMap<String, String>,
    /// Used in place of a null or missing value.
    pub default: Option<Box<Data>>,
}

/// One field of a struct schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    pub name: String,
    pub schema: Schema,
}

impl Field {
    pub fn new(name: impl Into<String>, schema: Schema) -> Self {
        Field { name: name.into(), schema }
    }
}

/// A decimal number: `unscaled × 10^-scale`. Values whose unscaled integer
/// needs more than 16 bytes (beyond 38 digits) are refused when read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    pub unscaled: i128,
    pub scale: i32,
}

/// A value under a [`Schema`]. Logical types have variants of their own, so
/// a column writer never has to look at the schema's name to read a value.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    Null,
    Int8(i8),
    Int16(i16),
    Int32(i32),
    Int64(i64),
    Float32(f32),
    Float64(f64),
    Boolean(bool),
    String(String),
    Bytes(Vec<u8>),
    /// Days since 1970-01-01 ([`Logical::Date`]).
    Date(i32),
    /// Milliseconds since midnight, UTC ([`Logical::Time`]).
    Time(i32),
    /// Milliseconds since the Unix epoch ([`Logical::Timestamp`]).
    Timestamp(i64),
    Decimal(Decimal),
    Array(Vec<Data>),
    /// Entries in the order read.
    Map(Vec<(Data, Data)>),
    /// Fields by name, in the order read (the schema's order for declared
    /// data; a struct value may lack an optional field of its schema).
    Struct(Vec<(String, Data)>),
}

/// A value read from bytes, with its schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded {
    pub schema: Schema,
    pub data: Data,
    /// True when the bytes declared the schema (a `{"schema", "payload"}`
    /// envelope); false when it was inferred from plain JSON.
    pub declared: bool,
}

/// Input that is not Connect data: not JSON, a malformed schema, or a
/// payload that does not match its schema.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataError {
    /// Where in the value: `payload.items[2].price`, `schema.fields[1]`, or
    /// empty for the whole input.
    pub path: String,
    pub message: String,
}

impl DataError {
    fn new(path: &str, message: impl Into<String>) -> Self {
        DataError { path: path.to_string(), message: message.into() }
    }
}

impl fmt::Display for DataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() { f.write_str(&self.message) } else { write!(f, "{}: {}", self.path, self.message) }
    }
}

impl std::error::Error for DataError {}

/// Reads a record value: a `{"schema": ..., "payload": ...}` envelope
/// (Connect's `JsonConverter` with schemas enabled) under its declared
/// schema, or plain JSON with a schema inferred from it. An envelope whose
/// schema is `null` is read as plain JSON from its payload.
pub fn read_value(bytes: &[u8]) -> Result<Decoded, DataError> {
    let json: Json = serde_json::from_slice(bytes).map_err(|e| DataError::new("", format!("not JSON: {e}")))?;
    read_json(&json)
}

/// [`read_value`] for JSON already parsed.
pub fn read_json(json: &Json) -> Result<Decoded, DataError> {
    if let Some((schema, payload)) = envelope(json) {
        if !schema.is_null() {
            let schema = Schema::from_connect_json_at(schema, "schema")?;
            let data = Data::from_json_at(payload, &schema, "payload")?;
            return Ok(Decoded { schema, data, declared: true });
        }
        let schema = infer_schema_at(payload, "payload")?;
        let data = Data::from_json_at(payload, &schema, "payload")?;
        return Ok(Decoded { schema, data, declared: false });
    }
    let schema = infer_schema(json)?;
    let data = Data::from_json(json, &schema)?;
    Ok(Decoded { schema, data, declared: false })
}

/// The schema and payload of an envelope: an object with exactly the keys
/// `schema` (an object or null) and `payload`.
pub fn envelope(json: &Json) -> Option<(&Json, &Json)> {
    let object = json.as_object()?;
    if object.len() != 2 {
        return None;
    }
    let schema = object.get("schema")?;
    let payload = object.get("payload")?;
    (schema.is_object() || schema.is_null()).then_some((schema, payload))
}

/// Infers a schema from plain JSON: objects become structs (fields in name
/// order, each required), integers that fit become `int64`, other numbers
/// `float64`, strings `string`, booleans `boolean`, arrays an `array` of
/// the merge of their elements' schemas, and `null` an optional
/// [`Type::Null`]. Fails only for an array whose elements cannot share a
/// schema (say, a number and a string).
pub fn infer_schema(json: &Json) -> Result<Schema, DataError> {
    infer_schema_at(json, "")
}

fn infer_schema_at(json: &Json, path: &str) -> Result<Schema, DataError> {
    Ok(match json {
        Json::Null => Schema::null(),
        Json::Bool(_) => Schema::new(Type::Boolean),
        Json::Number(n) if n.is_i64() => Schema::new(Type::Int64),
        Json::Number(_) => Schema::new(Type::Float64),
        Json::String(_) => Schema::new(Type::String),
        Json::Array(items) => {
            let mut element: Option<Schema> = None;
            for (i, item) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                let schema = infer_schema_at(item, &at)?;
                element = Some(match element {
                    None => schema,
                    Some(element) => element.merge_at(&schema, &at)?,
                });
            }
            Schema::new(Type::Array(Box::new(element.unwrap_or_else(Schema::null))))
        }
        Json::Object(object) => Schema::new(Type::Struct(
            object
                .iter()
                .map(|(name, value)| Ok(Field::new(name, infer_schema_at(value, &join(path, name))?)))
                .collect::<Result<_, DataError>>()?,
        )),
    })
}

fn join(path: &str, name: &str) -> String {
    if path.is_empty() { name.to_string() } else { format!("{path}.{name}") }
}

impl Schema {
    /// A required schema of `ty`, without name or parameters.
    pub fn new(ty: Type) -> Self {
        Schema { ty, optional: false, name: None, version: None, doc: None, parameters: BTreeMap::new(), default: None }
    }

    /// The schema inference gives `null`: optional [`Type::Null`].
    pub fn null() -> Self {
        Schema::new(Type::Null).into_optional()
    }

    /// A struct schema of these fields.
    pub fn structure(fields: Vec<Field>) -> Self {
        Schema::new(Type::Struct(fields))
    }

    /// The logical [`DATE`] schema.
    pub fn date() -> Self {
        Schema::new(Type::Int32).named(DATE)
    }

    /// The logical [`TIME`] schema.
    pub fn time() -> Self {
        Schema::new(Type::Int32).named(TIME)
    }

    /// The logical [`TIMESTAMP`] schema.
    pub fn timestamp() -> Self {
        Schema::new(Type::Int64).named(TIMESTAMP)
    }

    /// The logical [`DECIMAL`] schema with this scale.
    pub fn decimal(scale: i32) -> Self {
        let mut schema = Schema::new(Type::Bytes).named(DECIMAL);
        schema.parameters.insert(DECIMAL_SCALE.into(), scale.to_string());
        schema
    }

    /// The same schema, optional.
    pub fn into_optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// The same schema with this name.
    pub fn named(mut self, name: &str) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The same schema with every struct field, at any depth, optional: what
    /// a schema inferred from a few records should be before more records
    /// (which may lack a field) are written under it.
    pub fn with_optional_fields(mut self) -> Self {
        match &mut self.ty {
            Type::Struct(fields) => {
                for field in fields.iter_mut() {
                    let schema = std::mem::replace(&mut field.schema, Schema::null());
                    field.schema = schema.with_optional_fields().into_optional();
                }
            }
            Type::Array(element) => {
                let schema = std::mem::replace(element.as_mut(), Schema::null());
                **element = schema.with_optional_fields();
            }
            Type::Map(_, value) => {
                let schema = std::mem::replace(value.as_mut(), Schema::null());
                **value = schema.with_optional_fields();
            }
            _ => {}
        }
        self
    }

    /// The field of a struct schema called `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        match &self.ty {
            Type::Struct(fields) => fields.iter().find(|f| f.name == name),
            _ => None,
        }
    }

    /// The struct schema's fields; empty for other types.
    pub fn fields(&self) -> &[Field] {
        match &self.ty {
            Type::Struct(fields) => fields,
            _ => &[],
        }
    }

    /// The logical type that the schema's name and type make, if any. A
    /// decimal without a parseable `scale` parameter has scale 0.
    pub fn logical(&self) -> Option<Logical> {
        match (self.name.as_deref()?, &self.ty) {
            (DATE, Type::Int32) => Some(Logical::Date),
            (TIME, Type::Int32) => Some(Logical::Time),
            (TIMESTAMP, Type::Int64) => Some(Logical::Timestamp),
            (DECIMAL, Type::Bytes) => Some(Logical::Decimal {
                scale: self.parameters.get(DECIMAL_SCALE).and_then(|s| s.trim().parse().ok()).unwrap_or(0),
                precision: self.parameters.get(DECIMAL_PRECISION).and_then(|s| s.trim().parse().ok()),
            }),
            _ => None,
        }
    }

    /// Reads a schema as Connect's `JsonConverter` writes it: `{"type":
    /// "struct", "fields": [{"field": "id", "type": "int64", "optional":
    /// false}, ...], "name": ..., "parameters": {...}}`, `"items"` for an
    /// array, `"keys"` and `"values"` for a map. `float` and `double` are
    /// Connect's JSON names for `float32` and `float64`; both spellings are
    /// accepted.
    pub fn from_connect_json(json: &Json) -> Result<Schema, DataError> {
        Schema::from_connect_json_at(json, "")
    }

    fn from_connect_json_at(json: &Json, path: &str) -> Result<Schema, DataError> {
        let object = json.as_object().ok_or_else(|| DataError::new(path, "a schema must be a JSON object"))?;
        let type_name = object
            .get("type")
            .and_then(Json::as_str)
            .ok_or_else(|| DataError::new(path, "a schema needs a \"type\" string"))?;
        let child = |key: &str| -> Result<Box<Schema>, DataError> {
            let at = join(path, key);
            let json =
                object.get(key).ok_or_else(|| DataError::new(path, format!("a {type_name} schema needs \"{key}\"")))?;
            Ok(Box::new(Schema::from_connect_json_at(json, &at)?))
        };
        let ty = match type_name {
            "int8" => Type::Int8,
            "int16" => Type::Int16,
            "int32" => Type::Int32,
            "int64" => Type::Int64,
            "float" | "float32" => Type::Float32,
            "double" | "float64" => Type::Float64,
            "boolean" => Type::Boolean,
            "string" => Type::String,
            "bytes" => Type::Bytes,
            "array" => Type::Array(child("items")?),
            "map" => Type::Map(child("keys")?, child("values")?),
            "struct" => {
                let at = join(path, "fields");
                let fields = object
                    .get("fields")
                    .and_then(Json::as_array)
                    .ok_or_else(|| DataError::new(path, "a struct schema needs a \"fields\" array"))?;
                let mut out: Vec<Field> = Vec::with_capacity(fields.len());
                for (i, field) in fields.iter().enumerate() {
                    let at = format!("{at}[{i}]");
                    let name = field
                        .get("field")
                        .and_then(Json::as_str)
                        .ok_or_else(|| DataError::new(&at, "a field needs a \"field\" name"))?;
                    if out.iter().any(|f| f.name == name) {
                        return Err(DataError::new(&at, format!("field '{name}' appears twice")));
                    }
                    out.push(Field::new(name, Schema::from_connect_json_at(field, &at)?));
                }
                Type::Struct(out)
            }
            other => return Err(DataError::new(path, format!("unknown schema type '{other}'"))),
        };
        let mut schema = Schema::new(ty);
        schema.optional = match object.get("optional") {
            None | Some(Json::Null) => false,
            Some(Json::Bool(b)) => *b,
            Some(_) => return Err(DataError::new(path, "\"optional\" must be a boolean")),
        };
        schema.name = object.get("name").and_then(Json::as_str).map(str::to_string);
        schema.version = object.get("version").and_then(Json::as_i64).and_then(|v| i32::try_from(v).ok());
        schema.doc = object.get("doc").and_then(Json::as_str).map(str::to_string);
        if let Some(parameters) = object.get("parameters").and_then(Json::as_object) {
            for (key, value) in parameters {
                let value = match value {
                    Json::String(s) => s.clone(),
                    other => other.to_string(),
                };
                schema.parameters.insert(key.clone(), value);
            }
        }
        match object.get("default") {
            None | Some(Json::Null) => {}
            Some(default) => {
                let data = Data::from_json_at(default, &schema, &join(path, "default"))?;
                schema.default = Some(Box::new(data));
            }
        }
        Ok(schema)
    }

    /// The schema as `JsonConverter` writes it (the inverse of
    /// [`Schema::from_connect_json`]; [`Type::Null`] is written as an
    /// optional `string`, the closest Connect type).
    pub fn to_connect_json(&self) -> Json {
        let mut object = Map::new();
        let type_name = match &self.ty {
            Type::Null => "string",
            Type::Float32 => "float",
            Type::Float64 => "double",
            other => other.name(),
        };
        object.insert("type".into(), type_name.into());
        match &self.ty {
            Type::Array(items) => {
                object.insert("items".into(), items.to_connect_json());
            }
            Type::Map(keys, values) => {
                object.insert("keys".into(), keys.to_connect_json());
                object.insert("values".into(), values.to_connect_json());
            }
            Type::Struct(fields) => {
                let fields = fields
                    .iter()
                    .map(|f| {
                        let mut json = f.schema.to_connect_json();
                        json.as_object_mut()
                            .expect("a schema is an object")
                            .insert("field".into(), f.name.clone().into());
                        json
                    })
                    .collect();
                object.insert("fields".into(), Json::Array(fields));
            }
            _ => {}
        }
        object.insert("optional".into(), (self.optional || self.ty == Type::Null).into());
        if let Some(name) = &self.name {
            object.insert("name".into(), name.clone().into());
        }
        if let Some(version) = self.version {
            object.insert("version".into(), version.into());
        }
        if let Some(doc) = &self.doc {
            object.insert("doc".into(), doc.clone().into());
        }
        if !self.parameters.is_empty() {
            let parameters = self.parameters.iter().map(|(k, v)| (k.clone(), Json::String(v.clone()))).collect();
            object.insert("parameters".into(), Json::Object(parameters));
        }
        if let Some(default) = &self.default {
            object.insert("default".into(), default.to_json());
        }
        Json::Object(object)
    }

    /// The narrowest schema that both `self` and `other` fit, for schemas
    /// inferred from several records: integers widen to the wider integer,
    /// an integer and a float to `float64`, `float32` and `float64` to
    /// `float64`; a struct gets the fields of both (in `self`'s order, then
    /// `other`'s new ones), a field missing on one side becoming optional;
    /// [`Type::Null`] merges into anything as optional; the result is
    /// optional if either is. Logical types merge only with the same
    /// logical type (a decimal with the same scale). Anything else, such as
    /// a string and a number, is an error naming the field.
    pub fn merge(&self, other: &Schema) -> Result<Schema, DataError> {
        self.merge_at(other, "")
    }

    fn merge_at(&self, other: &Schema, path: &str) -> Result<Schema, DataError> {
        if self == other {
            return Ok(self.clone());
        }
        let optional = self.optional || other.optional;
        if self.ty == Type::Null {
            let mut merged = other.clone();
            merged.optional = true;
            return Ok(merged);
        }
        if other.ty == Type::Null {
            let mut merged = self.clone();
            merged.optional = true;
            return Ok(merged);
        }
        let mismatch = || DataError::new(path, format!("cannot widen {} to fit {}", describe(self), describe(other)));
        if (self.logical().is_some() || other.logical().is_some()) && self.logical() != other.logical() {
            return Err(mismatch());
        }
        let ty = match (&self.ty, &other.ty) {
            (a, b) if a == b => a.clone(),
            (a, b) if a.int_rank().is_some() && b.int_rank().is_some() => {
                if a.int_rank() >= b.int_rank() {
                    a.clone()
                } else {
                    b.clone()
                }
            }
            (a, b) if is_number(a) && is_number(b) => Type::Float64,
            (Type::Array(a), Type::Array(b)) => Type::Array(Box::new(a.merge_at(b, &format!("{path}[]"))?)),
            (Type::Map(ak, av), Type::Map(bk, bv)) => Type::Map(
                Box::new(ak.merge_at(bk, &format!("{path}{{key}}"))?),
                Box::new(av.merge_at(bv, &format!("{path}{{value}}"))?),
            ),
            (Type::Struct(a), Type::Struct(b)) => {
                let mut fields = Vec::with_capacity(a.len().max(b.len()));
                for field in a {
                    let at = join(path, &field.name);
                    fields.push(match b.iter().find(|f| f.name == field.name) {
                        Some(theirs) => Field::new(&field.name, field.schema.merge_at(&theirs.schema, &at)?),
                        None => Field::new(&field.name, field.schema.clone().into_optional()),
                    });
                }
                for field in b.iter().filter(|f| !a.iter().any(|g| g.name == f.name)) {
                    fields.push(Field::new(&field.name, field.schema.clone().into_optional()));
                }
                Type::Struct(fields)
            }
            _ => return Err(mismatch()),
        };
        let mut merged = Schema { ty, optional, ..self.clone() };
        if merged.default != other.default {
            merged.default = None;
        }
        Ok(merged)
    }
}

fn is_number(ty: &Type) -> bool {
    ty.int_rank().is_some() || matches!(ty, Type::Float32 | Type::Float64)
}

/// `int32 (org.apache.kafka.connect.data.Date)`, `struct`, ...
fn describe(schema: &Schema) -> String {
    match (&schema.name, schema.logical()) {
        (Some(name), Some(_)) => format!("{} ({name})", schema.ty.name()),
        _ => schema.ty.name().to_string(),
    }
}

impl Decimal {
    /// Reads a big-endian two's complement unscaled integer (Connect's
    /// `Decimal` bytes); at most 16 bytes.
    pub fn from_be_bytes(bytes: &[u8], scale: i32) -> Result<Decimal, DataError> {
        // Leading sign bytes carry no digits: skip them so a wide encoding of
        // a small number still fits.
        let negative = bytes.first().is_some_and(|b| b & 0x80 != 0);
        let pad = if negative { 0xff } else { 0x00 };
        let mut start = 0;
        while bytes.len() - start > 16 && bytes[start] == pad {
            start += 1;
        }
        let digits = &bytes[start..];
        if digits.len() > 16 {
            return Err(DataError::new("", format!("a decimal of {} bytes does not fit 128 bits", bytes.len())));
        }
        let mut buf = [pad; 16];
        buf[16 - digits.len()..].copy_from_slice(digits);
        Ok(Decimal { unscaled: i128::from_be_bytes(buf), scale })
    }

    /// The unscaled integer as `len` big-endian two's complement bytes
    /// (sign-extended or cut from the left; `len` up to 16).
    pub fn to_be_bytes(&self, len: usize) -> Vec<u8> {
        let all = self.unscaled.to_be_bytes();
        all[16 - len.min(16)..].to_vec()
    }

    /// The shortest big-endian two's complement bytes (what Connect writes).
    pub fn to_minimal_be_bytes(&self) -> Vec<u8> {
        let all = self.unscaled.to_be_bytes();
        let mut start = 0;
        while start < 15 {
            let (b, next) = (all[start], all[start + 1]);
            if (b == 0x00 && next & 0x80 == 0) || (b == 0xff && next & 0x80 != 0) {
                start += 1;
            } else {
                break;
            }
        }
        all[start..].to_vec()
    }

    /// Parses decimal text (`-12.345`, `1e3`) at this scale, rounding half
    /// away from zero when the text has more fraction digits than the scale.
    pub fn parse(text: &str, scale: i32) -> Result<Decimal, DataError> {
        let bad = || DataError::new("", format!("'{text}' is not a decimal number"));
        let (mantissa, exponent) = match text.find(['e', 'E']) {
            Some(i) => (&text[..i], text[i + 1..].parse::<i32>().map_err(|_| bad())?),
            None => (text, 0),
        };
        let (negative, digits) = match mantissa.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, mantissa.strip_prefix('+').unwrap_or(mantissa)),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        if whole.is_empty() && fraction.is_empty() || !whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
        {
            return Err(bad());
        }
        // value = digits × 10^(exponent - fraction digits); bring it to scale.
        let all: String = format!("{whole}{fraction}");
        let shift = scale as i64 + exponent as i64 - fraction.len() as i64;
        let overflow = || DataError::new("", format!("'{text}' does not fit a 128-bit decimal at scale {scale}"));
        let mut unscaled: i128 = 0;
        for b in all.bytes() {
            unscaled = unscaled.checked_mul(10).and_then(|u| u.checked_add((b - b'0') as i128)).ok_or_else(overflow)?;
        }
        if shift >= 0 {
            for _ in 0..shift {
                unscaled = unscaled.checked_mul(10).ok_or_else(overflow)?;
            }
        } else {
            let mut dropped = 0;
            for _ in 0..(-shift).min(40) {
                dropped = unscaled % 10;
                unscaled /= 10;
            }
            if dropped >= 5 {
                unscaled += 1;
            }
        }
        Ok(Decimal { unscaled: if negative { -unscaled } else { unscaled }, scale })
    }

    /// The nearest `f64`.
    pub fn to_f64(&self) -> f64 {
        self.unscaled as f64 / 10f64.powi(self.scale)
    }
}

impl fmt::Display for Decimal {
    /// Plain notation with `scale` fraction digits: `-12.30`, `1200` for a
    /// negative scale.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.unscaled.unsigned_abs().to_string();
        let sign = if self.unscaled < 0 { "-" } else { "" };
        if self.scale <= 0 {
            let zeros = if self.unscaled == 0 { 0 } else { (-self.scale) as usize };
            return write!(f, "{sign}{digits}{}", "0".repeat(zeros));
        }
        let scale = self.scale as usize;
        let padded = format!("{digits:0>width$}", width = scale + 1);
        let (whole, fraction) = padded.split_at(padded.len() - scale);
        write!(f, "{sign}{whole}.{fraction}")
    }
}

impl Data {
    /// Converts JSON under a schema as Connect's `JsonConverter` does: bytes
    /// and decimals from base64 strings (a decimal also from a JSON number),
    /// dates, times and timestamps from integers, a map with string keys
    /// from an object and any other map from an array of `[key, value]`
    /// pairs; `null` or a missing field gives the schema's default, else
    /// null where the schema is optional, else an error. Object keys that
    /// a struct schema does not name are ignored, as Connect ignores them.
    pub fn from_json(json: &Json, schema: &Schema) -> Result<Data, DataError> {
        Data::from_json_at(json, schema, "")
    }

    fn from_json_at(json: &Json, schema: &Schema, path: &str) -> Result<Data, DataError> {
        if json.is_null() {
            return match (&schema.default, schema.optional || schema.ty == Type::Null) {
                (Some(default), _) => Ok((**default).clone()),
                (None, true) => Ok(Data::Null),
                (None, false) => Err(DataError::new(path, format!("null for a required {}", describe(schema)))),
            };
        }
        let expected = || DataError::new(path, format!("expected {}, found {}", describe(schema), json_kind(json)));
        let int = |min: i64, max: i64| -> Result<i64, DataError> {
            json.as_i64().filter(|v| (min..=max).contains(v)).ok_or_else(expected)
        };
        if let Some(logical) = schema.logical() {
            return Ok(match logical {
                Logical::Date => Data::Date(int(i32::MIN as i64, i32::MAX as i64)? as i32),
                Logical::Time => Data::Time(int(0, 86_400_000)? as i32),
                Logical::Timestamp => Data::Timestamp(int(i64::MIN, i64::MAX)?),
                Logical::Decimal { scale, .. } => Data::Decimal(match json {
                    Json::String(text) => {
                        let bytes =
                            BASE64.decode(text).map_err(|e| DataError::new(path, format!("bad base64: {e}")))?;
                        Decimal::from_be_bytes(&bytes, scale).map_err(|e| DataError::new(path, e.message))?
                    }
                    Json::Number(n) => {
                        Decimal::parse(&n.to_string(), scale).map_err(|e| DataError::new(path, e.message))?
                    }
                    _ => return Err(expected()),
                }),
            });
        }
        Ok(match &schema.ty {
            Type::Null => return Err(expected()),
            Type::Int8 => Data::Int8(int(i8::MIN as i64, i8::MAX as i64)? as i8),
            Type::Int16 => Data::Int16(int(i16::MIN as i64, i16::MAX as i64)? as i16),
            Type::Int32 => Data::Int32(int(i32::MIN as i64, i32::MAX as i64)? as i32),
            Type::Int64 => Data::Int64(int(i64::MIN, i64::MAX)?),
            Type::Float32 => Data::Float32(json.as_f64().ok_or_else(expected)? as f32),
            Type::Float64 => Data::Float64(json.as_f64().ok_or_else(expected)?),
            Type::Boolean => Data::Boolean(json.as_bool().ok_or_else(expected)?),
            Type::String => Data::String(json.as_str().ok_or_else(expected)?.to_string()),
            Type::Bytes => {
                let text = json.as_str().ok_or_else(expected)?;
                Data::Bytes(BASE64.decode(text).map_err(|e| DataError::new(path, format!("bad base64: {e}")))?)
            }
            Type::Array(items) => Data::Array(
                json.as_array()
                    .ok_or_else(expected)?
                    .iter()
                    .enumerate()
                    .map(|(i, item)| Data::from_json_at(item, items, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            ),
            Type::Map(keys, values) => match json {
                Json::Object(object) if keys.ty == Type::String => Data::Map(
                    object
                        .iter()
                        .map(|(k, v)| {
                            let at = join(path, k);
                            Ok((Data::String(k.clone()), Data::from_json_at(v, values, &at)?))
                        })
                        .collect::<Result<_, DataError>>()?,
                ),
                Json::Array(entries) => Data::Map(
                    entries
                        .iter()
                        .enumerate()
                        .map(|(i, entry)| {
                            let at = format!("{path}[{i}]");
                            match entry.as_array().map(Vec::as_slice) {
                                Some([k, v]) => {
                                    Ok((Data::from_json_at(k, keys, &at)?, Data::from_json_at(v, values, &at)?))
                                }
                                _ => Err(DataError::new(&at, "a map entry must be a [key, value] array")),
                            }
                        })
                        .collect::<Result<_, DataError>>()?,
                ),
                _ => return Err(expected()),
            },
            Type::Struct(fields) => {
                let object = json.as_object().ok_or_else(expected)?;
                Data::Struct(
                    fields
                        .iter()
                        .map(|field| {
                            let value = object.get(&field.name).unwrap_or(&Json::Null);
                            Ok((
                                field.name.clone(),
                                Data::from_json_at(value, &field.schema, &join(path, &field.name))?,
                            ))
                        })
                        .collect::<Result<_, DataError>>()?,
                )
            }
        })
    }

    /// The value as schemaless JSON, as `JsonConverter` writes a payload:
    /// bytes and decimals as base64 strings, dates, times and timestamps as
    /// integers, a map with string keys as an object and any other map as an
    /// array of `[key, value]` pairs. Non-finite floats become `null`.
    pub fn to_json(&self) -> Json {
        match self {
            Data::Null => Json::Null,
            Data::Int8(v) => (*v).into(),
            Data::Int16(v) => (*v).into(),
            Data::Int32(v) | Data::Date(v) | Data::Time(v) => (*v).into(),
            Data::Int64(v) | Data::Timestamp(v) => (*v).into(),
            Data::Float32(v) => serde_json::Number::from_f64(*v as f64).map_or(Json::Null, Json::Number),
            Data::Float64(v) => serde_json::Number::from_f64(*v).map_or(Json::Null, Json::Number),
            Data::Boolean(v) => (*v).into(),
            Data::String(v) => v.clone().into(),
            Data::Bytes(v) => BASE64.encode(v).into(),
            Data::Decimal(d) => BASE64.encode(d.to_minimal_be_bytes()).into(),
            Data::Array(items) => Json::Array(items.iter().map(Data::to_json).collect()),
            Data::Map(entries) if entries.iter().all(|(k, _)| matches!(k, Data::String(_))) => Json::Object(
                entries
                    .iter()
                    .map(|(k, v)| match k {
                        Data::String(k) => (k.clone(), v.to_json()),
                        _ => unreachable!("checked above"),
                    })
                    .collect(),
            ),
            Data::Map(entries) => {
                Json::Array(entries.iter().map(|(k, v)| Json::Array(vec![k.to_json(), v.to_json()])).collect())
            }
            Data::Struct(fields) => Json::Object(fields.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self, Data::Null)
    }

    /// A struct's field by name; `None` for a missing field or a non-struct.
    pub fn get(&self, name: &str) -> Option<&Data> {
        match self {
            Data::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Sets a struct's field, replacing one of the same name; does nothing
    /// to a non-struct.
    pub fn set(&mut self, name: &str, value: Data) {
        if let Data::Struct(fields) = self {
            match fields.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) => *v = value,
                None => fields.push((name.to_string(), value)),
            }
        }
    }

    /// An integer of any width (not a logical type) as `i64`.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Data::Int8(v) => Some(v as i64),
            Data::Int16(v) => Some(v as i64),
            Data::Int32(v) => Some(v as i64),
            Data::Int64(v) => Some(v),
            _ => None,
        }
    }

    /// Moves a value onto `schema`, a schema it fits, typically a
    /// [`Schema::merge`] of its own: integers widen to wider integers or
    /// floats, `float32` to `float64`, struct fields are put in the schema's
    /// order with null for the ones missing, and null takes the schema's
    /// default where it has one. A value that does not fit (a string for a
    /// number, a struct field the schema lacks, null for a required field)
    /// is an error naming where.
    pub fn conform(self, schema: &Schema) -> Result<Data, DataError> {
        self.conform_at(schema, "")
    }

    fn conform_at(self, schema: &Schema, path: &str) -> Result<Data, DataError> {
        if self.is_null() {
            return match (&schema.default, schema.optional || schema.ty == Type::Null) {
                (Some(default), _) => Ok((**default).clone()),
                (None, true) => Ok(Data::Null),
                (None, false) => Err(DataError::new(path, format!("null for a required {}", describe(schema)))),
            };
        }
        let mismatch = |data: &Data| DataError::new(path, format!("{} does not fit {}", data.kind(), describe(schema)));
        if let Some(logical) = schema.logical() {
            return match (logical, self) {
                (Logical::Date, v @ Data::Date(_))
                | (Logical::Time, v @ Data::Time(_))
                | (Logical::Timestamp, v @ Data::Timestamp(_)) => Ok(v),
                (Logical::Decimal { scale, .. }, Data::Decimal(d)) if d.scale == scale => Ok(Data::Decimal(d)),
                (_, other) => Err(mismatch(&other)),
            };
        }
        let int = |v: i64| -> Result<Data, DataError> {
            let out = match &schema.ty {
                Type::Int8 => i8::try_from(v).ok().map(Data::Int8),
                Type::Int16 => i16::try_from(v).ok().map(Data::Int16),
                Type::Int32 => i32::try_from(v).ok().map(Data::Int32),
                Type::Int64 => Some(Data::Int64(v)),
                Type::Float32 => Some(Data::Float32(v as f32)),
                Type::Float64 => Some(Data::Float64(v as f64)),
                _ => None,
            };
            out.ok_or_else(|| DataError::new(path, format!("{v} does not fit {}", describe(schema))))
        };
        match (self, &schema.ty) {
            (v @ (Data::Int8(_) | Data::Int16(_) | Data::Int32(_) | Data::Int64(_)), _) => int(v.as_i64().unwrap_or(0)),
            (Data::Float32(v), Type::Float32) => Ok(Data::Float32(v)),
            (Data::Float32(v), Type::Float64) => Ok(Data::Float64(v as f64)),
            (Data::Float64(v), Type::Float64) => Ok(Data::Float64(v)),
            (v @ Data::Boolean(_), Type::Boolean)
            | (v @ Data::String(_), Type::String)
            | (v @ Data::Bytes(_), Type::Bytes) => Ok(v),
            (Data::Array(items), Type::Array(element)) => Ok(Data::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| item.conform_at(element, &format!("{path}[{i}]")))
                    .collect::<Result<_, _>>()?,
            )),
            (Data::Map(entries), Type::Map(keys, values)) => Ok(Data::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| Ok((k.conform_at(keys, path)?, v.conform_at(values, path)?)))
                    .collect::<Result<_, DataError>>()?,
            )),
            (Data::Struct(mut given), Type::Struct(fields)) => {
                if let Some((extra, _)) = given.iter().find(|(n, _)| !fields.iter().any(|f| &f.name == n)) {
                    return Err(DataError::new(&join(path, extra), "a field the schema does not have"));
                }
                let mut out = Vec::with_capacity(fields.len());
                for field in fields {
                    let value = match given.iter().position(|(n, _)| n == &field.name) {
                        Some(i) => given.swap_remove(i).1,
                        None => Data::Null,
                    };
                    out.push((field.name.clone(), value.conform_at(&field.schema, &join(path, &field.name))?));
                }
                Ok(Data::Struct(out))
            }
            (other, _) => Err(mismatch(&other)),
        }
    }

    /// What kind of value this is, for messages: `int64`, `Date`, `struct`, ...
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Null => "null",
            Data::Int8(_) => "int8",
            Data::Int16(_) => "int16",
            Data::Int32(_) => "int32",
            Data::Int64(_) => "int64",
            Data::Float32(_) => "float32",
            Data::Float64(_) => "float64",
            Data::Boolean(_) => "boolean",
            Data::String(_) => "string",
            Data::Bytes(_) => "bytes",
            Data::Date(_) => "Date",
            Data::Time(_) => "Time",
            Data::Timestamp(_) => "Timestamp",
            Data::Decimal(_) => "Decimal",
            Data::Array(_) => "array",
            Data::Map(_) => "map",
            Data::Struct(_) => "struct",
        }
    }
}

fn json_kind(json: &Json) -> &'static str {
    match json {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(n) if n.is_i64() || n.is_u64() => "an integer",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(schema: Json, payload: Json) -> Vec<u8> {
        serde_json::to_vec(&json!({"schema": schema, "payload": payload})).unwrap()
    }

    #[test]
    fn reads_every_connect_type_from_an_envelope() {
        let schema = json!({"type": "struct", "name": "shop.Order", "fields": [
            {"field": "i8", "type": "int8"},
            {"field": "i16", "type": "int16"},
            {"field": "i32", "type": "int32"},
            {"field": "i64", "type": "int64"},
            {"field": "f32", "type": "float"},
            {"field": "f64", "type": "double"},
            {"field": "ok", "type": "boolean"},
            {"field": "s", "type": "string"},
            {"field": "b", "type": "bytes"},
            {"field": "tags", "type": "array", "items": {"type": "string"}},
            {"field": "counts", "type": "map", "keys": {"type": "string"}, "values": {"type": "int32"}},
            {"field": "by_id", "type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}},
            {"field": "inner", "type": "struct", "optional": true, "fields": [{"field": "x", "type": "int32"}]},
            {"field": "missing", "type": "string", "optional": true},
        ]});
        let payload = json!({"i8": -8, "i16": 300, "i32": 70000, "i64": 1_i64 << 40, "f32": 1.5, "f64": 2.25,
            "ok": true, "s": "hé", "b": "AAEC", "tags": ["a", "b"], "counts": {"x": 1},
            "by_id": [[1, "one"], [2, "two"]], "inner": {"x": 5}, "unknown": 1});
        let value = read_value(&envelope(schema, payload)).unwrap();
        assert!(value.declared);
        assert_eq!(value.schema.name.as_deref(), Some("shop.Order"));
        assert_eq!(value.schema.field("f32").unwrap().schema.ty, Type::Float32);
        assert!(value.schema.field("inner").unwrap().schema.optional);
        let expected = Data::Struct(vec![
            ("i8".into(), Data::Int8(-8)),
            ("i16".into(), Data::Int16(300)),
            ("i32".into(), Data::Int32(70000)),
            ("i64".into(), Data::Int64(1 << 40)),
            ("f32".into(), Data::Float32(1.5)),
            ("f64".into(), Data::Float64(2.25)),
            ("ok".into(), Data::Boolean(true)),
            ("s".into(), Data::String("hé".into())),
            ("b".into(), Data::Bytes(vec![0, 1, 2])),
            ("tags".into(), Data::Array(vec![Data::String("a".into()), Data::String("b".into())])),
            ("counts".into(), Data::Map(vec![(Data::String("x".into()), Data::Int32(1))])),
            (
                "by_id".into(),
                Data::Map(vec![
                    (Data::Int32(1), Data::String("one".into())),
                    (Data::Int32(2), Data::String("two".into())),
                ]),
            ),
            ("inner".into(), Data::Struct(vec![("x".into(), Data::Int32(5))])),
            ("missing".into(), Data::Null),
        ]);
        assert_eq!(value.data, expected);
        // Written back as JsonConverter writes a payload.
        let back = value.data.to_json();
        assert_eq!(back["b"], "AAEC");
        assert_eq!(back["by_id"], json!([[1, "one"], [2, "two"]]));
        assert_eq!(back["counts"], json!({"x": 1}));
    }

    #[test]
    fn reads_logical_types() {
        let schema = json!({"type": "struct", "fields": [
            {"field": "day", "type": "int32", "name": DATE},
            {"field": "at", "type": "int32", "name": TIME},
            {"field": "ts", "type": "int64", "name": TIMESTAMP},
            {"field": "price", "type": "bytes", "name": DECIMAL, "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
            {"field": "debt", "type": "bytes", "name": DECIMAL, "parameters": {"scale": "2"}},
            {"field": "numeric", "type": "bytes", "name": DECIMAL, "parameters": {"scale": "3"}},
        ]});
        // 12345 = 0x3039; -12345 = 0xCFC7.
        let payload = json!({"day": 19723, "at": 3_600_000, "ts": 1_704_067_200_000_i64,
            "price": BASE64.encode([0x30, 0x39]), "debt": BASE64.encode([0xCF, 0xC7]), "numeric": 1.5});
        let value = read_value(&envelope(schema, payload)).unwrap();
        assert_eq!(value.data.get("day"), Some(&Data::Date(19723)));
        assert_eq!(value.data.get("at"), Some(&Data::Time(3_600_000)));
        assert_eq!(value.data.get("ts"), Some(&Data::Timestamp(1_704_067_200_000)));
        assert_eq!(value.data.get("price"), Some(&Data::Decimal(Decimal { unscaled: 12345, scale: 2 })));
        assert_eq!(value.data.get("debt"), Some(&Data::Decimal(Decimal { unscaled: -12345, scale: 2 })));
        assert_eq!(value.data.get("numeric"), Some(&Data::Decimal(Decimal { unscaled: 1500, scale: 3 })));
        assert_eq!(
            value.schema.field("price").unwrap().schema.logical(),
            Some(Logical::Decimal { scale: 2, precision: Some(10) })
        );
        let Some(Data::Decimal(debt)) = value.data.get("debt") else { panic!() };
        assert_eq!(debt.to_string(), "-123.45");
        assert_eq!(debt.to_minimal_be_bytes(), vec![0xCF, 0xC7]);
        assert_eq!(debt.to_be_bytes(4), vec![0xFF, 0xFF, 0xCF, 0xC7]);
        assert_eq!(value.data.to_json()["price"], BASE64.encode([0x30, 0x39]));
    }

    #[test]
    fn decimals_print_and_parse() {
        let d = |unscaled, scale| Decimal { unscaled, scale };
        assert_eq!(d(5, 3).to_string(), "0.005");
        assert_eq!(d(-5, 3).to_string(), "-0.005");
        assert_eq!(d(12, -2).to_string(), "1200");
        assert_eq!(d(0, 2).to_string(), "0.00");
        assert_eq!(Decimal::parse("12.345", 2).unwrap(), d(1235, 2));
        assert_eq!(Decimal::parse("-1e2", 1).unwrap(), d(-1000, 1));
        assert!(Decimal::parse("abc", 1).is_err());
        assert_eq!(Decimal::from_be_bytes(&[0xff; 20], 0).unwrap(), d(-1, 0));
        assert!(Decimal::from_be_bytes(&[0x7f; 17], 0).is_err());
    }

    #[test]
    fn defaults_and_nulls_follow_the_schema() {
        let schema = json!({"type": "struct", "fields": [
            {"field": "n", "type": "int32", "default": 7},
            {"field": "o", "type": "string", "optional": true},
        ]});
        let value = read_value(&envelope(schema.clone(), json!({}))).unwrap();
        assert_eq!(value.data, Data::Struct(vec![("n".into(), Data::Int32(7)), ("o".into(), Data::Null)]));
        let strict = json!({"type": "struct", "fields": [{"field": "n", "type": "int32"}]});
        let err = read_value(&envelope(strict, json!({"n": null}))).unwrap_err();
        assert_eq!(err.path, "payload.n");
        assert!(err.message.contains("null for a required int32"), "{err}");
        assert_eq!(Schema::from_connect_json(&schema).unwrap().to_connect_json()["fields"][0]["default"], 7);
    }

    #[test]
    fn malformed_input_is_an_error_that_says_where() {
        let err = read_value(b"not json").unwrap_err();
        assert!(err.message.starts_with("not JSON"), "{err}");
        let err = read_value(&envelope(json!({"type": "int99"}), json!(1))).unwrap_err();
        assert_eq!(err.to_string(), "schema: unknown schema type 'int99'");
        let schema = json!({"type": "struct", "fields": [{"field": "a", "type": "array", "items": {"type": "int8"}}]});
        let err = read_value(&envelope(schema, json!({"a": [1, 300]}))).unwrap_err();
        assert_eq!(err.to_string(), "payload.a[1]: expected int8, found an integer");
        let err = read_value(&envelope(json!({"type": "bytes"}), json!("!!"))).unwrap_err();
        assert!(err.message.starts_with("bad base64"), "{err}");
        let err = read_value(&envelope(json!({"type": "struct"}), json!({}))).unwrap_err();
        assert_eq!(err.to_string(), "schema: a struct schema needs a \"fields\" array");
        let err = read_value(br#"[1, "a"]"#).unwrap_err();
        assert_eq!(err.to_string(), "[1]: cannot widen int64 to fit string");
    }

    #[test]
    fn infers_a_schema_from_plain_json() {
        let value = read_value(
            br#"{"id": 1, "price": 2.5, "name": "x", "ok": false, "tags": [1, 2.5], "none": null, "inner": {"a": []}}"#,
        )
        .unwrap();
        assert!(!value.declared);
        let fields: Vec<_> = value.schema.fields().iter().map(|f| (f.name.as_str(), f.schema.ty.name())).collect();
        assert_eq!(
            fields,
            [
                ("id", "int64"),
                ("inner", "struct"),
                ("name", "string"),
                ("none", "null"),
                ("ok", "boolean"),
                ("price", "float64"),
                ("tags", "array")
            ]
        );
        assert_eq!(value.schema.field("tags").unwrap().schema.ty, Type::Array(Box::new(Schema::new(Type::Float64))));
        assert_eq!(value.data.get("tags"), Some(&Data::Array(vec![Data::Float64(1.0), Data::Float64(2.5)])));
        assert_eq!(value.data.get("none"), Some(&Data::Null));
        // An envelope whose schema is null is plain JSON in its payload.
        let value = read_value(br#"{"schema": null, "payload": {"a": 1}}"#).unwrap();
        assert_eq!(value.data, Data::Struct(vec![("a".into(), Data::Int64(1))]));
        // A scalar is a scalar.
        assert_eq!(read_value(b"\"hi\"").unwrap().data, Data::String("hi".into()));
    }

    #[test]
    fn merges_and_widens_inferred_schemas() {
        let a = infer_schema(&json!({"id": 1, "v": 1, "gone": "x", "later": null})).unwrap();
        let b = infer_schema(&json!({"id": 2, "v": 2.5, "new": true, "later": [1]})).unwrap();
        let merged = a.merge(&b).unwrap();
        let fields: Vec<_> =
            merged.fields().iter().map(|f| (f.name.as_str(), f.schema.ty.name(), f.schema.optional)).collect();
        assert_eq!(
            fields,
            [
                ("gone", "string", true),
                ("id", "int64", false),
                ("later", "array", true),
                ("v", "float64", false),
                ("new", "boolean", true)
            ]
        );
        // Merging is what records need: each value moves onto the merged schema.
        let first = read_value(br#"{"id": 1, "v": 1, "gone": "x", "later": null}"#).unwrap().data;
        let conformed = first.conform(&merged).unwrap();
        assert_eq!(conformed.get("v"), Some(&Data::Float64(1.0)));
        assert_eq!(conformed.get("new"), Some(&Data::Null));
        let Data::Struct(fields) = &conformed else { panic!() };
        assert_eq!(fields.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(), ["gone", "id", "later", "v", "new"]);
        // Integers widen to the wider integer; what cannot widen is an error naming the field.
        assert_eq!(Schema::new(Type::Int8).merge(&Schema::new(Type::Int32)).unwrap().ty, Type::Int32);
        let err = a.merge(&infer_schema(&json!({"id": "one"})).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "id: cannot widen int64 to fit string");
        let err = Schema::date().merge(&Schema::new(Type::Int32)).unwrap_err();
        assert!(err.message.contains("org.apache.kafka.connect.data.Date"), "{err}");
        assert!(Schema::decimal(2).merge(&Schema::decimal(3)).is_err());
        // A value with a field the schema lacks does not fit it.
        let err = read_value(br#"{"x": 1}"#).unwrap().data.conform(&a).unwrap_err();
        assert_eq!(err.to_string(), "x: a field the schema does not have");
    }

    #[test]
    fn optional_fields_and_schema_round_trip() {
        let schema = infer_schema(&json!({"a": {"b": 1}, "c": [{"d": true}]})).unwrap().with_optional_fields();
        assert!(schema.fields().iter().all(|f| f.schema.optional));
        assert!(schema.field("a").unwrap().schema.fields()[0].schema.optional);
        assert!(!schema.optional);
        let declared = Schema::structure(vec![
            Field::new("day", Schema::date()),
            Field::new("price", Schema::decimal(2).into_optional()),
            Field::new(
                "m",
                Schema::new(Type::Map(Box::new(Schema::new(Type::String)), Box::new(Schema::new(Type::Float32)))),
            ),
        ]);
        let json = declared.to_connect_json();
        assert_eq!(json["fields"][2]["values"]["type"], "float");
        assert_eq!(Schema::from_connect_json(&json).unwrap(), declared);
    }
}
