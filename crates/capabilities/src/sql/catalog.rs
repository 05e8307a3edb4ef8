//! Table names the host quotes itself, and what the catalogue says of a
//! table's columns.

use super::bindings::spillway::sql::databases::{Column, Value};
use super::failure::Failure;
use super::grant::Pool;
use super::tx::Tx;
use crate::errors::Error;

/// A plain name (`table` or `schema.table`) quoted part by part for the
/// pool's dialect.
pub fn quote_name(pool: &Pool, name: &str) -> Result<String, Error> {
    if name.is_empty() || name.contains('\0') || name.split('.').any(str::is_empty) {
        return Err(Error::fatal(format!("'{name}' is not a table or column name")));
    }
    Ok(name.split('.').map(|part| quote(pool, part)).collect::<Vec<_>>().join("."))
}

/// One identifier, quoted, with its own quote characters doubled.
pub fn quote(pool: &Pool, identifier: &str) -> String {
    let q = if matches!(pool, Pool::MySql(_)) { '`' } else { '"' };
    format!("{q}{}{q}", identifier.replace(q, &format!("{q}{q}")))
}

/// A table's columns in order, or none when there is no such table; each
/// query's rows at most `max_bytes`.
pub async fn describe(pool: &Pool, tx: &mut Tx, table: &str, max_bytes: usize) -> Result<Option<Vec<Column>>, Failure> {
    let (schema, name) = match table.rsplit_once('.') {
        Some((schema, name)) => (Value::Text(schema.to_string()), name.to_string()),
        None => (Value::Null, table.to_string()),
    };
    let rows = match pool {
        Pool::Postgres(_) => {
            let regclass = Value::Text(quote_name(pool, table)?);
            let found = tx.query("SELECT to_regclass($1)::text", std::slice::from_ref(&regclass), max_bytes).await?;
            if found.rows.first().and_then(|r| r.first()).is_none_or(|v| matches!(v, Value::Null)) {
                return Ok(None);
            }
            let sql = "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull, \
                       COALESCE(a.attnum = ANY(i.indkey), false) \
                       FROM pg_attribute a LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary \
                       WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped \
                       ORDER BY a.attnum";
            tx.query(sql, &[regclass], max_bytes).await?.rows
        }
        Pool::MySql(_) => {
            let sql = "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE = 'YES', COLUMN_KEY = 'PRI' \
                       FROM information_schema.COLUMNS \
                       WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION";
            tx.query(sql, &[schema, Value::Text(name)], max_bytes).await?.rows
        }
        Pool::Sqlite(_) => {
            let sql = match schema {
                Value::Null => "SELECT name, type, \"notnull\" = 0, pk > 0 FROM pragma_table_info(?1)",
                _ => "SELECT name, type, \"notnull\" = 0, pk > 0 FROM pragma_table_info(?1, ?2)",
            };
            let params = match schema {
                Value::Null => vec![Value::Text(name)],
                schema => vec![Value::Text(name), schema],
            };
            tx.query(sql, &params, max_bytes).await?.rows
        }
    };
    if rows.is_empty() {
        return Ok(None);
    }
    let columns = rows.into_iter().map(|row| {
        let mut row = row.into_iter();
        let mut next = || row.next().unwrap_or(Value::Null);
        Column {
            name: text(next()),
            data_type: text(next()).to_lowercase(),
            nullable: truth(&next()),
            primary_key: truth(&next()),
        }
    });
    Ok(Some(columns.collect()))
}

fn text(value: Value) -> String {
    match value {
        Value::Text(s) => s,
        // MySQL's catalogue answers some names as binary strings.
        Value::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        _ => String::new(),
    }
}

fn truth(value: &Value) -> bool {
    matches!(value, Value::Boolean(true)) || matches!(value, Value::Int(n) if *n != 0)
}
