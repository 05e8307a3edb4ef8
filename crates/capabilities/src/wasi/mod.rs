//! WASI 0.2 for a plugin: nothing but what its grants allow. Linked for
//! every plugin (language runtimes import much of it at start-up), but with
//! no files, sockets or environment beyond the grants.

mod output;

pub use output::OutputTail;

use super::WasiGrants;
use anyhow::{Context, Result};
use std::time::Duration;
use wasmtime::component::Linker;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{Deterministic, FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiView};

/// WASI's host functions, async: a plugin blocked in one (a sleep, a socket
/// read) is a pending future that the call's deadline or a task stop drops.
pub fn add_to_linker<T: WasiView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker)
}

/// Builds a WASI context with no files, network or environment beyond the
/// grants. Clocks and entropy are real (they grant no authority) unless the
/// connector asked for `plugin.deterministic`. stdout is discarded; stderr
/// is kept (its tail) for failure reports.
pub fn sandbox(grants: &WasiGrants, stderr: &OutputTail) -> Result<WasiCtx> {
    let mut builder = WasiCtxBuilder::new();
    builder.stderr(stderr.clone());
    for dir in &grants.dirs {
        let guest = dir.path.to_str().context("granted directory is not UTF-8")?;
        let perms = if dir.read_only { FsPerms::ReadOnly } else { FsPerms::ReadWrite };
        builder
            .preopened_dir(&dir.path, guest, perms)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("granting directory {}", dir.path.display()))?;
    }
    for (name, value) in &grants.env {
        builder.env(name, value);
    }
    if grants.deterministic {
        // Fixed, not absent: language runtimes (Rust's HashMap seeds,
        // CPython's hash) read randomness at start-up and abort without it.
        builder
            .wall_clock(FrozenClock)
            .monotonic_clock(FrozenClock)
            .secure_random(Deterministic::new(vec![0x5a]))
            .insecure_random(Deterministic::new(vec![0xa5]))
            .insecure_random_seed(0);
    }
    let allowed = grants.connect.clone();
    builder.socket_addr_check(move |addr, use_| {
        let ok = match use_ {
            SocketAddrUse::TcpConnect => allowed.contains(&addr),
            // The implicit bind before a connect uses the wildcard address.
            SocketAddrUse::TcpBind => !allowed.is_empty() && addr.ip().is_unspecified() && addr.port() == 0,
            _ => false,
        };
        Box::pin(async move { ok })
    });
    builder.allow_ip_name_lookup(false).allow_udp(false).allow_tcp(!grants.connect.is_empty());
    Ok(builder.build())
}

/// A clock stopped at zero: the plugin can call it, but learns nothing.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}
