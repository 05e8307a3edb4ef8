//! The sink's configuration keys: one table ([`keys`]) that `metadata()`,
//! the README and the parser share, and [`Settings`], the parsed form.

use spillway_sdk::{Config, ConfigError, ConfigKey, ConfigReader, ConfigType};

/// The column names `pk.mode=kafka` uses when `pk.fields` names none.
pub const KAFKA_PK: [&str; 3] = ["__connect_topic", "__connect_partition", "__connect_offset"];
/// The column of a primitive key under `pk.mode=record_key` when `pk.fields` names none.
pub const KEY_COLUMN: &str = "__connect_key";
/// What `${topic}` in `table.name.format` stands for.
pub const TOPIC: &str = "${topic}";

/// Every key the sink takes, in the order the README lists them.
pub fn keys() -> Vec<ConfigKey> {
    use ConfigType::{Boolean, Int, List, String};
    let k = ConfigKey::optional;
    vec![
        k(
            "sql.grant",
            String,
            "db",
            "Name of the SQL grant to write to: the database of plugin.grant.sql.<name>.url, whose user and \
             password stay in the host.",
        ),
        k(
            "table.name.format",
            String,
            TOPIC,
            "The table a record goes to, ${topic} standing for its topic. schema.table names the schema (on \
             MySQL, the database); a bare name is in the connection's default schema.",
        ),
        k(
            "insert.mode",
            String,
            "insert",
            "insert: plain INSERTs (a key already in the table is a refused row); upsert: insert or replace by \
             primary key (ON CONFLICT ... DO UPDATE on PostgreSQL and SQLite, ON DUPLICATE KEY UPDATE on \
             MySQL), so that redelivered records leave the table as it was; update: UPDATE ... WHERE the \
             primary key (a key not in the table changes nothing). upsert and update need a pk.mode.",
        ),
        k(
            "pk.mode",
            String,
            "none",
            "Where the primary key comes from: none; kafka (the record's topic, partition and offset, as \
             __connect_topic, __connect_partition and __connect_offset or the three pk.fields); record_key \
             (the pk.fields of a struct key, or all its fields; a primitive key as one column, pk.fields or \
             __connect_key); record_value (the pk.fields of the value, or all its fields).",
        ),
        k(
            "pk.fields",
            List,
            "",
            "The primary key's columns, in order, for pk.mode: three names for kafka, key fields for \
             record_key (one name for a primitive key), value fields for record_value. Empty: the defaults \
             pk.mode describes.",
        ),
        k("fields.whitelist", List, "", "The value fields written, besides the primary key's; empty: all of them."),
        k(
            "delete.enabled",
            Boolean,
            "false",
            "A tombstone (a record whose value is null) deletes the row of its key: DELETE ... WHERE the \
             primary key. Needs pk.mode=record_key. Off: tombstones are rejected.",
        ),
        k(
            "auto.create",
            Boolean,
            "false",
            "Create a missing table (CREATE TABLE IF NOT EXISTS) with a column per field of the records' \
             schema, NOT NULL for required fields, and the PRIMARY KEY of pk.mode. Off: a missing table fails \
             the task.",
        ),
        k(
            "auto.evolve",
            Boolean,
            "false",
            "Add a nullable column (ALTER TABLE ... ADD COLUMN) for a field the table lacks. Off: such a field \
             fails the task.",
        ),
        k("primary.key.mode", String, "", "Debezium's name for pk.mode, accepted in its place (not both)."),
        k("primary.key.fields", List, "", "Debezium's name for pk.fields, accepted in its place (not both)."),
        k(
            "schema.evolution",
            String,
            "",
            "Debezium's key: basic sets auto.create and auto.evolve, none neither; give it or those two.",
        ),
        k(
            "batch.size",
            Int,
            "3000",
            "Most rows in one statement: a multi-row INSERT (which also binds at most 30000 parameters), or \
             one prepared UPDATE or DELETE run over many rows. All statements of a put run in one \
             transaction.",
        ),
        k(
            "quote.sql.identifiers",
            String,
            "always",
            "always: table and column names are quoted (\"name\", `name` on MySQL), kept exactly as written, \
             quotes inside doubled; never: written bare, so the database may fold their case, and they must \
             be plain identifiers ([A-Za-z_][A-Za-z0-9_$]*).",
        ),
    ]
}

/// `insert.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InsertMode {
    Insert,
    Upsert,
    Update,
}

/// `pk.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PkMode {
    None,
    Kafka,
    RecordKey,
    RecordValue,
}

/// The parsed configuration of one task.
#[derive(Clone, Debug)]
pub struct Settings {
    pub grant: String,
    pub table_format: String,
    pub insert_mode: InsertMode,
    pub pk_mode: PkMode,
    pub pk_fields: Vec<String>,
    /// Empty: every value field.
    pub whitelist: Vec<String>,
    pub delete_enabled: bool,
    pub auto_create: bool,
    pub auto_evolve: bool,
    pub batch_size: usize,
    /// `quote.sql.identifiers=always`.
    pub quote: bool,
}

