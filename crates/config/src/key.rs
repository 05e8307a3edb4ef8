//! One key of a [`ConfigDef`](super::ConfigDef): its type, default, checks
//! and documentation.

use super::pattern::{Pattern, Segment};
use std::fmt;

/// A key's type, as Connect names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    Boolean,
    Int,
    Long,
    Double,
    String,
    List,
    /// A string that is never shown: `[hidden]` wherever config is shown.
    Password,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::Boolean => "BOOLEAN",
            Type::Int => "INT",
            Type::Long => "LONG",
            Type::Double => "DOUBLE",
            Type::String => "STRING",
            Type::List => "LIST",
            Type::Password => "PASSWORD",
        }
    }

    /// Parses a value as Connect does (trimmed, except a password); the error
    /// is Connect's reason.
    pub fn parse(self, raw: &str) -> Result<Value, String> {
        let trimmed = raw.trim();
        let number = || format!("Not a number of type {}", self.name());
        Ok(match self {
            Type::Boolean if trimmed.eq_ignore_ascii_case("true") => Value::Boolean(true),
            Type::Boolean if trimmed.eq_ignore_ascii_case("false") => Value::Boolean(false),
            Type::Boolean => return Err("Expected value to be either true or false".into()),
            Type::Int => Value::Int(trimmed.parse().map_err(|_| number())?),
            Type::Long => Value::Long(trimmed.parse().map_err(|_| number())?),
            Type::Double => Value::Double(trimmed.parse().map_err(|_| number())?),
            Type::String => Value::String(trimmed.to_string()),
            Type::List => {
                Value::List(trimmed.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
            }
            Type::Password => Value::Password(Password(raw.to_string())),
        })
    }
}

/// A parsed value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Boolean(bool),
    Int(i32),
    Long(i64),
    Double(f64),
    String(String),
    List(Vec<String>),
    Password(Password),
}

/// A secret string; `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    pub fn new(secret: impl Into<String>) -> Self {
        Password(secret.into())
    }

    pub fn value(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[hidden]")
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Importance {
    High,
    Medium,
    Low,
}

impl Importance {
    pub fn name(self) -> &'static str {
        match self {
            Importance::High => "HIGH",
            Importance::Medium => "MEDIUM",
            Importance::Low => "LOW",
        }
    }
}

type Check = dyn Fn(&Value) -> Result<(), String> + Send + Sync;

/// A check past the type: a range, a set of values. Its error is the reason
/// in "Invalid value … for configuration …: reason".
pub struct Validator {
    description: String,
    check: Box<Check>,
}

impl Validator {
    /// `description` says what is valid, in the docs ("at least 1").
    pub fn new(
        description: impl Into<String>,
        check: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Validator { description: description.into(), check: Box::new(check) }
    }

    /// An INT, LONG or DOUBLE no smaller than `min`.
    pub fn at_least(min: i64) -> Self {
        Validator::new(format!("at least {min}"), move |value| {
            let ok = match value {
                Value::Int(v) => i64::from(*v) >= min,
                Value::Long(v) => *v >= min,
                Value::Double(v) => *v >= min as f64,
                _ => true,
            };
            if ok { Ok(()) } else { Err(format!("Value must be at least {min}")) }
        })
    }

    /// An INT or LONG that is -1 (which means `meaning`: no ceiling, the
    /// broker's default) or a count of at least 1.
    pub fn minus_one_or_at_least_one(meaning: &str) -> Self {
        let error = format!("Value must be -1 ({meaning}) or at least 1");
        Validator::new(format!("-1 ({meaning}), or at least 1"), move |v| match v {
            Value::Int(-1) | Value::Long(-1) => Ok(()),
            Value::Int(n) if *n >= 1 => Ok(()),
            Value::Long(n) if *n >= 1 => Ok(()),
            _ => Err(error.clone()),
        })
    }

    /// A STRING that is one of `allowed`.
    pub fn one_of(allowed: &'static [&'static str]) -> Self {
        Validator::new(allowed.join(", "), move |value| match value {
            Value::String(s) if !allowed.contains(&s.as_str()) => {
                Err(format!("String must be one of: {}", allowed.join(", ")))
            }
            _ => Ok(()),
        })
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    pub fn check(&self, value: &Value) -> Result<(), String> {
        (self.check)(value)
    }
}

