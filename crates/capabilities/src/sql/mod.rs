//! `spillway:sql`: databases the operator granted, opened by the grant's
//! name, on `sqlx` pools: PostgreSQL, MySQL / MariaDB and SQLite.
//!
//! The grant (`plugin.grant.sql.<name>.*`, [`grant`]) holds the URL and the
//! credentials; the plugin sends statements with bound parameters, which
//! [`guard`] reads first so that nothing reaches past the database (files,
//! programs, other databases). Every operation is atomic (one transaction, or
//! one statement on its own, which saves the BEGIN and COMMIT round trips), under
//! the grant's timeout and retries and is counted ([`op`](super::op)); a row
//! the database refuses comes back as the plugin's to handle, the rest as
//! the one retriable / fatal error ([`failure`]).

mod catalog;
mod copy;
mod failure;
mod grant;
mod guard;
mod sqlite_split;
mod tx;
mod values;

pub use grant::SqlGrant;

use super::errors::Error;
use super::op::{self, CallBudget, CapabilityMetrics, OpKey, OpPolicy};
use super::pending::room;
use super::{Capability, ContextsView, GrantKind};
use copy::CopyFailure;
use failure::Failure;
use futures::future::BoxFuture;
use grant::Pool;
use spillway_policy::InstanceBounds;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tokio::sync::Semaphore;
use tx::Tx;
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};

pub const PACKAGE: &str = "spillway:sql";
pub const VERSION: &str = "0.1.0";
/// The grants' capability segment and the metrics' label.
const NAME: &str = "sql";

pub const CAPABILITY: Capability = Capability {
    package: PACKAGE,
    version: VERSION,
    interfaces: &["databases"],
    grant: Some(GrantKind {
        name: NAME,
        setting_keys: grant::setting_keys,
        parse: grant::parse,
        check: grant::check,
        reach: grant::reach,
        granted: |grants| !grants.sql.is_empty(),
    }),
};

pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "spillway:sql/imports",
        imports: { default: async | trappable },
        additional_derives: [PartialEq],
        with: {
            "spillway:types/errors": crate::errors::bindings::spillway::types::errors,
            "spillway:sql/databases.database": super::OpenDatabase,
            "spillway:sql/databases.pending-batch": super::PendingBatch,
        },
    });
}

use bindings::spillway::sql::databases::{
    BatchOutcome, Column, Dialect, Host, HostDatabase, HostPendingBatch, RowFailure, Rows, Statement, Value,
};
/// A batch begun in the background: the resource behind `pending-batch`.
pub type PendingBatch = super::pending::Pending<BatchOutcome>;

/// A database the plugin opened: the resource behind `database`.
pub struct OpenDatabase {
    pool: Pool,
    policy: OpPolicy,
    /// Held by the batch that writes: one at a time, in the order begun,
    /// whether the plugin waits for it or not.
    writer: Arc<tokio::sync::Mutex<()>>,
}

/// The work of one operation, given its transaction and its input; boxed,
/// so that a background batch can own it.
type Work<A, T> = for<'t> fn(&'t Pool, &'t mut Tx, &'t A) -> BoxFuture<'t, Result<Outcome<T>, Error>>;

/// The capability's state in one plugin instance.
pub struct SqlCtx {
    grants: BTreeMap<String, SqlGrant>,
    /// One pool per grant, made at its first `open`: every database opened
    /// by the grant shares it, so `pool.size` bounds the instance, not one
    /// handle. Its connections close when the instance ends.
    pools: BTreeMap<String, Pool>,
    table: ResourceTable,
    budget: CallBudget,
    metrics: Arc<CapabilityMetrics>,
    /// Room for batches going on in the host: `work_in_flight` of them, over
    /// all its databases, each holding its rows in the host until it ends.
    batches: Arc<Semaphore>,
    bounds: InstanceBounds,
    /// Statements the guard admitted, by dialect: checked once.
    admitted: HashSet<(&'static str, String)>,
}

/// Admitted statements kept per instance; past it, the set starts over.
const ADMITTED_KEPT: usize = 64;

impl SqlCtx {
    pub fn new(
        grants: &BTreeMap<String, SqlGrant>,
        bounds: &InstanceBounds,
        budget: CallBudget,
        metrics: Arc<CapabilityMetrics>,
    ) -> Self {
        let batches = Arc::new(Semaphore::new(bounds.work_in_flight));
        SqlCtx {
            grants: grants.clone(),
            pools: BTreeMap::new(),
            table: ResourceTable::new(),
            budget,
            metrics,
            batches,
            bounds: bounds.clone(),
            admitted: HashSet::new(),
        }
    }

