//! Plain JSON objects of scalars (most records of a topic), read straight
//! into cells: the same names, schemas and values that `read_value` and
//! `Schema::with_optional_fields` give such an object, without the JSON
//! tree, the inferred struct schema and the struct value in between. Field
//! names borrow from the record where JSON lets them.
//!
//! Anything else (not JSON, not an object, a nested value, a name given
//! twice, what may be an envelope) is `None`: the caller reads it the
//! general way, which also says what is wrong with it.

use crate::rows::{Cell, CellSchema};
use serde::de::{Deserialize, Deserializer, Error, MapAccess, Visitor};
use spillway_sdk::data::{Data, Type};
use std::borrow::Cow;
use std::fmt;

/// The fields of a plain JSON object of scalars, in the order of their
/// names (as serde_json orders an object's keys), every one optional.
pub fn read(bytes: &[u8]) -> Option<Vec<Cell<'_>>> {
    // One UTF-8 check of the whole text, rather than one per string.
    let Object(mut cells) = serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()?;
    cells.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    // serde_json keeps the last of a repeated name: rare, left to it.
    if cells.windows(2).any(|pair| pair[0].name == pair[1].name) {
        return None;
    }
    // `{"payload": ..., "schema": ...}` may be an envelope.
    if cells.len() == 2 && cells[0].name == "payload" && cells[1].name == "schema" {
        return None;
    }
    Some(cells)
}

struct Object<'a>(Vec<Cell<'a>>);

impl<'de> Deserialize<'de> for Object<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Object<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Object<'de>, A::Error> {
        let mut cells = Vec::with_capacity(map.size_hint().unwrap_or(8));
        while let Some(Name(name)) = map.next_key()? {
            let Scalar(data) = map.next_value()?;
            // What inference gives each kind of JSON scalar, optional.
            let ty = match data {
                Data::Null => Type::Null,
                Data::Boolean(_) => Type::Boolean,
                Data::Int64(_) => Type::Int64,
                Data::Float64(_) => Type::Float64,
                _ => Type::String,
            };
            let schema = CellSchema::shared(&ty, true).expect("scalars' schemas are shared");
            cells.push(Cell { name, schema, data });
        }
        Ok(Object(cells))
    }
}

/// A field name, borrowed unless JSON escapes in it had to be undone.
struct Name<'a>(Cow<'a, str>);

impl<'de> Deserialize<'de> for Name<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Name<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_borrowed_str<E: Error>(self, v: &'de str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Borrowed(v)))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(v.to_string())))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Name<'de>, E> {
        Ok(Name(Cow::Owned(v)))
    }
}

/// A scalar as `Data`, as `serde_json::Value`, `infer_schema` and
/// `Data::from_json` would make it: integers that fit `i64` are `Int64`,
/// other numbers `Float64`. Arrays and objects are errors (the general way
/// reads them).
struct Scalar(Data);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON scalar")
    }

    fn visit_unit<E: Error>(self) -> Result<Scalar, E> {
        Ok(Scalar(Data::Null))
    }

    fn visit_bool<E: Error>(self, v: bool) -> Result<Scalar, E> {
        Ok(Scalar(Data::Boolean(v)))
    }

    fn visit_i64<E: Error>(self, v: i64) -> Result<Scalar, E> {
        Ok(Scalar(Data::Int64(v)))
    }

    fn visit_u64<E: Error>(self, v: u64) -> Result<Scalar, E> {
        Ok(Scalar(i64::try_from(v).map_or(Data::Float64(v as f64), Data::Int64)))
    }

    fn visit_f64<E: Error>(self, v: f64) -> Result<Scalar, E> {
        // serde_json's Value makes a number that is not finite null.
        Ok(Scalar(if v.is_finite() { Data::Float64(v) } else { Data::Null }))
    }

    fn visit_str<E: Error>(self, v: &str) -> Result<Scalar, E> {
        Ok(Scalar(Data::String(v.to_string())))
    }

    fn visit_string<E: Error>(self, v: String) -> Result<Scalar, E> {
        Ok(Scalar(Data::String(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_sdk::data::read_value;

    /// What the general way gives: `read_value`, optional fields, in order.
    fn general(json: &str) -> Vec<Cell<'static>> {
        let decoded = read_value(json.as_bytes()).unwrap();
        assert!(!decoded.declared);
        let schema = decoded.schema.with_optional_fields();
        schema
            .fields()
            .iter()
            .map(|f| Cell::new(f.name.clone(), f.schema.clone(), decoded.data.get(&f.name).cloned().unwrap()))
            .collect()
    }

    #[test]
    fn objects_of_scalars_read_as_the_general_way_reads_them() {
        for json in [
            r#"{"id":"record-1","n":1,"name":"customer 1","amount":1.25,"ok":false}"#,
            r#"{"z": null, "a": -0, "b": -5, "c": 18446744073709551615, "d": 9223372036854775807, "e": 1e300}"#,
            r#"{"esc\"aped": "t\u00e9xt", "": 0.0, "B": true, "a": 2.0}"#,
            r#"{"payload": 1, "other": 2}"#,
            "{}",
            " { \"x\" : 1 } ",
        ] {
            assert_eq!(read(json.as_bytes()), Some(general(json)), "{json}");
        }
        let cells = read(br#"{"b": 1, "a\n": 2}"#).unwrap();
        assert!(matches!(cells[0].name, Cow::Owned(_)) && matches!(cells[1].name, Cow::Borrowed(_)));
    }

    #[test]
    fn anything_else_is_left_to_the_general_way() {
        for json in [
            r#"{"a": [1]}"#,
            r#"{"a": {"b": 1}}"#,
            r#"{"a": 1, "a": 2}"#,
            r#"{"schema": null, "payload": {"a": 1}}"#,
            r#"{"schema": 1, "payload": 2}"#,
            "[1]",
            "null",
            "1",
            "not json",
            r#"{"a": 1} x"#,
            r#"{"a": 1"#,
            "{\"a\": \"\u{0}\"}",
        ] {
            assert_eq!(read(json.as_bytes()), None, "{json}");
        }
        assert_eq!(read(b"{\"a\": \"\xff\"}"), None);
    }
}