/// One key, or one family of keys when its name is a pattern: see
/// [`ConfigDef`](super::ConfigDef).
pub struct KeyDef {
    pub(super) name: String,
    pub(super) pattern: Pattern,
    kind: Type,
    /// As written, and parsed.
    default: Option<(String, Value)>,
    importance: Importance,
    documentation: String,
    pub(super) group: String,
    validator: Option<Validator>,
    required: bool,
}

impl KeyDef {
    /// A key that is optional and has no default until told otherwise. In
    /// `name`, a `<label>` segment is a placeholder ([`Segment::Slug`] unless
    /// [`KeyDef::with_placeholder`] says otherwise) and a trailing `*` stands
    /// for any rest.
    pub fn new(name: &str, kind: Type, importance: Importance, documentation: &str) -> Self {
        KeyDef {
            name: name.to_string(),
            pattern: Pattern::parse(name),
            kind,
            default: None,
            importance,
            documentation: documentation.to_string(),
            group: String::new(),
            validator: None,
            required: false,
        }
    }

    /// Panics if `default` does not parse as the key's type or fails its
    /// validator: tables are written by hand, and a test builds each one.
    pub fn with_default(mut self, default: &str) -> Self {
        let value = self.kind.parse(default).unwrap_or_else(|e| panic!("{}: default '{default}': {e}", self.name));
        self.default = Some((default.to_string(), value));
        self.check_default();
        self
    }

    pub fn with_validator(mut self, validator: Validator) -> Self {
        self.validator = Some(validator);
        self.check_default();
        self
    }

    pub fn with_placeholder(mut self, label: &str, segment: Segment) -> Self {
        self.pattern.set_segment(label, segment);
        self
    }

    /// The same key under `prefix`, for a table that holds another table's
    /// keys: a capability's grant settings, under
    /// `plugin.grant.<capability>.<name>.`. A pattern cannot be required, so
    /// the copy is optional; the inner table still requires it.
    pub fn prefixed(self, prefix: &str) -> KeyDef {
        let name = format!("{prefix}{}", self.name);
        let documentation = match self.required {
            true => format!("Required for each grant. {}", self.documentation),
            false => self.documentation,
        };
        KeyDef { pattern: Pattern::parse(&name), name, documentation, required: false, ..self }
    }

    /// Must be given, not blank. A required key has no default.
    pub fn required(mut self) -> Self {
        assert!(self.pattern.is_exact(), "{}: a pattern cannot be required", self.name);
        self.required = true;
        self.check_default();
        self
    }

    fn check_default(&self) {
        let Some((raw, value)) = &self.default else { return };
        assert!(!self.required, "{}: a required key has no default", self.name);
        if let Some(Err(e)) = self.validator.as_ref().map(|v| v.check(value)) {
            panic!("{}: default '{raw}': {e}", self.name);
        }
    }

    /// The name, or the pattern as written (`plugin.grant.fs.<name>.path`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn kind(&self) -> Type {
        self.kind
    }

    pub fn default_value(&self) -> Option<&str> {
        self.default.as_ref().map(|(raw, _)| raw.as_str())
    }

    pub(super) fn default_parsed(&self) -> Option<&Value> {
        self.default.as_ref().map(|(_, value)| value)
    }

    pub fn importance(&self) -> Importance {
        self.importance
    }

    pub fn documentation(&self) -> &str {
        &self.documentation
    }

    pub fn group(&self) -> &str {
        &self.group
    }

    pub fn is_required(&self) -> bool {
        self.required
    }

    /// Connect's rule: a PASSWORD key's value is never shown.
    pub fn is_secret(&self) -> bool {
        self.kind == Type::Password
    }

    pub fn is_pattern(&self) -> bool {
        !self.pattern.is_exact()
    }

    pub fn matches(&self, key: &str) -> bool {
        self.pattern.matches(key)
    }

    /// What the validator admits, for documentation.
    pub fn valid_values(&self) -> Option<&str> {
        self.validator.as_ref().map(Validator::description)
    }

    /// Parses and checks a given value; the error is the whole message.
    pub(super) fn check(&self, key: &str, raw: &str) -> Result<Value, String> {
        let value = self.kind.parse(raw);
        let value = value.and_then(|v| match &self.validator {
            Some(validator) => validator.check(&v).map(|()| v),
            None => Ok(v),
        });
        value.map_err(|reason| {
            let shown = if self.is_secret() { "[hidden]".to_string() } else { format!("'{}'", without_userinfo(raw)) };
            format!("Invalid value {shown} for configuration {key}: {reason}")
        })
    }
}

