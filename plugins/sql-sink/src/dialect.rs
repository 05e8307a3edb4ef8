//! The SQL text the sink sends, per dialect: identifier quoting,
//! placeholders, INSERT / upsert / UPDATE / DELETE, CREATE TABLE and
//! ALTER TABLE, and the column type of a Connect schema.

use spillway_sdk::data::{Logical, Schema, Type};
use spillway_sdk::sql::Dialect;

/// Writes statements for one database.
#[derive(Clone, Copy, Debug)]
pub struct Sql {
    pub dialect: Dialect,
    /// `quote.sql.identifiers=always`.
    pub quote: bool,
}

/// A column of a table to create or add.
#[derive(Clone, Debug)]
pub struct ColumnDef {
    pub name: String,
    /// The dialect's type (`BIGINT`, `JSONB`, ...).
    pub ty: String,
    pub not_null: bool,
}

impl Sql {
    pub fn new(dialect: Dialect, quote: bool) -> Self {
        Sql { dialect, quote }
    }

    /// An identifier: quoted (quotes inside doubled) or bare.
    pub fn ident(&self, name: &str) -> String {
        if !self.quote {
            return name.to_string();
        }
        let q = match self.dialect {
            Dialect::Mysql => '`',
            Dialect::Postgres | Dialect::Sqlite => '"',
        };
        let mut out = String::with_capacity(name.len() + 2);
        out.push(q);
        for c in name.chars() {
            if c == q {
                out.push(q);
            }
            out.push(c);
        }
        out.push(q);
        out
    }

    /// A table name, `table` or `schema.table`, quoted part by part.
    pub fn table(&self, name: &str) -> String {
        name.split('.').map(|part| self.ident(part)).collect::<Vec<_>>().join(".")
    }

    /// The placeholder of the `n`-th parameter (from 1).
    pub fn placeholder(&self, n: usize) -> String {
        let mut out = String::new();
        self.push_placeholder(&mut out, n);
        out
    }

    /// Appends the placeholder of the `n`-th parameter (from 1): a
    /// multi-row statement has thousands, each written in place.
    fn push_placeholder(&self, out: &mut String, n: usize) {
        match self.dialect {
            Dialect::Postgres => {
                // Digit by digit: the formatting machinery costs more.
                let mut digits = [0u8; 20];
                let (mut at, mut rest) = (digits.len(), n);
                loop {
                    at -= 1;
                    digits[at] = b'0' + (rest % 10) as u8;
                    rest /= 10;
                    if rest == 0 {
                        break;
                    }
                }
                out.push('$');
                out.push_str(std::str::from_utf8(&digits[at..]).expect("ASCII digits"));
            }
            Dialect::Mysql | Dialect::Sqlite => out.push('?'),
        }
    }

    fn columns(&self, names: &[String]) -> String {
        names.iter().map(|n| self.ident(n)).collect::<Vec<_>>().join(", ")
    }

    /// `INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4)`: `rows` rows of
    /// `columns`; with `upsert` (the key columns, a prefix of `columns`
    /// or not) the dialect's insert-or-update by that key, every other
    /// column taking the new row's value.
    pub fn insert(&self, table: &str, columns: &[String], rows: usize, upsert: Option<&[String]>) -> String {
        let mut sql = format!("INSERT INTO {} ({}) VALUES ", self.table(table), self.columns(columns));
        sql.reserve(rows * columns.len() * 8);
        let mut n = 0;
        for row in 0..rows {
            if row > 0 {
                sql.push_str(", ");
            }
            sql.push('(');
            for column in 0..columns.len() {
                if column > 0 {
                    sql.push_str(", ");
                }
                n += 1;
                self.push_placeholder(&mut sql, n);
            }
            sql.push(')');
        }
        if let Some(keys) = upsert {
            let others: Vec<&String> = columns.iter().filter(|c| !keys.contains(c)).collect();
            match self.dialect {
                Dialect::Postgres | Dialect::Sqlite => {
                    sql.push_str(&format!(" ON CONFLICT ({}) DO ", self.columns(keys)));
                    if others.is_empty() {
                        sql.push_str("NOTHING");
                    } else {
                        let set: Vec<String> =
                            others.iter().map(|c| format!("{0} = EXCLUDED.{0}", self.ident(c))).collect();
                        sql.push_str(&format!("UPDATE SET {}", set.join(", ")));
                    }
                }
                Dialect::Mysql => {
                    // With only key columns, setting a key to itself changes
                    // nothing and still takes the duplicate without an error
                    // (INSERT IGNORE would also hide other errors).
                    let set: Vec<String> = if others.is_empty() {
                        keys.iter().take(1).map(|c| format!("{0} = {0}", self.ident(c))).collect()
                    } else {
                        others.iter().map(|c| format!("{0} = VALUES({0})", self.ident(c))).collect()
                    };
                    sql.push_str(&format!(" ON DUPLICATE KEY UPDATE {}", set.join(", ")));
                }
            }
        }
        sql
    }

