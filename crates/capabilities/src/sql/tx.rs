//! A connection of one of the three drivers, in a transaction, so that a
//! batch is all or nothing, or alone for a single statement, which is
//! atomic by itself (and saves the BEGIN and COMMIT round trips).

use super::bindings::spillway::sql::databases::{Rows, Value};
use super::failure::{Failure, classify};
use super::grant::Pool;
use super::values::{bind_mysql, bind_postgres, bind_sqlite, binds_postgres, read_mysql, read_postgres, read_sqlite};
use crate::errors::Error;
use futures::{Stream, TryStreamExt};
use sqlx::pool::PoolConnection;
use sqlx::{Column, Database, Either, Executor, MySql, Postgres, Sqlite, Statement, Transaction};
use std::ops::{Deref, DerefMut};

pub enum Tx {
    Postgres(Held<Postgres>),
    MySql(Held<MySql>),
    Sqlite(Held<Sqlite>),
}

/// How the connection is held.
pub enum Held<DB: Database> {
    InTransaction(Transaction<'static, DB>),
    Alone(PoolConnection<DB>),
}

impl<DB: Database> Deref for Held<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        match self {
            Held::InTransaction(tx) => tx,
            Held::Alone(conn) => conn,
        }
    }
}

impl<DB: Database> DerefMut for Held<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        match self {
            Held::InTransaction(tx) => tx,
            Held::Alone(conn) => conn,
        }
    }
}

impl<DB: Database> Held<DB> {
    async fn begin(pool: &sqlx::Pool<DB>, alone: bool) -> Result<Self, sqlx::Error> {
        if alone { pool.acquire().await.map(Held::Alone) } else { pool.begin().await.map(Held::InTransaction) }
    }

    async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Held::InTransaction(tx) => tx.commit().await,
            Held::Alone(_) => Ok(()),
        }
    }
}

impl Tx {
    /// A transaction, or (`alone`) a connection for one statement.
    pub async fn begin(pool: &Pool, alone: bool) -> Result<Tx, Error> {
        let begun = match pool {
            Pool::Postgres(p) => Held::begin(p, alone).await.map(Tx::Postgres),
            Pool::MySql(p) => Held::begin(p, alone).await.map(Tx::MySql),
            Pool::Sqlite(p) => Held::begin(p, alone).await.map(Tx::Sqlite),
        };
        begun.map_err(|e| classify(e).into_error())
    }

    pub async fn commit(self) -> Result<(), Error> {
        let committed = match self {
            Tx::Postgres(held) => held.commit().await,
            Tx::MySql(held) => held.commit().await,
            Tx::Sqlite(held) => held.commit().await,
        };
        committed.map_err(|e| classify(e).into_error())
    }

    /// Runs one statement with one row of parameters; the rows it affected.
    pub async fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, Failure> {
        let unfit = |n: usize, why: String| Failure::Row { code: None, message: format!("parameter {}: {why}", n + 1) };
        let done = match self {
            Tx::Postgres(tx) => {
                let conn = &mut **tx;
                let args = postgres_args(conn, sql, params).await?;
                sqlx::query_with(sql, args).execute(conn).await.map(|r| r.rows_affected())
            }
            Tx::MySql(tx) => {
                let mut args = sqlx::mysql::MySqlArguments::default();
                for (n, value) in params.iter().enumerate() {
                    bind_mysql(&mut args, value).map_err(|why| unfit(n, why))?;
                }
                sqlx::query_with(sql, args).execute(&mut **tx).await.map(|r| r.rows_affected())
            }
            Tx::Sqlite(tx) => {
                let mut args = sqlx::sqlite::SqliteArguments::default();
                for (n, value) in params.iter().enumerate() {
                    bind_sqlite(&mut args, value).map_err(|why| unfit(n, why))?;
                }
                sqlx::query_with(sql, args).execute(&mut **tx).await.map(|r| r.rows_affected())
            }
        };
        done.map_err(classify)
    }

