//! Parquet with the `parquet` crate's low-level writer (no Arrow): the
//! Connect schema becomes the file schema, each batch of rows one row group,
//! its values shredded into columns with their definition and repetition
//! levels.
//!
//! Types: int8/int16 are INT32 with INTEGER(8|16) annotations, int32 INT32,
//! int64 INT64, float32 FLOAT, float64 DOUBLE, boolean BOOLEAN, string
//! BYTE_ARRAY (STRING), bytes BYTE_ARRAY; Date is INT32 (DATE), Time INT32
//! (TIME millis, UTC), Timestamp INT64 (TIMESTAMP millis, UTC), Decimal a
//! 16-byte FIXED_LEN_BYTE_ARRAY (DECIMAL, the schema's scale and its
//! `connect.decimal.precision` or 38); structs are groups, arrays 3-level
//! LISTs, maps MAPs (`key_value` with a required key). Optional Connect
//! schemas are OPTIONAL columns, the rest REQUIRED.
//!
//! The encoded file goes into an in-memory buffer (the writer's output),
//! from which parts are cut while later row groups are written; the footer
//! comes at the end.

use super::ParquetCodec;
use parquet::basic::{Compression, LogicalType, Repetition, TimeUnit, Type as Physical};
use parquet::data_type::{
    BoolType, ByteArray, ByteArrayType, DoubleType, FixedLenByteArray, FixedLenByteArrayType, FloatType, Int32Type,
    Int64Type,
};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{Type as ParquetType, TypePtr};
use spillway_sdk::data::{Data, Logical, Schema, Type};
use std::sync::Arc;

/// Why a schema cannot be written as Parquet, if it cannot.
pub fn check_schema(schema: &Schema) -> Result<(), String> {
    build_root(schema).map(drop)
}

/// Whether a value holds a map entry with a null key (Parquet keys are required).
pub fn has_null_map_key(data: &Data) -> bool {
    match data {
        Data::Map(entries) => entries.iter().any(|(k, v)| k.is_null() || has_null_map_key(k) || has_null_map_key(v)),
        Data::Array(items) => items.iter().any(has_null_map_key),
        Data::Struct(fields) => fields.iter().any(|(_, v)| has_null_map_key(v)),
        _ => false,
    }
}

#[derive(Clone, Copy, Debug)]
enum Leaf {
    Bool,
    Int32,
    Int64,
    Float,
    Double,
    Binary,
    Decimal,
}

/// The shape of the schema, for shredding values into columns.
enum Node {
    Leaf {
        column: usize,
        optional: bool,
    },
    Group {
        fields: Vec<Node>,
        optional: bool,
    },
    /// `rep`: the repetition level of the repeated group inside.
    List {
        element: Box<Node>,
        optional: bool,
        rep: i16,
    },
    Map {
        key: Box<Node>,
        value: Box<Node>,
        optional: bool,
        rep: i16,
    },
}

impl Node {
    fn optional(&self) -> bool {
        match self {
            Node::Leaf { optional, .. }
            | Node::Group { optional, .. }
            | Node::List { optional, .. }
            | Node::Map { optional, .. } => *optional,
        }
    }

    fn columns(&self, out: &mut Vec<usize>) {
        match self {
            Node::Leaf { column, .. } => out.push(*column),
            Node::Group { fields, .. } => fields.iter().for_each(|f| f.columns(out)),
            Node::List { element, .. } => element.columns(out),
            Node::Map { key, value, .. } => {
                key.columns(out);
                value.columns(out);
            }
        }
    }
}

struct LeafInfo {
    kind: Leaf,
    max_def: i16,
    max_rep: i16,
}

fn repetition(schema: &Schema) -> Repetition {
    if schema.optional || schema.ty == Type::Null { Repetition::OPTIONAL } else { Repetition::REQUIRED }
}

fn build_root(schema: &Schema) -> Result<(TypePtr, Vec<Node>, Vec<LeafInfo>), String> {
    let Type::Struct(fields) = &schema.ty else { return Err("parquet needs struct values".into()) };
    if fields.is_empty() {
        return Err("parquet cannot write a struct without fields".into());
    }
    let mut leaves = Vec::new();
    let mut types = Vec::with_capacity(fields.len());
    let mut nodes = Vec::with_capacity(fields.len());
    for field in fields {
        let (ty, node) = build(&field.name, &field.schema, repetition(&field.schema), 0, 0, &mut leaves)?;
        types.push(ty);
        nodes.push(node);
    }
    let root =
        ParquetType::group_type_builder("connect_record").with_fields(types).build().map_err(|e| e.to_string())?;
    Ok((Arc::new(root), nodes, leaves))
}