/// A name that can be written bare in SQL.
pub fn is_plain_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$')
}

impl Settings {
    /// Parses and checks the whole configuration; every problem is reported, one per key.
    pub fn parse(config: &Config) -> Result<Settings, Vec<ConfigError>> {
        let mut r = ConfigReader::new(config, keys());

        let grant = r.string("sql.grant").trim().to_string();
        if grant.is_empty() || !grant.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            r.error("sql.grant", format!("'{grant}' is not a grant name: [a-z0-9-]+"));
        }
        let table_format = r.string("table.name.format").trim().to_string();
        let insert_mode = [InsertMode::Insert, InsertMode::Upsert, InsertMode::Update]
            [r.choice("insert.mode", &[&["insert"], &["upsert"], &["update"]])];
        // Debezium's JDBC sink names these primary.key.mode and .fields.
        let pk_mode_key = r.key_or_alias("pk.mode", "primary.key.mode");
        let pk_mode = [PkMode::None, PkMode::Kafka, PkMode::RecordKey, PkMode::RecordValue]
            [r.choice(pk_mode_key, &[&["none"], &["kafka"], &["record_key"], &["record_value"]])];
        let pk_fields_key = r.key_or_alias("pk.fields", "primary.key.fields");
        let pk_fields = r.list(pk_fields_key);
        let whitelist = r.list("fields.whitelist");
        let delete_enabled = r.boolean("delete.enabled");
        let mut auto_create = r.boolean("auto.create");
        let mut auto_evolve = r.boolean("auto.evolve");
        // Debezium's one key for both: basic creates and evolves tables.
        if let Some(evolution) = r.optional("schema.evolution") {
            let basic = r.choice("schema.evolution", &[&["none"], &["basic"]]) == 1;
            if ["auto.create", "auto.evolve"].iter().any(|k| config.get(k).is_some()) {
                r.error(
                    "schema.evolution",
                    format!("'{evolution}' sets auto.create and auto.evolve: give one or the other"),
                );
            }
            (auto_create, auto_evolve) = (basic, basic);
        }
        let raw = r.string("batch.size");
        let batch_size = match raw.trim().parse::<i64>() {
            Ok(n) if n >= 1 => n as usize,
            _ => {
                r.error("batch.size", format!("invalid value '{raw}': a number of rows, at least 1"));
                1
            }
        };
        let quote = r.choice("quote.sql.identifiers", &[&["always"], &["never"]]) == 0;

        // The table name a topic gives, checked with a stand-in topic.
        match check_table_name(&table_name(&table_format, "topic"), quote) {
            Err(e) if table_format.is_empty() => r.error("table.name.format", format!("must not be empty ({e})")),
            Err(e) => r.error("table.name.format", e),
            Ok(()) => {}
        }

        if pk_mode == PkMode::None && insert_mode != InsertMode::Insert {
            let mode = if insert_mode == InsertMode::Upsert { "upsert" } else { "update" };
            r.error(
                "insert.mode",
                format!("{mode} needs a primary key: set pk.mode (record_key, record_value or kafka)"),
            );
        }
        match pk_mode {
            PkMode::None if !pk_fields.is_empty() => {
                r.error("pk.fields", "pk.fields needs pk.mode (record_key, record_value or kafka)")
            }
            PkMode::Kafka if !pk_fields.is_empty() && pk_fields.len() != 3 => r.error(
                "pk.fields",
                format!("pk.mode=kafka takes three names (topic, partition, offset), not {}", pk_fields.len()),
            ),
            _ => {}
        }
        if let Some(dup) = (1..pk_fields.len()).find(|&i| pk_fields[..i].contains(&pk_fields[i])) {
            r.error("pk.fields", format!("'{}' is named twice", pk_fields[dup]));
        }
        if delete_enabled && pk_mode != PkMode::RecordKey {
            r.error("delete.enabled", "deletes find rows by the record's key: they need pk.mode=record_key");
        }
        if !quote {
            for (key, names) in [("pk.fields", &pk_fields), ("fields.whitelist", &whitelist)] {
                if let Some(bad) = names.iter().find(|n| !is_plain_identifier(n)) {
                    r.error(
                        key,
                        format!(
                            "'{bad}' is not a plain identifier ([A-Za-z_][A-Za-z0-9_$]*), which \
                             quote.sql.identifiers=never needs"
                        ),
                    );
                }
            }
        }

        r.finish(Settings {
            grant,
            table_format,
            insert_mode,
            pk_mode,
            pk_fields,
            whitelist,
            delete_enabled,
            auto_create,
            auto_evolve,
            batch_size,
            quote,
        })
    }

    /// The table of a topic's records: `table.name.format` with `${topic}` replaced.
    pub fn table_for(&self, topic: &str) -> String {
        table_name(&self.table_format, topic)
    }
}

fn table_name(format: &str, topic: &str) -> String {
    format.replace(TOPIC, topic)
}