    /// `UPDATE t SET a = $1, b = $2 WHERE k = $3`: parameters are the set
    /// columns' values, then the keys'.
    pub fn update(&self, table: &str, set: &[String], keys: &[String]) -> String {
        let assignments: Vec<String> =
            set.iter().enumerate().map(|(i, c)| format!("{} = {}", self.ident(c), self.placeholder(i + 1))).collect();
        format!("UPDATE {} SET {} WHERE {}", self.table(table), assignments.join(", "), self.key_match(keys, set.len()))
    }

    /// `DELETE FROM t WHERE k = $1 AND l = $2`.
    pub fn delete(&self, table: &str, keys: &[String]) -> String {
        format!("DELETE FROM {} WHERE {}", self.table(table), self.key_match(keys, 0))
    }

    fn key_match(&self, keys: &[String], before: usize) -> String {
        keys.iter()
            .enumerate()
            .map(|(i, c)| format!("{} = {}", self.ident(c), self.placeholder(before + i + 1)))
            .collect::<Vec<_>>()
            .join(" AND ")
    }

    /// `CREATE TABLE IF NOT EXISTS`, one column a line, the primary key last.
    pub fn create_table(&self, table: &str, columns: &[ColumnDef], keys: &[String]) -> String {
        let mut lines: Vec<String> =
            columns.iter().map(|c| format!("{}{}", self.ident(&c.name), self.definition(c))).collect();
        if !keys.is_empty() {
            lines.push(format!("PRIMARY KEY ({})", self.columns(keys)));
        }
        format!("CREATE TABLE IF NOT EXISTS {} (\n{}\n)", self.table(table), lines.join(",\n"))
    }

    /// `ALTER TABLE t ADD COLUMN c TYPE` (nullable): on PostgreSQL `IF NOT
    /// EXISTS`, so that two tasks adding the same column both succeed.
    pub fn add_column(&self, table: &str, column: &ColumnDef) -> String {
        let exists = if self.dialect == Dialect::Postgres { "IF NOT EXISTS " } else { "" };
        format!(
            "ALTER TABLE {} ADD COLUMN {exists}{}{}",
            self.table(table),
            self.ident(&column.name),
            self.definition(column)
        )
    }

    fn definition(&self, column: &ColumnDef) -> String {
        format!(" {}{}", column.ty, if column.not_null { " NOT NULL" } else { "" })
    }

