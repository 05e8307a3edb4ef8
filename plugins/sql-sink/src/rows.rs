//! A record becomes a row: the table it goes to, what to do (insert,
//! upsert, update, delete), its primary-key cells from `pk.mode` and its
//! other cells from the value, each a Connect schema and value. A record
//! that cannot become a row is an `Err` with the reason it is rejected.

use crate::config::{InsertMode, KAFKA_PK, KEY_COLUMN, PkMode, Settings, is_plain_identifier};
use crate::plain;
use spillway_sdk::SinkRecord;
use spillway_sdk::data::{Data, Decoded, Schema, Type, read_value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::rc::Rc;

/// What a row does to its table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Insert,
    Upsert,
    Update,
    Delete,
}

/// One field of a row: the name of its column, the field's schema and
/// value. The name borrows from the record or the settings when it can.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell<'a> {
    pub name: Cow<'a, str>,
    pub schema: CellSchema,
    pub data: Data,
}

impl<'a> Cell<'a> {
    pub fn new(name: impl Into<Cow<'a, str>>, schema: impl Into<CellSchema>, data: Data) -> Self {
        Cell { name: name.into(), schema: schema.into(), data }
    }
}

/// A cell's schema. Most are a bare primitive type (every plain-JSON
/// field is): those are shared, not made and dropped for every record.
#[derive(Clone, Debug)]
pub enum CellSchema {
    Shared(&'static Schema),
    Own(Box<Schema>),
}

/// A schema of `ty` alone; `const` for the shared ones.
const fn bare(ty: Type, optional: bool) -> Schema {
    Schema { ty, optional, name: None, version: None, doc: None, parameters: BTreeMap::new(), default: None }
}

/// The shared schemas: optional and required, of each of these types.
static SHARED: [[Schema; 2]; 6] = [
    [bare(Type::Null, true), bare(Type::Null, false)],
    [bare(Type::Boolean, true), bare(Type::Boolean, false)],
    [bare(Type::Int32, true), bare(Type::Int32, false)],
    [bare(Type::Int64, true), bare(Type::Int64, false)],
    [bare(Type::Float64, true), bare(Type::Float64, false)],
    [bare(Type::String, true), bare(Type::String, false)],
];

impl CellSchema {
    /// The shared schema of `ty` alone, if there is one.
    pub fn shared(ty: &Type, optional: bool) -> Option<CellSchema> {
        let i = match ty {
            Type::Null => 0,
            Type::Boolean => 1,
            Type::Int32 => 2,
            Type::Int64 => 3,
            Type::Float64 => 4,
            Type::String => 5,
            _ => return None,
        };
        Some(CellSchema::Shared(&SHARED[i][usize::from(!optional)]))
    }

    /// Makes the schema required (a key column is never null).
    fn set_required(&mut self) {
        match self {
            CellSchema::Own(schema) => schema.optional = false,
            CellSchema::Shared(schema) => {
                if let Some(required) = CellSchema::shared(&schema.ty, false) {
                    *self = required;
                }
            }
        }
    }
}

impl From<Schema> for CellSchema {
    fn from(schema: Schema) -> Self {
        match CellSchema::shared(&schema.ty, schema.optional) {
            Some(shared) if *shared == schema => shared,
            _ => CellSchema::Own(Box::new(schema)),
        }
    }
}

impl Deref for CellSchema {
    type Target = Schema;

    fn deref(&self) -> &Schema {
        match self {
            CellSchema::Shared(schema) => schema,
            CellSchema::Own(schema) => schema,
        }
    }
}

impl PartialEq for CellSchema {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

/// What one record writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Row<'a> {
    pub table: Rc<str>,
    pub op: Op,
    /// The primary key's cells, in `pk.fields` order; never null.
    pub key: Vec<Cell<'a>>,
    /// The other cells: the value's fields (those of `fields.whitelist`),
    /// without the key's.
    pub values: Vec<Cell<'a>>,
}

impl Row<'_> {
    pub fn cells(&self) -> impl Iterator<Item = &Cell<'_>> {
        self.key.iter().chain(&self.values)
    }
}

