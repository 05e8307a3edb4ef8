//! Apache Kafka's transforms of a key's or value's fields: InsertField,
//! ReplaceField, ExtractField, ValueToKey, HoistField, MaskField.

use super::{BuildError, Class, KAFKA, Side, both_sides};
use crate::data::{Data, Fields, primitive, schema_as_field, struct_schema, timestamp_schema};
use crate::{Record, Transform};
use serde_json::{Map, Value, json};
use spillway_config::{ConfigDef, Importance, KeyDef, Type, Validator, Values};

pub fn classes() -> Vec<Class<dyn Transform>> {
    let mut classes = Vec::new();
    classes.extend(both_sides("InsertField", insert_keys, InsertField::build));
    classes.extend(both_sides("ReplaceField", replace_keys, ReplaceField::build));
    classes.extend(both_sides("ExtractField", extract_keys, ExtractField::build));
    classes.extend(both_sides("HoistField", hoist_keys, |side, v| {
        Ok(Box::new(HoistField { side, field: v.string("field").into() }))
    }));
    classes.extend(both_sides("MaskField", mask_keys, MaskField::build));
    classes.push(Class::<dyn Transform>::new(
        Box::leak(format!("{KAFKA}ValueToKey").into_boxed_str()),
        value_to_key_keys(),
        |v| Ok(Box::new(ValueToKey { fields: v.list("fields").to_vec() })),
    ));
    classes
}

fn string(name: &str, doc: &str) -> KeyDef {
    KeyDef::new(name, Type::String, Importance::Medium, doc)
}

fn list(name: &str, doc: &str) -> KeyDef {
    KeyDef::new(name, Type::List, Importance::Medium, doc)
}

fn non_empty() -> Validator {
    Validator::new("a non-empty list", |v| match v {
        spillway_config::Value::List(items) if items.is_empty() => Err("Empty list".into()),
        _ => Ok(()),
    })
}

fn def(keys: impl IntoIterator<Item = KeyDef>) -> ConfigDef {
    ConfigDef::new().group("Transform", keys)
}

// --- InsertField --------------------------------------------------------

fn insert_keys() -> ConfigDef {
    let field = |name: &str, what: &str| {
        string(name, &format!("Field name for {what}. Suffix with ! to make it required, ? (the default) optional."))
    };
    def([
        field("topic.field", "the record's topic"),
        field("partition.field", "the record's partition"),
        field("offset.field", "the record's offset"),
        field("timestamp.field", "the record's timestamp"),
        field("static.field", "a static value"),
        string("static.value", "The static field's value."),
    ])
}

/// A field to insert and whether it is optional (`name?`, or no suffix) or
/// required (`name!`).
struct Spec {
    name: String,
    optional: bool,
}

impl Spec {
    fn parse(raw: &str) -> Option<Spec> {
        match raw.trim() {
            "" => None,
            s if s.ends_with('!') => Some(Spec { name: s[..s.len() - 1].into(), optional: false }),
            s if s.ends_with('?') => Some(Spec { name: s[..s.len() - 1].into(), optional: true }),
            s => Some(Spec { name: s.into(), optional: true }),
        }
    }
}

struct InsertField {
    side: Side,
    topic: Option<Spec>,
    partition: Option<Spec>,
    offset: Option<Spec>,
    timestamp: Option<Spec>,
    fixed: Option<(Spec, String)>,
}

impl InsertField {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let spec = |key: &str| Spec::parse(v.string(key));
        let fixed = match (spec("static.field"), v.string("static.value")) {
            (Some(field), value) if v.get("static.value").is_some() => Some((field, value.to_string())),
            (Some(field), _) => {
                return Err((Some("static.field"), format!("No value specified for static field: {}", field.name)));
            }
            (None, _) => None,
        };
        let insert = InsertField {
            side,
            topic: spec("topic.field"),
            partition: spec("partition.field"),
            offset: spec("offset.field"),
            timestamp: spec("timestamp.field"),
            fixed,
        };
        if [&insert.topic, &insert.partition, &insert.offset, &insert.timestamp].iter().all(|s| s.is_none())
            && insert.fixed.is_none()
        {
            return Err((None, "No field insertion configured".into()));
        }
        Ok(Box::new(insert))
    }
}

impl Transform for InsertField {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let data = self.side.read(&record);
        if data == Data::Null {
            return Ok(Some(record));
        }
        let mut fields = Fields::of(data, "field insertion")?;
        let mut put = |spec: &Option<Spec>, schema: fn(bool) -> Value, value: Value| {
            if let Some(spec) = spec {
                fields.put(&spec.name, schema(spec.optional), value);
            }
        };
        put(&self.topic, |o| primitive("string", o), json!(record.topic));
        put(&self.partition, |o| primitive("int32", o), json!(record.partition));
        put(&self.offset, |o| primitive("int64", o), json!(record.offset));
        let timestamp = if record.timestamp >= 0 { json!(record.timestamp) } else { Value::Null };
        put(&self.timestamp, timestamp_schema, timestamp);
        if let Some((spec, value)) = &self.fixed {
            fields.put(&spec.name, primitive("string", spec.optional), json!(value));
        }
        self.side.write(&mut record, fields.into_data());
        Ok(Some(record))
    }
}