/// A table name is `table` or `schema.table`, each part non-empty, plain
/// when identifiers are not quoted.
pub fn check_table_name(name: &str, quote: bool) -> Result<(), String> {
    let parts: Vec<&str> = name.split('.').collect();
    if parts.len() > 2 || parts.iter().any(|p| p.is_empty()) {
        return Err(format!("'{name}' is not a table name: table or schema.table"));
    }
    if !quote && let Some(bad) = parts.iter().find(|p| !is_plain_identifier(p)) {
        return Err(format!(
            "'{bad}' (of table '{name}') is not a plain identifier ([A-Za-z_][A-Za-z0-9_$]*), which \
             quote.sql.identifiers=never needs"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Config {
        Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>())
    }

    fn error_keys(pairs: &[(&str, &str)]) -> Vec<String> {
        match Settings::parse(&config(pairs)) {
            Ok(_) => Vec::new(),
            Err(errors) => errors.into_iter().map(|e| e.key).collect(),
        }
    }

    #[test]
    fn defaults_are_confluents() {
        let s = Settings::parse(&config(&[])).unwrap();
        assert_eq!((s.grant.as_str(), s.insert_mode, s.pk_mode), ("db", InsertMode::Insert, PkMode::None));
        assert_eq!(
            (s.batch_size, s.quote, s.delete_enabled, s.auto_create, s.auto_evolve),
            (3000, true, false, false, false)
        );
        assert_eq!(s.table_for("orders"), "orders");
        let s = Settings::parse(&config(&[
            ("insert.mode", "UPSERT"),
            ("pk.mode", "record_value"),
            ("pk.fields", " id , region "),
            ("table.name.format", "sales.kafka_${topic}"),
        ]))
        .unwrap();
        assert_eq!(
            (s.insert_mode, s.pk_fields.as_slice()),
            (InsertMode::Upsert, ["id", "region"].map(String::from).as_slice())
        );
        assert_eq!(s.table_for("orders"), "sales.kafka_orders");
    }

    #[test]
    fn every_problem_is_named_by_its_key() {
        assert_eq!(error_keys(&[("insert.mode", "upsert")]), ["insert.mode"]);
        assert_eq!(error_keys(&[("insert.mode", "update")]), ["insert.mode"]);
        assert_eq!(error_keys(&[("insert.mode", "merge")]), ["insert.mode"]);
        assert_eq!(error_keys(&[("delete.enabled", "true"), ("pk.mode", "record_value")]), ["delete.enabled"]);
        assert_eq!(error_keys(&[("delete.enabled", "true"), ("pk.mode", "record_key")]), Vec::<String>::new());
        assert_eq!(error_keys(&[("delete.enabled", "yes")]), ["delete.enabled"]);
        assert_eq!(error_keys(&[("pk.mode", "kafka"), ("pk.fields", "a,b")]), ["pk.fields"]);
        assert_eq!(error_keys(&[("pk.mode", "kafka"), ("pk.fields", "t,p,o")]), Vec::<String>::new());
        assert_eq!(error_keys(&[("pk.fields", "id")]), ["pk.fields"]);
        assert_eq!(error_keys(&[("pk.mode", "record_value"), ("pk.fields", "id,id")]), ["pk.fields"]);
        assert_eq!(error_keys(&[("pk.mode", "record")]), ["pk.mode"]);
        assert_eq!(error_keys(&[("batch.size", "0")]), ["batch.size"]);
        assert_eq!(error_keys(&[("sql.grant", "My.DB")]), ["sql.grant"]);
        assert_eq!(error_keys(&[("table.name.format", "a.b.${topic}")]), ["table.name.format"]);
        assert_eq!(error_keys(&[("table.name.format", "")]), ["table.name.format"]);
        assert_eq!(error_keys(&[("table.name.format", "${topic}.")]), ["table.name.format"]);
        assert_eq!(error_keys(&[("quote.sql.identifiers", "sometimes")]), ["quote.sql.identifiers"]);
        assert_eq!(
            error_keys(&[("quote.sql.identifiers", "never"), ("table.name.format", "kafka-${topic}")]),
            ["table.name.format"]
        );
        assert_eq!(
            error_keys(&[
                ("quote.sql.identifiers", "never"),
                ("pk.mode", "record_value"),
                ("pk.fields", "order id"),
                ("fields.whitelist", "ok,\"x\""),
            ]),
            ["pk.fields", "fields.whitelist"]
        );
        let errors = Settings::parse(&config(&[("insert.mode", "upsert")])).unwrap_err();
        assert!(errors[0].message.contains("pk.mode"), "{errors:?}");
    }

    #[test]
    fn plain_identifiers() {
        assert!(is_plain_identifier("_a1$"));
        assert!(is_plain_identifier("Orders"));
        for bad in ["", "1a", "a-b", "a b", "a\"b", "é"] {
            assert!(!is_plain_identifier(bad), "{bad}");
        }
    }
}
