//! A Confluent-compatible Schema Registry for the Avro converter's tests:
//! the one `SPILLWAY_TEST_SCHEMA_REGISTRY_URL` names (its Confluent API base
//! URL), or Apicurio Registry started once per test binary by
//! `scripts/registry.sh` (in memory, empty at start) and shared by its tests,
//! each with topics, so subjects, of its own. And Avro records written by
//! Confluent's own serializer (`tests/support/avro-produce.py`).
//!
//! A started registry stops when the test binary ends, however it ends: a
//! shared one lives in a static, which is never dropped, so a small shell
//! beside it holds a pipe from this process and runs `registry.sh stop` when
//! the pipe closes (as db-server.sh and moto do).

use super::support_dir;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};

pub const REGISTRY_ENV: &str = "SPILLWAY_TEST_SCHEMA_REGISTRY_URL";

/// What `scripts/registry.sh` runs (its `APICURIO_VERSION` default).
pub const APICURIO_VERSION: &str = "2.6.13.Final";

pub struct Registry {
    /// The Confluent-compatible base URL, as `schema.registry.url` takes it
    /// (Apicurio's: `http://127.0.0.1:PORT/apis/ccompat/v7`).
    pub url: String,
    /// registry.sh's state (pid, log); none for an external registry.
    dir: Option<tempfile::TempDir>,
    /// Runs `registry.sh stop` once its stdin closes: when dropped here, or
    /// when this process exits and the kernel closes the pipe.
    stopper: Option<Mutex<Child>>,
}

impl Registry {
    /// The registry every test of this binary shares.
    pub fn start_or_env() -> &'static Registry {
        static REGISTRY: OnceLock<Registry> = OnceLock::new();
        REGISTRY.get_or_init(|| {
            if let Ok(url) = std::env::var(REGISTRY_ENV) {
                println!("schema registry: external at {url} (${REGISTRY_ENV})");
                return Registry { url, dir: None, stopper: None };
            }
            Registry::start()
        })
    }

    /// A registry of its own (not shared), stopped when dropped: for a test
    /// that needs it empty or stops it.
    pub fn start() -> Registry {
        let dir = tempfile::tempdir().expect("temp dir");
        // Before the start, so that a panic from here on still stops it.
        let stopper = stopper(dir.path());
        let url = registry_sh(&["start", "--dir"], dir.path());
        assert!(url.starts_with("http://"), "registry.sh start printed no URL last, but {url:?}");
        println!("schema registry: Apicurio Registry {APICURIO_VERSION} (scripts/registry.sh) at {url}");
        Registry { url, dir: Some(dir), stopper: Some(Mutex::new(stopper)) }
    }

    /// Where registry.sh keeps this registry's log, for a failing test's
    /// message; none for an external registry.
    pub fn log(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|dir| dir.path().join("registry.log"))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        // Closing the stopper's stdin makes it run `registry.sh stop --dir`
        // (TERM, KILL after 5 s) and remove the directory; waiting for it
        // stops the registry before the test goes on.
        if let Some(stopper) = self.stopper.take() {
            let mut child = stopper.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
            drop(child.stdin.take());
            let _ = child.wait();
        }
    }
}

/// The repository's root, where `scripts/` is.
fn repo_root() -> PathBuf {
    support_dir().join("../..")
}

/// Runs `scripts/registry.sh ARGS DIR` and answers what it printed last.
fn registry_sh(args: &[&str], dir: &Path) -> String {
    let out = Command::new("bash")
        .arg("scripts/registry.sh")
        .args(args)
        .arg(dir)
        .current_dir(repo_root())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running scripts/registry.sh: {e}"));
    assert!(out.status.success(), "registry.sh {args:?} {} failed ({}): is Java 17 there?", dir.display(), out.status);
    String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim().to_string()
}

/// A shell that waits for its stdin (a pipe only this process holds: Rust
/// opens it close-on-exec) to close, then stops the registry in `dir` and
/// removes `dir`. It ignores SIGINT: Ctrl-C reaches the whole process group,
/// and the registry's JVM, started in the background, ignores it too.
fn stopper(dir: &Path) -> Child {
    Command::new("bash")
        .arg("-c")
        .arg(r#"trap '' INT; cat >/dev/null; bash scripts/registry.sh stop --dir "$1"; rm -rf "$1""#)
        .arg("registry-stopper")
        .arg(dir)
        .current_dir(repo_root())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the registry's stopper (bash)")
}

/// Produces `count` Avro records to `topic` with confluent-kafka's
/// AvroSerializer, registering the schema under `<topic>-value` at
/// `registry`, and answers their keys (`<topic>-<i>`, or `<P>-<i>` with
/// `--key-prefix P`), in order. `extra_args`: `--schema v2` (the evolved
/// schema), `--key-prefix P`, `--raw-unknown-id N` (N records of an unknown
/// schema id instead); see the script. Blocks until every record is
/// delivered; panics with the script's stderr if one is not.
pub fn produce_avro(bootstrap: &str, registry: &str, topic: &str, count: usize, extra_args: &[&str]) -> Vec<String> {
    let script = support_dir().join("avro-produce.py");
    let out = Command::new("python3")
        .arg(&script)
        .args([bootstrap, registry, topic])
        .arg(count.to_string())
        .args(extra_args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "avro-produce.py {topic} {count} {extra_args:?} failed ({}): {}\n\
         (needs pip install 'confluent-kafka[avro,schemaregistry]==2.16.1', as scripts/test.sh does)",
        out.status,
        String::from_utf8_lossy(&out.stderr),
    );
    String::from_utf8(out.stdout).expect("UTF-8 keys").lines().map(str::to_string).collect()
}
