use crate::{ConfigError, TaskError};
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
