//! How a database's refusal reaches the plugin: a row the data of which the
//! database refused (a constraint, a value that does not fit) is an outcome
//! the plugin acts on, one record at a time; everything else is the one
//! retriable / fatal [`Error`].

use crate::errors::Error;
use sqlx::error::DatabaseError;

/// Why a statement failed.
#[derive(Debug)]
pub enum Failure {
    /// The data of one row was refused: the plugin rejects that record.
    Row { code: Option<String>, message: String },
    /// Anything else.
    Call(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Call(e)
    }
}

impl Failure {
    /// As an error of the call, for operations that have no rows to blame.
    pub fn into_error(self) -> Error {
        match self {
            Failure::Row { code, message } => Error::fatal(with_code(code.as_deref(), &message)),
            Failure::Call(e) => e,
        }
    }
}

/// Sorts a driver error: lost connections, deadlocks, serialization
/// failures, timeouts and a full server are retriable; constraint and data
/// errors blame the row; the rest (syntax, missing tables, privileges) is
/// fatal.
pub fn classify(e: sqlx::Error) -> Failure {
    match e {
        sqlx::Error::Database(db) => classify_database(db.as_ref()),
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed | sqlx::Error::Tls(_) => {
            Failure::Call(Error::retriable(format!("database unreachable: {e}")))
        }
        sqlx::Error::Encode(why) => Failure::Row { code: None, message: why.to_string() },
        other => Failure::Call(Error::fatal(other.to_string())),
    }
}

fn classify_database(db: &(dyn DatabaseError + 'static)) -> Failure {
    let message = describe(db);
    if let Some(sqlite) = db.try_downcast_ref::<sqlx::sqlite::SqliteError>() {
        let code = sqlite.code().and_then(|c| c.parse::<i32>().ok()).unwrap_or_default();
        return match code & 0xff {
            // BUSY, LOCKED, FULL (disk), IOERR
            5 | 6 | 13 | 10 => Failure::Call(Error::retriable(message)),
            // CONSTRAINT, MISMATCH, TOOBIG
            18..=20 => Failure::Row { code: Some(code.to_string()), message },
            _ => Failure::Call(Error::fatal(message)),
        };
    }
    if let Some(mysql) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        let number = mysql.number();
        let code = Some(number.to_string());
        return match number {
            // lock wait timeout, deadlock, too many connections, shutdown,
            // interrupted, connection killed, gone away, lost, statement timeouts
            1205 | 1213 | 1040 | 1053 | 1317 | 1927 | 2006 | 2013 | 3024 | 1969 => {
                Failure::Call(Error::retriable(message))
            }
            1048 | 1062 | 1264 | 1265 | 1292 | 1364 | 1366 | 1367 | 1406 | 1411 | 1451 | 1452 | 1690 | 3140 | 3819
            | 4025 => Failure::Row { code, message },
            _ if mysql.code().is_some_and(|s| s.starts_with("22") || s.starts_with("23")) => {
                Failure::Row { code, message }
            }
            _ => Failure::Call(Error::fatal(message)),
        };
    }
    // PostgreSQL: SQLSTATE classes.
    let state = db.code().map(|c| c.to_string()).unwrap_or_default();
    let retriable = state.starts_with("08")
        || state.starts_with("53")
        || matches!(state.as_str(), "40001" | "40P01" | "55P03" | "57014" | "57P01" | "57P02" | "57P03" | "57P05");
    if retriable {
        Failure::Call(Error::retriable(message))
    } else if state.starts_with("22") || state.starts_with("23") {
        Failure::Row { code: Some(state), message }
    } else {
        Failure::Call(Error::fatal(message))
    }
}

/// The database's message with its code, and PostgreSQL's detail (which
/// names the offending key or value).
fn describe(db: &(dyn DatabaseError + 'static)) -> String {
    let mut message = with_code(db.code().as_deref(), db.message());
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
        && let Some(detail) = pg.detail()
    {
        message = format!("{message} ({detail})");
    }
    message
}

fn with_code(code: Option<&str>, message: &str) -> String {
    match code {
        Some(code) => format!("{code}: {message}"),
        None => message.to_string(),
    }
}

/// PostgreSQL's COPY names the line of the input it failed on ("COPY t, line
/// 3, column b"): lines count from 1, rows from 0.
pub fn copy_line(e: &sqlx::Error) -> Option<u32> {
    let sqlx::Error::Database(db) = e else { return None };
    let pg = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>()?;
    let place = pg.r#where()?;
    let after = &place[place.find("line ")? + 5..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<u32>().ok()?.checked_sub(1)
}
