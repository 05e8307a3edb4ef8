//! An Avro datum, read with its writer's schema, as Connect's JsonConverter
//! writes the record Confluent's AvroConverter reads from it: the schema
//! mapped as Connect's `AvroData` maps it (logical types to Connect's
//! Date, Time, Timestamp and Decimal; a union with null to an optional
//! field; enums to strings), the payload as JsonConverter writes it (bytes
//! and decimals in base64).

use apache_avro::schema::{Name, Schema};
use apache_avro::types::Value;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value as Json, json};
use std::collections::HashMap;

/// A writer's schema, with its Connect form worked out once.
pub struct AvroSchema {
    schema: Schema,
    /// `{"schema": <the Connect schema>, "payload": ` serialized, to which
    /// each record's payload and `}` are appended.
    envelope_head: Vec<u8>,
}

impl AvroSchema {
    pub fn parse(text: &str) -> Result<AvroSchema, String> {
        let schema = Schema::parse_str(text).map_err(|e| format!("not an Avro schema: {e}"))?;
        let mut names = HashMap::new();
        collect_names(&schema, &mut names);
        let connect = connect_schema(&schema, &names, "")?;
        let mut envelope_head = br#"{"schema":"#.to_vec();
        serde_json::to_writer(&mut envelope_head, &connect).map_err(|e| e.to_string())?;
        envelope_head.extend_from_slice(br#","payload":"#);
        Ok(AvroSchema { schema, envelope_head })
    }

    /// Connect's JSON envelope of the datum.
    pub fn read(&self, mut datum: &[u8]) -> Result<Vec<u8>, String> {
        let value = apache_avro::from_avro_datum(&self.schema, &mut datum, None)
            .map_err(|e| format!("the datum does not read with its schema: {e}"))?;
        if !datum.is_empty() {
            return Err(format!("{} bytes left over after the datum", datum.len()));
        }
        let payload = payload(value, "")?;
        let mut envelope = self.envelope_head.clone();
        serde_json::to_writer(&mut envelope, &payload).map_err(|e| e.to_string())?;
        envelope.push(b'}');
        Ok(envelope)
    }
}

fn collect_names(schema: &Schema, names: &mut HashMap<String, Schema>) {
    match schema {
        Schema::Record(record) => {
            names.insert(record.name.fullname(None), schema.clone());
            for field in &record.fields {
                collect_names(&field.schema, names);
            }
        }
        Schema::Enum(e) => {
            names.insert(e.name.fullname(None), schema.clone());
        }
        Schema::Fixed(f) => {
            names.insert(f.name.fullname(None), schema.clone());
        }
        Schema::Array(a) => collect_names(&a.items, names),
        Schema::Map(m) => collect_names(&m.types, names),
        Schema::Union(u) => u.variants().iter().for_each(|v| collect_names(v, names)),
        _ => {}
    }
}

const DATE: &str = "org.apache.kafka.connect.data.Date";
const TIME: &str = "org.apache.kafka.connect.data.Time";
const TIMESTAMP: &str = "org.apache.kafka.connect.data.Timestamp";
const DECIMAL: &str = "org.apache.kafka.connect.data.Decimal";

fn logical(ty: &str, name: &str) -> Json {
    json!({"type": ty, "name": name, "version": 1})
}

/// The Connect schema of `schema` (at `path`, for errors).
fn connect_schema(schema: &Schema, names: &HashMap<String, Schema>, path: &str) -> Result<Json, String> {
    let at = |what: &str| format!("{}: {what}", if path.is_empty() { "the schema" } else { path });
    Ok(match schema {
        Schema::Boolean => json!({"type": "boolean"}),
        Schema::Int => json!({"type": "int32"}),
        Schema::Long => json!({"type": "int64"}),
        Schema::Float => json!({"type": "float32"}),
        Schema::Double => json!({"type": "float64"}),
        Schema::Bytes | Schema::Fixed(_) => json!({"type": "bytes"}),
        Schema::String | Schema::Uuid | Schema::Enum(_) => json!({"type": "string"}),
        Schema::Date => logical("int32", DATE),
        Schema::TimeMillis => logical("int32", TIME),
        Schema::TimestampMillis => logical("int64", TIMESTAMP),
        // As Connect's AvroData reads them: plain numbers in their units.
        Schema::TimeMicros
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => json!({"type": "int64"}),
        Schema::Decimal(d) => {
            let mut decimal = logical("bytes", DECIMAL);
            decimal["parameters"] =
                json!({"scale": d.scale.to_string(), "connect.decimal.precision": d.precision.to_string()});
            decimal
        }
        Schema::Array(a) => json!({"type": "array", "items": connect_schema(&a.items, names, &format!("{path}[]"))?}),
        Schema::Map(m) => json!({
            "type": "map",
            "keys": {"type": "string"},
            "values": connect_schema(&m.types, names, &format!("{path}{{}}"))?,
        }),
        Schema::Record(record) => {
            let mut fields = Vec::with_capacity(record.fields.len());
            for field in &record.fields {
                let field_path = if path.is_empty() { field.name.clone() } else { format!("{path}.{}", field.name) };
                let mut schema = connect_schema(&field.schema, names, &field_path)?;
                schema["field"] = Json::String(field.name.clone());
                fields.push(schema);
            }
            json!({"type": "struct", "name": record.name.fullname(None), "fields": fields})
        }
        Schema::Union(union) => {
            let variants = union.variants();
            let others: Vec<&Schema> = variants.iter().filter(|v| **v != Schema::Null).collect();
            match (others.as_slice(), variants.len() - others.len()) {
                ([only], 1) => {
                    let mut schema = connect_schema(only, names, path)?;
                    schema["optional"] = Json::Bool(true);
                    schema
                }
                _ => {
                    return Err(at("a union of several types, which Spillway does not read yet (only a type or null)"));
                }
            }
        }
        Schema::Ref { name } => {
            let named = resolve(name, names).ok_or_else(|| at(&format!("{} is not defined", name.fullname(None))))?;
            connect_schema(named, names, path)?
        }
        Schema::Null => return Err(at("a null type has no Connect schema")),
        Schema::BigDecimal | Schema::Duration => {
            return Err(at("a big-decimal or duration, which Connect has no type for"));
        }
    })
}

fn resolve<'a>(name: &Name, names: &'a HashMap<String, Schema>) -> Option<&'a Schema> {
    names.get(&name.fullname(None))
}

