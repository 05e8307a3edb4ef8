//! Values crossing between the plugin and a database: bound as the type the
//! database expects, read back as the plugin's `value`.
//!
//! PostgreSQL is strict: a text parameter cannot go into a `uuid`, `jsonb`,
//! `numeric` or `smallint` column, and a NULL typed as text cannot go into an
//! integer one. So the host asks PostgreSQL what each parameter is (the
//! prepared statement's inferred types) and encodes every value as that
//! type: a UUID's text into `uuid`, a JSON document into `json` or `jsonb`,
//! a decimal's text into `numeric`. MySQL and SQLite convert what they are
//! given, so there values go as their closest plain type.

use super::bindings::spillway::sql::databases::Value;
use bigdecimal::BigDecimal;
use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, TimeDelta, Utc};
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgArguments, PgTypeInfo, Postgres};
use sqlx::{Arguments, Column, Row, TypeInfo, ValueRef};
use std::str::FromStr;

// PostgreSQL type ids (pg_type.oid) of the types bound natively.
const BOOL: u32 = 16;
const BYTEA: u32 = 17;
const NAME: u32 = 19;
const INT8: u32 = 20;
const INT2: u32 = 21;
const INT4: u32 = 23;
const TEXT: u32 = 25;
const JSON: u32 = 114;
const FLOAT4: u32 = 700;
const FLOAT8: u32 = 701;
const UNKNOWN: u32 = 705;
const BPCHAR: u32 = 1042;
const VARCHAR: u32 = 1043;
const DATE: u32 = 1082;
const TIME: u32 = 1083;
const TIMESTAMP: u32 = 1114;
const TIMESTAMPTZ: u32 = 1184;
const NUMERIC: u32 = 1700;
const UUID: u32 = 2950;
const JSONB: u32 = 3802;

/// A parameter as raw bytes of a given type (NULL when none).
struct Raw {
    oid: u32,
    bytes: Option<Vec<u8>>,
}

impl sqlx::Type<Postgres> for Raw {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(Oid(0))
    }
}

impl sqlx::Encode<'_, Postgres> for Raw {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        match &self.bytes {
            None => Ok(IsNull::Yes),
            Some(bytes) => {
                buf.extend_from_slice(bytes);
                Ok(IsNull::No)
            }
        }
    }

    fn produces(&self) -> Option<PgTypeInfo> {
        Some(PgTypeInfo::with_oid(Oid(self.oid)))
    }
}

/// Whether the host can encode values for a PostgreSQL parameter of type
/// `oid`. Others (enums, arrays, network types) are a fatal error of the
/// statement: no record would fit them.
pub fn binds_postgres(oid: u32) -> bool {
    matches!(
        oid,
        BOOL | BYTEA
            | NAME
            | INT8
            | INT2
            | INT4
            | TEXT
            | JSON
            | FLOAT4
            | FLOAT8
            | UNKNOWN
            | BPCHAR
            | VARCHAR
            | DATE
            | TIME
            | TIMESTAMP
            | TIMESTAMPTZ
            | NUMERIC
            | UUID
            | JSONB
    )
}

