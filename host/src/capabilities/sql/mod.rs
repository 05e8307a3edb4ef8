//! `spillway:sql`: databases the operator granted, opened by the grant's
//! name, on `sqlx` pools: PostgreSQL, MySQL / MariaDB and SQLite.
//!
//! The grant (`plugin.grant.sql.<name>.*`, [`grant`]) holds the URL and the
//! credentials; the plugin sends statements with bound parameters, which
//! [`guard`] reads first so that nothing reaches past the database (files,
//! programs, other databases). Every operation runs in one transaction under
//! the grant's timeout and retries and is counted ([`op`](super::op)); a row
//! the database refuses comes back as the plugin's to handle, the rest as
//! the one retriable / fatal error ([`failure`]).

mod catalog;
mod copy;
mod failure;
mod grant;
mod guard;
mod tx;
mod values;

pub use grant::{SqlGrant, setting_keys};

use super::errors::Error;
use super::op::{self, CallBudget, CapabilityMetrics, OpKey, OpPolicy};
use copy::CopyFailure;
use failure::Failure;
use futures::future::BoxFuture;
use grant::Pool;
use std::collections::BTreeMap;
use std::sync::Arc;
use tx::Tx;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

pub const VERSION: &str = "0.1.0";
const CAPABILITY: &str = "sql";

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "spillway:sql/imports",
        imports: { default: async | trappable },
        additional_derives: [PartialEq],
        with: {
            "spillway:types/errors": crate::capabilities::errors::bindings::spillway::types::errors,
            "spillway:sql/databases.database": super::OpenDatabase,
        },
    });
}

use bindings::spillway::sql::databases::{
    BatchOutcome, Column, Dialect, Host, HostDatabase, RowFailure, Rows, Statement, Value,
};

/// A database the plugin opened: the resource behind `database`.
pub struct OpenDatabase {
    pool: Pool,
    policy: OpPolicy,
}

/// The capability's state in one plugin instance.
pub struct SqlCtx {
    grants: BTreeMap<String, SqlGrant>,
    table: ResourceTable,
    budget: CallBudget,
    metrics: Arc<CapabilityMetrics>,
}

impl SqlCtx {
    pub fn new(grants: &BTreeMap<String, SqlGrant>, budget: CallBudget, metrics: Arc<CapabilityMetrics>) -> Self {
        SqlCtx { grants: grants.clone(), table: ResourceTable::new(), budget, metrics }
    }

    /// Runs one operation on an open database under its grant's policy:
    /// each attempt in a transaction of its own, committed when `work` says
    /// so and rolled back (dropped) otherwise. `work` takes its input as an
    /// argument, so that its future borrows only what the attempt lends it.
    async fn in_transaction<A: Sync, T: Send>(
        &mut self,
        database: &Resource<OpenDatabase>,
        op: &'static str,
        input: &A,
        work: impl for<'t> Fn(&'t Pool, &'t mut Tx, &'t A) -> BoxFuture<'t, Result<Outcome<T>, Error>>,
    ) -> wasmtime::Result<Result<T, Error>> {
        let open = self.table.get(database)?;
        let (pool, policy) = (open.pool.clone(), open.policy.clone());
        let work = &work;
        let attempt = || {
            let pool = pool.clone();
            async move {
                let mut tx = Tx::begin(&pool).await?;
                match work(&pool, &mut tx, input).await? {
                    Outcome::Commit(value) => {
                        tx.commit().await?;
                        Ok(value)
                    }
                    // Dropping the transaction rolls it back.
                    Outcome::RollBack(value) => Ok(value),
                }
            }
        };
        Ok(op::run(&self.metrics, key(op), &policy, &self.budget, attempt).await)
    }
}

/// How a unit of work ends its transaction.
enum Outcome<T> {
    Commit(T),
    RollBack(T),
}

fn key(op: &'static str) -> OpKey {
    OpKey { capability: CAPABILITY, op }
}

/// How a store's data lends the runtime its [`SqlCtx`].
pub trait SqlView: Send {
    fn sql(&mut self) -> &mut SqlCtx;
}

struct HasSql;

impl HasData for HasSql {
    type Data<'a> = &'a mut SqlCtx;
}

pub fn add_to_linker<T: SqlView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    bindings::spillway::sql::databases::add_to_linker::<T, HasSql>(linker, T::sql)
}

impl Host for SqlCtx {}

impl HostDatabase for SqlCtx {
    async fn open(&mut self, grant: String) -> wasmtime::Result<Result<Resource<OpenDatabase>, Error>> {
        let Some(granted) = self.grants.get(&grant) else {
            let names: Vec<&str> = self.grants.keys().map(String::as_str).collect();
            return Ok(Err(Error::fatal(format!(
                "no sql grant named '{grant}' (granted: {})",
                if names.is_empty() { "none".to_string() } else { names.join(", ") }
            ))));
        };
        let pool = match granted.pool() {
            Ok(pool) => pool,
            Err(e) => return Ok(Err(Error::fatal(format!("opening sql grant '{grant}': {e:#}")))),
        };
        // Connect once, so that a database that is down or refuses the
        // credentials fails the task at start with a clear message.
        let probe = || {
            let pool = pool.clone();
            async move { Tx::begin(&pool).await.map(drop) }
        };
        let answered = op::run(&self.metrics, key("open"), &granted.policy, &self.budget, probe).await;
        if let Err(e) = answered {
            let message = format!("sql grant '{grant}' ({}): {}", granted.describe(), e.message());
            return Ok(Err(match e {
                Error::Retriable(_) => Error::retriable(message),
                Error::Fatal(_) => Error::fatal(message),
            }));
        }
        let database = OpenDatabase { pool, policy: granted.policy.clone() };
        Ok(Ok(self.table.push(database)?))
    }

