//! One `plugin.grant.sql.<name>.*` grant: its settings, parsed from one
//! table, and the pool of connections it opens. The URL, user and password
//! stay here; the plugin only names the grant.

use super::NAME;
use crate::Grants;
use crate::grants::checked_settings;
use crate::op::OpPolicy;
use crate::reach::{GrantSettings, Reach};
use anyhow::{Result, anyhow, bail};
use spillway_config::{ConfigDef, Importance, KeyDef, Password, Type, Validator};
use sqlx::ConnectOptions;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use std::collections::BTreeMap;
use std::path::{Component, PathBuf};
use std::str::FromStr;
use std::sync::LazyLock;

/// The settings one grant takes (`plugin.grant.sql.<name>.<setting>`): the
/// connector's key table lists them under that prefix, and
/// [`SqlGrant::from_settings`] parses them, so each default is written once.
pub fn setting_keys() -> Vec<KeyDef> {
    vec![
        KeyDef::new(
            "url",
            Type::String,
            Importance::High,
            "The database: postgres://host:port/db, mysql://host:port/db (MySQL and MariaDB), or \
             sqlite:///absolute/file.db, whose directory must be granted to the connector \
             (plugin.grant.fs.<name>.path); a JDBC URL (jdbc:postgresql://, jdbc:mysql://, \
             jdbc:mariadb://) is read as the URL after jdbc:. Without a password: that goes in password.",
        )
        .required(),
        KeyDef::new("user", Type::String, Importance::High, "The database user; empty for the URL's own."),
        KeyDef::new(
            "password",
            Type::Password,
            Importance::High,
            "The user's password. Stays in the host: the plugin never sees it.",
        ),
        KeyDef::new(
            "pool.size",
            Type::Int,
            Importance::Medium,
            "Most connections one plugin instance (one task) holds open.",
        )
        .with_default("2")
        .with_validator(Validator::at_least(1)),
    ]
    .into_iter()
    .chain(OpPolicy::setting_keys(
        "Longest one operation (a batch, a statement, a query) may take, retries included; also the \
             database's own statement timeout. Never past the plugin call's deadline.",
    ))
    .collect()
}

/// Which database a grant reaches, and how.
#[derive(Clone, Debug, PartialEq)]
pub enum Target {
    Postgres { url: String, user: Option<String>, password: Option<Password> },
    MySql { url: String, user: Option<String>, password: Option<Password> },
    Sqlite { path: PathBuf },
}

/// One parsed grant.
#[derive(Clone, Debug, PartialEq)]
pub struct SqlGrant {
    pub target: Target,
    pub pool_size: u32,
    pub policy: OpPolicy,
}

/// An open pool, one per driver.
#[derive(Clone)]
pub enum Pool {
    Postgres(PgPool),
    MySql(MySqlPool),
    Sqlite(SqlitePool),
}

