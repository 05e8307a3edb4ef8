//! Config definitions in the manner of Kafka Connect's `ConfigDef`: one table
//! of keys (type, default, checks, documentation) that parses a config,
//! reporting every problem, gives typed values with the table's defaults,
//! says which keys are secret, and documents itself for the REST API and the
//! README.
//!
//! A leaf crate: it knows nothing of the rest of Spillway.

mod key;
mod pattern;
/// What a secret's value shows as, wherever a config or a problem is shown.
pub const HIDDEN: &str = "[hidden]";

pub mod providers;

pub use key::{Importance, KeyDef, Password, Type, Validator, Value};
pub use pattern::Segment;
pub use providers::ConfigProviders;

use std::collections::BTreeMap;
use std::fmt::Write;

/// A problem with one key, as Connect's validation reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

impl Problem {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { key: key.into(), message: message.into() }
    }
}

/// An ordered table of keys. A key given in a config belongs to the def of
/// the same name, else to the first pattern that matches it, else to none
/// (and is passed through unchecked, as Connect passes unknown keys).
#[derive(Default)]
pub struct ConfigDef {
    keys: Vec<KeyDef>,
}

impl ConfigDef {
    pub fn new() -> Self {
        ConfigDef::default()
    }

    /// Adds `keys`, in order, under `group`. Panics on a name defined twice.
    pub fn group(mut self, group: &str, keys: impl IntoIterator<Item = KeyDef>) -> Self {
        for mut key in keys {
            assert!(self.keys.iter().all(|k| k.name != key.name), "{} is defined twice", key.name);
            key.group = group.to_string();
            self.keys.push(key);
        }
        self
    }

    pub fn keys(&self) -> &[KeyDef] {
        &self.keys
    }

    /// The groups, in the order they first appear.
    pub fn groups(&self) -> Vec<&str> {
        let mut groups: Vec<&str> = Vec::new();
        for key in &self.keys {
            if !groups.contains(&key.group()) {
                groups.push(key.group());
            }
        }
        groups
    }

    /// The def `key` belongs to: the exact one, else the first matching pattern.
    pub fn find(&self, key: &str) -> Option<&KeyDef> {
        self.owner(key).map(|i| &self.keys[i])
    }

    fn owner(&self, key: &str) -> Option<usize> {
        let keys = || self.keys.iter().enumerate();
        keys()
            .find(|(_, k)| !k.is_pattern() && k.name == key)
            .or_else(|| keys().find(|(_, k)| k.is_pattern() && k.matches(key)))
            .map(|(i, _)| i)
    }

    /// Whether `key`'s value must be hidden: any def it matches is secret, so
    /// that a broader pattern listed first cannot unmask it.
    pub fn is_secret(&self, key: &str) -> bool {
        self.keys.iter().any(|k| k.is_secret() && k.matches(key))
    }

    /// Parses `raw`, reporting every problem: a required key missing or
    /// blank, a value not of its key's type, a value its validator refuses.
    /// A key with a problem reads as its default in the returned values.
    pub fn parse(&self, raw: &BTreeMap<String, String>) -> (Values<'_>, Vec<Problem>) {
        let mut parsed = BTreeMap::new();
        let mut problems = Vec::new();
        let owned: Vec<(usize, &String, &String)> =
            raw.iter().filter_map(|(key, value)| Some((self.owner(key)?, key, value))).collect();
        // In table order, so that problems come in the order the keys are documented.
        for (i, def) in self.keys.iter().enumerate() {
            if def.is_required() && raw.get(&def.name).is_none_or(|v| v.trim().is_empty()) {
                let message = format!("Missing required configuration \"{}\" which has no default value.", def.name);
                problems.push(Problem { key: def.name.clone(), message });
                continue;
            }
            for (_, key, value) in owned.iter().filter(|(owner, ..)| *owner == i) {
                match def.check(key, value) {
                    Ok(value) => {
                        parsed.insert(key.to_string(), value);
                    }
                    Err(message) => problems.push(Problem { key: key.to_string(), message }),
                }
            }
        }
        (Values { def: self, parsed, originals: raw.clone() }, problems)
    }