    /// Runs one operation on an open database under its grant's policy, in
    /// a transaction ([`transact`]). A write first takes the database's
    /// writer lock, so that it never overtakes a batch begun earlier.
    async fn in_transaction<A: Sync, T: Send>(
        &mut self,
        database: &Resource<OpenDatabase>,
        op: &'static str,
        writes: bool,
        alone: bool,
        input: &A,
        work: Work<A, T>,
    ) -> wasmtime::Result<Result<T, Error>> {
        let open = self.table.get(database)?;
        let (pool, policy, writer) = (open.pool.clone(), open.policy.clone(), open.writer.clone());
        let _turn = match writes {
            true => match writer_turn(&self.budget, writer).await {
                Ok(turn) => Some(turn),
                Err(e) => return Ok(Err(e)),
            },
            false => None,
        };
        Ok(transact((&self.metrics, &policy, &self.budget), &pool, op, alone, input, work).await)
    }

    /// Starts a write in the background once the batch before it ended (its
    /// turn is taken here, inside the plugin call's time).
    async fn begin<A: Send + Sync + 'static>(
        &mut self,
        database: &Resource<OpenDatabase>,
        op: &'static str,
        alone: bool,
        input: A,
        work: Work<A, BatchOutcome>,
    ) -> wasmtime::Result<Result<Resource<PendingBatch>, Error>> {
        let permit = match room(&self.batches, &self.budget, self.bounds.work_in_flight, "batches").await {
            Ok(permit) => permit,
            Err(e) => return Ok(Err(e)),
        };
        let open = self.table.get(database)?;
        let (pool, policy, writer) = (open.pool.clone(), open.policy.clone(), open.writer.clone());
        let turn = match writer_turn(&self.budget, writer).await {
            Ok(turn) => turn,
            Err(e) => return Ok(Err(e)),
        };
        let metrics = self.metrics.clone();
        let task = tokio::spawn(async move {
            // Outside any plugin call: the grant's own timeout bounds it.
            let result = transact((&metrics, &policy, &CallBudget::default()), &pool, op, alone, &input, work).await;
            drop((turn, permit));
            result
        });
        Ok(Ok(self.table.push(PendingBatch::new(task))?))
    }
}

/// The writer lock, waited for as long as the plugin call allows.
async fn writer_turn(
    budget: &CallBudget,
    writer: Arc<tokio::sync::Mutex<()>>,
) -> Result<tokio::sync::OwnedMutexGuard<()>, Error> {
    let turn = writer.lock_owned();
    match budget.until() {
        Some(until) => tokio::time::timeout_at(until, turn)
            .await
            .map_err(|_| Error::retriable("a batch begun earlier is still running at the end of the plugin call")),
        None => Ok(turn.await),
    }
}

/// Runs `work` under `policy`: each attempt in a transaction of its own,
/// committed when `work` says so and rolled back (dropped) otherwise; or,
/// for a single statement (`alone`), on a connection without one.
/// `work` takes its input as an argument, so that its future borrows only
/// what the attempt lends it.
async fn transact<A: Sync, T: Send>(
    (metrics, policy, budget): (&CapabilityMetrics, &OpPolicy, &CallBudget),
    pool: &Pool,
    op: &'static str,
    alone: bool,
    input: &A,
    work: Work<A, T>,
) -> Result<T, Error> {
    let attempt = || async move {
        let mut tx = Tx::begin(pool, alone).await?;
        match work(pool, &mut tx, input).await? {
            Outcome::Commit(value) => {
                tx.commit().await?;
                Ok(value)
            }
            // Dropping the transaction rolls it back.
            Outcome::RollBack(value) => Ok(value),
        }
    };
    op::run(metrics, key(op), policy, budget, attempt).await
}