/// The row of a record, or the reason it cannot be one; `table` is the
/// record's (`Settings::table_for` its topic).
pub fn build<'a>(settings: &'a Settings, record: &'a SinkRecord, table: Rc<str>) -> Result<Row<'a>, String> {
    let fields = match &record.value {
        None => None,
        Some(bytes) => match plain::read(bytes) {
            Some(fields) => Some(fields),
            None => read_fields(bytes)?,
        },
    };
    let Some(mut fields) = fields else {
        if !settings.delete_enabled {
            return Err("a tombstone (null value), and delete.enabled=false: nothing to write".into());
        }
        let key = key_cells(settings, record, &mut Vec::new())?;
        return Ok(Row { table, op: Op::Delete, key, values: Vec::new() });
    };

    let key = key_cells(settings, record, &mut fields)?;
    let mut values = fields;
    values.retain(|c| {
        !key.iter().any(|k| k.name == c.name)
            && (settings.whitelist.is_empty() || settings.whitelist.iter().any(|w| *w == c.name))
    });
    if key.is_empty() && values.is_empty() {
        return Err("the value has no fields to write".into());
    }
    if !settings.quote
        && let Some(bad) = key.iter().chain(&values).find(|c| !is_plain_identifier(&c.name))
    {
        return Err(format!(
            "field '{}' cannot be a column: not a plain identifier ([A-Za-z_][A-Za-z0-9_$]*), which \
             quote.sql.identifiers=never needs",
            bad.name
        ));
    }
    let op = match settings.insert_mode {
        InsertMode::Insert => Op::Insert,
        InsertMode::Upsert => Op::Upsert,
        InsertMode::Update => Op::Update,
    };
    Ok(Row { table, op, key, values })
}

/// The fields of a value read as Connect data (an envelope, or plain JSON
/// that [`plain::read`] leaves), or None for a tombstone: JSON null, or an
/// envelope whose payload is null.
fn read_fields(bytes: &[u8]) -> Result<Option<Vec<Cell<'static>>>, String> {
    let decoded = read_value(bytes).map_err(|e| format!("the value cannot be read: {e}"))?;
    if decoded.data.is_null() {
        return Ok(None);
    }
    let Decoded { schema, data, declared } = decoded;
    let Type::Struct(_) = &schema.ty else {
        return Err(format!("the value is {}, not a struct or JSON object", article(schema.ty.name())));
    };
    // Fields of plain JSON are only what one record had: later ones may lack them.
    let schema = if declared { schema } else { schema.with_optional_fields() };
    Ok(Some(struct_cells(schema, data)))
}

/// A struct's fields as cells, moved out of its schema and value.
fn struct_cells(schema: Schema, data: Data) -> Vec<Cell<'static>> {
    let Type::Struct(fields) = schema.ty else { return Vec::new() };
    let mut values = match data {
        Data::Struct(values) => values,
        _ => Vec::new(),
    };
    fields
        .into_iter()
        .enumerate()
        .map(|(i, field)| {
            // read_value gives a struct's values in its schema's order.
            let at = match values.get(i) {
                Some((name, _)) if *name == field.name => Some(i),
                _ => values.iter().position(|(name, _)| *name == field.name),
            };
            let data = at.map_or(Data::Null, |at| std::mem::replace(&mut values[at].1, Data::Null));
            Cell::new(field.name, field.schema, data)
        })
        .collect()
}

fn article(name: &str) -> String {
    let vowel = name.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {name}", if vowel { "an" } else { "a" })
}

