//! Debezium's `io.debezium.transforms.ExtractNewRecordState`: a change
//! event's envelope (`before`, `after`, `op`, `source`) unwrapped to the
//! row as it now is, with Debezium 3.2's handling of deletes and their
//! tombstones, `add.fields`, `add.headers` and `route.by.field`.

use super::builtin::{BuildError, Class, header_bytes};
use super::data::{Data, Fields, field_as_schema, primitive, schema_fields};
use super::{Record, Transform};
use serde_json::Value;
use spillway_config::{ConfigDef, Importance, KeyDef, Type, Validator, Values};

pub const CLASS: &str = "io.debezium.transforms.ExtractNewRecordState";
const MODES: &[&str] = &["drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone"];

pub fn class() -> Class<dyn Transform> {
    let key = |name: &str, kind: Type, doc: &str| KeyDef::new(name, kind, Importance::Medium, doc);
    let def = ConfigDef::new().group(
        "Transform",
        [
            key(
                "delete.tombstone.handling.mode",
                Type::String,
                "What becomes of a delete event and of the tombstone after it. drop: both dropped. tombstone: the \
                 delete becomes a record with a null value (a delete for a JDBC-style sink), its tombstone dropped. \
                 rewrite: the delete becomes its before state with __deleted=true, its tombstone dropped. \
                 rewrite-with-tombstone: as rewrite, the tombstone kept. delete-to-tombstone: as tombstone.",
            )
            .with_validator(Validator::one_of(MODES)),
            key("drop.tombstones", Type::Boolean, "Deprecated (Debezium 2.5-3.1): use delete.tombstone.handling.mode."),
            key(
                "delete.handling.mode",
                Type::String,
                "Deprecated (Debezium 2.5-3.1): use delete.tombstone.handling.mode.",
            )
            .with_validator(Validator::one_of(&["none", "drop", "rewrite"])),
            key(
                "add.fields",
                Type::List,
                "Fields of the envelope to add to the row, as field, struct.field or field:NEWNAME.",
            )
            .with_default(""),
            key("add.fields.prefix", Type::String, "The prefix of an added field's name.").with_default("__"),
            key("add.headers", Type::List, "Fields of the envelope to add as headers, as add.fields names them.")
                .with_default(""),
            key("add.headers.prefix", Type::String, "The prefix of an added header's name.").with_default("__"),
            key("route.by.field", Type::String, "A field of the row whose value becomes the record's topic.")
                .with_default(""),
        ],
    );
    Class::new(CLASS, def, ExtractNewRecordState::build)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Drop,
    Tombstone,
    Rewrite,
    RewriteWithTombstone,
    /// Debezium 2.5-3.1's `drop.tombstones=false` with `delete.handling.mode`
    /// drop or none: deletes as `drop` / `tombstone` say, tombstones kept.
    KeepTombstones {
        drop_deletes: bool,
    },
}

/// An envelope field to add: where it is (`struct`, `field`) and its name.
struct Added {
    parent: Option<String>,
    field: String,
    name: String,
}

struct ExtractNewRecordState {
    mode: Mode,
    fields: Vec<Added>,
    headers: Vec<Added>,
    route_by: Option<String>,
}

impl ExtractNewRecordState {
    fn build(v: &Values) -> Result<Box<dyn Transform>, BuildError> {
        let mode = match v.string("delete.tombstone.handling.mode") {
            "drop" => Mode::Drop,
            "rewrite" => Mode::Rewrite,
            "rewrite-with-tombstone" => Mode::RewriteWithTombstone,
            "tombstone" | "delete-to-tombstone" => Mode::Tombstone,
            // Unset: the deprecated keys, where given, as Debezium maps them.
            _ => {
                match (v.get("drop.tombstones").map(|_| v.boolean("drop.tombstones")), v.string("delete.handling.mode"))
                {
                    (None, "") => Mode::Tombstone,
                    (drop, "rewrite") if drop != Some(false) => Mode::Rewrite,
                    (Some(false), "rewrite") => Mode::RewriteWithTombstone,
                    (Some(false), handling) => Mode::KeepTombstones { drop_deletes: handling != "none" },
                    (_, "none") => Mode::Tombstone,
                    _ => Mode::Drop,
                }
            }
        };
        let added = |key: &'static str, prefix: &str| -> Result<Vec<Added>, BuildError> {
            v.list(key).iter().map(|entry| added(entry, prefix).map_err(|e| (Some(key), e))).collect()
        };
        Ok(Box::new(ExtractNewRecordState {
            mode,
            fields: added("add.fields", v.string("add.fields.prefix"))?,
            headers: added("add.headers", v.string("add.headers.prefix"))?,
            route_by: Some(v.string("route.by.field").to_string()).filter(|f| !f.is_empty()),
        }))
    }
}