/// Adds `value` to `args` encoded as PostgreSQL type `oid` (one that
/// [`binds_postgres`]); the error says why the value does not fit.
pub fn bind_postgres(args: &mut PgArguments, oid: u32, value: &Value) -> Result<(), String> {
    let added = match (oid, value) {
        (_, Value::Null) => args.add(Raw { oid, bytes: None }),
        (BOOL, v) => args.add(boolean(v)?),
        (INT2, v) => args.add(i16::try_from(integer(v)?).map_err(|_| out_of_range(v, "smallint"))?),
        (INT4, v) => args.add(i32::try_from(integer(v)?).map_err(|_| out_of_range(v, "integer"))?),
        (INT8, v) => args.add(integer(v)?),
        (FLOAT4, v) => args.add(double(v)? as f32),
        (FLOAT8, v) => args.add(double(v)?),
        (NUMERIC, v) => args.add(decimal(v)?),
        // Borrowed, not copied: this runs for every value of every row.
        (
            TEXT | VARCHAR | BPCHAR | NAME | UNKNOWN,
            Value::Text(s) | Value::Json(s) | Value::Uuid(s) | Value::Decimal(s),
        ) => args.add(s.as_str()),
        (TEXT | VARCHAR | BPCHAR | NAME | UNKNOWN, v) => args.add(text(v)?),
        (BYTEA, Value::Bytes(b)) => args.add(b.as_slice()),
        (BYTEA, Value::Text(s)) => args.add(s.as_bytes()),
        (JSON, v) => args.add(Raw { oid, bytes: Some(json(v)?.into_bytes()) }),
        // jsonb's binary form: a version byte, then the text.
        (JSONB, v) => args.add(Raw { oid, bytes: Some([&[1u8][..], json(v)?.as_bytes()].concat()) }),
        (UUID, Value::Uuid(s) | Value::Text(s)) => {
            args.add(uuid::Uuid::parse_str(s).map_err(|e| format!("'{s}' is not a UUID: {e}"))?)
        }
        (UUID, Value::Bytes(b)) => args.add(uuid::Uuid::from_slice(b).map_err(|e| format!("not a UUID: {e}"))?),
        (DATE, v) => args.add(date(v)?),
        (TIME, v) => args.add(time(v)?),
        (TIMESTAMP, v) => args.add(timestamp(v)?),
        (TIMESTAMPTZ, v) => args.add(timestamp(v)?.and_utc()),
        (oid, v) => return Err(format!("{} does not fit a {} column", kind(v), name(oid))),
    };
    added.map_err(|e| e.to_string())
}

/// Adds `value` to MySQL arguments: MySQL converts text into its decimal,
/// date, time and JSON columns.
pub fn bind_mysql(args: &mut sqlx::mysql::MySqlArguments, value: &Value) -> Result<(), String> {
    let added = match value {
        Value::Null => args.add(Option::<String>::None),
        Value::Boolean(b) => args.add(*b),
        Value::Int(i) => args.add(*i),
        Value::Double(d) => args.add(*d),
        Value::Bytes(b) => args.add(b.clone()),
        v => args.add(text(v)?),
    };
    added.map_err(|e| e.to_string())
}

/// Adds `value` to SQLite arguments: dates and times as ISO-8601 text
/// (SQLite's date functions read it), decimals and JSON as text.
pub fn bind_sqlite(args: &mut sqlx::sqlite::SqliteArguments<'_>, value: &Value) -> Result<(), String> {
    let added = match value {
        Value::Null => args.add(Option::<i64>::None),
        Value::Boolean(b) => args.add(*b),
        Value::Int(i) => args.add(*i),
        Value::Double(d) => args.add(*d),
        Value::Bytes(b) => args.add(b.clone()),
        v => args.add(text(v)?),
    };
    added.map_err(|e| e.to_string())
}

/// Appends a value as PostgreSQL's COPY text format reads it into a column
/// of any type: `\N` for NULL, text escaped so that a row stays one line.
/// Written straight into `out`: this runs for every value of every row.
pub fn push_copy_text(out: &mut String, value: &Value) -> Result<(), String> {
    use std::fmt::Write;
    match value {
        Value::Null => out.push_str("\\N"),
        Value::Boolean(b) => out.push(if *b { 't' } else { 'f' }),
        Value::Int(i) => write!(out, "{i}").expect("writing to a String"),
        Value::Double(d) if d.is_nan() => out.push_str("NaN"),
        Value::Double(d) if d.is_infinite() => out.push_str(if *d > 0.0 { "Infinity" } else { "-Infinity" }),
        Value::Double(d) => write!(out, "{d}").expect("writing to a String"),
        // bytea's hex form, its backslash escaped for the text format.
        Value::Bytes(b) => {
            out.push_str("\\\\x");
            out.push_str(&hex::encode(b));
        }
        Value::Text(s) | Value::Json(s) | Value::Uuid(s) | Value::Decimal(s) => push_escaped(out, s),
        Value::Timestamp(_) => {
            push_escaped(out, &text(value)?);
            out.push_str("+00");
        }
        Value::Date(_) | Value::Time(_) => push_escaped(out, &text(value)?),
    }
    Ok(())
}