/// Whether a batch is one statement run once: atomic without a transaction.
fn single(statements: &[Statement]) -> bool {
    statements.len() == 1 && statements[0].rows.len() <= 1
}

impl SqlCtx {
    /// Whether `copy-in` is one statement: PostgreSQL's COPY is; elsewhere it
    /// is an INSERT per row, in a transaction.
    fn copies_alone(&self, database: &Resource<OpenDatabase>) -> wasmtime::Result<bool> {
        Ok(matches!(self.table.get(database)?.pool, Pool::Postgres(_)))
    }

    /// Refuses statements that reach past the database ([`guard`]).
    /// Parsing a long multi-row statement takes milliseconds, and a sink
    /// sends the same few texts again and again: those admitted are kept.
    fn check<'s>(
        &mut self,
        database: &Resource<OpenDatabase>,
        statements: impl IntoIterator<Item = &'s str>,
    ) -> wasmtime::Result<Result<(), Error>> {
        let pool = &self.table.get(database)?.pool;
        let dialect = pool.dialect_name();
        for sql in statements {
            if self.admitted.contains(&(dialect, sql.to_string())) {
                continue;
            }
            if let Err(why) = guard::check(pool, sql) {
                return Ok(Err(Error::fatal(why)));
            }
            if self.admitted.len() >= ADMITTED_KEPT {
                self.admitted.clear();
            }
            self.admitted.insert((dialect, sql.to_string()));
        }
        Ok(Ok(()))
    }
}

/// How a unit of work ends its transaction.
enum Outcome<T> {
    Commit(T),
    RollBack(T),
}

fn key(op: &'static str) -> OpKey {
    OpKey { capability: NAME, op }
}

struct HasSql;

impl HasData for HasSql {
    type Data<'a> = &'a mut SqlCtx;
}

fn ctx<T: ContextsView>(data: &mut T) -> &mut SqlCtx {
    &mut data.contexts().sql
}

pub fn add_to_linker<T: ContextsView + 'static>(linker: &mut Linker<T>) -> anyhow::Result<()> {
    bindings::spillway::sql::databases::add_to_linker::<T, HasSql>(linker, ctx::<T>)?;
    Ok(())
}

