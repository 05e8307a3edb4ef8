//! What a plugin may send: one statement of the kinds a sink needs, over
//! the tables of the database it was granted, calling only functions a sink
//! needs. The database's own privileges are the second wall (README
//! recommends a least-privilege role); this is the first, and it holds
//! whatever role the operator granted.
//!
//! The statement is parsed as its database reads it, by `sqlparser`'s
//! dialect for it, and admitted by an allow-list over the parse tree: what
//! the parser cannot read is refused, so a statement the guard reads as
//! harmless cannot run as something else.

use super::grant::Pool;
use super::sqlite_split;
use sqlparser::ast::{
    AccessExpr, AlterTableOperation, ColumnDef, ColumnOption, Expr, ObjectName, Query, SetExpr, Statement,
    TableConstraint, TableFactor, Visit, Visitor,
};
use sqlparser::dialect::{Dialect, MySqlDialect, PostgreSqlDialect, SQLiteDialect};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Token, Tokenizer, Whitespace};
use std::ops::ControlFlow;

/// The statements a sink may run.
const ALLOWED_STATEMENTS: &str = "SELECT, INSERT (and REPLACE), UPDATE, DELETE, MERGE, CREATE TABLE, CREATE INDEX, \
                                  ALTER TABLE ... ADD";

/// The functions a statement may call: aggregates, and what computes on
/// values. Nothing that reads files, runs programs or reaches other servers.
/// Which session a statement ran on (`connection_id`, `pg_backend_pid`) is
/// allowed: a sink may log it, and it reaches nothing. Nothing that sleeps
/// or builds a string of a size it is given (`repeat`, `lpad`) either: the
/// database's time and memory are the operator's.
#[rustfmt::skip]
const ALLOWED_FUNCTIONS: &[&str] = &[
    // Aggregates and window functions.
    "array_agg", "avg", "bool_and", "bool_or", "count", "dense_rank", "first_value", "group_concat", "lag",
    "last_value", "lead", "max", "min", "rank", "row_number", "string_agg", "sum",
    // Values: choice, numbers, text, bytes.
    "abs", "ceil", "ceiling", "coalesce", "exp", "floor", "greatest", "if", "ifnull", "iif", "least", "ln", "log",
    "mod", "nullif", "power", "round", "sign", "sqrt", "char_length", "concat", "concat_ws", "hex", "instr",
    "left", "length", "lower", "ltrim", "md5", "octet_length", "replace", "right", "rtrim", "sha1", "sha2",
    "strpos", "substr", "substring", "trim", "typeof", "unhex", "upper",
    // Time.
    "current_date", "current_time", "current_timestamp", "date", "date_format", "date_part", "date_trunc",
    "datetime", "from_unixtime", "julianday", "localtimestamp", "now", "strftime", "to_char", "to_timestamp",
    "unix_timestamp", "unixepoch", "utc_timestamp",
    // JSON, identifiers, and which session ran the statement.
    "json_array", "json_build_array", "json_build_object", "json_extract", "json_object", "json_unquote",
    "jsonb_build_object", "to_json", "to_jsonb", "gen_random_uuid", "uuid", "connection_id", "pg_backend_pid",
    "values",
];

/// Refuses a statement the capability does not run; the message says why.
pub fn check(pool: &Pool, sql: &str) -> Result<(), String> {
    let dialect = dialect(pool);
    let unreadable =
        |e: &dyn std::fmt::Display| format!("refused: {} cannot read this statement: {e}", pool.dialect_name());
    // Unescaped: the checks see each string literal as written.
    let tokens = Tokenizer::new(dialect.as_ref(), sql).with_unescape(false).tokenize().map_err(|e| unreadable(&e))?;
    check_tokens(pool, &tokens)?;
    if let Pool::MySql(_) = pool {
        check_versioned_comments(sql)?;
    }
    let statements = Parser::parse_sql(dialect.as_ref(), sql).map_err(|e| unreadable(&e))?;
    let statement = match statements.as_slice() {
        [one] => one,
        [] => return Err("refused: an empty statement".to_string()),
        _ => return Err("refused: more than one statement (send each on its own)".to_string()),
    };
    if let ControlFlow::Break(why) = statement.visit(&mut Guard { pool }) {
        return Err(format!("refused: {why}"));
    }
    match pool {
        Pool::Sqlite(_) => sqlite_split::check_one_statement(sql),
        _ => Ok(()),
    }
}