/// COPY's text format: backslash, tab and line ends escaped.
fn push_escaped(out: &mut String, value: &str) {
    if !value.bytes().any(|b| matches!(b, b'\\' | b'\t' | b'\n' | b'\r')) {
        out.push_str(value);
        return;
    }
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            ch => out.push(ch),
        }
    }
}

/// The text form of any value but bytes.
fn text(value: &Value) -> Result<String, String> {
    Ok(match value {
        Value::Null => return Err("NULL has no text".to_string()),
        Value::Boolean(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Text(s) | Value::Json(s) | Value::Uuid(s) | Value::Decimal(s) => s.clone(),
        Value::Bytes(_) => return Err("bytes do not fit a text column".to_string()),
        Value::Date(_) => date(value)?.format("%Y-%m-%d").to_string(),
        Value::Time(_) => time(value)?.format("%H:%M:%S%.6f").to_string(),
        Value::Timestamp(_) => timestamp(value)?.format("%Y-%m-%d %H:%M:%S%.6f").to_string(),
    })
}

fn boolean(value: &Value) -> Result<bool, String> {
    match value {
        Value::Boolean(b) => Ok(*b),
        Value::Int(0) => Ok(false),
        Value::Int(1) => Ok(true),
        Value::Text(s) => match s.to_ascii_lowercase().as_str() {
            "true" | "t" => Ok(true),
            "false" | "f" => Ok(false),
            _ => Err(format!("'{s}' is not a boolean")),
        },
        v => Err(format!("{} does not fit a boolean column", kind(v))),
    }
}

fn integer(value: &Value) -> Result<i64, String> {
    match value {
        Value::Int(i) => Ok(*i),
        Value::Boolean(b) => Ok(i64::from(*b)),
        Value::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Ok(*d as i64),
        Value::Text(s) | Value::Decimal(s) => s.trim().parse().map_err(|_| format!("'{s}' is not an integer")),
        v => Err(format!("{} does not fit an integer column", kind(v))),
    }
}

fn double(value: &Value) -> Result<f64, String> {
    match value {
        Value::Double(d) => Ok(*d),
        Value::Int(i) => Ok(*i as f64),
        Value::Text(s) | Value::Decimal(s) => s.trim().parse().map_err(|_| format!("'{s}' is not a number")),
        v => Err(format!("{} does not fit a floating-point column", kind(v))),
    }
}

fn decimal(value: &Value) -> Result<BigDecimal, String> {
    match value {
        Value::Int(i) => Ok(BigDecimal::from(*i)),
        Value::Double(d) => BigDecimal::try_from(*d).map_err(|e| format!("{d} is not a decimal: {e}")),
        Value::Decimal(s) | Value::Text(s) => {
            BigDecimal::from_str(s.trim()).map_err(|e| format!("'{s}' is not a decimal number: {e}"))
        }
        v => Err(format!("{} does not fit a numeric column", kind(v))),
    }
}

fn json(value: &Value) -> Result<String, String> {
    match value {
        Value::Json(s) | Value::Text(s) => Ok(s.clone()),
        Value::Boolean(_) | Value::Int(_) | Value::Double(_) => text(value),
        Value::Uuid(s) | Value::Decimal(s) => Ok(serde_json::Value::String(s.clone()).to_string()),
        v => Err(format!("{} does not fit a JSON column", kind(v))),
    }
}

const EPOCH: NaiveDate = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();

fn date(value: &Value) -> Result<NaiveDate, String> {
    match value {
        Value::Date(days) => EPOCH
            .checked_add_signed(TimeDelta::days(i64::from(*days)))
            .ok_or_else(|| format!("{days} days from 1970-01-01 is not a date")),
        Value::Timestamp(_) => Ok(timestamp(value)?.date()),
        Value::Text(s) => NaiveDate::from_str(s.trim()).map_err(|e| format!("'{s}' is not a date: {e}")),
        v => Err(format!("{} does not fit a date column", kind(v))),
    }
}

fn time(value: &Value) -> Result<NaiveTime, String> {
    match value {
        Value::Time(micros) if (0..86_400_000_000).contains(micros) => {
            Ok(NaiveTime::MIN + TimeDelta::microseconds(*micros))
        }
        Value::Time(micros) => Err(format!("{micros} µs is not a time of day")),
        Value::Text(s) => NaiveTime::from_str(s.trim()).map_err(|e| format!("'{s}' is not a time: {e}")),
        v => Err(format!("{} does not fit a time column", kind(v))),
    }
}

fn timestamp(value: &Value) -> Result<NaiveDateTime, String> {
    match value {
        Value::Timestamp(micros) => DateTime::<Utc>::from_timestamp_micros(*micros)
            .map(|t| t.naive_utc())
            .ok_or_else(|| format!("{micros} µs from the epoch is not a timestamp")),
        Value::Date(_) => Ok(date(value)?.and_time(NaiveTime::MIN)),
        Value::Text(s) => {
            let s = s.trim();
            DateTime::parse_from_rfc3339(s)
                .map(|t| t.naive_utc())
                .or_else(|_| NaiveDateTime::from_str(s))
                .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f"))
                .map_err(|e| format!("'{s}' is not a timestamp: {e}"))
        }
        v => Err(format!("{} does not fit a timestamp column", kind(v))),
    }
}

fn out_of_range(value: &Value, column: &str) -> String {
    format!("{} is out of range for a {column} column", text(value).unwrap_or_default())
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Boolean(_) => "a boolean",
        Value::Int(_) => "an integer",
        Value::Double(_) => "a floating-point number",
        Value::Text(_) => "text",
        Value::Bytes(_) => "bytes",
        Value::Json(_) => "JSON",
        Value::Uuid(_) => "a UUID",
        Value::Decimal(_) => "a decimal",
        Value::Date(_) => "a date",
        Value::Time(_) => "a time",
        Value::Timestamp(_) => "a timestamp",
    }
}