/// `raw` with the user and password of a URL in it hidden: a refusal
/// quotes the value, and must not quote credentials.
fn without_userinfo(raw: &str) -> std::borrow::Cow<'_, str> {
    let Some(start) = raw.find("://").map(|i| i + 3) else { return raw.into() };
    let authority_end = raw[start..].find(['/', '?', '#']).map_or(raw.len(), |i| start + i);
    match raw[start..authority_end].rfind('@') {
        Some(at) => format!("{}[hidden]{}", &raw[..start], &raw[start + at..]).into(),
        None => raw.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_quotes_no_credentials_of_a_url() {
        assert_eq!(without_userinfo("https://u:p@host:1/x@y"), "https://[hidden]@host:1/x@y");
        assert_eq!(without_userinfo("https://host/a@b"), "https://host/a@b");
        assert_eq!(without_userinfo("plain"), "plain");
    }

    #[test]
    fn types_parse_as_connect_parses_them() {
        assert_eq!(Type::Boolean.parse(" TRUE "), Ok(Value::Boolean(true)));
        assert_eq!(Type::Boolean.parse("no"), Err("Expected value to be either true or false".into()));
        assert_eq!(Type::Int.parse(" 7"), Ok(Value::Int(7)));
        assert_eq!(Type::Int.parse("3000000000"), Err("Not a number of type INT".into()));
        assert_eq!(Type::Long.parse("3000000000"), Ok(Value::Long(3_000_000_000)));
        assert_eq!(Type::Double.parse("0.5"), Ok(Value::Double(0.5)));
        assert_eq!(Type::List.parse(" a, b,,c "), Ok(Value::List(vec!["a".into(), "b".into(), "c".into()])));
        assert_eq!(Type::List.parse(""), Ok(Value::List(Vec::new())));
        assert_eq!(Type::String.parse(" x "), Ok(Value::String("x".into())));
        assert_eq!(Type::Password.parse(" p ").unwrap(), Value::Password(Password(" p ".into())), "not trimmed");
    }

    #[test]
    fn a_password_does_not_show_in_debug_output() {
        let value = Type::Password.parse("hunter2").unwrap();
        assert!(!format!("{value:?}").contains("hunter2"), "{value:?}");
    }

    #[test]
    fn messages_name_the_value_and_key_but_never_a_secret() {
        let tasks = KeyDef::new("tasks.max", Type::Int, Importance::High, "").with_validator(Validator::at_least(1));
        assert_eq!(
            tasks.check("tasks.max", "0").unwrap_err(),
            "Invalid value '0' for configuration tasks.max: Value must be at least 1"
        );
        assert_eq!(
            tasks.check("tasks.max", "x").unwrap_err(),
            "Invalid value 'x' for configuration tasks.max: Not a number of type INT"
        );
        assert_eq!(tasks.check("tasks.max", "2"), Ok(Value::Int(2)));
        let secret = KeyDef::new("a.<name>.token", Type::Password, Importance::High, "")
            .with_validator(Validator::new("short", |_| Err("too long".into())));
        let message = secret.check("a.b.token", "hunter2").unwrap_err();
        assert_eq!(message, "Invalid value [hidden] for configuration a.b.token: too long");
    }

    #[test]
    fn one_of_names_what_is_allowed() {
        let v = Validator::one_of(&["none", "all"]);
        assert_eq!(v.check(&Value::String("all".into())), Ok(()));
        assert_eq!(v.check(&Value::String("some".into())), Err("String must be one of: none, all".into()));
        assert_eq!(v.description(), "none, all");
    }

    #[test]
    #[should_panic(expected = "Value must be at least 1")]
    fn a_default_its_validator_refuses_is_a_table_bug() {
        let _ =
            KeyDef::new("k", Type::Int, Importance::Low, "").with_default("0").with_validator(Validator::at_least(1));
    }

    #[test]
    #[should_panic(expected = "Not a number of type LONG")]
    fn a_default_of_the_wrong_type_is_a_table_bug() {
        let _ = KeyDef::new("k", Type::Long, Importance::Low, "").with_default("soon");
    }
}