fn build(
    name: &str,
    schema: &Schema,
    rep_kind: Repetition,
    def: i16,
    rep: i16,
    leaves: &mut Vec<LeafInfo>,
) -> Result<(TypePtr, Node), String> {
    let optional = rep_kind == Repetition::OPTIONAL;
    let def = def + optional as i16;
    let err = |e: parquet::errors::ParquetError| format!("field '{name}': {e}");
    let mut leaf = |physical: Physical, kind: Leaf, logical: Option<LogicalType>| -> Result<(TypePtr, Node), String> {
        let mut builder = ParquetType::primitive_type_builder(name, physical)
            .with_repetition(rep_kind)
            .with_logical_type(logical.clone());
        if let Some(LogicalType::Decimal(d)) = &logical {
            builder = builder.with_length(16).with_precision(d.precision).with_scale(d.scale);
        }
        let ty = builder.build().map_err(err)?;
        leaves.push(LeafInfo { kind, max_def: def, max_rep: rep });
        Ok((Arc::new(ty), Node::Leaf { column: leaves.len() - 1, optional }))
    };
    if let Some(logical) = schema.logical() {
        return match logical {
            Logical::Date => leaf(Physical::INT32, Leaf::Int32, Some(LogicalType::Date)),
            Logical::Time => leaf(Physical::INT32, Leaf::Int32, Some(LogicalType::time(true, TimeUnit::MILLIS))),
            Logical::Timestamp => {
                leaf(Physical::INT64, Leaf::Int64, Some(LogicalType::timestamp(true, TimeUnit::MILLIS)))
            }
            Logical::Decimal { scale, precision } => {
                let precision = precision.unwrap_or(38) as i32;
                if !(0..=precision).contains(&scale) || precision > 38 {
                    return Err(format!(
                        "field '{name}': parquet cannot hold a decimal of scale {scale} and precision {precision}"
                    ));
                }
                leaf(Physical::FIXED_LEN_BYTE_ARRAY, Leaf::Decimal, Some(LogicalType::decimal(scale, precision)))
            }
        };
    }
    match &schema.ty {
        Type::Null | Type::String => leaf(Physical::BYTE_ARRAY, Leaf::Binary, Some(LogicalType::String)),
        Type::Bytes => leaf(Physical::BYTE_ARRAY, Leaf::Binary, None),
        Type::Int8 => leaf(Physical::INT32, Leaf::Int32, Some(LogicalType::integer(8, true))),
        Type::Int16 => leaf(Physical::INT32, Leaf::Int32, Some(LogicalType::integer(16, true))),
        Type::Int32 => leaf(Physical::INT32, Leaf::Int32, None),
        Type::Int64 => leaf(Physical::INT64, Leaf::Int64, None),
        Type::Float32 => leaf(Physical::FLOAT, Leaf::Float, None),
        Type::Float64 => leaf(Physical::DOUBLE, Leaf::Double, None),
        Type::Boolean => leaf(Physical::BOOLEAN, Leaf::Bool, None),
        Type::Struct(fields) => {
            if fields.is_empty() {
                return Err(format!("field '{name}': parquet cannot write a struct without fields"));
            }
            let mut types = Vec::with_capacity(fields.len());
            let mut nodes = Vec::with_capacity(fields.len());
            for field in fields {
                let (ty, node) = build(&field.name, &field.schema, repetition(&field.schema), def, rep, leaves)?;
                types.push(ty);
                nodes.push(node);
            }
            let ty = ParquetType::group_type_builder(name)
                .with_repetition(rep_kind)
                .with_fields(types)
                .build()
                .map_err(err)?;
            Ok((Arc::new(ty), Node::Group { fields: nodes, optional }))
        }
        Type::Array(items) => {
            let (element_ty, element) = build("element", items, repetition(items), def + 1, rep + 1, leaves)?;
            let list = ParquetType::group_type_builder("list")
                .with_repetition(Repetition::REPEATED)
                .with_fields(vec![element_ty])
                .build()
                .map_err(err)?;
            let ty = ParquetType::group_type_builder(name)
                .with_repetition(rep_kind)
                .with_logical_type(Some(LogicalType::List))
                .with_fields(vec![Arc::new(list)])
                .build()
                .map_err(err)?;
            Ok((Arc::new(ty), Node::List { element: Box::new(element), optional, rep: rep + 1 }))
        }
        Type::Map(keys, values) => {
            let (key_ty, key) = build("key", keys, Repetition::REQUIRED, def + 1, rep + 1, leaves)?;
            let (value_ty, value) = build("value", values, repetition(values), def + 1, rep + 1, leaves)?;
            let entries = ParquetType::group_type_builder("key_value")
                .with_repetition(Repetition::REPEATED)
                .with_fields(vec![key_ty, value_ty])
                .build()
                .map_err(err)?;
            let ty = ParquetType::group_type_builder(name)
                .with_repetition(rep_kind)
                .with_logical_type(Some(LogicalType::Map))
                .with_fields(vec![Arc::new(entries)])
                .build()
                .map_err(err)?;
            Ok((Arc::new(ty), Node::Map { key: Box::new(key), value: Box::new(value), optional, rep: rep + 1 }))
        }
    }
}