fn name(oid: u32) -> &'static str {
    match oid {
        BYTEA => "bytea",
        UUID => "uuid",
        _ => "such",
    }
}

/// Reads column `i` of a PostgreSQL row, by the column's type.
pub fn read_postgres(row: &sqlx::postgres::PgRow, i: usize) -> Result<Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let type_name = raw.type_info().name().to_string();
    let failed = |e: sqlx::Error| format!("column '{}' ({type_name}): {e}", row.columns()[i].name());
    Ok(match type_name.as_str() {
        "BOOL" => Value::Boolean(row.try_get(i).map_err(failed)?),
        "INT2" => Value::Int(row.try_get::<i16, _>(i).map_err(failed)?.into()),
        "INT4" => Value::Int(row.try_get::<i32, _>(i).map_err(failed)?.into()),
        "INT8" => Value::Int(row.try_get(i).map_err(failed)?),
        "FLOAT4" => Value::Double(row.try_get::<f32, _>(i).map_err(failed)?.into()),
        "FLOAT8" => Value::Double(row.try_get(i).map_err(failed)?),
        "NUMERIC" => Value::Decimal(row.try_get::<BigDecimal, _>(i).map_err(failed)?.to_string()),
        "BYTEA" => Value::Bytes(row.try_get(i).map_err(failed)?),
        "UUID" => Value::Uuid(row.try_get::<uuid::Uuid, _>(i).map_err(failed)?.to_string()),
        "JSON" | "JSONB" => {
            let bytes = raw.as_bytes().map_err(|e| e.to_string())?;
            // Binary jsonb starts with its version byte.
            let text = if type_name == "JSONB" && bytes.first() == Some(&1) { &bytes[1..] } else { bytes };
            Value::Json(String::from_utf8_lossy(text).into_owned())
        }
        "DATE" => Value::Date(days(row.try_get(i).map_err(failed)?)),
        "TIME" => Value::Time(micros(row.try_get(i).map_err(failed)?)),
        "TIMESTAMP" => {
            Value::Timestamp(row.try_get::<NaiveDateTime, _>(i).map_err(failed)?.and_utc().timestamp_micros())
        }
        "TIMESTAMPTZ" => Value::Timestamp(row.try_get::<DateTime<Utc>, _>(i).map_err(failed)?.timestamp_micros()),
        _ => Value::Text(row.try_get(i).map_err(failed)?),
    })
}