impl SqlGrant {
    pub(crate) fn from_settings(name: &str, settings: &BTreeMap<String, String>) -> Result<Self> {
        static SETTINGS: LazyLock<ConfigDef> = LazyLock::new(|| ConfigDef::new().group("sql", setting_keys()));
        let key = |setting: &str| format!("plugin.grant.{NAME}.{name}.{setting}");
        let values = checked_settings(&SETTINGS, NAME, name, settings)?;
        let raw = native_url(values.string("url"));
        let non_empty = |s: &str| Some(s.to_string()).filter(|s| !s.is_empty());
        let user = non_empty(values.string("user"));
        let password = non_empty(values.password("password")).map(Password::new);
        let scheme = raw.split_once(':').map(|(s, _)| s).unwrap_or_default();
        let target = match scheme {
            "postgres" | "postgresql" | "mysql" | "mariadb" => {
                let url = url::Url::parse(raw).map_err(|e| anyhow!("{}: '{raw}' is not a URL: {e}", key("url")))?;
                let secret_in_query =
                    url.query_pairs().any(|(k, _)| matches!(k.to_ascii_lowercase().as_str(), "password" | "passfile"));
                if url.password().is_some() || secret_in_query {
                    // It would show wherever the config does; password is hidden.
                    bail!("{}: put the password in {}, not in the URL", key("url"), key("password"));
                }
                if url.host_str().is_none_or(str::is_empty) {
                    bail!("{}: '{raw}' names no host", key("url"));
                }
                let url = raw.to_string();
                if scheme.starts_with("postgres") {
                    Target::Postgres { url, user, password }
                } else {
                    // sqlx speaks MySQL's protocol to both.
                    Target::MySql { url: url.replacen("mariadb:", "mysql:", 1), user, password }
                }
            }
            "sqlite" => {
                let path = raw.trim_start_matches("sqlite:").trim_start_matches("//");
                let path = path.split('?').next().unwrap_or_default();
                if path.is_empty() || path == ":memory:" {
                    bail!("{}: '{raw}' names no file (sqlite:///absolute/file.db)", key("url"));
                }
                let path = PathBuf::from(path);
                if !path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir)) {
                    bail!("{}: '{raw}' must name an absolute path without '..'", key("url"));
                }
                if user.is_some() || password.is_some() {
                    bail!("{}: a SQLite database takes no user or password", key("user"));
                }
                Target::Sqlite { path }
            }
            _ => bail!("{}: '{raw}' is not a postgres://, mysql://, mariadb:// or sqlite:// URL", key("url")),
        };
        Ok(SqlGrant { target, pool_size: values.int("pool.size") as u32, policy: OpPolicy::from_values(&values) })
    }

    /// A SQLite file must lie in a directory the connector was granted: the
    /// database is a file the plugin writes, and only granted files may be.
    pub(crate) fn check_within(&self, name: &str, dirs: &[PathBuf]) -> Result<()> {
        let Target::Sqlite { path } = &self.target else { return Ok(()) };
        if dirs.iter().any(|dir| path.starts_with(dir) && path != dir) {
            return Ok(());
        }
        bail!(
            "plugin.grant.{NAME}.{name}.url: the SQLite file {} is not under a directory granted to the \
             connector (plugin.grant.fs.<name>.path)",
            path.display()
        )
    }

    /// Where the grant points, for messages: never its credentials.
    pub(super) fn describe(&self) -> String {
        match &self.target {
            Target::Postgres { url, .. } | Target::MySql { url, .. } => url.clone(),
            Target::Sqlite { path } => format!("sqlite://{}", path.display()),
        }
    }

    /// A pool; connections are made lazily, so the caller asks for one to
    /// find out whether the database answers.
    pub(super) fn pool(&self) -> Result<Pool> {
        let timeout = self.policy.timeout;
        let ms = timeout.as_millis().to_string();
        Ok(match &self.target {
            Target::Postgres { url, user, password } => {
                let mut options = PgConnectOptions::from_str(url)?
                    // Timestamps cross as UTC whatever the server's zone, and
                    // the server stops a statement the host gave up on.
                    .options([("TimeZone", "UTC"), ("statement_timeout", ms.as_str())])
                    .application_name("spillway")
                    .disable_statement_logging();
                if let Some(user) = user {
                    options = options.username(user);
                }
                if let Some(password) = password {
                    options = options.password(password.value());
                }
                let pool = PgPoolOptions::new().max_connections(self.pool_size).acquire_timeout(timeout);
                Pool::Postgres(pool.connect_lazy_with(options))
            }
            Target::MySql { url, user, password } => {
                let mut options = MySqlConnectOptions::from_str(url)?
                    .timezone(Some("+00:00".to_string()))
                    .disable_statement_logging();
                if let Some(user) = user {
                    options = options.username(user);
                }
                if let Some(password) = password {
                    options = options.password(password.value());
                }
                let pool = MySqlPoolOptions::new().max_connections(self.pool_size).acquire_timeout(timeout);
                Pool::MySql(pool.connect_lazy_with(options))
            }
            Target::Sqlite { path } => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let options = SqliteConnectOptions::new()
                    .filename(path)
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(timeout)
                    .disable_statement_logging();
                let pool = SqlitePoolOptions::new().max_connections(self.pool_size).acquire_timeout(timeout);
                Pool::Sqlite(pool.connect_lazy_with(options))
            }
        })
    }
}

impl Pool {
    pub fn dialect_name(&self) -> &'static str {
        match self {
            Pool::Postgres(_) => "PostgreSQL",
            Pool::MySql(_) => "MySQL",
            Pool::Sqlite(_) => "SQLite",
        }
    }
}

/// Reads grant `name` into the connector's grants.
pub(super) fn parse(grants: &mut Grants, name: &str, settings: &BTreeMap<String, String>) -> Result<()> {
    grants.sql.insert(name.to_string(), SqlGrant::from_settings(name, settings)?);
    Ok(())
}