/// The primary key's cells; `fields` are the value's (none for a
/// tombstone), and lose those that `pk.mode=record_value` takes.
fn key_cells<'a>(
    settings: &'a Settings,
    record: &'a SinkRecord,
    fields: &mut Vec<Cell<'a>>,
) -> Result<Vec<Cell<'a>>, String> {
    let mut cells = match settings.pk_mode {
        PkMode::None => Vec::new(),
        PkMode::Kafka => {
            let name = |i: usize| settings.pk_fields.get(i).map_or(KAFKA_PK[i], String::as_str);
            vec![
                Cell::new(name(0), Schema::new(Type::String), Data::String(record.topic.clone())),
                Cell::new(name(1), Schema::new(Type::Int32), Data::Int32(record.partition)),
                Cell::new(name(2), Schema::new(Type::Int64), Data::Int64(record.offset)),
            ]
        }
        PkMode::RecordKey => {
            let Some(bytes) = &record.key else {
                return Err("the record has no key, and pk.mode=record_key".into());
            };
            let key = match plain::read(bytes) {
                Some(fields) => Key::Struct(fields),
                None => read_key(bytes)?,
            };
            match key {
                Key::Struct(mut key_fields) => {
                    if settings.pk_fields.is_empty() {
                        if key_fields.is_empty() {
                            return Err("the key is a struct without fields".into());
                        }
                        key_fields
                    } else {
                        let mut cells = Vec::with_capacity(settings.pk_fields.len());
                        for name in &settings.pk_fields {
                            let Some(cell) = take(&mut key_fields, name) else {
                                return Err(format!("the key has no field '{name}' (pk.fields)"));
                            };
                            cells.push(cell);
                        }
                        cells
                    }
                }
                Key::Single(schema, data) => {
                    if settings.pk_fields.len() > 1 {
                        return Err(format!(
                            "the key is {}, a single column, and pk.fields names {}",
                            article(schema.ty.name()),
                            settings.pk_fields.len()
                        ));
                    }
                    let name = settings.pk_fields.first().map_or(KEY_COLUMN, String::as_str);
                    vec![Cell::new(name, schema, data)]
                }
            }
        }
        PkMode::RecordValue => {
            if settings.pk_fields.is_empty() {
                std::mem::take(fields)
            } else {
                let mut cells = Vec::with_capacity(settings.pk_fields.len());
                for name in &settings.pk_fields {
                    let Some(cell) = take(fields, name) else {
                        return Err(format!("the value has no field '{name}' (pk.fields)"));
                    };
                    cells.push(cell);
                }
                cells
            }
        }
    };
    for cell in &mut cells {
        if cell.data.is_null() {
            return Err(format!("the primary key's field '{}' is null", cell.name));
        }
        // A key column is never null.
        cell.schema.set_required();
    }
    Ok(cells)
}

/// Moves the cell called `name` out of `cells`.
fn take<'a>(cells: &mut Vec<Cell<'a>>, name: &str) -> Option<Cell<'a>> {
    let i = cells.iter().position(|c| c.name == name)?;
    Some(cells.remove(i))
}

/// A record's key: a struct's fields, or one value.
enum Key<'a> {
    Struct(Vec<Cell<'a>>),
    Single(Schema, Data),
}