fn dialect(pool: &Pool) -> Box<dyn Dialect> {
    match pool {
        Pool::Postgres(_) => Box::new(PostgreSqlDialect {}),
        // MariaDB reads statements as MySQL does, for what a sink sends.
        Pool::MySql(_) => Box::new(MySqlDialect {}),
        Pool::Sqlite(_) => Box::new(SQLiteDialect {}),
    }
}

/// What the tokens alone show: a second statement after a `;` (said before
/// the parser fails on what the second holds), and MariaDB's executable
/// comments. MySQL runs the inside of `/*! ... */` and MariaDB of
/// `/*M! ... */`: the tokenizer reads the first as code, which the parser
/// then checks, but keeps the second a comment, so it is refused.
fn check_tokens(pool: &Pool, tokens: &[Token]) -> Result<(), String> {
    let code = |t: &&Token| !matches!(t, Token::Whitespace(_));
    if let Some(semicolon) = tokens.iter().position(|t| *t == Token::SemiColon)
        && tokens[semicolon + 1..].iter().any(|t| code(&t))
    {
        return Err("refused: more than one statement (send each on its own)".to_string());
    }
    // Where the database's own tokenizer reads a token otherwise than the
    // parser does, what the parser sees is not what runs: such tokens are
    // refused. Placeholders are the driver's (`$N`, `?`, `?N`); SQLite
    // reads `$name(...)` as one variable and has no `::`; PostgreSQL takes
    // any non-ASCII character in a `$tag$` quote, where the parser sees a
    // placeholder; MySQL's `--` is a comment only before ASCII blank.
    for token in tokens {
        let refused = match (pool, token) {
            (Pool::Postgres(_), Token::Placeholder(p)) => !is_numbered(p, '$'),
            (Pool::Postgres(_), Token::DollarQuotedString(q)) => q.tag.as_ref().is_some_and(|t| !t.is_ascii()),
            (Pool::Sqlite(_), Token::Placeholder(p)) => p != "?" && !is_numbered(p, '?'),
            (Pool::Sqlite(_), Token::DoubleColon) => true,
            (Pool::MySql(_), Token::Placeholder(p)) => p != "?",
            (Pool::MySql(_), Token::Whitespace(Whitespace::SingleLineComment { prefix, comment })) => {
                prefix == "--" && !comment.is_empty() && !comment.starts_with([' ', '\t', '\n', '\r'])
            }
            // MariaDB's executable comments, and optimizer hints, which set
            // session variables.
            (Pool::MySql(_), Token::Whitespace(Whitespace::MultiLineComment(c))) => {
                c.starts_with("M!") || c.starts_with('+')
            }
            // Server and session variables.
            (Pool::MySql(_), Token::Word(w)) => w.value.starts_with('@'),
            // A backslash in a string is an escape or a character as the
            // server's mode says (MySQL's NO_BACKSLASH_ESCAPES,
            // PostgreSQL's standard_conforming_strings), so where the string
            // ends is the server's to say. E'...' escapes whatever the mode.
            (Pool::MySql(_), Token::SingleQuotedString(s) | Token::DoubleQuotedString(s))
            | (Pool::MySql(_) | Pool::Postgres(_), Token::NationalStringLiteral(s))
            | (Pool::Postgres(_), Token::SingleQuotedString(s)) => s.contains('\\'),
            _ => false,
        };
        if refused {
            return Err(format!("refused: '{token}' is read otherwise by the database than by the guard"));
        }
    }
    Ok(())
}