enum Values {
    Bool(Vec<bool>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Float(Vec<f32>),
    Double(Vec<f64>),
    Binary(Vec<ByteArray>),
    Decimal(Vec<FixedLenByteArray>),
}

struct Column {
    values: Values,
    def: Vec<i16>,
    rep: Vec<i16>,
}

impl Column {
    fn new(kind: Leaf) -> Column {
        let values = match kind {
            Leaf::Bool => Values::Bool(Vec::new()),
            Leaf::Int32 => Values::Int32(Vec::new()),
            Leaf::Int64 => Values::Int64(Vec::new()),
            Leaf::Float => Values::Float(Vec::new()),
            Leaf::Double => Values::Double(Vec::new()),
            Leaf::Binary => Values::Binary(Vec::new()),
            Leaf::Decimal => Values::Decimal(Vec::new()),
        };
        Column { values, def: Vec::new(), rep: Vec::new() }
    }

    fn push(&mut self, value: &Data, def: i16, rep: i16) -> Result<(), String> {
        match (&mut self.values, value) {
            (Values::Bool(v), Data::Boolean(b)) => v.push(*b),
            (Values::Int32(v), Data::Date(x) | Data::Time(x) | Data::Int32(x)) => v.push(*x),
            (Values::Int32(v), Data::Int8(x)) => v.push(*x as i32),
            (Values::Int32(v), Data::Int16(x)) => v.push(*x as i32),
            (Values::Int64(v), Data::Int64(x) | Data::Timestamp(x)) => v.push(*x),
            (Values::Float(v), Data::Float32(x)) => v.push(*x),
            (Values::Double(v), Data::Float64(x)) => v.push(*x),
            (Values::Binary(v), Data::String(s)) => v.push(ByteArray::from(s.as_bytes().to_vec())),
            (Values::Binary(v), Data::Bytes(b)) => v.push(ByteArray::from(b.clone())),
            (Values::Decimal(v), Data::Decimal(d)) => v.push(FixedLenByteArray::from(d.to_be_bytes(16))),
            (_, other) => return Err(format!("a {} value in a column of another type", other.kind())),
        }
        self.def.push(def);
        self.rep.push(rep);
        Ok(())
    }

