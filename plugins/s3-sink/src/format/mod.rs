//! Object formats. An object is one or more streams (its values, and the
//! keys and headers companions), each a [`Body`] that takes one [`Item`]
//! per record and gives encoded bytes as they are ready, so that a large
//! object goes up in parts while it is written.
//!
//! json and bytes encode each record as it comes (a line). csv and parquet
//! need a schema for the whole object: their rows wait as values until a
//! part's worth has gathered (or the object closes), and the object's schema
//! may widen until then (plain JSON records inferring it); once rows are
//! encoded it is fixed, and a record that would change it starts a new
//! object instead.

pub mod csv;
pub mod lines;
pub mod parquet;

use crate::compress::{Compression, Encoder};
use spillway_sdk::TaskError;
use spillway_sdk::data::{Data, Field, Schema, Type};

/// `format.class`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormatKind {
    Json,
    Bytes,
    Csv,
    Parquet,
}

impl FormatKind {
    pub fn extension(self) -> &'static str {
        match self {
            FormatKind::Json => "json",
            FormatKind::Bytes => "bin",
            FormatKind::Csv => "csv",
            FormatKind::Parquet => "parquet",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FormatKind::Json => "json",
            FormatKind::Bytes => "bytes",
            FormatKind::Csv => "csv",
            FormatKind::Parquet => "parquet",
        }
    }
}

/// `parquet.codec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParquetCodec {
    None,
    Snappy,
    Gzip,
}

impl ParquetCodec {
    /// Confluent's names: `snappy.parquet`, `gz.parquet`, `parquet`.
    pub fn extension(self) -> &'static str {
        match self {
            ParquetCodec::None => "parquet",
            ParquetCodec::Snappy => "snappy.parquet",
            ParquetCodec::Gzip => "gz.parquet",
        }
    }
}

/// What one record adds to one stream.
#[derive(Debug)]
pub enum Item {
    /// Encoded bytes, terminator included (json, bytes).
    Line(Vec<u8>),
    /// A row (csv, parquet): a struct value and its schema. `size` is what
    /// the row is reckoned to hold in memory until it is encoded.
    Row { schema: Schema, declared: bool, data: Data, size: usize },
    /// A null value written as a row: nulls but for the inserted fields.
    NullRow { inserts: Vec<(String, Data)>, size: usize },
}

/// Whether an item can join an open object.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    Fits,
    /// It needs a schema the object cannot take any more: close the object
    /// and start another with this record.
    Rotate,
    /// It can never be written (the reason goes to the dead-letter queue).
    Reject(String),
}

/// One stream of an object being written.
pub enum Body {
    Lines(Encoder),
    Rows(Box<Rows>),
}

impl Body {
    /// `inserts`: the fields the sink adds to each value (for a null row's schema).
    pub fn new(format: FormatKind, compression: Compression, codec: ParquetCodec, inserts: Vec<Field>) -> Body {
        match format {
            FormatKind::Json | FormatKind::Bytes => Body::Lines(compression.encoder()),
            FormatKind::Csv => Body::Rows(Box::new(Rows::new(RowFormat::Csv(compression), inserts))),
            FormatKind::Parquet => Body::Rows(Box::new(Rows::new(RowFormat::Parquet(codec), inserts))),
        }
    }

    pub fn admit(&self, item: &Item) -> Admit {
        match (self, item) {
            (Body::Lines(_), Item::Line(_)) => Admit::Fits,
            (Body::Rows(rows), Item::Row { .. } | Item::NullRow { .. }) => rows.admit(item),
            _ => Admit::Reject("internal: an item of another format".into()),
        }
    }

    /// Adds an admitted item. Rows are encoded once `part_size` bytes of
    /// them wait.
    pub fn push(&mut self, item: Item, part_size: usize) -> Result<(), TaskError> {
        match (self, item) {
            (Body::Lines(encoder), Item::Line(bytes)) => {
                encoder.write(&bytes);
                Ok(())
            }
            (Body::Rows(rows), item) => rows.push(item, part_size),
            _ => Err(TaskError::Fatal("internal: an item of another format".into())),
        }
    }