/// A key as Connect data. A key that is not JSON is its text (as
/// StringConverter gives it), or its bytes when not UTF-8.
fn read_key(bytes: &[u8]) -> Result<Key<'static>, String> {
    let (schema, data) = match read_value(bytes) {
        Ok(decoded) => (decoded.schema, decoded.data),
        Err(e) if e.path.is_empty() && e.message.starts_with("not JSON") => match std::str::from_utf8(bytes) {
            Ok(text) => (Schema::new(Type::String), Data::String(text.to_string())),
            Err(_) => (Schema::new(Type::Bytes), Data::Bytes(bytes.to_vec())),
        },
        Err(e) => return Err(format!("the key cannot be read: {e}")),
    };
    Ok(match schema.ty {
        Type::Struct(_) => Key::Struct(struct_cells(schema, data)),
        _ => Key::Single(schema, data),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use spillway_sdk::{Config, TimestampType};

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let config = Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
        Settings::parse(&config).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn record(key: Option<&str>, value: Option<&str>) -> SinkRecord {
        SinkRecord {
            id: 1,
            topic: "orders".into(),
            partition: 3,
            offset: 42,
            timestamp: 0,
            timestamp_type: TimestampType::CreateTime,
            key: key.map(|k| k.as_bytes().to_vec()),
            value: value.map(|v| v.as_bytes().to_vec()),
            headers: vec![],
            delivery_count: 1,
            lock_deadline: None,
        }
    }

    /// [`super::build`], its row owning its names (the records and
    /// settings here are temporaries).
    fn build(settings: &Settings, record: &SinkRecord) -> Result<Row<'static>, String> {
        let owned = |cells: Vec<Cell>| -> Vec<Cell<'static>> {
            cells.into_iter().map(|c| Cell::new(c.name.into_owned(), c.schema, c.data)).collect()
        };
        let row = super::build(settings, record, settings.table_for(&record.topic).into())?;
        Ok(Row { table: row.table, op: row.op, key: owned(row.key), values: owned(row.values) })
    }

    fn names<'a>(cells: &'a [Cell]) -> Vec<&'a str> {
        cells.iter().map(|c| c.name.as_ref()).collect()
    }

    #[test]
    fn pk_none_writes_every_value_field() {
        let row = build(&settings(&[]), &record(Some("k"), Some(r#"{"id": 1, "name": "a", "gone": null}"#))).unwrap();
        assert_eq!((&*row.table, row.op), ("orders", Op::Insert));
        assert!(row.key.is_empty());
        assert_eq!(names(&row.values), ["gone", "id", "name"]);
        // Plain JSON: every field optional (later records may lack it).
        assert!(row.values.iter().all(|c| c.schema.optional));
        assert_eq!(row.values[1].data, Data::Int64(1));
        assert_eq!(row.values[0].schema.ty, Type::Null);
    }

    #[test]
    fn pk_kafka_uses_the_coordinates() {
        let row = build(&settings(&[("pk.mode", "kafka")]), &record(None, Some(r#"{"a": 1}"#))).unwrap();
        assert_eq!(names(&row.key), KAFKA_PK);
        assert_eq!(
            row.key.iter().map(|c| c.data.clone()).collect::<Vec<_>>(),
            [Data::String("orders".into()), Data::Int32(3), Data::Int64(42)]
        );
        let row = build(
            &settings(&[("pk.mode", "kafka"), ("pk.fields", "t,p,o"), ("insert.mode", "upsert")]),
            &record(None, Some(r#"{"a": 1, "p": 9}"#)),
        )
        .unwrap();
        assert_eq!((names(&row.key), row.op), (vec!["t", "p", "o"], Op::Upsert));
        // The key wins over a value field of the same name.
        assert_eq!(names(&row.values), ["a"]);
        assert_eq!(row.key[1].data, Data::Int32(3));
    }

    #[test]
    fn pk_record_key_takes_struct_fields_or_a_primitive() {
        let s = settings(&[("pk.mode", "record_key")]);
        let row = build(&s, &record(Some(r#"{"id": 7, "region": "eu"}"#), Some(r#"{"id": 7, "qty": 2}"#))).unwrap();
        assert_eq!((names(&row.key), names(&row.values)), (vec!["id", "region"], vec!["qty"]));
        assert!(row.key.iter().all(|c| !c.schema.optional));
        let s2 = settings(&[("pk.mode", "record_key"), ("pk.fields", "region")]);
        let row = build(&s2, &record(Some(r#"{"id": 7, "region": "eu"}"#), Some(r#"{"qty": 2}"#))).unwrap();
        assert_eq!(names(&row.key), ["region"]);
        let err = build(
            &settings(&[("pk.mode", "record_key"), ("pk.fields", "nope")]),
            &record(Some(r#"{"id": 7}"#), Some("{}")),
        );
        assert_eq!(err.unwrap_err(), "the key has no field 'nope' (pk.fields)");
        // A primitive key is one column; a key that is not JSON is its text.
        let row = build(&s, &record(Some("order-7"), Some(r#"{"qty": 2}"#))).unwrap();
        assert_eq!(row.key, [Cell::new(KEY_COLUMN, Schema::new(Type::String), Data::String("order-7".into()))]);
        let row = build(&settings(&[("pk.mode", "record_key"), ("pk.fields", "oid")]), &record(Some("7"), Some("{}")))
            .unwrap();
        assert_eq!(row.key, [Cell::new("oid", Schema::new(Type::Int64), Data::Int64(7))]);
        let err = build(&settings(&[("pk.mode", "record_key"), ("pk.fields", "a,b")]), &record(Some("7"), Some("{}")));
        assert_eq!(err.unwrap_err(), "the key is an int64, a single column, and pk.fields names 2");
        assert_eq!(build(&s, &record(None, Some("{}"))).unwrap_err(), "the record has no key, and pk.mode=record_key");
        assert_eq!(
            build(&s, &record(Some("null"), Some("{}"))).unwrap_err(),
            "the primary key's field '__connect_key' is null"
        );
        assert_eq!(
            build(&s, &record(Some(r#"{"id": null}"#), Some("{}"))).unwrap_err(),
            "the primary key's field 'id' is null"
        );
    }

    #[test]
    fn pk_record_value_takes_value_fields() {
        let s = settings(&[("pk.mode", "record_value"), ("pk.fields", "id"), ("insert.mode", "update")]);
        let row = build(&s, &record(None, Some(r#"{"id": 7, "qty": 2}"#))).unwrap();
        assert_eq!((names(&row.key), names(&row.values), row.op), (vec!["id"], vec!["qty"], Op::Update));
        assert_eq!(
            build(&s, &record(None, Some(r#"{"qty": 2}"#))).unwrap_err(),
            "the value has no field 'id' (pk.fields)"
        );
        assert_eq!(
            build(&s, &record(None, Some(r#"{"id": null, "qty": 2}"#))).unwrap_err(),
            "the primary key's field 'id' is null"
        );
        // Declared: a field the schema lacks is missing.
        let declared =
            json!({"schema": {"type": "struct", "fields": [{"field": "qty", "type": "int32"}]}, "payload": {"qty": 1}});
        assert_eq!(
            build(&s, &record(None, Some(&declared.to_string()))).unwrap_err(),
            "the value has no field 'id' (pk.fields)"
        );
        let all = build(&settings(&[("pk.mode", "record_value")]), &record(None, Some(r#"{"a": 1, "b": 2}"#))).unwrap();
        assert_eq!((names(&all.key), all.values.len()), (vec!["a", "b"], 0));
    }

    #[test]
    fn declared_schemas_keep_required_fields_required() {
        let value = json!({"schema": {"type": "struct", "fields": [
            {"field": "id", "type": "int32"},
            {"field": "note", "type": "string", "optional": true},
            {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date"}]},
            "payload": {"id": 1, "day": 19000}});
        let row = build(&settings(&[]), &record(None, Some(&value.to_string()))).unwrap();
        let optional: Vec<bool> = row.values.iter().map(|c| c.schema.optional).collect();
        assert_eq!(optional, [false, true, false]);
        assert_eq!(row.values[1].data, Data::Null);
        assert_eq!(row.values[2].data, Data::Date(19000));
    }

    #[test]
    fn whitelist_keeps_listed_value_fields_and_the_key() {
        let s = settings(&[("pk.mode", "record_value"), ("pk.fields", "id"), ("fields.whitelist", "name")]);
        let row = build(&s, &record(None, Some(r#"{"id": 1, "name": "a", "secret": "x"}"#))).unwrap();
        assert_eq!((names(&row.key), names(&row.values)), (vec!["id"], vec!["name"]));
        let err = build(&settings(&[("fields.whitelist", "other")]), &record(None, Some(r#"{"a": 1}"#)));
        assert_eq!(err.unwrap_err(), "the value has no fields to write");
    }

    #[test]
    fn tombstones_delete_or_are_rejected() {
        let err = build(&settings(&[]), &record(Some("k"), None)).unwrap_err();
        assert!(err.contains("delete.enabled=false"), "{err}");
        let s = settings(&[("pk.mode", "record_key"), ("delete.enabled", "true"), ("insert.mode", "upsert")]);
        let row = build(&s, &record(Some(r#"{"id": 5}"#), None)).unwrap();
        assert_eq!((row.op, names(&row.key), row.values.len()), (Op::Delete, vec!["id"], 0));
        assert_eq!(build(&s, &record(None, None)).unwrap_err(), "the record has no key, and pk.mode=record_key");
        // A null payload is a tombstone too.
        let null_payload = json!({"schema": {"type": "struct", "optional": true, "fields": []}, "payload": null});
        for value in ["null".to_string(), null_payload.to_string()] {
            let row = build(&s, &record(Some(r#"{"id": 5}"#), Some(&value))).unwrap();
            assert_eq!(row.op, Op::Delete, "{value}");
        }
    }

    #[test]
    fn values_that_are_not_rows_are_rejected_with_the_reason() {
        let s = settings(&[]);
        let err = build(&s, &record(None, Some("not json"))).unwrap_err();
        assert!(err.starts_with("the value cannot be read: not JSON"), "{err}");
        assert_eq!(
            build(&s, &record(None, Some("[1, 2]"))).unwrap_err(),
            "the value is an array, not a struct or JSON object"
        );
        assert_eq!(
            build(&s, &record(None, Some("\"x\""))).unwrap_err(),
            "the value is a string, not a struct or JSON object"
        );
        let bad =
            json!({"schema": {"type": "struct", "fields": [{"field": "id", "type": "int8"}]}, "payload": {"id": 300}});
        let err = build(&s, &record(None, Some(&bad.to_string()))).unwrap_err();
        assert_eq!(err, "the value cannot be read: payload.id: expected int8, found an integer");
        let never = settings(&[("quote.sql.identifiers", "never")]);
        let err = build(&never, &record(None, Some(r#"{"order id": 1}"#))).unwrap_err();
        assert!(err.starts_with("field 'order id' cannot be a column"), "{err}");
    }

    #[test]
    fn schema_table_formats() {
        let s = settings(&[("table.name.format", "kafka.${topic}_v1")]);
        assert_eq!(&*build(&s, &record(None, Some("{\"a\":1}"))).unwrap().table, "kafka.orders_v1");
    }
}