    /// Runs one query; its columns and rows, at most `max_bytes` of them
    /// (`policy.plugin.return.bytes.max`).
    pub async fn query(&mut self, sql: &str, params: &[Value], max_bytes: usize) -> Result<Rows, Failure> {
        let unfit = |n: usize, why: String| Failure::Row { code: None, message: format!("parameter {}: {why}", n + 1) };
        match self {
            Tx::Postgres(tx) => {
                let conn = &mut **tx;
                let columns = column_names(conn.prepare(sql).await.map_err(classify)?.columns());
                let args = postgres_args(conn, sql, params).await?;
                let rows =
                    read_rows(sqlx::query_with(sql, args).fetch(conn), columns.len(), max_bytes, read_postgres).await?;
                Ok(Rows { columns, rows })
            }
            Tx::MySql(tx) => {
                let conn = &mut **tx;
                let columns = column_names(conn.prepare(sql).await.map_err(classify)?.columns());
                let mut args = sqlx::mysql::MySqlArguments::default();
                for (n, value) in params.iter().enumerate() {
                    bind_mysql(&mut args, value).map_err(|why| unfit(n, why))?;
                }
                let rows =
                    read_rows(sqlx::query_with(sql, args).fetch(conn), columns.len(), max_bytes, read_mysql).await?;
                Ok(Rows { columns, rows })
            }
            Tx::Sqlite(tx) => {
                let conn = &mut **tx;
                let columns = column_names(conn.prepare(sql).await.map_err(classify)?.columns());
                let mut args = sqlx::sqlite::SqliteArguments::default();
                for (n, value) in params.iter().enumerate() {
                    bind_sqlite(&mut args, value).map_err(|why| unfit(n, why))?;
                }
                let rows =
                    read_rows(sqlx::query_with(sql, args).fetch(conn), columns.len(), max_bytes, read_sqlite).await?;
                Ok(Rows { columns, rows })
            }
        }
    }

    /// The PostgreSQL connection, for COPY.
    pub fn postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match self {
            Tx::Postgres(tx) => Some(&mut **tx),
            _ => None,
        }
    }
}

/// PostgreSQL's arguments, each encoded as the type the server inferred for
/// its parameter: the statement is prepared (and cached) first, without
/// types, so that the server decides them from the columns they go into.
async fn postgres_args(
    conn: &mut sqlx::PgConnection,
    sql: &str,
    params: &[Value],
) -> Result<sqlx::postgres::PgArguments, Failure> {
    let statement = conn.prepare(sql).await.map_err(classify)?;
    let types = match statement.parameters() {
        Some(Either::Left(types)) => types,
        _ => &[],
    };
    if types.len() != params.len() {
        return Err(Failure::Call(Error::fatal(format!(
            "the statement takes {} parameters and {} were given",
            types.len(),
            params.len()
        ))));
    }
    let mut args = sqlx::postgres::PgArguments::default();
    for (n, (value, ty)) in params.iter().zip(types).enumerate() {
        let oid = ty.oid().map_or(0, |oid| oid.0);
        if !binds_postgres(oid) {
            return Err(Failure::Call(Error::fatal(format!(
                "parameter ${} is of PostgreSQL type {ty}, which this host does not bind (bind it as text and cast: \
                 ${}::text::<type>)",
                n + 1,
                n + 1
            ))));
        }
        bind_postgres(&mut args, oid, value)
            .map_err(|why| Failure::Row { code: None, message: format!("parameter ${}: {why}", n + 1) })?;
    }
    Ok(args)
}

fn column_names<C: Column>(columns: &[C]) -> Vec<String> {
    columns.iter().map(|c| c.name().to_string()).collect()
}

/// Reads a query's rows as they arrive, refusing the query once they pass
/// `max_bytes` rather than holding them all first.
async fn read_rows<R>(
    mut rows: impl Stream<Item = Result<R, sqlx::Error>> + Unpin,
    width: usize,
    max_bytes: usize,
    read: impl Fn(&R, usize) -> Result<Value, String>,
) -> Result<Vec<Vec<Value>>, Failure> {
    let mut read_rows = Vec::new();
    let mut bytes = 0;
    while let Some(row) = rows.try_next().await.map_err(classify)? {
        let values = (0..width)
            .map(|i| read(&row, i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| Failure::Call(Error::fatal(format!("reading the result: {why}"))))?;
        bytes += values.iter().map(value_bytes).sum::<usize>();
        if bytes > max_bytes {
            return Err(Failure::Call(Error::fatal(format!(
                "the query's rows pass {max_bytes} bytes after {} rows, more than one query returns \
                 (policy.plugin.return.bytes.max): read them in pages (LIMIT)",
                read_rows.len()
            ))));
        }
        read_rows.push(values);
    }
    Ok(read_rows)
}

/// About what a value takes in the host and in the plugin's memory.
fn value_bytes(value: &Value) -> usize {
    const FIXED: usize = 16;
    FIXED
        + match value {
            Value::Text(s) | Value::Json(s) | Value::Uuid(s) | Value::Decimal(s) => s.len(),
            Value::Bytes(b) => b.len(),
            _ => 0,
        }
}