    /// Bytes this stream holds in memory.
    pub fn buffered(&self) -> usize {
        match self {
            Body::Lines(encoder) => encoder.buffered(),
            Body::Rows(rows) => rows.buffered(),
        }
    }

    /// Encoded bytes ready to go out.
    pub fn ready(&self) -> usize {
        match self {
            Body::Lines(encoder) => encoder.ready(),
            Body::Rows(rows) => rows.writer.as_ref().map_or(0, RowWriter::ready),
        }
    }

    /// Takes the encoded bytes ready so far.
    pub fn take(&mut self) -> Vec<u8> {
        match self {
            Body::Lines(encoder) => encoder.take(),
            Body::Rows(rows) => rows.writer.as_mut().map_or_else(Vec::new, RowWriter::take),
        }
    }

    /// Ends the stream: the rest of its bytes.
    pub fn finish(self) -> Result<Vec<u8>, TaskError> {
        match self {
            Body::Lines(encoder) => Ok(encoder.finish()),
            Body::Rows(rows) => rows.finish(),
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum RowFormat {
    Csv(Compression),
    Parquet(ParquetCodec),
}

/// A csv or parquet stream: rows waiting as values, then the writer.
pub struct Rows {
    format: RowFormat,
    inserts: Vec<Field>,
    schema: Option<Schema>,
    declared: bool,
    has_null_rows: bool,
    pending: Vec<Data>,
    pending_bytes: usize,
    /// Exists once rows were encoded; the schema is fixed from then on.
    writer: Option<RowWriter>,
}

pub enum RowWriter {
    Csv(csv::CsvWriter),
    Parquet(Box<parquet::ParquetWriter>),
}

impl RowWriter {
    fn ready(&self) -> usize {
        match self {
            RowWriter::Csv(w) => w.ready(),
            RowWriter::Parquet(w) => w.ready(),
        }
    }
    fn take(&mut self) -> Vec<u8> {
        match self {
            RowWriter::Csv(w) => w.take(),
            RowWriter::Parquet(w) => w.take(),
        }
    }
    fn buffered(&self) -> usize {
        match self {
            RowWriter::Csv(w) => w.buffered(),
            RowWriter::Parquet(w) => w.ready(),
        }
    }
}

impl Rows {
    fn new(format: RowFormat, inserts: Vec<Field>) -> Rows {
        Rows {
            format,
            inserts,
            schema: None,
            declared: false,
            has_null_rows: false,
            pending: Vec::new(),
            pending_bytes: 0,
            writer: None,
        }
    }

    fn format_name(&self) -> &'static str {
        match self.format {
            RowFormat::Csv(_) => "csv",
            RowFormat::Parquet(_) => "parquet",
        }
    }

    /// A required field of `schema` that a null row could not fill.
    fn required_field<'a>(&self, schema: &'a Schema) -> Option<&'a Field> {
        schema.fields().iter().find(|f| !f.schema.optional && !self.inserts.iter().any(|i| i.name == f.name))
    }

    fn admit(&self, item: &Item) -> Admit {
        let (schema, declared) = match item {
            Item::Row { schema, declared, .. } => (schema, *declared),
            Item::NullRow { .. } => {
                return match self.schema.as_ref().and_then(|s| self.required_field(s)) {
                    Some(field) => Admit::Reject(format!(
                        "a null value cannot be a {} row here: field '{}' is required",
                        self.format_name(),
                        field.name
                    )),
                    None => Admit::Fits,
                };
            }
            Item::Line(_) => return Admit::Reject("internal: a line in a row format".into()),
        };
        if !matches!(schema.ty, Type::Struct(_)) {
            return Admit::Reject(format!(
                "{} needs object or struct values, not {}",
                self.format_name(),
                schema.ty.name()
            ));
        }
        if let (RowFormat::Parquet(_), Item::Row { data, .. }) = (self.format, item) {
            if self.schema.as_ref() != Some(schema)
                && let Err(problem) = parquet::check_schema(schema)
            {
                return Admit::Reject(problem);
            }
            if parquet::has_null_map_key(data) {
                return Admit::Reject("parquet cannot hold a map entry whose key is null".into());
            }
        }
        let Some(current) = &self.schema else {
            // Null rows came first: a schema with required fields cannot hold them.
            return if self.has_null_rows && self.required_field(schema).is_some() {
                Admit::Rotate
            } else {
                Admit::Fits
            };
        };
        if declared || self.declared {
            // A declared schema that changes starts a new object, as Confluent's sink does.
            return if declared == self.declared && schema == current { Admit::Fits } else { Admit::Rotate };
        }
        match current.merge(schema) {
            Err(e) => Admit::Reject(format!("the value does not fit the object's inferred schema: {e}")),
            Ok(merged) if &merged == current => Admit::Fits,
            Ok(_) if self.writer.is_none() => Admit::Fits,
            Ok(_) => Admit::Rotate,
        }
    }

