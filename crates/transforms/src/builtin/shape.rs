//! Apache Kafka's transforms of a key's or value's shape and types:
//! Flatten and Cast.

use super::{BuildError, Class, Side, both_sides};
use crate::data::{Data, Fields, json_kind, schema_as_field, schema_fields, struct_schema};
use crate::{Record, Transform};
use serde_json::{Map, Number, Value};
use spillway_config::{ConfigDef, Importance, KeyDef, Type, Values};

pub fn classes() -> Vec<Class<dyn Transform>> {
    let mut classes = Vec::new();
    classes.extend(both_sides("Flatten", flatten_keys, |side, v| {
        Ok(Box::new(Flatten { side, delimiter: v.string("delimiter").to_string() }))
    }));
    classes.extend(both_sides("Cast", cast_keys, Cast::build));
    classes
}

// --- Flatten ------------------------------------------------------------

fn flatten_keys() -> ConfigDef {
    let doc = "Delimiter to insert between field names from the input record when generating field names for the output record";
    ConfigDef::new()
        .group("Transform", [KeyDef::new("delimiter", Type::String, Importance::Medium, doc).with_default(".")])
}

struct Flatten {
    side: Side,
    delimiter: String,
}

impl Flatten {
    fn name(&self, prefix: &str, name: &str) -> String {
        if prefix.is_empty() { name.to_string() } else { format!("{prefix}{}{name}", self.delimiter) }
    }

    fn schemaless(&self, prefix: &str, from: Map<String, Value>, into: &mut Map<String, Value>) {
        for (name, value) in from {
            match value {
                Value::Object(nested) => self.schemaless(&self.name(prefix, &name), nested, into),
                other => {
                    into.insert(self.name(prefix, &name), other);
                }
            }
        }
    }

    /// A struct's fields, nested structs' fields brought up; `optional`
    /// when an enclosing struct is.
    fn with_schema(
        &self,
        prefix: &str,
        schema: &Value,
        payload: Option<&Map<String, Value>>,
        optional: bool,
        into: &mut (Vec<Value>, Map<String, Value>),
    ) -> Result<(), String> {
        for field in schema_fields(schema) {
            let name = field.get("field").and_then(Value::as_str).unwrap_or_default();
            let flat = self.name(prefix, name);
            let value = payload.and_then(|p| p.get(name));
            let optional = optional || field.get("optional").and_then(Value::as_bool).unwrap_or(false);
            match field.get("type").and_then(Value::as_str) {
                Some("struct") => self.with_schema(&flat, field, value.and_then(Value::as_object), optional, into)?,
                Some("map") => {
                    return Err(format!(
                        "Flatten transformation does not support MAP for record with schemas (for field {flat})."
                    ));
                }
                _ => {
                    let mut field = field.clone();
                    field["optional"] = Value::Bool(optional);
                    into.0.push(schema_as_field(field, &flat));
                    into.1.insert(flat, value.cloned().unwrap_or(Value::Null));
                }
            }
        }
        Ok(())
    }
}

impl Transform for Flatten {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let data = self.side.read(&record);
        if data == Data::Null {
            return Ok(Some(record));
        }
        let fields = Fields::of(data, "flattening")?;
        let flat = match &fields.schema {
            None => {
                let mut flat = Map::new();
                self.schemaless("", fields.payload, &mut flat);
                Fields { schema: None, payload: flat }
            }
            Some(schema) => {
                let mut flat = (Vec::new(), Map::new());
                self.with_schema("", schema, Some(&fields.payload), false, &mut flat)?;
                let mut flat_schema = struct_schema(flat.0, schema["optional"].as_bool().unwrap_or(false));
                if let Some(name) = schema.get("name") {
                    flat_schema["name"] = name.clone();
                }
                Fields { schema: Some(flat_schema), payload: flat.1 }
            }
        };
        self.side.write(&mut record, flat.into_data());
        Ok(Some(record))
    }
}

// --- Cast ---------------------------------------------------------------

const TYPES: [&str; 8] = ["int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string"];

fn cast_keys() -> ConfigDef {
    let doc = "List of fields and the type to cast them to of the form field1:type,field2:type to cast fields of \
               Maps or Structs. A single type to cast the entire value. Valid types are int8, int16, int32, int64, \
               float32, float64, boolean, and string.";
    ConfigDef::new().group("Transform", [KeyDef::new("spec", Type::List, Importance::High, doc).required()])
}