// --- ReplaceField -------------------------------------------------------

fn replace_keys() -> ConfigDef {
    def([
        list("exclude", "Fields to exclude. This takes precedence over the fields to include.").with_default(""),
        list("include", "Fields to include. If specified, only these fields will be used.").with_default(""),
        list("renames", "Field rename mappings, as old:new.").with_default(""),
        list("blacklist", "Deprecated. Use exclude instead.").with_default(""),
        list("whitelist", "Deprecated. Use include instead.").with_default(""),
    ])
}

struct ReplaceField {
    side: Side,
    exclude: Vec<String>,
    include: Vec<String>,
    renames: Vec<(String, String)>,
}

impl ReplaceField {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let mut renames = Vec::new();
        for mapping in v.list("renames") {
            match mapping.split_once(':') {
                Some((old, new)) if !old.is_empty() && !new.is_empty() && !new.contains(':') => {
                    renames.push((old.to_string(), new.to_string()))
                }
                _ => {
                    let list = v.list("renames").join(",");
                    let message =
                        format!("Invalid value {list} for configuration renames: Invalid rename mapping: {mapping}");
                    return Err((Some("renames"), message));
                }
            }
        }
        let both = |key: &str, old: &str| [v.list(key), v.list(old)].concat();
        Ok(Box::new(ReplaceField {
            side,
            exclude: both("exclude", "blacklist"),
            include: both("include", "whitelist"),
            renames,
        }))
    }
}

impl Transform for ReplaceField {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let data = self.side.read(&record);
        if data == Data::Null {
            return Ok(Some(record));
        }
        let mut fields = Fields::of(data, "field replacement")?;
        fields.retain(|name| {
            let kept = !self.exclude.iter().any(|f| f == name)
                && (self.include.is_empty() || self.include.iter().any(|f| f == name));
            let renamed = self.renames.iter().find(|(old, _)| old == name).map_or(name, |(_, new)| new.as_str());
            kept.then(|| renamed.to_string())
        });
        self.side.write(&mut record, fields.into_data());
        Ok(Some(record))
    }
}

// --- ExtractField -------------------------------------------------------

fn extract_keys() -> ConfigDef {
    def([
        string("field", "Field name to extract (with field.syntax.version=V2, a dotted path to a nested field).")
            .required(),
        string(
            "field.syntax.version",
            "V1: field names a top-level field. V2: a dotted path, `back-quoted` names may hold dots.",
        )
        .with_default("V1")
        .with_validator(Validator::new("V1, V2", |v| match v {
            spillway_config::Value::String(s) if !["v1", "v2"].contains(&s.to_ascii_lowercase().as_str()) => {
                Err("String must be one of: V1, V2".into())
            }
            _ => Ok(()),
        })),
    ])
}

struct ExtractField {
    side: Side,
    path: Vec<String>,
}

impl ExtractField {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let field = v.string("field");
        let path = match v.string("field.syntax.version").eq_ignore_ascii_case("v2") {
            true => dotted_path(field).map_err(|e| (Some("field"), e))?,
            false => vec![field.to_string()],
        };
        Ok(Box::new(ExtractField { side, path }))
    }
}

/// KIP-821's path: names split at dots, a `back-quoted` name may hold dots.
fn dotted_path(path: &str) -> Result<Vec<String>, String> {
    let mut names = vec![String::new()];
    let mut quoted = false;
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'`') => names.last_mut().unwrap().push(chars.next().unwrap()),
            '`' => quoted = !quoted,
            '.' if !quoted => names.push(String::new()),
            c => names.last_mut().unwrap().push(c),
        }
    }
    if quoted {
        return Err(format!("Incomplete backtick pair in path: [{path}]"));
    }
    Ok(names)
}

impl Transform for ExtractField {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let mut data = self.side.read(&record);
        for name in &self.path {
            if data == Data::Null {
                break;
            }
            let fields = Fields::of(data, "field extraction")?;
            let schema = fields.field_schema(name)?;
            let mut payload = fields.payload;
            let value = payload.remove(name).unwrap_or(Value::Null);
            data = match (schema, value) {
                (None, Value::Null) => Data::Null,
                (schema, payload) => Data::Json { schema, payload },
            };
        }
        self.side.write(&mut record, data);
        Ok(Some(record))
    }
}

