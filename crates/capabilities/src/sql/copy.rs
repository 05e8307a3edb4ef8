//! Appending rows in bulk: PostgreSQL's `COPY ... FROM STDIN` (its text
//! format, one line per row, so that the line it names is the row), one
//! prepared `INSERT` per row elsewhere, all in the caller's transaction.

use super::bindings::spillway::sql::databases::Value;
use super::catalog::{quote, quote_name};
use super::failure::{Failure, classify, copy_line};
use super::grant::Pool;
use super::tx::Tx;
use super::values::push_copy_text;
use crate::errors::Error;

/// How much text is sent to the server at a time.
const CHUNK: usize = 1 << 20;

/// A row the database refused, by its index, or a failure of the call.
pub enum CopyFailure {
    Row { row: Option<u32>, code: Option<String>, message: String },
    Call(Error),
}

pub async fn copy_in(
    pool: &Pool,
    tx: &mut Tx,
    table: &str,
    columns: &[String],
    rows: &[Vec<Value>],
) -> Result<u64, CopyFailure> {
    let table = quote_name(pool, table).map_err(CopyFailure::Call)?;
    let names: Vec<String> = columns.iter().map(|c| quote(pool, c)).collect();
    if let Some(r) = rows.iter().position(|row| row.len() != columns.len()) {
        return Err(CopyFailure::Call(Error::fatal(format!(
            "row {r} has {} values for {} columns",
            rows[r].len(),
            columns.len()
        ))));
    }
    let Some(conn) = tx.postgres() else {
        let placeholders = vec!["?"; columns.len()].join(", ");
        let sql = format!("INSERT INTO {table} ({}) VALUES ({placeholders})", names.join(", "));
        let mut inserted = 0;
        for (r, row) in rows.iter().enumerate() {
            inserted += tx.execute(&sql, row).await.map_err(|f| blame(f, Some(r as u32)))?;
        }
        return Ok(inserted);
    };
    let sql = format!("COPY {table} ({}) FROM STDIN", names.join(", "));
    let mut copy = conn.copy_in_raw(&sql).await.map_err(|e| blame(classify(e), None))?;
    let mut text = String::with_capacity(CHUNK + 4096);
    for (r, row) in rows.iter().enumerate() {
        for (c, value) in row.iter().enumerate() {
            if c > 0 {
                text.push('\t');
            }
            if let Err(why) = push_copy_text(&mut text, value) {
                let _ = copy.abort(why.clone()).await;
                let message = format!("column {}: {why}", columns[c]);
                return Err(CopyFailure::Row { row: Some(r as u32), code: None, message });
            }
        }
        text.push('\n');
        if text.len() >= CHUNK {
            copy.send(text.as_bytes()).await.map_err(|e| blame(classify(e), None))?;
            text.clear();
        }
    }
    if !text.is_empty() {
        copy.send(text.as_bytes()).await.map_err(|e| blame(classify(e), None))?;
    }
    copy.finish().await.map_err(|e| {
        let line = copy_line(&e);
        blame(classify(e), line)
    })
}

fn blame(failure: Failure, row: Option<u32>) -> CopyFailure {
    match failure {
        Failure::Row { code, message } => CopyFailure::Row { row, code, message },
        Failure::Call(e) => CopyFailure::Call(e),
    }
}
