use crate::{ConfigError, ConfigKey, ConfigType, TaskError};
use std::str::FromStr;

/// A connector's configuration as the host passed it: string keys and values.
#[derive(Clone, Debug, Default)]
pub struct Config {
    entries: Vec<(String, String)>,
}

impl From<Vec<(String, String)>> for Config {
    fn from(entries: Vec<(String, String)>) -> Self {
        Config { entries }
    }
}

impl Config {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The value of a key the plugin declared as required.
    pub fn require(&self, key: &str) -> Result<&str, TaskError> {
        self.get(key).ok_or_else(|| TaskError::Fatal(format!("missing required config '{key}'")))
    }

    /// Parses a key's value, or gives `default` when the key is absent.
    pub fn parse_or<T: FromStr>(&self, key: &str, default: T) -> Result<T, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(raw) => raw
                .trim()
                .parse()
                .map_err(|_| ConfigError { key: key.into(), message: format!("invalid value '{raw}'") }),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl From<ConfigError> for TaskError {
    fn from(e: ConfigError) -> Self {
        TaskError::Fatal(format!("config '{}': {}", e.key, e.message))
    }
}

/// Every problem [`ConfigReader`] found, as one fatal error: `start` can
/// then read its settings with `?`.
impl From<Vec<ConfigError>> for TaskError {
    fn from(errors: Vec<ConfigError>) -> Self {
        let all: Vec<String> = errors.iter().map(|e| format!("{}: {}", e.key, e.message)).collect();
        TaskError::Fatal(format!("invalid configuration: {}", all.join("; ")))
    }
}

/// Reads a configuration against the plugin's own key table: each key's value
/// or its declared default, parsed, with every problem collected (one per
/// key) so that `validate` reports them all at once.
pub struct ConfigReader<'a> {
    config: &'a Config,
    keys: Vec<ConfigKey>,
    errors: Vec<ConfigError>,
}

impl<'a> ConfigReader<'a> {
    /// `keys` is the table `metadata()` declares: it gives the defaults.
    pub fn new(config: &'a Config, keys: Vec<ConfigKey>) -> Self {
        ConfigReader { config, keys, errors: Vec::new() }
    }

    /// The value, or the key's default (empty when it has none).
    pub fn string(&self, key: &str) -> String {
        match self.config.get(key) {
            Some(value) => value.to_string(),
            None => self.keys.iter().find(|k| k.name == key).and_then(|k| k.default_value.clone()).unwrap_or_default(),
        }
    }

    /// The value trimmed, or none when it is empty.
    pub fn optional(&self, key: &str) -> Option<String> {
        Some(self.string(key).trim().to_string()).filter(|s| !s.is_empty())
    }

    /// A comma-separated list, its items trimmed, empty ones left out.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.string(key).split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
    }

    pub fn boolean(&mut self, key: &str) -> bool {
        let raw = self.string(key);
        match raw.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                self.error(key, format!("invalid value '{raw}': true or false"));
                false
            }
        }
    }

    /// A number; on a bad value, an error and `T::default()`.
    pub fn number<T: FromStr + Default>(&mut self, key: &str) -> T {
        let raw = self.string(key);
        match raw.trim().parse() {
            Ok(v) => v,
            Err(_) => {
                self.error(key, format!("invalid value '{raw}'"));
                T::default()
            }
        }
    }

    /// One of `choices` (each a list of accepted spellings, the first its
    /// name, compared without case), as its index; on a bad value, an error
    /// and 0.
    pub fn choice(&mut self, key: &str, choices: &[&[&str]]) -> usize {
        let raw = self.string(key);
        let wanted = raw.trim();
        match choices.iter().position(|names| names.iter().any(|n| n.eq_ignore_ascii_case(wanted))) {
            Some(i) => i,
            None => {
                let names: Vec<&str> = choices.iter().map(|names| names[0]).collect();
                self.error(key, format!("'{raw}' is not one of {}", names.join(", ")));
                0
            }
        }
    }

    /// Which of `key` and `alias` (another product's name for it, as
    /// Confluent's `s3.compression.type` for `compression.type`) to read:
    /// the alias when only it is given. Both given is an error on the alias.
    pub fn key_or_alias<'k>(&mut self, key: &'k str, alias: &'k str) -> &'k str {
        let given = |k: &str| self.config.get(k).is_some_and(|v| !v.trim().is_empty());
        match (given(key), given(alias)) {
            (false, true) => alias,
            (true, true) => {
                self.error(alias, format!("{alias} is another name for {key}: give one of them"));
                key
            }
            _ => key,
        }
    }

    /// Records a problem with `key`.
    pub fn error(&mut self, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError { key: key.into(), message: message.into() });
    }

    /// `parsed` when no problem was found, else every problem.
    pub fn finish<T>(self, parsed: T) -> Result<T, Vec<ConfigError>> {
        if self.errors.is_empty() { Ok(parsed) } else { Err(self.errors) }
    }
}