// --- HoistField ---------------------------------------------------------

fn hoist_keys() -> ConfigDef {
    def([string("field", "Field name for the single field that will be created in the resulting Struct or Map.")
        .required()])
}

struct HoistField {
    side: Side,
    field: String,
}

impl Transform for HoistField {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let hoisted = match self.side.read(&record) {
            Data::Null => Data::Json { schema: None, payload: json!({ &self.field: null }) },
            Data::Json { schema: Some(schema), payload } => Data::Json {
                schema: Some(struct_schema(vec![schema_as_field(schema, &self.field)], false)),
                payload: json!({ &self.field: payload }),
            },
            Data::Json { schema: None, payload } => {
                Data::Json { schema: None, payload: json!({ &self.field: payload }) }
            }
            // Text that is not JSON (StringConverter's): hoisted as a string.
            Data::Opaque(bytes) => match std::str::from_utf8(&bytes) {
                Ok(text) => Data::Json { schema: None, payload: json!({ &self.field: text }) },
                Err(_) => return Err("HoistField needs a value that reads as JSON or text; found bytes".into()),
            },
        };
        self.side.write(&mut record, hoisted);
        Ok(Some(record))
    }
}

// --- MaskField ----------------------------------------------------------

fn mask_keys() -> ConfigDef {
    def([
        list("fields", "Names of fields to mask.").required().with_validator(non_empty()),
        string(
            "replacement",
            "Custom value replacement, that will be applied to all 'fields' values (numeric or non-empty string values only).",
        ),
    ])
}

struct MaskField {
    side: Side,
    fields: Vec<String>,
    replacement: Option<String>,
}

impl MaskField {
    fn build(side: Side, v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let replacement = v.get("replacement").map(|_| v.string("replacement").to_string());
        if replacement.as_deref() == Some("") {
            return Err((Some("replacement"), "String may not be empty".into()));
        }
        Ok(Box::new(MaskField { side, fields: v.list("fields").to_vec(), replacement }))
    }

    fn mask(&self, value: &Value, schema: Option<&Value>) -> Result<Value, String> {
        let kind = schema.and_then(|s| s.get("type")).and_then(Value::as_str);
        let float = matches!(kind, Some("float32" | "float64"));
        Ok(match (value, &self.replacement) {
            (Value::Null, _) => Value::Null,
            (Value::Number(_), Some(r)) => {
                let number: Option<Value> = match float {
                    true => r.parse::<f64>().ok().map(Value::from),
                    false => r.parse::<i64>().ok().map(Value::from).or_else(|| r.parse::<f64>().ok().map(Value::from)),
                };
                number.ok_or_else(|| format!("Unable to convert {r} (class java.lang.String) to number"))?
            }
            (Value::String(_), Some(r)) => Value::String(r.clone()),
            (other, Some(_)) => {
                return Err(format!(
                    "Cannot mask value of type {} with custom replacement.",
                    crate::data::json_kind(other)
                ));
            }
            (Value::Bool(_), None) => json!(false),
            (Value::Number(_), None) if float => json!(0.0),
            (Value::Number(_), None) => json!(0),
            (Value::String(_), None) => json!(""),
            (Value::Array(_), None) => json!([]),
            (Value::Object(_), None) => json!({}),
        })
    }
}

impl Transform for MaskField {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let mut fields = Fields::of(self.side.read(&record), "mask fields")?;
        for name in &self.fields {
            let schema = fields.field_schema(name).ok().flatten();
            if let Some(value) = fields.payload.get(name) {
                let masked = self.mask(value, schema.as_ref())?;
                fields.payload.insert(name.clone(), masked);
            }
        }
        self.side.write(&mut record, fields.into_data());
        Ok(Some(record))
    }
}

// --- ValueToKey ---------------------------------------------------------

fn value_to_key_keys() -> ConfigDef {
    def([list("fields", "Field names on the record value to extract as the record key.")
        .required()
        .with_validator(non_empty())])
}

struct ValueToKey {
    fields: Vec<String>,
}

impl Transform for ValueToKey {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let value = Fields::of(Side::Value.read(&record), "copying fields from value to key")?;
        let mut payload = Map::new();
        let mut schema_fields = Vec::new();
        for name in &self.fields {
            if value.schema.is_some() {
                let schema = value.field_schema(name).map_err(|_| format!("Field does not exist: {name}"))?;
                schema_fields.push(schema_as_field(schema.unwrap_or_default(), name));
            }
            payload.insert(name.clone(), value.payload.get(name).cloned().unwrap_or(Value::Null));
        }
        let schema = value.schema.as_ref().map(|_| struct_schema(schema_fields, false));
        Side::Key.write(&mut record, Data::Json { schema, payload: Value::Object(payload) });
        Ok(Some(record))
    }
}
