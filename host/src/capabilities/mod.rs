//! What a plugin may reach. Each granted interface lives in a file of its own;
//! `Grants` is parsed from the connector config, and nothing is reachable that
//! the config did not grant.
//!
//! Capability keys (all optional):
//!
//! | key | grants |
//! |---|---|
//! | `plugin.grant.fs.dirs` | read-write access to these host directories (comma-separated), at the same paths |
//! | `plugin.grant.net.connect` | TCP connections to these `ip:port` addresses |
//! | `plugin.grant.clock` | the real wall and monotonic clocks (otherwise both read 0) |
//! | `plugin.grant.random` | real randomness (otherwise a fixed byte stream) |
//! | `plugin.grant.env.<NAME>` | an environment variable `NAME` with this value |

mod log;
mod output;
mod wasi;

pub use output::OutputTail;

use crate::runtime::MemoryLimiter;
use anyhow::{Result, bail};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use wasmtime::Engine;
use wasmtime::component::{Component, ResourceTable};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

const GRANT_PREFIX: &str = "plugin.grant.";

/// The capabilities one connector's plugin instances get.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Grants {
    pub dirs: Vec<PathBuf>,
    pub connect: Vec<SocketAddr>,
    pub clock: bool,
    pub random: bool,
    pub env: BTreeMap<String, String>,
}

impl Grants {
    /// Reads the `plugin.grant.*` keys of a connector config.
    pub fn from_config<'a>(config: impl IntoIterator<Item = (&'a str, &'a str)>) -> Result<Self> {
        let mut grants = Grants::default();
        for (key, value) in config {
            let Some(grant) = key.strip_prefix(GRANT_PREFIX) else { continue };
            let list = || value.split(',').map(str::trim).filter(|s| !s.is_empty());
            match grant {
                "fs.dirs" => {
                    for dir in list() {
                        let path = PathBuf::from(dir);
                        if !path.is_absolute() {
                            bail!("{key}: '{dir}' must be an absolute path");
                        }
                        grants.dirs.push(path);
                    }
                }
                "net.connect" => {
                    for addr in list() {
                        grants.connect.push(
                            addr.parse().map_err(|_| anyhow::anyhow!("{key}: '{addr}' is not an ip:port address"))?,
                        );
                    }
                }
                "clock" => grants.clock = parse_bool(key, value)?,
                "random" => grants.random = parse_bool(key, value)?,
                other => match other.strip_prefix("env.") {
                    Some(name) if !name.is_empty() => {
                        grants.env.insert(name.to_string(), value.to_string());
                    }
                    _ => bail!("unknown capability '{key}'"),
                },
            }
        }
        Ok(grants)
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => bail!("{key}: expected true or false, got '{other}'"),
    }
}

/// Everything a plugin instance's store holds.
pub struct PluginState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: MemoryLimiter,
    /// The connector and task, for log lines.
    pub(crate) name: String,
    /// The end of what the plugin wrote to stderr: a panic message lands here.
    pub(crate) stderr: OutputTail,
}

impl PluginState {
    pub(crate) fn new(name: &str, grants: &Grants, memory_bytes: usize) -> Result<Self> {
        let stderr = OutputTail::new(name);
        Ok(PluginState {
            wasi: wasi::sandbox(grants, &stderr)?,
            table: ResourceTable::new(),
            limiter: MemoryLimiter::new(memory_bytes),
            name: name.to_string(),
            stderr,
        })
    }
}

impl WasiView for PluginState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

/// Interfaces every plugin may import. WASI is always linked, but sandboxed by
/// the context `wasi::sandbox` builds from the grants.
const ALWAYS_LINKED: [&str; 3] = ["wasi:", "spillway:connector/types@", "spillway:connector/log@"];

/// Refuses a component that imports an interface this host does not provide,
/// naming it, instead of failing later with a linker error.
pub fn check_imports(engine: &Engine, component: &Component, _grants: &Grants) -> Result<()> {
    for (name, _) in component.component_type().imports(engine) {
        if !ALWAYS_LINKED.iter().any(|prefix| name.starts_with(prefix)) {
            bail!("plugin imports '{name}', a capability this host does not provide");
        }
    }
    Ok(())
}