/// A datum's payload as JsonConverter writes it.
fn payload(value: Value, path: &str) -> Result<Json, String> {
    let number = |n: f64| {
        serde_json::Number::from_f64(n)
            .map(Json::Number)
            .ok_or_else(|| format!("{path}: {n} has no JSON form (JsonConverter cannot write it either)"))
    };
    Ok(match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(b),
        Value::Int(n) | Value::Date(n) | Value::TimeMillis(n) => json!(n),
        Value::Long(n)
        | Value::TimeMicros(n)
        | Value::TimestampMillis(n)
        | Value::TimestampMicros(n)
        | Value::TimestampNanos(n)
        | Value::LocalTimestampMillis(n)
        | Value::LocalTimestampMicros(n)
        | Value::LocalTimestampNanos(n) => json!(n),
        Value::Float(n) => number(n as f64)?,
        Value::Double(n) => number(n)?,
        Value::Bytes(b) | Value::Fixed(_, b) => Json::String(BASE64.encode(b)),
        Value::String(s) | Value::Enum(_, s) => Json::String(s),
        Value::Uuid(u) => Json::String(u.to_string()),
        Value::Decimal(d) => {
            let unscaled = Vec::<u8>::try_from(d).map_err(|e| format!("{path}: {e}"))?;
            Json::String(BASE64.encode(unscaled))
        }
        Value::Union(_, inner) => payload(*inner, path)?,
        Value::Array(items) => {
            Json::Array(items.into_iter().map(|v| payload(v, &format!("{path}[]"))).collect::<Result<_, _>>()?)
        }
        Value::Map(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                let value = payload(v, &format!("{path}{{{k}}}"))?;
                map.insert(k, value);
            }
            Json::Object(map)
        }
        Value::Record(fields) => {
            let mut map = Map::new();
            for (name, v) in fields {
                let value = payload(v, &format!("{path}.{name}"))?;
                map.insert(name, value);
            }
            Json::Object(map)
        }
        Value::BigDecimal(_) | Value::Duration(_) => return Err(format!("{path}: a type Connect has no form for")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Record;

    const ORDER: &str = r#"{"type": "record", "name": "Order", "namespace": "t", "fields": [
        {"name": "id", "type": "long"},
        {"name": "note", "type": ["null", "string"], "default": null},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "child", "type": ["null", {"type": "record", "name": "Child", "fields": [{"name": "n", "type": "int"}]}]},
        {"name": "sibling", "type": ["null", "Child"]}
    ]}"#;

    #[test]
    fn a_datum_reads_as_connects_json_envelope_with_its_logical_types() {
        let schema = Schema::parse_str(ORDER).unwrap();
        let mut record = Record::new(&schema).unwrap();
        record.put("id", 7i64);
        record.put("note", Value::Union(0, Box::new(Value::Null)));
        record.put("amount", Value::Decimal(apache_avro::Decimal::from(vec![0x01, 0x05])));
        record.put("day", Value::Date(19723));
        record.put("at", Value::TimestampMillis(1_704_067_200_000));
        record.put("tags", Value::Array(vec![Value::String("a".into())]));
        let child = Value::Record(vec![("n".into(), Value::Int(3))]);
        record.put("child", Value::Union(1, Box::new(child)));
        record.put("sibling", Value::Union(0, Box::new(Value::Null)));
        let datum = apache_avro::to_avro_datum(&schema, record).unwrap();

        let read = AvroSchema::parse(ORDER).unwrap().read(&datum).unwrap();
        let envelope: Json = serde_json::from_slice(&read).unwrap();
        assert_eq!(
            envelope["payload"],
            json!({"id": 7, "note": null, "amount": "AQU=", "day": 19723, "at": 1_704_067_200_000i64,
                   "tags": ["a"], "child": {"n": 3}, "sibling": null})
        );
        let fields = &envelope["schema"]["fields"];
        assert_eq!(envelope["schema"]["name"], "t.Order");
        assert_eq!(fields[1], json!({"field": "note", "type": "string", "optional": true}));
        assert_eq!(
            fields[2],
            json!({"field": "amount", "type": "bytes", "name": DECIMAL, "version": 1,
                   "parameters": {"scale": "2", "connect.decimal.precision": "10"}})
        );
        assert_eq!(fields[3]["name"], DATE);
        assert_eq!(fields[4]["name"], TIMESTAMP);
        assert_eq!(fields[7]["fields"], json!([{"field": "n", "type": "int32"}]), "a named type used again");
        assert_eq!(fields[7]["optional"], true);
    }

    #[test]
    fn what_connect_cannot_hold_is_refused_by_name() {
        let union = r#"{"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]}"#;
        let err = AvroSchema::parse(union).err().unwrap();
        assert!(err.starts_with("u: a union of several types"), "{err}");
        let schema = AvroSchema::parse(r#"{"type": "record", "name": "L", "fields": [{"name": "n", "type": "long"}]}"#);
        let err = schema.unwrap().read(&[0x02, 0x00]).unwrap_err();
        assert!(err.contains("1 bytes left over"), "{err}");
        assert!(AvroSchema::parse("{").is_err());
    }
}
