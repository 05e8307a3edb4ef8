//! What a plugin may send: one statement of the kinds a sink needs, and
//! nothing that reaches past the database into the server's files, programs
//! or other databases. The database's own privileges are the second wall
//! (README recommends a least-privilege role); this is the first, and it
//! holds whatever role the operator granted.
//!
//! The check reads the statement as the database would tokenize it: string
//! literals, quoted identifiers and comments are skipped, so a value or a
//! quoted column named `program` passes, while the word outside them does
//! not.

use super::grant::Pool;

/// The statements a sink may run, by their first word.
const ALLOWED_FIRST: &[&str] = &["select", "insert", "update", "delete", "replace", "with", "create", "alter", "merge"];

/// What `create` and `alter` may make or change.
const ALLOWED_OBJECTS: &[&str] = &["table", "index", "unique"];

/// Words that reach past the database, whatever statement holds them:
/// SQLite's other files and pragmas, PostgreSQL's COPY, server programs and
/// file functions, MariaDB's file reads and writes.
const REFUSED_WORDS: &[&str] = &[
    // SQLite
    "attach",
    "detach",
    "pragma",
    "vacuum",
    "load_extension",
    // PostgreSQL
    "copy",
    "program",
    "pg_read_file",
    "pg_read_binary_file",
    "pg_ls_dir",
    "pg_stat_file",
    "pg_file_write",
    "lo_import",
    "lo_export",
    "dblink",
    "dblink_exec",
    "dblink_connect",
    // MySQL and MariaDB
    "load",
    "load_file",
    "outfile",
    "dumpfile",
    "infile",
];

/// Refuses a statement the capability does not run; the message says why.
pub fn check(pool: &Pool, sql: &str) -> Result<(), String> {
    let words = words(pool, sql)?;
    let first = words.first().map(String::as_str).unwrap_or_default();
    if !ALLOWED_FIRST.contains(&first) {
        let what = if first.is_empty() { "an empty statement".to_string() } else { format!("'{first}'") };
        return Err(format!("refused: {what} is not a statement a sink runs (allowed: {})", ALLOWED_FIRST.join(", ")));
    }
    if matches!(first, "create" | "alter") {
        let object = words.get(1).map(String::as_str).unwrap_or_default();
        if !ALLOWED_OBJECTS.contains(&object) {
            return Err(format!("refused: {first} {object}: only tables and indexes may be created or altered"));
        }
    }
    if let Some(word) = words.iter().find(|w| REFUSED_WORDS.contains(&w.as_str())) {
        return Err(format!("refused: '{word}' reaches past the database (quote it if it is an identifier of yours)"));
    }
    Ok(())
}

/// The statement's bare words, lower case, outside literals, quoted
/// identifiers and comments; an error for a second statement or a
/// construct that hides code from this reading.
fn words(pool: &Pool, sql: &str) -> Result<Vec<String>, String> {
    let mysql = matches!(pool, Pool::MySql(_));
    let postgres = matches!(pool, Pool::Postgres(_));
    let bytes = sql.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    let skip_quoted = |i: usize, quote: u8| -> Result<usize, String> {
        // Doubled quotes escape; MySQL also escapes with a backslash.
        let mut j = i + 1;
        while j < bytes.len() {
            if mysql && quote != b'`' && bytes[j] == b'\\' {
                j += 2;
                continue;
            }
            if bytes[j] == quote {
                if bytes.get(j + 1) == Some(&quote) {
                    j += 2;
                    continue;
                }
                return Ok(j + 1);
            }
            j += 1;
        }
        Err("refused: an unterminated quote".to_string())
    };
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'\'' | b'"' | b'`' => i = skip_quoted(i, b)?,
            b'-' if bytes.get(i + 1) == Some(&b'-') => {
                i = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p + 1);
            }
            b'#' if mysql => {
                i = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p + 1);
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                // MySQL runs the inside of /*! ... */ and MariaDB of /*M! ... */.
                if mysql && matches!(bytes.get(i + 2), Some(b'!') | Some(b'M')) {
                    return Err("refused: executable comments (/*! ... */)".to_string());
                }
                let end = sql[i + 2..].find("*/").ok_or("refused: an unterminated comment")?;
                i += 2 + end + 2;
            }
            b'$' if postgres && !bytes.get(i + 1).is_some_and(u8::is_ascii_digit) => {
                return Err("refused: dollar-quoted strings (bind the value as a parameter)".to_string());
            }
            b';' => {
                if !words_after(&sql[i + 1..]) {
                    i += 1;
                    continue;
                }
                return Err("refused: more than one statement (send each on its own)".to_string());
            }
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$') {
                    i += 1;
                }
                words.push(sql[start..i].to_ascii_lowercase());
            }
            _ => i += 1,
        }
    }
    Ok(words)
}

