//! A key or value as Connect's data, in the JSON that Connect's
//! JsonConverter writes: a payload with its schema (the envelope
//! `{"schema":…,"payload":…}`), or a schemaless payload. Schemas are
//! Connect's JSON schemas (`{"type":"struct","fields":[{"field":"id",
//! "type":"int32","optional":false}]}`).

use bytes::Bytes;
use serde_json::{Map, Value, json};

/// A record's key or value as the transforms read it.
#[derive(Clone, Debug, PartialEq)]
pub enum Data {
    /// No value: a tombstone's value, or a record without a key.
    Null,
    /// JSON, with the schema that came with it (`None`: schemaless).
    Json { schema: Option<Value>, payload: Value },
    /// Bytes that are not JSON (StringConverter's text, ByteArrayConverter's
    /// bytes): transforms that need fields refuse them.
    Opaque(Bytes),
}

impl Data {
    pub fn read(bytes: Option<&Bytes>) -> Data {
        let Some(bytes) = bytes else { return Data::Null };
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Object(mut envelope))
                if envelope.len() == 2 && envelope.contains_key("schema") && envelope.contains_key("payload") =>
            {
                let payload = envelope.remove("payload").unwrap_or_default();
                let schema = envelope.remove("schema").filter(|s| !s.is_null());
                Data::Json { schema, payload }
            }
            Ok(payload) => Data::Json { schema: None, payload },
            Err(_) => Data::Opaque(bytes.clone()),
        }
    }

    pub fn write(self) -> Option<Bytes> {
        let json = match self {
            Data::Null => return None,
            Data::Opaque(bytes) => return Some(bytes),
            Data::Json { schema: Some(schema), payload } => json!({ "schema": schema, "payload": payload }),
            Data::Json { schema: None, payload } => payload,
        };
        Some(Bytes::from(serde_json::to_vec(&json).expect("a JSON value serializes")))
    }

    /// What it is, for an error message (Connect names a Java class).
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Null => "null",
            Data::Opaque(_) => "bytes that are not JSON",
            Data::Json { payload, .. } => json_kind(payload),
        }
    }
}

pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A struct (with its schema) or a map (schemaless): what most field
/// transforms work on. Connect's `requireStruct` / `requireMap`.
pub struct Fields {
    pub schema: Option<Value>,
    pub payload: Map<String, Value>,
}

impl Fields {
    pub fn of(data: Data, purpose: &str) -> Result<Fields, String> {
        match data {
            Data::Json { schema: Some(schema), payload: Value::Object(payload) }
                if schema.get("type").and_then(Value::as_str) == Some("struct") =>
            {
                Ok(Fields { schema: Some(schema), payload })
            }
            Data::Json { schema: None, payload: Value::Object(payload) } => Ok(Fields { schema: None, payload }),
            Data::Json { schema: Some(schema), .. } => Err(format!(
                "Only Struct objects supported for [{purpose}], found: {}",
                schema.get("type").and_then(Value::as_str).unwrap_or("no type")
            )),
            other => {
                Err(format!("Only Map objects supported in absence of schema for [{purpose}], found: {}", other.kind()))
            }
        }
    }

    pub fn into_data(self) -> Data {
        Data::Json { schema: self.schema, payload: Value::Object(self.payload) }
    }

    /// The field's schema, when there is a schema; an error when the schema
    /// has no such field.
    pub fn field_schema(&self, name: &str) -> Result<Option<Value>, String> {
        let Some(schema) = &self.schema else { return Ok(None) };
        let field = schema_fields(schema).iter().find(|f| f.get("field").and_then(Value::as_str) == Some(name));
        match field {
            Some(field) => Ok(Some(field_as_schema(field))),
            None => Err(format!("Unknown field: {name}")),
        }
    }

    /// Keeps the fields `keep` says to, in order, renamed as it says.
    pub fn retain(&mut self, keep: impl Fn(&str) -> Option<String>) {
        let payload = std::mem::take(&mut self.payload);
        self.payload = payload.into_iter().filter_map(|(name, value)| Some((keep(&name)?, value))).collect();
        if let Some(fields) = self.schema.as_mut().and_then(|s| s.get_mut("fields")).and_then(Value::as_array_mut) {
            let old = std::mem::take(fields);
            for mut field in old {
                let name = field.get("field").and_then(Value::as_str).unwrap_or_default().to_string();
                if let Some(renamed) = keep(&name) {
                    field["field"] = Value::String(renamed);
                    fields.push(field);
                }
            }
        }
    }

    /// Adds a field last, or replaces it where it is; `schema` is its
    /// schema, used when the struct has one.
    pub fn put(&mut self, name: &str, schema: Value, value: Value) {
        self.payload.insert(name.to_string(), value);
        if let Some(fields) = self.schema.as_mut().and_then(|s| s.get_mut("fields")).and_then(Value::as_array_mut) {
            let field = schema_as_field(schema, name);
            match fields.iter_mut().find(|f| f.get("field").and_then(Value::as_str) == Some(name)) {
                Some(existing) => *existing = field,
                None => fields.push(field),
            }
        }
    }
}

/// A struct schema's fields (none for any other schema).
pub fn schema_fields(schema: &Value) -> &[Value] {
    schema.get("fields").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A field entry of a struct schema, as the schema of its value.
pub fn field_as_schema(field: &Value) -> Value {
    let mut schema = field.clone();
    if let Some(object) = schema.as_object_mut() {
        object.remove("field");
    }
    schema
}

/// A schema as the field `name` of a struct schema.
pub fn schema_as_field(mut schema: Value, name: &str) -> Value {
    if let Some(object) = schema.as_object_mut() {
        object.insert("field".into(), Value::String(name.into()));
    }
    schema
}

/// A struct schema of `fields`, named `name` if given.
pub fn struct_schema(fields: Vec<Value>, optional: bool) -> Value {
    json!({ "type": "struct", "fields": fields, "optional": optional })
}

/// A primitive schema.
pub fn primitive(kind: &str, optional: bool) -> Value {
    json!({ "type": kind, "optional": optional })
}

/// Connect's Timestamp logical type: int64 milliseconds.
pub fn timestamp_schema(optional: bool) -> Value {
    json!({ "type": "int64", "optional": optional, "name": "org.apache.kafka.connect.data.Timestamp", "version": 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_reads_with_its_schema_and_writes_back_alike() {
        let bytes = Bytes::from_static(br#"{"schema":{"type":"string","optional":false},"payload":"a"}"#);
        let data = Data::read(Some(&bytes));
        assert_eq!(data, Data::Json { schema: Some(primitive("string", false)), payload: json!("a") });
        assert_eq!(Data::read(data.write().as_ref()), Data::read(Some(&bytes)));
        let schemaless = Bytes::from_static(br#"{"id":1}"#);
        assert_eq!(Data::read(Some(&schemaless)), Data::Json { schema: None, payload: json!({"id": 1}) });
        assert_eq!(Data::read(Some(&Bytes::from_static(b"not json"))).kind(), "bytes that are not JSON");
        assert_eq!(Data::read(None), Data::Null);
    }
}