    /// The column type for values of `schema`; `key` for a primary-key
    /// column (MySQL cannot index TEXT or BLOB). None for a schema that
    /// says nothing of its type (a plain-JSON field only seen null).
    pub fn column_type(&self, schema: &Schema, key: bool) -> Option<String> {
        use Dialect::{Mysql, Postgres, Sqlite};
        let d = self.dialect;
        let pick = |postgres: &str, mysql: &str, sqlite: &str| {
            Some(
                match d {
                    Postgres => postgres,
                    Mysql => mysql,
                    Sqlite => sqlite,
                }
                .to_string(),
            )
        };
        if let Some(logical) = schema.logical() {
            return match logical {
                Logical::Date => pick("DATE", "DATE", "TEXT"),
                Logical::Time => pick("TIME", "TIME(6)", "TEXT"),
                Logical::Timestamp => pick("TIMESTAMP", "DATETIME(6)", "TEXT"),
                Logical::Decimal { scale, .. } => match d {
                    // MySQL's scale is 0 to 30.
                    Mysql => Some(format!("DECIMAL(65,{})", scale.clamp(0, 30))),
                    Postgres | Sqlite => Some("NUMERIC".to_string()),
                },
            };
        }
        match &schema.ty {
            Type::Null => None,
            Type::Int8 => pick("SMALLINT", "TINYINT", "INTEGER"),
            Type::Int16 => pick("SMALLINT", "SMALLINT", "INTEGER"),
            Type::Int32 => pick("INTEGER", "INT", "INTEGER"),
            Type::Int64 => pick("BIGINT", "BIGINT", "INTEGER"),
            Type::Float32 => pick("REAL", "FLOAT", "REAL"),
            Type::Float64 => pick("DOUBLE PRECISION", "DOUBLE", "REAL"),
            Type::Boolean => pick("BOOLEAN", "BOOLEAN", "INTEGER"),
            Type::String if key => pick("TEXT", "VARCHAR(255)", "TEXT"),
            Type::String => pick("TEXT", "TEXT", "TEXT"),
            Type::Bytes if key => pick("BYTEA", "VARBINARY(255)", "BLOB"),
            Type::Bytes => pick("BYTEA", "BLOB", "BLOB"),
            Type::Array(_) | Type::Map(..) | Type::Struct(_) => pick("JSONB", "JSON", "TEXT"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_sdk::data::Field;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    const PG: Sql = Sql { dialect: Dialect::Postgres, quote: true };
    const MY: Sql = Sql { dialect: Dialect::Mysql, quote: true };
    const LITE: Sql = Sql { dialect: Dialect::Sqlite, quote: true };

    #[test]
    fn identifiers_are_quoted_part_by_part_with_quotes_doubled() {
        assert_eq!(PG.ident("Order \"x\""), "\"Order \"\"x\"\"\"");
        assert_eq!(MY.ident("a`b"), "`a``b`");
        assert_eq!(LITE.ident("a`b"), "\"a`b\"");
        assert_eq!(PG.table("sales.Orders"), "\"sales\".\"Orders\"");
        assert_eq!(MY.table("sales.orders"), "`sales`.`orders`");
        let bare = Sql::new(Dialect::Postgres, false);
        assert_eq!(bare.table("sales.orders"), "sales.orders");
        assert_eq!(bare.ident("Id"), "Id");
    }

    #[test]
    fn inserts_with_each_dialects_placeholders() {
        let cols = names(&["id", "name"]);
        assert_eq!(PG.insert("t", &cols, 2, None), "INSERT INTO \"t\" (\"id\", \"name\") VALUES ($1, $2), ($3, $4)");
        assert_eq!(MY.insert("t", &cols, 2, None), "INSERT INTO `t` (`id`, `name`) VALUES (?, ?), (?, ?)");
        assert_eq!(LITE.insert("s.t", &cols, 1, None), "INSERT INTO \"s\".\"t\" (\"id\", \"name\") VALUES (?, ?)");
    }

    #[test]
    fn upserts_per_dialect() {
        let cols = names(&["id", "region", "name", "qty"]);
        let keys = names(&["id", "region"]);
        assert_eq!(
            PG.insert("t", &cols, 1, Some(&keys)),
            "INSERT INTO \"t\" (\"id\", \"region\", \"name\", \"qty\") VALUES ($1, $2, $3, $4) \
             ON CONFLICT (\"id\", \"region\") DO UPDATE SET \"name\" = EXCLUDED.\"name\", \"qty\" = EXCLUDED.\"qty\""
        );
        assert_eq!(
            LITE.insert("t", &cols, 1, Some(&keys)),
            "INSERT INTO \"t\" (\"id\", \"region\", \"name\", \"qty\") VALUES (?, ?, ?, ?) \
             ON CONFLICT (\"id\", \"region\") DO UPDATE SET \"name\" = EXCLUDED.\"name\", \"qty\" = EXCLUDED.\"qty\""
        );
        assert_eq!(
            MY.insert("t", &cols, 2, Some(&keys)),
            "INSERT INTO `t` (`id`, `region`, `name`, `qty`) VALUES (?, ?, ?, ?), (?, ?, ?, ?) \
             ON DUPLICATE KEY UPDATE `name` = VALUES(`name`), `qty` = VALUES(`qty`)"
        );
        // Only key columns: nothing to update, and no error for a key already there.
        assert_eq!(
            PG.insert("t", &keys, 1, Some(&keys)),
            "INSERT INTO \"t\" (\"id\", \"region\") VALUES ($1, $2) ON CONFLICT (\"id\", \"region\") DO NOTHING"
        );
        assert_eq!(
            MY.insert("t", &keys, 1, Some(&keys)),
            "INSERT INTO `t` (`id`, `region`) VALUES (?, ?) ON DUPLICATE KEY UPDATE `id` = `id`"
        );
    }

    #[test]
    fn updates_and_deletes_by_key() {
        let set = names(&["name", "qty"]);
        let keys = names(&["id", "region"]);
        assert_eq!(
            PG.update("t", &set, &keys),
            "UPDATE \"t\" SET \"name\" = $1, \"qty\" = $2 WHERE \"id\" = $3 AND \"region\" = $4"
        );
        assert_eq!(MY.update("t", &set, &keys), "UPDATE `t` SET `name` = ?, `qty` = ? WHERE `id` = ? AND `region` = ?");
        assert_eq!(PG.delete("s.t", &keys), "DELETE FROM \"s\".\"t\" WHERE \"id\" = $1 AND \"region\" = $2");
        assert_eq!(LITE.delete("t", &keys[..1]), "DELETE FROM \"t\" WHERE \"id\" = ?");
    }

    #[test]
    fn create_and_alter() {
        let columns = vec![
            ColumnDef { name: "id".into(), ty: "BIGINT".into(), not_null: true },
            ColumnDef { name: "note".into(), ty: "TEXT".into(), not_null: false },
        ];
        assert_eq!(
            PG.create_table("app.t", &columns, &names(&["id"])),
            "CREATE TABLE IF NOT EXISTS \"app\".\"t\" (\n\"id\" BIGINT NOT NULL,\n\"note\" TEXT,\nPRIMARY KEY (\"id\")\n)"
        );
        assert_eq!(MY.create_table("t", &columns[1..], &[]), "CREATE TABLE IF NOT EXISTS `t` (\n`note` TEXT\n)");
        assert_eq!(PG.add_column("t", &columns[1]), "ALTER TABLE \"t\" ADD COLUMN IF NOT EXISTS \"note\" TEXT");
        assert_eq!(MY.add_column("t", &columns[1]), "ALTER TABLE `t` ADD COLUMN `note` TEXT");
        assert_eq!(LITE.add_column("t", &columns[1]), "ALTER TABLE \"t\" ADD COLUMN \"note\" TEXT");
    }

    #[test]
    fn column_types_per_dialect() {
        let schemas = [
            Schema::new(Type::Int8),
            Schema::new(Type::Int16),
            Schema::new(Type::Int32),
            Schema::new(Type::Int64),
            Schema::new(Type::Float32),
            Schema::new(Type::Float64),
            Schema::new(Type::Boolean),
            Schema::new(Type::String),
            Schema::new(Type::Bytes),
            Schema::decimal(2),
            Schema::date(),
            Schema::time(),
            Schema::timestamp(),
            Schema::structure(vec![Field::new("a", Schema::new(Type::Int32))]),
            Schema::new(Type::Map(Box::new(Schema::new(Type::String)), Box::new(Schema::new(Type::Int32)))),
            Schema::new(Type::Array(Box::new(Schema::new(Type::String)))),
        ];
        let types =
            |sql: Sql, key: bool| -> Vec<String> { schemas.iter().map(|s| sql.column_type(s, key).unwrap()).collect() };
        assert_eq!(
            types(PG, false),
            [
                "SMALLINT",
                "SMALLINT",
                "INTEGER",
                "BIGINT",
                "REAL",
                "DOUBLE PRECISION",
                "BOOLEAN",
                "TEXT",
                "BYTEA",
                "NUMERIC",
                "DATE",
                "TIME",
                "TIMESTAMP",
                "JSONB",
                "JSONB",
                "JSONB"
            ]
        );
        assert_eq!(
            types(MY, false),
            [
                "TINYINT",
                "SMALLINT",
                "INT",
                "BIGINT",
                "FLOAT",
                "DOUBLE",
                "BOOLEAN",
                "TEXT",
                "BLOB",
                "DECIMAL(65,2)",
                "DATE",
                "TIME(6)",
                "DATETIME(6)",
                "JSON",
                "JSON",
                "JSON"
            ]
        );
        assert_eq!(
            types(LITE, false),
            [
                "INTEGER", "INTEGER", "INTEGER", "INTEGER", "REAL", "REAL", "INTEGER", "TEXT", "BLOB", "NUMERIC",
                "TEXT", "TEXT", "TEXT", "TEXT", "TEXT", "TEXT"
            ]
        );
        // MySQL cannot index TEXT or BLOB: key columns are bounded.
        assert_eq!(&types(MY, true)[7..9], ["VARCHAR(255)", "VARBINARY(255)"]);
        assert_eq!(&types(PG, true)[7..9], ["TEXT", "BYTEA"]);
        assert_eq!(MY.column_type(&Schema::decimal(40), false).unwrap(), "DECIMAL(65,30)");
        assert_eq!(PG.column_type(&Schema::null(), false), None);
    }
}