/// Reads column `i` of a MySQL or MariaDB row, by the column's type.
pub fn read_mysql(row: &sqlx::mysql::MySqlRow, i: usize) -> Result<Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let type_name = raw.type_info().name().to_string();
    let failed = |e: sqlx::Error| format!("column '{}' ({type_name}): {e}", row.columns()[i].name());
    Ok(match type_name.as_str() {
        "BOOLEAN" => Value::Boolean(row.try_get(i).map_err(failed)?),
        "TINYINT" | "SMALLINT" | "MEDIUMINT" | "INT" | "BIGINT" => Value::Int(row.try_get(i).map_err(failed)?),
        t if t.ends_with("UNSIGNED") => {
            let n: u64 = row.try_get(i).map_err(failed)?;
            Value::Int(i64::try_from(n).map_err(|_| format!("{n} does not fit a signed 64-bit integer"))?)
        }
        "FLOAT" => Value::Double(row.try_get::<f32, _>(i).map_err(failed)?.into()),
        "DOUBLE" => Value::Double(row.try_get(i).map_err(failed)?),
        "DECIMAL" => Value::Decimal(row.try_get::<BigDecimal, _>(i).map_err(failed)?.to_string()),
        "DATE" => Value::Date(days(row.try_get(i).map_err(failed)?)),
        "TIME" => Value::Time(micros(row.try_get(i).map_err(failed)?)),
        "DATETIME" => {
            Value::Timestamp(row.try_get::<NaiveDateTime, _>(i).map_err(failed)?.and_utc().timestamp_micros())
        }
        "TIMESTAMP" => Value::Timestamp(row.try_get::<DateTime<Utc>, _>(i).map_err(failed)?.timestamp_micros()),
        "JSON" => Value::Json(row.try_get(i).map_err(failed)?),
        t if t.contains("BLOB") || t.contains("BINARY") => Value::Bytes(row.try_get(i).map_err(failed)?),
        _ => Value::Text(row.try_get(i).map_err(failed)?),
    })
}

/// Reads column `i` of a SQLite row: SQLite types values, not columns, so
/// by the value's own storage class.
pub fn read_sqlite(row: &sqlx::sqlite::SqliteRow, i: usize) -> Result<Value, String> {
    let raw = row.try_get_raw(i).map_err(|e| e.to_string())?;
    if raw.is_null() {
        return Ok(Value::Null);
    }
    let type_name = raw.type_info().name().to_string();
    let failed = |e: sqlx::Error| format!("column '{}' ({type_name}): {e}", row.columns()[i].name());
    Ok(match type_name.as_str() {
        "INTEGER" | "BOOLEAN" => Value::Int(row.try_get(i).map_err(failed)?),
        "REAL" => Value::Double(row.try_get(i).map_err(failed)?),
        "BLOB" => Value::Bytes(row.try_get(i).map_err(failed)?),
        _ => Value::Text(row.try_get(i).map_err(failed)?),
    })
}

fn days(date: NaiveDate) -> i32 {
    (date - EPOCH).num_days() as i32
}

fn micros(time: NaiveTime) -> i64 {
    (time - NaiveTime::MIN).num_microseconds().unwrap_or_default()
}