/// `field`, `struct.field` or either with `:NEWNAME`, as Debezium names them.
fn added(entry: &str, prefix: &str) -> Result<Added, String> {
    let (path, rename) = match entry.split(':').collect::<Vec<_>>()[..] {
        [path] => (path, None),
        [path, name] => (path, Some(name)),
        _ => return Err(format!("Unexpected field name: {entry}")),
    };
    let (parent, field) = match path.split_once('.') {
        Some((parent, field)) => (Some(parent.to_string()), field.to_string()),
        None => {
            let parent = match path {
                "op" | "ts_ms" | "ts_us" | "ts_ns" => None,
                "id" | "total_order" | "data_collection_order" => Some("transaction"),
                _ => Some("source"),
            };
            (parent.map(String::from), path.to_string())
        }
    };
    let name = match (rename, &parent) {
        (Some(name), _) => format!("{prefix}{name}"),
        (None, Some(parent)) if path.contains('.') => format!("{prefix}{parent}_{field}"),
        (None, _) => format!("{prefix}{field}"),
    };
    Ok(Added { parent, field, name })
}

impl Added {
    /// Its value and schema in the envelope: in its struct, else at the top;
    /// `None` where the event has no such field (Debezium skips it).
    fn find(&self, envelope: &Fields) -> Option<(Value, Option<Value>)> {
        let in_struct = |parent: &str| -> Option<(Value, Option<Value>)> {
            let value = envelope.payload.get(parent)?.get(&self.field)?.clone();
            let schema = envelope.field_schema(parent).ok().flatten().and_then(|s| {
                let field = schema_fields(&s).iter().find(|f| f["field"] == self.field.as_str())?.clone();
                Some(field_as_schema(&field))
            });
            Some((value, schema))
        };
        let top =
            || Some((envelope.payload.get(&self.field)?.clone(), envelope.field_schema(&self.field).ok().flatten()));
        self.parent.as_deref().and_then(in_struct).or_else(top)
    }
}

/// A schema made optional: every added field is.
fn optional(schema: Option<Value>) -> Value {
    let mut schema = schema.unwrap_or_else(|| primitive("string", true));
    schema["optional"] = Value::Bool(true);
    schema
}

impl Transform for ExtractNewRecordState {
    fn apply(&self, mut record: Record) -> Result<Option<Record>, String> {
        let envelope = match Data::read(record.value.as_ref()) {
            Data::Null => {
                return Ok(match self.mode {
                    Mode::RewriteWithTombstone | Mode::KeepTombstones { .. } => {
                        self.add_delete_header(&mut record);
                        Some(record)
                    }
                    _ => None,
                });
            }
            Data::Json { schema: Some(schema), payload: Value::Object(payload) } if is_envelope(&schema) => {
                Fields { schema: Some(schema), payload }
            }
            // Not a change event: Debezium passes it on as it is.
            _ => return Ok(Some(record)),
        };
        let row = |side: &str| -> Option<Fields> {
            let payload = envelope.payload.get(side)?.as_object()?.clone();
            Some(Fields { schema: envelope.field_schema(side).ok().flatten(), payload })
        };
        for header in &self.headers {
            if let Some((value, _)) = header.find(&envelope) {
                record.headers.push((header.name.clone(), header_bytes(&value)));
            }
        }
        let (mut row, deleted) = match (row("after"), row("before")) {
            (Some(after), _) => (after, false),
            // A truncate: no row to write.
            (None, None) => return Ok(None),
            (None, Some(before)) => match self.mode {
                Mode::Drop | Mode::KeepTombstones { drop_deletes: true } => return Ok(None),
                Mode::Tombstone | Mode::KeepTombstones { drop_deletes: false } => {
                    self.route(&mut record, &before);
                    record.value = None;
                    return Ok(Some(record));
                }
                Mode::Rewrite | Mode::RewriteWithTombstone => (before, true),
            },
        };
        self.route(&mut record, &row);
        if matches!(self.mode, Mode::Rewrite | Mode::RewriteWithTombstone) {
            row.put("__deleted", primitive("string", true), Value::String(deleted.to_string()));
        }
        for field in &self.fields {
            if let Some((value, schema)) = field.find(&envelope) {
                row.put(&field.name, optional(schema), value);
            }
        }
        record.value = Data::Json { schema: row.schema, payload: Value::Object(row.payload) }.write();
        Ok(Some(record))
    }
}

impl ExtractNewRecordState {
    fn route(&self, record: &mut Record, row: &Fields) {
        let topic = self.route_by.as_ref().and_then(|f| row.payload.get(f)).and_then(Value::as_str);
        if let Some(topic) = topic.filter(|t| !t.trim().is_empty()) {
            record.topic = topic.to_string();
        }
    }

    /// On a kept tombstone, an `op` header says `d`, as Debezium adds it.
    fn add_delete_header(&self, record: &mut Record) {
        if let Some(op) = self.headers.iter().find(|h| h.parent.is_none() && h.field == "op") {
            record.headers.push((op.name.clone(), Some(bytes::Bytes::from_static(b"d"))));
        }
    }
}

/// Debezium's test: the value's schema is named `….Envelope`.
fn is_envelope(schema: &Value) -> bool {
    schema.get("name").and_then(Value::as_str).is_some_and(|n| n.ends_with(".Envelope"))
}