    async fn dialect(&mut self, database: Resource<OpenDatabase>) -> wasmtime::Result<Dialect> {
        Ok(match self.table.get(&database)?.pool {
            Pool::Postgres(_) => Dialect::Postgres,
            Pool::MySql(_) => Dialect::Mysql,
            Pool::Sqlite(_) => Dialect::Sqlite,
        })
    }

    async fn execute_batch(
        &mut self,
        database: Resource<OpenDatabase>,
        statements: Vec<Statement>,
    ) -> wasmtime::Result<Result<BatchOutcome, Error>> {
        let pool = self.table.get(&database)?.pool.clone();
        for statement in &statements {
            if let Err(why) = guard::check(&pool, &statement.sql) {
                return Ok(Err(Error::fatal(why)));
            }
        }
        self.in_transaction(&database, "execute-batch", &statements, |_, tx, statements| {
            Box::pin(run_batch(tx, statements))
        })
        .await
    }

    async fn execute(
        &mut self,
        database: Resource<OpenDatabase>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        let pool = self.table.get(&database)?.pool.clone();
        if let Err(why) = guard::check(&pool, &sql) {
            return Ok(Err(Error::fatal(why)));
        }
        self.in_transaction(&database, "execute", &(sql, params), |_, tx, (sql, params)| {
            Box::pin(async move { tx.execute(sql, params).await.map(Outcome::Commit).map_err(Failure::into_error) })
        })
        .await
    }

    async fn query(
        &mut self,
        database: Resource<OpenDatabase>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<Rows, Error>> {
        let pool = self.table.get(&database)?.pool.clone();
        if let Err(why) = guard::check(&pool, &sql) {
            return Ok(Err(Error::fatal(why)));
        }
        self.in_transaction(&database, "query", &(sql, params), |_, tx, (sql, params)| {
            Box::pin(async move { tx.query(sql, params).await.map(Outcome::RollBack).map_err(Failure::into_error) })
        })
        .await
    }

    async fn copy_in(
        &mut self,
        database: Resource<OpenDatabase>,
        table: String,
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    ) -> wasmtime::Result<Result<BatchOutcome, Error>> {
        self.in_transaction(&database, "copy-in", &(table, columns, rows), |pool, tx, (table, columns, rows)| {
            Box::pin(async move {
                match copy::copy_in(pool, tx, table, columns, rows).await {
                    Ok(n) => Ok(Outcome::Commit(BatchOutcome::Committed(vec![n]))),
                    Err(CopyFailure::Row { row, code, message }) => {
                        let failure = RowFailure { statement: 0, row, code, message };
                        Ok(Outcome::RollBack(BatchOutcome::RowFailed(failure)))
                    }
                    Err(CopyFailure::Call(e)) => Err(e),
                }
            })
        })
        .await
    }

    async fn describe_table(
        &mut self,
        database: Resource<OpenDatabase>,
        table: String,
    ) -> wasmtime::Result<Result<Option<Vec<Column>>, Error>> {
        self.in_transaction(&database, "describe-table", &table, |pool, tx, table| {
            Box::pin(async move {
                catalog::describe(pool, tx, table).await.map(Outcome::RollBack).map_err(Failure::into_error)
            })
        })
        .await
    }

    async fn drop(&mut self, database: Resource<OpenDatabase>) -> wasmtime::Result<()> {
        let open = self.table.delete(database)?;
        // Close the connections in the background: the plugin does not wait.
        tokio::spawn(async move {
            match open.pool {
                Pool::Postgres(p) => p.close().await,
                Pool::MySql(p) => p.close().await,
                Pool::Sqlite(p) => p.close().await,
            }
        });
        Ok(())
    }
}

/// The statements of a batch in order, each once per row of parameters; the
/// first row the database refuses rolls the whole batch back.
async fn run_batch(tx: &mut Tx, statements: &[Statement]) -> Result<Outcome<BatchOutcome>, Error> {
    let mut affected = Vec::with_capacity(statements.len());
    for (s, statement) in statements.iter().enumerate() {
        let once = [Vec::new()];
        let rows = if statement.rows.is_empty() { &once[..] } else { &statement.rows[..] };
        let mut count = 0;
        for (r, params) in rows.iter().enumerate() {
            match tx.execute(&statement.sql, params).await {
                Ok(n) => count += n,
                Err(Failure::Row { code, message }) => {
                    // A row index only where the statement ran more than once.
                    let row = (rows.len() > 1).then_some(r as u32);
                    let failure = RowFailure { statement: s as u32, row, code, message };
                    return Ok(Outcome::RollBack(BatchOutcome::RowFailed(failure)));
                }
                Err(Failure::Call(e)) => return Err(e),
            }
        }
        affected.push(count);
    }
    Ok(Outcome::Commit(BatchOutcome::Committed(affected)))
}