/// Whether anything but blanks and comments follows a `;`.
fn words_after(rest: &str) -> bool {
    let mut rest = rest.trim_start();
    loop {
        if let Some(r) = rest.strip_prefix("--") {
            rest = r.split_once('\n').map_or("", |(_, r)| r).trim_start();
        } else if let Some(r) = rest.strip_prefix("/*") {
            rest = r.split_once("*/").map_or("", |(_, r)| r).trim_start();
        } else {
            return !rest.is_empty();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::postgres::PgPoolOptions;

    fn pools() -> [Pool; 3] {
        let pg = PgPoolOptions::new().connect_lazy("postgres://127.0.0.1:1/x").unwrap();
        let my = sqlx::mysql::MySqlPoolOptions::new().connect_lazy("mysql://127.0.0.1:1/x").unwrap();
        let lite = sqlx::sqlite::SqlitePoolOptions::new().connect_lazy("sqlite::memory:").unwrap();
        [Pool::Postgres(pg), Pool::MySql(my), Pool::Sqlite(lite)]
    }

    #[tokio::test]
    async fn what_a_sink_runs_passes() {
        for pool in pools() {
            for sql in [
                "INSERT INTO \"t\" (\"a\", \"program\") VALUES ($1, 'copy; load data')",
                "insert into t (a) values (?) on conflict (a) do update set a = excluded.a;",
                "UPDATE t SET a = ? WHERE b = ? -- trailing comment",
                "DELETE FROM t WHERE k = ?",
                "CREATE TABLE IF NOT EXISTS t (a BIGINT NOT NULL, PRIMARY KEY (a))",
                "ALTER TABLE t ADD COLUMN b TEXT NULL",
                "CREATE UNIQUE INDEX i ON t (a)",
                "SELECT count(*) FROM t /* a comment */",
                "INSERT INTO t (`load`) VALUES (?)",
            ] {
                let sql = if matches!(pool, Pool::MySql(_)) { sql.to_string() } else { sql.replace('`', "\"") };
                assert_eq!(check(&pool, &sql), Ok(()), "{} refused {sql}", pool.dialect_name());
            }
        }
    }

    #[tokio::test]
    async fn what_reaches_past_the_database_is_refused() {
        let [pg, my, lite] = pools();
        for (pool, sql, why) in [
            (&lite, "ATTACH DATABASE '/etc/passwd.db' AS x", "'attach' is not a statement"),
            (&lite, "PRAGMA writable_schema = ON", "'pragma' is not a statement"),
            (&lite, "VACUUM INTO '/tmp/copy.db'", "'vacuum' is not"),
            (&lite, "SELECT load_extension('/tmp/evil.so')", "'load_extension' reaches past"),
            (&lite, "INSERT INTO t VALUES (1); ATTACH DATABASE 'x' AS y", "more than one statement"),
            (&pg, "COPY t TO PROGRAM 'rm -rf /'", "'copy' is not a statement"),
            (&pg, "WITH x AS (SELECT 1) SELECT pg_read_file('/etc/passwd')", "'pg_read_file' reaches past"),
            (&pg, "SELECT lo_import('/etc/passwd')", "'lo_import'"),
            (&pg, "SELECT $x$ hidden $x$", "dollar-quoted"),
            (&pg, "DO $$ BEGIN END $$", "dollar-quoted"),
            (&pg, "SET ROLE postgres", "'set' is not a statement"),
            (&pg, "CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", "only tables and indexes"),
            (&pg, "ALTER SYSTEM SET x = 1", "only tables and indexes"),
            (&my, "LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "'load' is not a statement"),
            (&my, "SELECT * FROM t INTO OUTFILE '/tmp/x'", "'outfile' reaches past"),
            (&my, "SELECT 1 INTO DUMPFILE '/tmp/x'", "'dumpfile'"),
            (&my, "SELECT load_file('/etc/passwd')", "'load_file'"),
            (&my, "SELECT 1 /*! INTO OUTFILE '/tmp/x' */", "executable comments"),
            (&my, "SELECT 'it\\'s' INTO OUTFILE '/tmp/x'", "'outfile' reaches past"),
            (&my, "SELECT 'unterminated", "unterminated quote"),
            (&my, "SELECT 1 # ; DROP TABLE t\n; DROP TABLE t", "more than one statement"),
            (&lite, "", "an empty statement"),
        ] {
            let err = check(pool, sql).expect_err(sql);
            assert!(err.contains(why), "{sql}: {err}");
        }
    }
}