    /// The README's table: one per group, then what the placeholders match.
    pub fn markdown_table(&self) -> String {
        let mut out = String::new();
        for group in self.groups() {
            let _ = write!(out, "**{group}**\n\n| key | type | default | valid values | description |\n");
            out.push_str("|---|---|---|---|---|\n");
            for key in self.keys.iter().filter(|k| k.group() == group) {
                let default = match key.default_value() {
                    _ if key.is_required() => "required".to_string(),
                    None => String::new(),
                    Some("") => "`\"\"`".to_string(),
                    Some(default) => format!("`{default}`"),
                };
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} |",
                    key.name(),
                    key.kind().name(),
                    default,
                    markdown_text(key.valid_values().unwrap_or_default()),
                    markdown_text(key.documentation()),
                );
            }
            out.push('\n');
        }
        // Placeholders by grammar, each in the order it first appears.
        let mut grammars: Vec<(Segment, Vec<String>)> = Vec::new();
        for (label, segment) in self.keys.iter().flat_map(|k| k.pattern.placeholders()) {
            let label = format!("`<{label}>`");
            match grammars.iter_mut().find(|(s, _)| *s == segment) {
                Some((_, labels)) if labels.contains(&label) => {}
                Some((_, labels)) => labels.push(label),
                None => grammars.push((segment, vec![label])),
            }
        }
        let mut legend: Vec<String> = grammars
            .iter()
            .map(|(segment, labels)| {
                let verb = if labels.len() == 1 { "is" } else { "are" };
                format!("{} {verb} `{}`", labels.join(" and "), segment.grammar())
            })
            .collect();
        if self.keys.iter().any(|k| k.pattern.has_rest()) {
            legend.push("a trailing `*` is any rest of the key".into());
        }
        if !legend.is_empty() {
            let _ = writeln!(out, "In a key, {}.", legend.join("; "));
        }
        out.trim_end().to_string() + "\n"
    }
}

/// Plain text in a table cell: `|` would end the cell and `<` open a tag.
fn markdown_text(text: &str) -> String {
    text.replace('|', "\\|").replace('<', "\\<").replace('>', "\\>")
}

/// A parsed config. The typed getters take a key the table defines (exact,
/// or matching a pattern) and answer its value, else its default, else the
/// type's zero value ("", 0, false, an empty list): a key can lack both only
/// if it is optional without a default, or required and reported missing.
/// They panic on a key the table does not define or of another type: that is
/// a bug in the caller, which every parse would hit.
pub struct Values<'d> {
    def: &'d ConfigDef,
    parsed: BTreeMap<String, Value>,
    originals: BTreeMap<String, String>,
}

impl Values<'_> {
    /// The value given for `key` if it was valid, else its default.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.parsed.get(key).or_else(|| self.def.find(key)?.default_parsed())
    }

    fn typed(&self, key: &str, kind: Type) -> Option<&Value> {
        let def = self.def.find(key).unwrap_or_else(|| panic!("{key} is not defined"));
        assert_eq!(def.kind(), kind, "{key} is not a {} key", kind.name());
        self.get(key)
    }

    pub fn boolean(&self, key: &str) -> bool {
        matches!(self.typed(key, Type::Boolean), Some(Value::Boolean(true)))
    }

    pub fn int(&self, key: &str) -> i32 {
        match self.typed(key, Type::Int) {
            Some(Value::Int(v)) => *v,
            _ => 0,
        }
    }

    pub fn long(&self, key: &str) -> i64 {
        match self.typed(key, Type::Long) {
            Some(Value::Long(v)) => *v,
            _ => 0,
        }
    }

    /// An INT or LONG key counted in milliseconds; a negative value is 0.
    pub fn millis(&self, key: &str) -> std::time::Duration {
        let ms = match self.get(key) {
            Some(Value::Int(v)) => i64::from(*v),
            Some(Value::Long(v)) => *v,
            _ => 0,
        };
        std::time::Duration::from_millis(ms.max(0) as u64)
    }

    pub fn double(&self, key: &str) -> f64 {
        match self.typed(key, Type::Double) {
            Some(Value::Double(v)) => *v,
            _ => 0.0,
        }
    }

    pub fn string(&self, key: &str) -> &str {
        match self.typed(key, Type::String) {
            Some(Value::String(v)) => v,
            _ => "",
        }
    }

    pub fn password(&self, key: &str) -> &str {
        match self.typed(key, Type::Password) {
            Some(Value::Password(v)) => v.value(),
            _ => "",
        }
    }

    pub fn list(&self, key: &str) -> &[String] {
        match self.typed(key, Type::List) {
            Some(Value::List(v)) => v,
            _ => &[],
        }
    }

    /// The keys given under `prefix`, with it removed and their values as
    /// given (Connect's `originalsWithPrefix`): for keys passed through to
    /// another client, such as `consumer.override.*`.
    pub fn originals_with_prefix(&self, prefix: &str) -> impl Iterator<Item = (&str, &str)> {
        self.originals.iter().filter_map(move |(k, v)| Some((k.strip_prefix(prefix)?, v.as_str())))
    }
}

