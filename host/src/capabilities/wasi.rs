//! The WASI context of a plugin: nothing but what its grants allow.

use super::{Grants, OutputTail};
use anyhow::{Context, Result};
use std::time::Duration;
use wasmtime_wasi::sockets::SocketAddrUse;
use wasmtime_wasi::{Deterministic, FsPerms, HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder};

/// Builds a WASI context with no files, network, environment, clock or
/// entropy beyond the grants. stdout is discarded; stderr is kept (its tail)
/// for failure reports.
pub fn sandbox(grants: &Grants, stderr: &OutputTail) -> Result<WasiCtx> {
    let mut builder = WasiCtxBuilder::new();
    builder.stderr(stderr.clone());
    for dir in &grants.dirs {
        let guest = dir.to_str().context("granted directory is not UTF-8")?;
        builder
            .preopened_dir(dir, guest, FsPerms::ReadWrite)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("granting directory {}", dir.display()))?;
    }
    for (name, value) in &grants.env {
        builder.env(name, value);
    }
    if !grants.clock {
        builder.wall_clock(FrozenClock).monotonic_clock(FrozenClock);
    }
    if !grants.random {
        // Deterministic, not absent: language runtimes (Rust's HashMap seeds,
        // CPython's hash) read randomness at start-up and abort without it.
        builder
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