/// Every SQLite file lies in a directory the connector was granted.
pub(super) fn check(grants: &Grants) -> Result<()> {
    let dirs: Vec<PathBuf> = grants.wasi.dirs.iter().map(|d| d.path.clone()).collect();
    for (name, grant) in &grants.sql {
        grant.check_within(name, &dirs)?;
    }
    Ok(())
}

/// The URL a JDBC URL (Kafka Connect's `connection.url`) holds after
/// `jdbc:`, which is the database's own URL for PostgreSQL, MySQL and
/// MariaDB; any other URL as it is.
fn native_url(url: &str) -> &str {
    let url = url.trim();
    url.strip_prefix("jdbc:").unwrap_or(url)
}

/// A database server, or a SQLite file, whose directory the grant reaches.
pub(super) fn reach<'a>(grant: &GrantSettings<'a>, reach: &mut Reach<'a>) {
    let Some((key, url)) = grant.get("url") else { return };
    let url = native_url(url);
    reach.targets.push((key, spillway_policy::Target::SqlUrl(url.to_string())));
    if let Some(file) = url.strip_prefix("sqlite://")
        && let Some(dir) = std::path::Path::new(file.split('?').next().unwrap_or(file)).parent()
    {
        reach.dirs.push((key, dir.to_path_buf()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn grant_settings_are_checked_and_defaulted_from_one_table() {
        let grant = SqlGrant::from_settings(
            "db",
            &settings(&[("url", "postgres://127.0.0.1:5432/app"), ("user", "app"), ("password", "s3cret")]),
        )
        .unwrap();
        assert_eq!(grant.policy, OpPolicy { timeout: Duration::from_millis(30_000), retries: 3 });
        assert_eq!(grant.pool_size, 2);
        assert!(!format!("{grant:?}").contains("s3cret"), "the password shows in Debug: {grant:?}");
        let jdbc = SqlGrant::from_settings("db", &settings(&[("url", "jdbc:postgresql://127.0.0.1:5432/app")]));
        assert!(
            matches!(&jdbc.unwrap().target, Target::Postgres { url, .. } if url == "postgresql://127.0.0.1:5432/app")
        );
        let maria = SqlGrant::from_settings("db", &settings(&[("url", "mariadb://127.0.0.1:3306/app")])).unwrap();
        assert!(matches!(&maria.target, Target::MySql { url, .. } if url == "mysql://127.0.0.1:3306/app"));
        let lite = SqlGrant::from_settings("db", &settings(&[("url", "sqlite:///data/app.db")])).unwrap();
        assert_eq!(lite.target, Target::Sqlite { path: PathBuf::from("/data/app.db") });
        for (pairs, expected) in [
            (vec![], "plugin.grant.sql.db.url: Missing required configuration"),
            (vec![("url", "postgres://h/db"), ("pasword", "x")], "plugin.grant.sql.db.pasword: unknown setting"),
            (vec![("url", "postgres://u:pw@h/db")], "put the password in plugin.grant.sql.db.password"),
            (vec![("url", "postgres://h/db?user=u&password=pw")], "put the password in plugin.grant.sql.db.password"),
            (vec![("url", "oracle://h/db")], "is not a postgres://"),
            (vec![("url", "sqlite::memory:")], "names no file"),
            (vec![("url", "sqlite://data/../etc/x.db")], "absolute path without '..'"),
            (vec![("url", "sqlite:///d/x.db"), ("user", "u")], "takes no user"),
            (vec![("url", "postgres://h/db"), ("pool.size", "0")], "plugin.grant.sql.db.pool.size: Invalid value"),
        ] {
            let err = SqlGrant::from_settings("db", &settings(&pairs)).unwrap_err().to_string();
            assert!(err.contains(expected), "{pairs:?}: {err}");
        }
    }

    #[test]
    fn a_sqlite_file_must_be_in_a_granted_directory() {
        let lite = SqlGrant::from_settings("db", &settings(&[("url", "sqlite:///data/sink/app.db")])).unwrap();
        assert!(lite.check_within("db", &[PathBuf::from("/data/sink")]).is_ok());
        assert!(lite.check_within("db", &[PathBuf::from("/data")]).is_ok());
        let err = lite.check_within("db", &[PathBuf::from("/data/other")]).unwrap_err().to_string();
        assert!(err.contains("not under a directory granted"), "{err}");
        assert!(lite.check_within("db", &[]).is_err());
    }
}