/// Fails unless README.md holds `def`'s markdown table verbatim between
/// `<!-- {marker}:begin -->` and `<!-- {marker}:end -->`; `command` is the
/// `spillway` subcommand that prints it.
#[doc(hidden)]
pub fn assert_readme_documents(def: &ConfigDef, marker: &str, command: &str) {
    let (begin, end) = (format!("<!-- {marker}:begin -->\n"), format!("<!-- {marker}:end -->"));
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let table = def.markdown_table();
    let documented = readme.split_once(&begin).and_then(|(_, rest)| rest.split_once(&end)).map(|(t, _)| t.trim());
    assert!(
        documented == Some(table.trim()),
        "README.md's {marker} differ from their table. Regenerate them with `cargo run --release -p spillway -- \
         {command}` and put the output between the lines `{}` and `{end}` in README.md. Expected:\n\n{table}",
        begin.trim_end()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> ConfigDef {
        ConfigDef::new()
            .group(
                "Common",
                [
                    KeyDef::new("name", Type::String, Importance::High, "The name.").required(),
                    KeyDef::new("tasks.max", Type::Int, Importance::High, "Tasks | at most.")
                        .with_default("1")
                        .with_validator(Validator::at_least(1)),
                    KeyDef::new("mode", Type::String, Importance::Low, "How.")
                        .with_default("none")
                        .with_validator(Validator::one_of(&["none", "all"])),
                    KeyDef::new("ratio", Type::Double, Importance::Low, "").with_default("0.5"),
                    KeyDef::new("prefix", Type::String, Importance::Low, "").with_default(""),
                    KeyDef::new("size", Type::Long, Importance::Low, "").with_default("10"),
                    KeyDef::new("topics", Type::List, Importance::High, "").required(),
                    KeyDef::new("client.override.group.id", Type::String, Importance::Low, ""),
                    KeyDef::new("client.override.*", Type::String, Importance::Low, "Passed on."),
                ],
            )
            .group(
                "Grants",
                [
                    KeyDef::new("grant.<capability>.<name>.token", Type::Password, Importance::High, "A secret."),
                    KeyDef::new("grant.fs.<name>.read-only", Type::Boolean, Importance::Low, "").with_default("false"),
                    KeyDef::new("grant.env.<NAME>", Type::String, Importance::Low, "For <NAME>.")
                        .with_placeholder("NAME", Segment::EnvVarName),
                ],
            )
    }

    fn raw(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_problem_is_reported_once_under_its_key() {
        let (_, problems) = def().parse(&raw(&[
            ("name", "  "),
            ("tasks.max", "0"),
            ("mode", "some"),
            ("size", "big"),
            ("grant.fs.logs.read-only", "maybe"),
            ("grant.fs.tmp.read-only", "yes"),
            ("unknown.key", "anything"),
        ]));
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            ["name", "tasks.max", "mode", "size", "topics", "grant.fs.logs.read-only", "grant.fs.tmp.read-only"],
            "{problems:#?}"
        );
        assert_eq!(problems[0].message, "Missing required configuration \"name\" which has no default value.");
        assert_eq!(problems[3].message, "Invalid value 'big' for configuration size: Not a number of type LONG");
    }

    #[test]
    fn getters_answer_the_value_else_the_tables_default() {
        let def = def();
        let (values, problems) = def.parse(&raw(&[("name", "n"), ("topics", "a,b"), ("size", "20")]));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(values.string("name"), "n");
        assert_eq!(values.list("topics"), ["a", "b"]);
        assert_eq!(values.long("size"), 20);
        assert_eq!(values.int("tasks.max"), 1);
        assert_eq!(values.string("mode"), "none");
        assert_eq!(values.double("ratio"), 0.5);
        assert!(!values.boolean("grant.fs.logs.read-only"), "a pattern's default");
        assert_eq!(values.string("client.override.group.id"), "", "optional, no default");
    }

    #[test]
    fn an_invalid_value_reads_as_the_default() {
        let def = def();
        let (values, _) = def.parse(&raw(&[("tasks.max", "0"), ("grant.fs.x.read-only", "maybe")]));
        assert_eq!(values.int("tasks.max"), 1);
        assert!(!values.boolean("grant.fs.x.read-only"));
    }

    #[test]
    fn patterns_type_check_the_keys_they_match() {
        let def = def();
        let (values, problems) = def.parse(&raw(&[
            ("grant.fs.logs.read-only", "true"),
            ("grant.env.API_URL", "http://x"),
            ("grant.net.db.token", "t0k"),
        ]));
        assert!(problems.iter().all(|p| ["name", "topics"].contains(&p.key.as_str())), "{problems:?}");
        assert!(values.boolean("grant.fs.logs.read-only"));
        assert_eq!(values.string("grant.env.API_URL"), "http://x");
        assert_eq!(values.password("grant.net.db.token"), "t0k");
    }

    #[test]
    fn an_exact_key_wins_over_a_pattern_listed_before_it() {
        let def = ConfigDef::new().group(
            "g",
            [
                KeyDef::new("client.override.*", Type::String, Importance::Low, ""),
                KeyDef::new("client.override.fetch.bytes", Type::Int, Importance::Low, ""),
            ],
        );
        assert_eq!(def.find("client.override.fetch.bytes").unwrap().kind(), Type::Int);
        assert_eq!(def.find("client.override.other").unwrap().kind(), Type::String);
        let (_, problems) = def.parse(&raw(&[("client.override.fetch.bytes", "many")]));
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[test]
    fn secrets_are_the_password_keys_exact_or_by_pattern() {
        let def = def();
        assert!(def.is_secret("grant.net.db.token"));
        assert!(def.is_secret("grant.fs.logs.token"));
        assert!(!def.is_secret("grant.net.db.connect"));
        assert!(!def.is_secret("grant.env.TOKEN"));
        assert!(!def.is_secret("name"));
        let exact = ConfigDef::new().group("g", [KeyDef::new("db.password", Type::Password, Importance::High, "")]);
        assert!(exact.is_secret("db.password"));
        assert!(!exact.is_secret("db.password.x"));
    }

    #[test]
    fn prefixed_originals_pass_through_as_given() {
        let def = def();
        let (values, _) = def.parse(&raw(&[("client.override.fetch.min.bytes", " 1024"), ("client.x", "y")]));
        let overrides: Vec<(&str, &str)> = values.originals_with_prefix("client.override.").collect();
        assert_eq!(overrides, [("fetch.min.bytes", " 1024")]);
    }

    #[test]
    #[should_panic(expected = "tasks.max is not a LONG key")]
    fn a_getter_of_the_wrong_type_is_a_bug() {
        let def = def();
        let (values, _) = def.parse(&raw(&[]));
        values.long("tasks.max");
    }

    #[test]
    #[should_panic(expected = "defined twice")]
    fn a_key_defined_twice_is_a_bug() {
        let _ = ConfigDef::new()
            .group("a", [KeyDef::new("k", Type::Int, Importance::Low, "")])
            .group("b", [KeyDef::new("k", Type::Int, Importance::Low, "")]);
    }

    #[test]
    fn groups_keep_their_first_order() {
        assert_eq!(def().groups(), ["Common", "Grants"]);
    }

    #[test]
    fn the_markdown_table_documents_every_key() {
        let table = def().markdown_table();
        let expected = "\
**Common**

| key | type | default | valid values | description |
|---|---|---|---|---|
| `name` | STRING | required |  | The name. |
| `tasks.max` | INT | `1` | at least 1 | Tasks \\| at most. |
| `mode` | STRING | `none` | none, all | How. |
| `ratio` | DOUBLE | `0.5` |  |  |
| `prefix` | STRING | `\"\"` |  |  |
| `size` | LONG | `10` |  |  |
| `topics` | LIST | required |  |  |
| `client.override.group.id` | STRING |  |  |  |
| `client.override.*` | STRING |  |  | Passed on. |

**Grants**

| key | type | default | valid values | description |
|---|---|---|---|---|
| `grant.<capability>.<name>.token` | PASSWORD |  |  | A secret. |
| `grant.fs.<name>.read-only` | BOOLEAN | `false` |  |  |
| `grant.env.<NAME>` | STRING |  |  | For \\<NAME\\>. |

In a key, `<capability>` and `<name>` are `[a-z0-9-]+`; `<NAME>` is `[A-Za-z_][A-Za-z0-9_]*`; a trailing `*` is any rest of the key.
";
        assert_eq!(table, expected, "got:\n{table}");
    }
}
