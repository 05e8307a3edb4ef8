//! Database servers for the SQL sink's tests: the ones the environment
//! names (`SPILLWAY_TEST_POSTGRES_URL`, `SPILLWAY_TEST_MYSQL_URL`, with the
//! password in `SPILLWAY_TEST_DB_PASSWORD`), or PostgreSQL and MariaDB from
//! Debian started once per test binary by `tests/support/db-server.sh`, as
//! a user that owns one database and nothing else. A started server stops
//! when the test binary ends (its stdin, held here, closes).

use super::support_dir;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const POSTGRES_ENV: &str = "SPILLWAY_TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "SPILLWAY_TEST_MYSQL_URL";
pub const PASSWORD_ENV: &str = "SPILLWAY_TEST_DB_PASSWORD";

pub struct DbServer {
    /// Without the password, as a grant's url takes it.
    pub url: String,
    pub password: String,
    _server: Option<Mutex<Child>>,
}

impl DbServer {
    /// The URL with the password, for the test's own connections.
    pub fn url_with_password(&self) -> String {
        let mut url = url::Url::parse(&self.url).expect("a URL");
        url.set_password(Some(&self.password)).expect("a password fits");
        url.to_string()
    }

    /// `plugin.grant.sql.<name>.*` for this server.
    pub fn grant(&self, name: &str) -> Vec<(String, String)> {
        vec![
            (format!("plugin.grant.sql.{name}.url"), self.url.clone()),
            (format!("plugin.grant.sql.{name}.password"), self.password.clone()),
        ]
    }
}

pub fn postgres() -> &'static DbServer {
    static SERVER: OnceLock<DbServer> = OnceLock::new();
    SERVER.get_or_init(|| DbServer::from_env_or_start(POSTGRES_ENV, "postgres"))
}

pub fn mariadb() -> &'static DbServer {
    static SERVER: OnceLock<DbServer> = OnceLock::new();
    SERVER.get_or_init(|| DbServer::from_env_or_start(MYSQL_ENV, "mariadb"))
}

impl DbServer {
    fn from_env_or_start(env: &str, kind: &str) -> DbServer {
        let password = std::env::var(PASSWORD_ENV).unwrap_or_else(|_| "spillway".to_string());
        if let Ok(url) = std::env::var(env) {
            println!("{kind}: external server at {url} (${env})");
            return DbServer { url, password, _server: None };
        }
        let mut started = DbServer::start(kind);
        started.password = password;
        started
    }

    /// A server of its own (not shared), stopped when dropped: for a test
    /// that stops and restarts it.
    pub fn start(kind: &str) -> DbServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("url");
        let script = support_dir().join("db-server.sh");
        let mut child = Command::new("bash")
            .arg(&script)
            .arg(kind)
            .arg(&file)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", script.display()));
        let deadline = Instant::now() + Duration::from_secs(120);
        let url = loop {
            if let Ok(s) = std::fs::read_to_string(&file) {
                break s.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("db-server.sh {kind} exited early ({status}): is the server installed?");
            }
            assert!(Instant::now() < deadline, "db-server.sh {kind} wrote no URL");
            std::thread::sleep(Duration::from_millis(50));
        };
        println!("{kind}: started at {url}");
        DbServer { url, password: "spillway".to_string(), _server: Some(Mutex::new(child)) }
    }
}

impl Drop for DbServer {
    fn drop(&mut self) {
        if let Some(server) = self._server.take() {
            let mut child = server.into_inner().unwrap();
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// Reads a granted database back through the capability's own host
/// functions (checked against each database's own functions in
/// `tests/sql_capability.rs`), bypassing the plugin.
pub struct Reader {
    ctx: spillway::capabilities::sql::SqlCtx,
    rep: u32,
    pub dialect: Dialect,
}

use spillway::capabilities::sql::bindings::spillway::sql::databases::{Column, Dialect, HostDatabase, Value};

impl Reader {
    pub async fn open(grant: &[(String, String)]) -> Reader {
        use spillway::capabilities::{CallBudget, CapabilityMetrics, Grants};
        let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
        let mut ctx = spillway::capabilities::sql::SqlCtx::new(
            &grants.sql,
            &grants.bounds,
            CallBudget::default(),
            std::sync::Arc::new(CapabilityMetrics::default()),
        );
        let name = grants.sql.keys().next().expect("a sql grant").clone();
        let db = ctx.open(name).await.unwrap().unwrap_or_else(|e| panic!("open: {e:?}"));
        let rep = db.rep();
        let dialect = ctx.dialect(wasmtime::component::Resource::new_borrow(rep)).await.unwrap();
        Reader { ctx, rep, dialect }
    }

    /// `name` quoted as the dialect quotes identifiers.
    pub fn quote(&self, name: &str) -> String {
        if self.dialect == Dialect::Mysql { format!("`{name}`") } else { format!("\"{name}\"") }
    }

    pub async fn query(&mut self, sql: &str) -> Vec<Vec<Value>> {
        let db = wasmtime::component::Resource::new_borrow(self.rep);
        self.ctx.query(db, sql.to_string(), vec![]).await.unwrap().unwrap_or_else(|e| panic!("{sql}: {e:?}")).rows
    }

    pub async fn execute(&mut self, sql: &str) {
        let db = wasmtime::component::Resource::new_borrow(self.rep);
        self.ctx.execute(db, sql.to_string(), vec![]).await.unwrap().unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }

    /// The table's columns, or none while it does not exist.
    pub async fn describe(&mut self, table: &str) -> Option<Vec<Column>> {
        let db = wasmtime::component::Resource::new_borrow(self.rep);
        self.ctx.describe_table(db, table.to_string()).await.unwrap().unwrap_or_else(|e| panic!("{table}: {e:?}"))
    }

    /// Rows in the table, or none while it does not exist.
    pub async fn count(&mut self, table: &str) -> Option<usize> {
        let db = wasmtime::component::Resource::new_borrow(self.rep);
        self.ctx.describe_table(db, table.to_string()).await.unwrap().unwrap()?;
        let rows = self.query(&format!("SELECT count(*) FROM {}", self.quote(table))).await;
        match rows[0][0] {
            Value::Int(n) => Some(n as usize),
            ref other => panic!("count: {other:?}"),
        }
    }
}

/// A TCP forwarder in front of a database, for outages: `cut` closes every
/// connection and refuses new ones until `restore`. Fault injection only:
/// the database behind it is real.
pub struct Cuttable {
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    generation: tokio::sync::watch::Sender<u64>,
}

impl Cuttable {
    pub async fn start(target: String) -> Cuttable {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (generation, _) = tokio::sync::watch::channel(0u64);
        let (flag, gen_tx) = (cut.clone(), generation.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                if flag.load(SeqCst) {
                    continue; // dropped: the connection closes at once
                }
                let target = target.clone();
                let mut cut_now = gen_tx.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut_now.changed() => {}
                    }
                });
            }
        });
        Cuttable { port, cut, generation }
    }

    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    pub fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
