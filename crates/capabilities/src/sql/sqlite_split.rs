//! The guard's second line on SQLite: where SQLite's own scanner ends the
//! first statement. sqlx-sqlite runs every statement in the text it is given
//! (PostgreSQL's and MySQL's prepared statements take one only, so their
//! servers refuse a second), and a parser's idea of where a string or
//! comment ends can differ from the database's. `sqlite3_complete` is the
//! scanner the sqlite3 shell uses to find statement ends (strings, quoted
//! names, `[...]`, comments, a trigger's BEGIN ... END): a prefix ending at
//! a `;` that it calls complete ends a statement. It does not know SQLite's
//! `$name(...)` variables; the first line refuses those.

use std::ffi::CString;

/// Semicolons a statement for SQLite may hold (each is checked with a pass
/// over the text before it). A sink binds values as parameters, so its
/// statements have next to none.
const MAX_SEMICOLONS: usize = 64;

/// Refuses text in which SQLite reads more than one statement.
pub fn check_one_statement(sql: &str) -> Result<(), String> {
    if sql.contains('\0') {
        return Err("refused: a NUL character, where SQLite stops reading".to_string());
    }
    let semicolons: Vec<usize> = sql.match_indices(';').map(|(at, _)| at).collect();
    if semicolons.len() > MAX_SEMICOLONS {
        return Err(format!("refused: more than {MAX_SEMICOLONS} ';' in a statement for SQLite"));
    }
    for at in semicolons {
        if sql[at + 1..].trim().is_empty() {
            break;
        }
        let prefix = CString::new(&sql[..=at]).expect("NUL refused above");
        // SAFETY: a NUL-terminated string that lives across the call;
        // sqlite3_complete only reads it.
        if unsafe { libsqlite3_sys::sqlite3_complete(prefix.as_ptr()) } != 0 {
            return Err("refused: more than one statement, as SQLite reads it (send each on its own)".to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_statement_as_sqlite_reads_it_is_refused() {
        for sql in [
            "SELECT 1; SELECT 2",
            "SELECT 1 /* ; */ ; ATTACH 'x' AS y",
            "SELECT 1; -- a comment",
            "SELECT 1\0; ATTACH 'x' AS y",
        ] {
            assert!(check_one_statement(sql).is_err(), "admitted {sql:?}");
        }
        let many = format!("SELECT '{}'", ";".repeat(MAX_SEMICOLONS + 1));
        assert!(check_one_statement(&many).is_err(), "admitted {} semicolons", MAX_SEMICOLONS + 1);
    }

    #[test]
    fn one_statement_with_semicolons_in_strings_and_comments_is_admitted() {
        for sql in [
            "SELECT 1",
            "SELECT 1;",
            "SELECT 1;  \n",
            "INSERT INTO t (a) VALUES ('a; ATTACH x AS y')",
            "SELECT 1 /* ; ATTACH 'x' AS y */",
            "SELECT \"a;b\" FROM t -- ; ATTACH\n",
            "SELECT [a;b] FROM t",
            "CREATE TRIGGER t AFTER INSERT ON a BEGIN DELETE FROM b; END;",
        ] {
            assert_eq!(check_one_statement(sql), Ok(()), "refused {sql:?}");
        }
    }
}