struct Cast {
    side: Side,
    /// `None`: the whole value; else each field and its type.
    whole: Option<&'static str>,
    fields: Vec<(String, &'static str)>,
}

impl Cast {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let spec = v.list("spec");
        let invalid =
            |why: String| (Some("spec"), format!("Invalid value {} for configuration spec: {why}", spec.join(",")));
        let kind = |name: &str| {
            let lower = name.trim().to_ascii_lowercase();
            TYPES
                .iter()
                .copied()
                .find(|t| *t == lower)
                .ok_or_else(|| invalid(format!("Invalid type found in casting spec: {}", name.trim())))
        };
        if spec.is_empty() {
            return Err(invalid("Must specify at least one field to cast.".into()));
        }
        let mut cast = Cast { side, whole: None, fields: Vec::new() };
        for entry in spec {
            match entry.split(':').collect::<Vec<_>>()[..] {
                [whole] if spec.len() == 1 => cast.whole = Some(kind(whole)?),
                [_] => {
                    return Err(invalid(
                        "Cast transformations that specify a type to cast the entire value to may only specify a single cast in their spec".into(),
                    ));
                }
                [field, to] => cast.fields.push((field.trim().to_string(), kind(to)?)),
                _ => return Err(invalid(format!("Invalid rename mapping: {entry}"))),
            }
        }
        Ok(Box::new(cast))
    }
}

/// `value` as `to`, or why it cannot be. Numbers out of the type's range
/// are refused (Connect would wrap them round in silence).
fn cast(value: &Value, to: &str) -> Result<Value, String> {
    let out_of_range = || format!("Value ({value}) was out of range for requested data type {to}");
    let integer = |n: f64, min: f64, max: f64| -> Result<Value, String> {
        let n = n.trunc();
        if n < min || n > max { Err(out_of_range()) } else { Ok(Value::from(n as i64)) }
    };
    let number: Option<f64> = match value {
        Value::Null => return Ok(Value::Null),
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) if to != "string" && to != "boolean" => Some(
            s.trim()
                .parse::<f64>()
                .map_err(|_| format!("Value ({s}) was out of range for requested data type {to}"))?,
        ),
        Value::String(_) => None,
        other => return Err(format!("Cast transformation does not support casting from {}", json_kind(other))),
    };
    match (to, number) {
        ("int8", Some(n)) => integer(n, i8::MIN as f64, i8::MAX as f64),
        ("int16", Some(n)) => integer(n, i16::MIN as f64, i16::MAX as f64),
        ("int32", Some(n)) => integer(n, i32::MIN as f64, i32::MAX as f64),
        // Integers beyond f64's 2^53 keep their digits.
        ("int64", _) if value.is_i64() => Ok(value.clone()),
        ("int64", Some(n)) => integer(n, i64::MIN as f64, i64::MAX as f64),
        ("float32" | "float64", Some(n)) => Ok(Number::from_f64(n).map_or(Value::Null, Value::Number)),
        ("boolean", Some(n)) => Ok(Value::Bool(n != 0.0)),
        ("boolean", None) => Ok(Value::Bool(value.as_str().is_some_and(|s| s.trim().eq_ignore_ascii_case("true")))),
        ("string", _) => Ok(Value::String(match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })),
        _ => Err(out_of_range()),
    }
}

impl Transform for Cast {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let data = self.side.read(&record);
        let cast_schema = |schema: &mut Value, to: &str| schema["type"] = Value::String(to.into());
        let out = match (data, self.whole) {
            (Data::Null, _) => return Ok(Some(record)),
            (Data::Json { mut schema, payload }, Some(to)) => {
                if let Some(schema) = schema.as_mut() {
                    cast_schema(schema, to);
                }
                Data::Json { schema, payload: cast(&payload, to)? }
            }
            (Data::Opaque(bytes), Some(to)) => match std::str::from_utf8(&bytes) {
                Ok(text) => Data::Json { schema: None, payload: cast(&Value::String(text.into()), to)? },
                Err(_) => {
                    return Err("Cast transformation does not support casting from bytes that are not text".into());
                }
            },
            (data, _) => {
                let mut fields = Fields::of(data, "cast types")?;
                for (name, to) in &self.fields {
                    if let Some(value) = fields.payload.get_mut(name) {
                        *value = cast(value, to)?;
                    }
                    let schema_fields =
                        fields.schema.as_mut().and_then(|s| s.get_mut("fields")).and_then(Value::as_array_mut);
                    for field in schema_fields.into_iter().flatten().filter(|f| f["field"] == name.as_str()) {
                        cast_schema(field, to);
                    }
                }
                fields.into_data()
            }
        };
        self.side.write(&mut record, out);
        Ok(Some(record))
    }
}