/// The instance has ended: its pools close their connections gracefully,
/// in the background. A statement still running (a batch the task stopped
/// waiting for) keeps its connection until it ends: sqlx's `close` waits
/// for connections in use and aborts none.
impl Drop for SqlCtx {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        for pool in std::mem::take(&mut self.pools).into_values() {
            runtime.spawn(async move {
                match pool {
                    Pool::Postgres(p) => p.close().await,
                    Pool::MySql(p) => p.close().await,
                    Pool::Sqlite(p) => p.close().await,
                }
            });
        }
    }
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
        let pool = match self.pools.get(&grant) {
            Some(pool) => pool.clone(),
            None => match granted.pool() {
                Ok(pool) => self.pools.entry(grant.clone()).or_insert(pool).clone(),
                Err(e) => return Ok(Err(Error::fatal(format!("opening sql grant '{grant}': {e:#}")))),
            },
        };
        // Connect once, so that a database that is down or refuses the
        // credentials fails the task at start with a clear message.
        let probe = || {
            let pool = pool.clone();
            async move { Tx::begin(&pool, true).await.map(drop) }
        };
        let answered = op::run(&self.metrics, key("open"), &granted.policy, &self.budget, probe).await;
        if let Err(e) = answered {
            let message = format!("sql grant '{grant}' ({}): {}", granted.describe(), e.message());
            return Ok(Err(match e {
                Error::Retriable(_) => Error::retriable(message),
                Error::Fatal(_) => Error::fatal(message),
            }));
        }
        let database = OpenDatabase { pool, policy: granted.policy.clone(), writer: Arc::default() };
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
        if let Err(e) = self.check(&database, statements.iter().map(|s| s.sql.as_str()))? {
            return Ok(Err(e));
        }
        let alone = single(&statements);
        self.in_transaction(&database, "execute-batch", true, alone, &statements, batch_work).await
    }

    async fn begin_batch(
        &mut self,
        database: Resource<OpenDatabase>,
        statements: Vec<Statement>,
    ) -> wasmtime::Result<Result<Resource<PendingBatch>, Error>> {
        if let Err(e) = self.check(&database, statements.iter().map(|s| s.sql.as_str()))? {
            return Ok(Err(e));
        }
        let alone = single(&statements);
        self.begin(&database, "execute-batch", alone, statements, batch_work).await
    }

    async fn execute(
        &mut self,
        database: Resource<OpenDatabase>,
        sql: String,
        params: Vec<Value>,
    ) -> wasmtime::Result<Result<u64, Error>> {
        if let Err(e) = self.check(&database, [sql.as_str()])? {
            return Ok(Err(e));
        }
        self.in_transaction(&database, "execute", true, true, &(sql, params), |_, tx, (sql, params)| {
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
        if let Err(e) = self.check(&database, [sql.as_str()])? {
            return Ok(Err(e));
        }
        let input = (sql, params, self.bounds.return_bytes);
        self.in_transaction(&database, "query", false, true, &input, |_, tx, (sql, params, max_bytes)| {
            Box::pin(async move {
                tx.query(sql, params, *max_bytes).await.map(Outcome::RollBack).map_err(Failure::into_error)
            })
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
        let alone = self.copies_alone(&database)?;
        self.in_transaction(&database, "copy-in", true, alone, &(table, columns, rows), copy_work).await
    }

    async fn begin_copy_in(
        &mut self,
        database: Resource<OpenDatabase>,
        table: String,
        columns: Vec<String>,
        rows: Vec<Vec<Value>>,
    ) -> wasmtime::Result<Result<Resource<PendingBatch>, Error>> {
        let alone = self.copies_alone(&database)?;
        self.begin(&database, "copy-in", alone, (table, columns, rows), copy_work).await
    }

    async fn describe_table(
        &mut self,
        database: Resource<OpenDatabase>,
        table: String,
    ) -> wasmtime::Result<Result<Option<Vec<Column>>, Error>> {
        let input = (table, self.bounds.return_bytes);
        self.in_transaction(&database, "describe-table", false, true, &input, |pool, tx, (table, max_bytes)| {
            Box::pin(async move {
                catalog::describe(pool, tx, table, *max_bytes).await.map(Outcome::RollBack).map_err(Failure::into_error)
            })
        })
        .await
    }

    async fn drop(&mut self, database: Resource<OpenDatabase>) -> wasmtime::Result<()> {
        // The grant's pool stays for the instance's other handles.
        self.table.delete(database)?;
        Ok(())
    }
}

// `&Vec`, not a slice: the signature is a `Work<Vec<Statement>, _>`.
#[allow(clippy::ptr_arg)]
fn batch_work<'t>(
    _: &'t Pool,
    tx: &'t mut Tx,
    statements: &'t Vec<Statement>,
) -> BoxFuture<'t, Result<Outcome<BatchOutcome>, Error>> {
    Box::pin(run_batch(tx, statements))
}

type CopyInput = (String, Vec<String>, Vec<Vec<Value>>);

fn copy_work<'t>(
    pool: &'t Pool,
    tx: &'t mut Tx,
    (table, columns, rows): &'t CopyInput,
) -> BoxFuture<'t, Result<Outcome<BatchOutcome>, Error>> {
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
}

impl HostPendingBatch for SqlCtx {
    async fn ready(&mut self, batch: Resource<PendingBatch>) -> wasmtime::Result<Option<Result<BatchOutcome, Error>>> {
        Ok(self.table.get_mut(&batch)?.ready().await)
    }

    async fn wait(&mut self, batch: Resource<PendingBatch>) -> wasmtime::Result<Result<BatchOutcome, Error>> {
        let until = self.budget.until();
        Ok(self.table.get_mut(&batch)?.wait(until).await)
    }

    async fn drop(&mut self, batch: Resource<PendingBatch>) -> wasmtime::Result<()> {
        // The batch goes on: it holds the writer lock until it ends.
        self.table.delete(batch)?;
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