/// MySQL runs `/*!NNNNN code */` on servers of version NNNNN and later,
/// reading five digits (MariaDB up to six), and the rest as code; the parser
/// skips every digit. So a version is five digits and a blank, or none:
/// `/*!500001abc` is read as `abc` by the parser and `1abc` by MySQL.
fn check_versioned_comments(sql: &str) -> Result<(), String> {
    for (at, _) in sql.match_indices("/*!") {
        let rest = &sql[at + 3..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let blank_after = rest.as_bytes().get(digits).is_some_and(u8::is_ascii_whitespace);
        if !(digits == 0 || (digits == 5 && blank_after)) {
            let shown: String = sql[at..].chars().take(3 + digits + 1).collect();
            return Err(format!(
                "refused: '{shown}': a versioned comment's version is five digits and a blank, read otherwise by \
                 the database than by the guard"
            ));
        }
    }
    Ok(())
}

/// `$1`, `?2`: the prefix and digits only.
fn is_numbered(placeholder: &str, prefix: char) -> bool {
    placeholder.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Walks the parse tree, breaking with the reason at the first thing a sink
/// may not do.
struct Guard<'p> {
    pool: &'p Pool,
}

impl Visitor for Guard<'_> {
    type Break = String;

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<String> {
        let refused = |what: &str| {
            ControlFlow::Break(format!("{what} is not a statement a sink runs (allowed: {ALLOWED_STATEMENTS})"))
        };
        match statement {
            Statement::Query(_) | Statement::Insert(_) | Statement::Update(_) | Statement::Delete(_) => {}
            Statement::Merge(_) | Statement::CreateIndex(_) => {}
            Statement::CreateTable(create) => {
                // Only columns and constraints: no options (a MySQL data
                // directory, a foreign engine), no AS SELECT, no LIKE.
                let plain = sqlparser::ast::helpers::stmt_create_table::CreateTableBuilder::new(create.name.clone())
                    .if_not_exists(create.if_not_exists)
                    .columns(create.columns.clone())
                    .constraints(create.constraints.clone())
                    .build();
                if plain.to_string() != create.to_string() {
                    return ControlFlow::Break(
                        "CREATE TABLE may name its columns and constraints only, with no table options".into(),
                    );
                }
                for table in foreign_tables(&create.columns, &create.constraints) {
                    self.check_table(table)?;
                }
            }
            Statement::AlterTable(alter) => {
                let adds = |op: &AlterTableOperation| {
                    matches!(op, AlterTableOperation::AddColumn { .. } | AlterTableOperation::AddConstraint { .. })
                };
                if !alter.operations.iter().all(adds) {
                    return ControlFlow::Break("ALTER TABLE may only add columns and constraints".into());
                }
                for op in &alter.operations {
                    let (columns, constraints) = match op {
                        AlterTableOperation::AddColumn { column_def, .. } => {
                            (std::slice::from_ref(column_def), &[][..])
                        }
                        AlterTableOperation::AddConstraint { constraint, .. } => {
                            (&[][..], std::slice::from_ref(constraint))
                        }
                        _ => continue,
                    };
                    for table in foreign_tables(columns, constraints) {
                        self.check_table(table)?;
                    }
                }
            }
            other => return refused(&first_words(other)),
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<String> {
        check_set_expr(&query.body)
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<String> {
        self.check_table(relation)
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        match factor {
            // A name with arguments is a function returning rows.
            TableFactor::Table { name, args: Some(_), .. } | TableFactor::Function { name, .. } => check_function(name),
            _ => ControlFlow::Continue(()),
        }
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<String> {
        match expr {
            Expr::Function(function) => check_function(&function.name),
            // PostgreSQL calls `(x).f` as `f(x)` when f is a function.
            Expr::CompoundFieldAccess { access_chain, .. }
                if access_chain.iter().any(|a| matches!(a, AccessExpr::Dot(_))) =>
            {
                ControlFlow::Break(format!("'{expr}': field access on an expression may call a function"))
            }
            _ => ControlFlow::Continue(()),
        }
    }
}

impl Guard<'_> {
    /// A table of the granted database: no system catalogue, no other
    /// database on the same server.
    fn check_table(&self, name: &ObjectName) -> ControlFlow<String> {
        let parts = name_parts(name);
        let system = |part: &String| match self.pool {
            Pool::Postgres(_) => part.starts_with("pg_") || part == "information_schema",
            Pool::MySql(_) => false,
            Pool::Sqlite(_) => part.starts_with("sqlite_") || part.starts_with("pragma_"),
        };
        // Qualified names a sink may use: PostgreSQL's schema.table,
        // SQLite's main.table, and MySQL's db.table of the granted database
        // (its name as the URL gives it: names are case-sensitive there).
        let qualified_ok = match self.pool {
            Pool::Postgres(_) => parts.len() <= 2,
            Pool::MySql(pool) => {
                let granted = pool.connect_options().get_database().map(str::to_string);
                let first = name.0.first().and_then(|part| part.as_ident()).map(|i| i.value.clone());
                parts.len() == 1 || (parts.len() == 2 && granted.is_some() && first == granted)
            }
            Pool::Sqlite(_) => parts.len() == 1 || (parts.len() == 2 && parts[0] == "main"),
        };
        if !qualified_ok || parts.iter().any(String::is_empty) {
            return ControlFlow::Break(format!("'{name}' names a table outside the granted database"));
        }
        if parts.iter().any(system) {
            return ControlFlow::Break(format!("'{name}' is the database's own catalogue, not a sink's table"));
        }
        ControlFlow::Continue(())
    }
}

/// A query's body, through its set operations: `TABLE x` names its table
/// as plain text, which the relation check never sees, so it is refused;
/// `SELECT ... INTO` makes a table (or, in MySQL, a file), wherever it is.
fn check_set_expr(body: &SetExpr) -> ControlFlow<String> {
    match body {
        SetExpr::Table(_) => ControlFlow::Break("TABLE x: name the table in a SELECT".into()),
        SetExpr::Select(select) if select.into.is_some() => {
            ControlFlow::Break("SELECT ... INTO makes a table or file: use CREATE TABLE and INSERT".into())
        }
        SetExpr::SetOperation { left, right, .. } => {
            check_set_expr(left)?;
            check_set_expr(right)
        }
        _ => ControlFlow::Continue(()),
    }
}

/// The tables that foreign keys in these columns and constraints refer to.
fn foreign_tables<'a>(columns: &'a [ColumnDef], constraints: &'a [TableConstraint]) -> Vec<&'a ObjectName> {
    let of_columns = columns.iter().flat_map(|c| &c.options).filter_map(|o| match &o.option {
        ColumnOption::ForeignKey(fk) => Some(&fk.foreign_table),
        _ => None,
    });
    let of_constraints = constraints.iter().filter_map(|c| match c {
        TableConstraint::ForeignKey(fk) => Some(&fk.foreign_table),
        _ => None,
    });
    of_columns.chain(of_constraints).collect()
}

/// A function of [`ALLOWED_FUNCTIONS`], by its plain name.
fn check_function(name: &ObjectName) -> ControlFlow<String> {
    let plain = match name_parts(name).as_slice() {
        [one] => one.clone(),
        _ => String::new(),
    };
    if ALLOWED_FUNCTIONS.contains(&plain.as_str()) {
        return ControlFlow::Continue(());
    }
    ControlFlow::Break(format!("'{name}' is not a function a sink calls (allowed: {})", ALLOWED_FUNCTIONS.join(", ")))
}

/// A name's parts, unquoted, in lower case; a part computed by a function
/// is none a sink names, so it reads as empty, which nothing allows.
fn name_parts(name: &ObjectName) -> Vec<String> {
    name.0.iter().map(|part| part.as_ident().map_or_else(String::new, |i| i.value.to_lowercase())).collect()
}

/// The statement's first words, to name what was refused.
fn first_words(statement: &Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    format!("'{}'", words.join(" "))
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

    /// What the SQL sink sends (its upserts, updates, deletes and DDL, as
    /// its own tests spell them), and what a hand-written sink would.
    #[tokio::test]
    async fn what_a_sink_runs_passes() {
        let [pg, my, lite] = pools();
        let pg_upsert = "INSERT INTO \"t\" (\"id\", \"region\", \"name\", \"qty\") VALUES ($1, $2, $3, $4) \
             ON CONFLICT (\"id\", \"region\") DO UPDATE SET \"name\" = EXCLUDED.\"name\", \"qty\" = EXCLUDED.\"qty\"";
        let lite_upsert = pg_upsert.replace(['$'], "?").replace(|c: char| c.is_ascii_digit(), "");
        for (pool, sql) in [
            (&pg, pg_upsert),
            (&lite, lite_upsert.as_str()),
            (
                &my,
                "INSERT INTO `t` (`id`, `region`, `name`, `qty`) VALUES (?, ?, ?, ?), (?, ?, ?, ?) \
                 ON DUPLICATE KEY UPDATE `name` = VALUES(`name`), `qty` = VALUES(`qty`)",
            ),
            (&pg, "INSERT INTO \"t\" (\"id\", \"region\") VALUES ($1, $2) ON CONFLICT (\"id\", \"region\") DO NOTHING"),
            (&my, "INSERT INTO `t` (`id`, `region`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `id` = `id`"),
            (&pg, "UPDATE \"t\" SET \"name\" = $1, \"qty\" = $2 WHERE \"id\" = $3 AND \"region\" = $4"),
            (&my, "UPDATE `t` SET `name` = ?, `qty` = ? WHERE `id` = ? AND `region` = ?"),
            (&pg, "DELETE FROM \"s\".\"t\" WHERE \"id\" = $1 AND \"region\" = $2"),
            (&lite, "DELETE FROM \"t\" WHERE \"id\" = ?"),
            (
                &pg,
                "CREATE TABLE IF NOT EXISTS \"app\".\"t\" (\n\"id\" BIGINT NOT NULL,\n\"note\" TEXT,\nPRIMARY KEY (\"id\")\n)",
            ),
            (&my, "CREATE TABLE IF NOT EXISTS `t` (\n`note` TEXT\n)"),
            (&pg, "ALTER TABLE \"t\" ADD COLUMN IF NOT EXISTS \"note\" TEXT"),
            (&my, "ALTER TABLE `t` ADD COLUMN `note` TEXT"),
            (&lite, "ALTER TABLE \"t\" ADD COLUMN \"note\" TEXT"),
            (&pg, "INSERT INTO \"t\" (\"a\", \"program\") VALUES ($1, 'copy; load data')"),
            (&my, "INSERT INTO t (`load`) VALUES (?) -- trailing comment"),
            (&my, "REPLACE INTO t (a) VALUES (?)"),
            (&lite, "SELECT count(*), max(a) FROM t /* a comment */ WHERE b = ?;"),
            (&pg, "WITH recent AS (SELECT a FROM t WHERE b > now()) SELECT coalesce(sum(a), 0) FROM recent"),
            (&pg, "CREATE UNIQUE INDEX i ON t (a)"),
            (&lite, "SELECT [a] FROM [t]"),
            (&pg, "SELECT E'it\\'s' FROM t"),
            // What the capability's own tests send.
            (
                &pg,
                "CREATE TABLE t (id BIGINT PRIMARY KEY, amount NUMERIC(20,4), data BYTEA, doc JSONB, ref UUID, \
                 at TIMESTAMP, at_tz TIMESTAMPTZ)",
            ),
            (
                &my,
                "CREATE TABLE t (id BIGINT PRIMARY KEY, ratio FLOAT, amount DECIMAL(20,4), data BLOB, doc JSON, \
                 at_time TIME(6), at DATETIME(6), at_tz TIMESTAMP(6) NULL)",
            ),
            (&lite, "CREATE TABLE t (id INTEGER PRIMARY KEY, amount NUMERIC, at DATETIME)"),
            (&my, "CREATE TABLE t (id BIGINT NOT NULL, part INTEGER NOT NULL, note TEXT, PRIMARY KEY (id, part))"),
            (
                &pg,
                "SELECT doc->'nested'->'a'->>1, ref = '6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b1c00'::uuid, \
                 amount = 12345.6789, at_tz = '2024-02-29T12:34:56.789012Z'::timestamptz FROM t WHERE id = 1",
            ),
            (&lite, "SELECT CAST(strftime('%s', at) AS INTEGER) FROM t WHERE id = 1"),
            (&pg, "SELECT pg_backend_pid()"),
            (&my, "SELECT CONNECTION_ID()"),
            // The granted database by name (the pools' URLs name `x`).
            (&my, "SELECT a FROM x.t JOIN `x`.`u` ON t.a = u.a"),
            (&my, "SELECT 1 /*!50000 , 2 */"),
            (&my, "SELECT 'it''s', date_format(at, '%Y'), concat_ws('-', a, b), row_number() OVER (ORDER BY a) FROM t"),
            (&pg, "SELECT string_agg(a, ','), json_build_object('a', a), to_char(at, 'YYYY') FROM t GROUP BY b"),
        ] {
            assert_eq!(check(pool, sql), Ok(()), "{} refused {sql}", pool.dialect_name());
        }
    }

    #[tokio::test]
    async fn what_reaches_past_the_database_is_refused() {
        let [pg, my, lite] = pools();
        let nested = format!("SELECT {}1{}", "(".repeat(200), ")".repeat(200));
        let mut wrong = Vec::new();
        for (pool, sql, why) in [
            (&lite, "ATTACH DATABASE '/etc/passwd.db' AS x", "is not a statement a sink runs"),
            (&lite, "PRAGMA writable_schema = ON", "cannot read"),
            (&lite, "PRAGMA writable_schema", "is not a statement a sink runs"),
            (&lite, "VACUUM INTO '/tmp/copy.db'", "cannot read"),
            (&lite, "SELECT load_extension('/tmp/evil.so')", "'load_extension' is not a function"),
            (&lite, "INSERT INTO t VALUES (1); ATTACH DATABASE 'x' AS y", "more than one statement"),
            (&pg, "SELECT 1; COPY t TO PROGRAM 'x'", "more than one statement"),
            (&my, "SELECT 1;; SELECT 1 INTO OUTFILE '/tmp/x'", "more than one statement"),
            (&lite, "SELECT * FROM sqlite_master", "catalogue"),
            (&lite, "SELECT * FROM other.t", "outside the granted database"),
            (&pg, "COPY t TO PROGRAM 'rm -rf /'", "is not a statement a sink runs"),
            (&pg, "WITH x AS (SELECT 1) SELECT pg_read_file('/etc/passwd')", "'pg_read_file' is not a function"),
            (&pg, "SELECT pg_catalog.lower('a')", "is not a function"),
            (&pg, "SELECT lo_import('/etc/passwd')", "'lo_import'"),
            (&pg, "SELECT * FROM dblink('host=evil', 'select 1') AS t(a int)", "'dblink' is not a function"),
            (&pg, "SELECT * FROM pg_authid", "catalogue"),
            (&pg, "SELECT * FROM information_schema.tables", "catalogue"),
            (&pg, "SELECT * INTO copy FROM t", "SELECT ... INTO"),
            (&pg, "DO $$ BEGIN END $$", "cannot read"),
            (&pg, "SET ROLE postgres", "is not a statement a sink runs"),
            (&pg, "CREATE FUNCTION f() RETURNS int AS 'select 1' LANGUAGE sql", "is not a statement a sink runs"),
            (&pg, "CREATE TABLE t2 AS SELECT * FROM t", "columns and constraints only"),
            (&pg, "ALTER TABLE t OWNER TO postgres", "only add columns"),
            (&pg, "ALTER SYSTEM SET x = 1", "cannot read"),
            // E'' takes backslash escapes: the quote is escaped, and the rest is one string.
            (&pg, "SELECT E'\\'; SELECT pg_read_file(''x'')' FROM t; SELECT 1", "more than one statement"),
            (&my, "LOAD DATA INFILE '/etc/passwd' INTO TABLE t", "cannot read"),
            (&my, "SELECT * FROM t INTO OUTFILE '/tmp/x'", "cannot read"),
            (&my, "SELECT load_file('/etc/passwd')", "'load_file' is not a function"),
            (&my, "SELECT 1 /*! INTO OUTFILE '/tmp/x' */", "cannot read"),
            (&my, "SELECT 1 /*!50000 , load_file('/etc/passwd') */", "'load_file' is not a function"),
            (&my, "SELECT 1 /*M! , load_file('/etc/passwd') */", "read otherwise"),
            (&my, "SELECT * FROM mysql.user", "outside the granted database"),
            (&my, "CREATE TABLE t (a INT) DATA DIRECTORY = '/tmp'", "columns and constraints only"),
            (&my, "CREATE TABLE t (a INT) ENGINE = CONNECT", "columns and constraints only"),
            (&my, "SELECT 'unterminated", "cannot read"),
            (&my, "SELECT 1 # ; DROP TABLE t\n; DROP TABLE t", "more than one statement"),
            // MySQL reads `--x` as two minus signs, not a comment: two statements.
            (&my, "SELECT 1 --x\n; DROP TABLE t", "more than one statement"),
            (&lite, "", "an empty statement"),
            (&pg, nested.as_str(), "cannot read"),
            // Read otherwise by the database than by the parser (found in review).
            (&lite, "SELECT $1::b(') ; ATTACH \"/tmp/evil.db\" AS y ; --')", "read otherwise"),
            (&pg, "SELECT $€$,'$€$, pg_read_file($$/etc/passwd$$), $€$' AS x, $€$", "read otherwise"),
            (&my, "SELECT 1 --\u{a0}, load_file(0x2f) FROM (SELECT 1 AS `\u{a0}`) x", "read otherwise"),
            (&my, "SELECT /*+ SET_VAR(foreign_key_checks=0) */ * FROM t", "read otherwise"),
            (&my, "SELECT @@datadir", "read otherwise"),
            (&pg, "SELECT ('/etc/passwd'::text).pg_read_file", "may call a function"),
            (&pg, "SELECT * FROM (TABLE pg_shadow) x", "TABLE x"),
            (&pg, "SELECT * FROM t UNION TABLE information_schema.tables", "TABLE x"),
            (&my, "INSERT INTO t TABLE mysql.user", "TABLE x"),
            (&pg, "SELECT 1 INTO newt UNION SELECT 2", "SELECT ... INTO"),
            (&lite, "SELECT * FROM pragma_database_list", "catalogue"),
            (&pg, "CREATE TABLE t (a oid REFERENCES pg_authid(oid))", "catalogue"),
            (&my, "ALTER TABLE t ADD CONSTRAINT f FOREIGN KEY (a) REFERENCES mysql.user (x)", "outside the granted"),
            // Found in review after the parser came in.
            (&my, "SELECT * FROM X.t", "outside the granted database"),
            (&my, "SELECT * FROM other.t", "outside the granted database"),
            (&my, "SELECT a /*!500001abc */ FROM t", "versioned comment"),
            (&my, "SELECT 1 /*!5 , 2 */", "versioned comment"),
            (&my, "SELECT 'a\\'' , 'b' FROM t", "read otherwise"),
            (&my, "SELECT \"a\\\\\" FROM t", "read otherwise"),
            (&pg, "SELECT '\\', 'x' FROM t", "read otherwise"),
            (&pg, "SELECT pg_sleep(3600)", "'pg_sleep' is not a function"),
            (&my, "SELECT repeat('x', 1000000000)", "'repeat' is not a function"),
        ] {
            match check(pool, sql) {
                Err(err) if err.contains(why) => {}
                other => wrong.push(format!("{} {sql}: {other:?}", pool.dialect_name())),
            }
        }
        assert!(wrong.is_empty(), "not refused as expected:\n{}", wrong.join("\n"));
    }
}