    fn push(&mut self, item: Item, part_size: usize) -> Result<(), TaskError> {
        match item {
            Item::Row { schema, declared, data, size } => {
                self.schema = Some(match self.schema.take() {
                    None => schema,
                    Some(current) if declared => {
                        debug_assert_eq!(current, schema);
                        current
                    }
                    Some(current) => current.merge(&schema).map_err(|e| TaskError::Fatal(format!("internal: {e}")))?,
                });
                self.declared = declared;
                self.pending.push(data);
                self.pending_bytes += size;
            }
            Item::NullRow { inserts, size } => {
                self.has_null_rows = true;
                self.pending.push(Data::Struct(inserts));
                self.pending_bytes += size;
            }
            Item::Line(_) => return Err(TaskError::Fatal("internal: a line in a row format".into())),
        }
        if self.pending_bytes >= part_size {
            self.write_pending()?;
        }
        Ok(())
    }

    /// The schema of an object that only null rows reached: the inserted
    /// fields, or one optional string column `value`.
    fn schema_or_nulls(&self) -> Schema {
        match &self.schema {
            Some(schema) => schema.clone(),
            None if !self.inserts.is_empty() => Schema::structure(self.inserts.clone()),
            None => Schema::structure(vec![Field::new("value", Schema::new(Type::String).into_optional())]),
        }
    }

    /// Encodes the waiting rows (creating the writer, which fixes the schema).
    fn write_pending(&mut self) -> Result<(), TaskError> {
        let schema = self.schema_or_nulls();
        let name = self.format_name();
        let internal = |e: String| TaskError::Fatal(format!("internal: encoding {name} rows: {e}"));
        let rows: Vec<Data> = std::mem::take(&mut self.pending)
            .into_iter()
            .map(|row| row.conform(&schema).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()
            .map_err(internal)?;
        self.pending_bytes = 0;
        if self.writer.is_none() {
            self.writer = Some(match self.format {
                RowFormat::Csv(compression) => RowWriter::Csv(csv::CsvWriter::new(&schema, compression)),
                RowFormat::Parquet(codec) => {
                    RowWriter::Parquet(Box::new(parquet::ParquetWriter::new(&schema, codec).map_err(internal)?))
                }
            });
        }
        match self.writer.as_mut().expect("created above") {
            RowWriter::Csv(w) => w.write_rows(&rows),
            RowWriter::Parquet(w) => w.write_rows(&rows).map_err(internal)?,
        }
        Ok(())
    }

    fn buffered(&self) -> usize {
        self.pending_bytes + self.writer.as_ref().map_or(0, RowWriter::buffered)
    }

    fn finish(mut self) -> Result<Vec<u8>, TaskError> {
        if !self.pending.is_empty() || self.writer.is_none() {
            self.write_pending()?;
        }
        match self.writer.take().expect("written above") {
            RowWriter::Csv(w) => Ok(w.finish()),
            RowWriter::Parquet(w) => {
                w.finish().map_err(|e| TaskError::Fatal(format!("internal: closing parquet: {e}")))
            }
        }
    }
}