    fn null(&mut self, def: i16, rep: i16) {
        self.def.push(def);
        self.rep.push(rep);
    }
}

/// Appends `value` under `node` to the columns. `def` and `rep`: the levels
/// reached above it.
fn shred(node: &Node, value: &Data, def: i16, rep: i16, columns: &mut [Column]) -> Result<(), String> {
    if value.is_null() {
        if !node.optional() {
            return Err("null in a required column".into());
        }
        let mut under = Vec::new();
        node.columns(&mut under);
        under.into_iter().for_each(|c| columns[c].null(def, rep));
        return Ok(());
    }
    let def = def + node.optional() as i16;
    match (node, value) {
        (Node::Leaf { column, .. }, value) => columns[*column].push(value, def, rep)?,
        (Node::Group { fields, .. }, Data::Struct(values)) => {
            if fields.len() != values.len() {
                return Err("a struct value that does not match its schema".into());
            }
            for (field, (_, value)) in fields.iter().zip(values) {
                shred(field, value, def, rep, columns)?;
            }
        }
        (Node::List { element, rep: list_rep, .. }, Data::Array(items)) => {
            if items.is_empty() {
                let mut under = Vec::new();
                element.columns(&mut under);
                under.into_iter().for_each(|c| columns[c].null(def, rep));
            }
            for (i, item) in items.iter().enumerate() {
                shred(element, item, def + 1, if i == 0 { rep } else { *list_rep }, columns)?;
            }
        }
        (Node::Map { key, value: value_node, rep: map_rep, .. }, Data::Map(entries)) => {
            if entries.is_empty() {
                let mut under = Vec::new();
                node.columns(&mut under);
                under.into_iter().for_each(|c| columns[c].null(def, rep));
            }
            for (i, (k, v)) in entries.iter().enumerate() {
                let r = if i == 0 { rep } else { *map_rep };
                shred(key, k, def + 1, r, columns)?;
                shred(value_node, v, def + 1, r, columns)?;
            }
        }
        (_, other) => return Err(format!("a {} value where the schema has another shape", other.kind())),
    }
    Ok(())
}

pub struct ParquetWriter {
    writer: SerializedFileWriter<Vec<u8>>,
    nodes: Vec<Node>,
    leaves: Vec<LeafInfo>,
}

impl ParquetWriter {
    pub fn new(schema: &Schema, codec: ParquetCodec) -> Result<ParquetWriter, String> {
        let (root, nodes, leaves) = build_root(schema)?;
        let compression = match codec {
            ParquetCodec::None => Compression::UNCOMPRESSED,
            ParquetCodec::Snappy => Compression::SNAPPY,
            ParquetCodec::Gzip => Compression::GZIP(Default::default()),
        };
        let properties = WriterProperties::builder()
            .set_compression(compression)
            .set_created_by(format!("spillway s3-sink {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = SerializedFileWriter::new(Vec::new(), root, Arc::new(properties)).map_err(|e| e.to_string())?;
        Ok(ParquetWriter { writer, nodes, leaves })
    }

    /// Writes rows (conformed to the schema) as one row group.
    pub fn write_rows(&mut self, rows: &[Data]) -> Result<(), String> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut columns: Vec<Column> = self.leaves.iter().map(|l| Column::new(l.kind)).collect();
        for row in rows {
            let Data::Struct(values) = row else { return Err("a row that is not a struct".into()) };
            if values.len() != self.nodes.len() {
                return Err("a row that does not match the schema".into());
            }
            for (node, (name, value)) in self.nodes.iter().zip(values) {
                shred(node, value, 0, 0, &mut columns).map_err(|e| format!("field '{name}': {e}"))?;
            }
        }
        let err = |e: parquet::errors::ParquetError| e.to_string();
        let mut group = self.writer.next_row_group().map_err(err)?;
        for (column, info) in columns.iter().zip(&self.leaves) {
            let mut writer = group.next_column().map_err(err)?.ok_or("fewer columns than the schema has")?;
            let def = (info.max_def > 0).then_some(column.def.as_slice());
            let rep = (info.max_rep > 0).then_some(column.rep.as_slice());
            match &column.values {
                Values::Bool(v) => writer.typed::<BoolType>().write_batch(v, def, rep),
                Values::Int32(v) => writer.typed::<Int32Type>().write_batch(v, def, rep),
                Values::Int64(v) => writer.typed::<Int64Type>().write_batch(v, def, rep),
                Values::Float(v) => writer.typed::<FloatType>().write_batch(v, def, rep),
                Values::Double(v) => writer.typed::<DoubleType>().write_batch(v, def, rep),
                Values::Binary(v) => writer.typed::<ByteArrayType>().write_batch(v, def, rep),
                Values::Decimal(v) => writer.typed::<FixedLenByteArrayType>().write_batch(v, def, rep),
            }
            .map_err(err)?;
            writer.close().map_err(err)?;
        }
        group.close().map_err(err)?;
        // Past the writer's own buffer, into ours, where parts are cut.
        self.writer.flush().map_err(|e| e.to_string())
    }

    pub fn ready(&self) -> usize {
        self.writer.inner().len()
    }

    pub fn take(&mut self) -> Vec<u8> {
        std::mem::take(self.writer.inner_mut())
    }

    /// Writes the footer; the rest of the file.
    pub fn finish(self) -> Result<Vec<u8>, String> {
        self.writer.into_inner().map_err(|e| e.to_string())
    }
}