/// The key table a plugin's README holds between its
/// `<!-- config-keys:begin -->` and `<!-- config-keys:end -->` lines, which
/// its tests compare with [`markdown_key_table`]; `None` without them.
pub fn readme_key_table(readme: &str) -> Option<&str> {
    let (begin, end) = ("<!-- config-keys:begin -->\n", "<!-- config-keys:end -->");
    let start = readme.find(begin)? + begin.len();
    readme.get(start..readme.find(end)?)
}

/// A Markdown table of the keys, as a plugin's README lists them (its tests
/// keep the README equal to this).
pub fn markdown_key_table(keys: &[ConfigKey]) -> String {
    let mut out = String::from("| key | type | default | description |\n|---|---|---|---|\n");
    for key in keys {
        let ty = match key.type_ {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::Int => "INT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::String => "STRING",
            ConfigType::List => "LIST",
            ConfigType::Password => "PASSWORD",
        };
        let default = match key.default_value.as_deref() {
            None => "required".to_string(),
            Some("") => "`\"\"`".to_string(),
            Some(d) => format!("`{}`", d.replace('|', "\\|")),
        };
        let doc = key.documentation.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;");
        out.push_str(&format!("| `{}` | {ty} | {default} | {doc} |\n", key.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> Vec<ConfigKey> {
        vec![
            ConfigKey::optional("mode", ConfigType::String, "fast", "How."),
            ConfigKey::optional("size", ConfigType::Int, "10", "How many | at most."),
            ConfigKey::optional("on", ConfigType::Boolean, "true", "Whether."),
            ConfigKey::optional("names", ConfigType::List, "", "Which."),
        ]
    }

    #[test]
    fn the_reader_gives_values_or_defaults_and_collects_every_problem() {
        let config = Config::from(vec![("size".to_string(), "x".to_string()), ("names".to_string(), " a, ,b ".into())]);
        let mut r = ConfigReader::new(&config, keys());
        assert_eq!(r.choice("mode", &[&["slow"], &["fast", "quick"]]), 1);
        assert_eq!(r.number::<i32>("size"), 0);
        assert!(r.boolean("on"));
        assert_eq!(r.list("names"), ["a", "b"]);
        assert_eq!(r.optional("missing"), None);
        let errors = r.finish(()).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!((errors[0].key.as_str(), errors[0].message.as_str()), ("size", "invalid value 'x'"));

        let config = Config::from(vec![("mode".to_string(), "QUICK".to_string())]);
        let mut r = ConfigReader::new(&config, keys());
        assert_eq!(r.choice("mode", &[&["slow"], &["fast", "quick"]]), 1);
        assert_eq!(r.number::<i32>("size"), 10);
        assert!(r.finish(()).is_ok());
    }

    #[test]
    fn the_key_table_escapes_markdown() {
        let table = markdown_key_table(&keys());
        assert!(table.contains("| `size` | INT | `10` | How many \\| at most. |"), "{table}");
        assert!(table.contains("| `names` | LIST | `\"\"` | Which. |"), "{table}");
    }
}
