//! The sandboxed WebAssembly runtime: one wasmtime engine per host, compiled
//! plugins cached by content digest, and one store per task instance.

mod cache;
mod instance;
mod limits;

pub use cache::ComponentCache;
pub use instance::{Interrupter, PluginError, PluginInstance};
pub use limits::Limits;
pub(crate) use limits::MemoryLimiter;

use crate::capabilities::{self, Grants};
use anyhow::{Context, Result, anyhow};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

/// The generated host side of `wit/connector.wit`.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "sink",
    });
    pub use self::spillway::connector::types::*;
}

use bindings::PluginMetadata;

/// The version of `wit/connector.wit` this host speaks. A plugin built
/// against another version is refused with a message naming both.
pub const CONTRACT_VERSION: &str = "0.2.0";
const CONTRACT_PACKAGE: &str = "spillway:connector";

/// How often the epoch advances: the granularity of per-call CPU bounds.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine, the linker every plugin is instantiated against, and the
/// compiled-component cache. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<capabilities::PluginState>,
    cache: ComponentCache,
}

/// A compiled plugin: what instances of it are made from.
#[derive(Clone)]
pub struct Plugin {
    pub digest: String,
    pub metadata: PluginMetadata,
    component: Component,
}

impl Runtime {
    /// Creates the engine and starts the epoch ticker. `cache_dir` holds
    /// compiled components across host restarts.
    pub fn new(cache_dir: &Path) -> Result<Self> {
        let mut config = Config::new();
        // Epoch interruption bounds each call: an endless loop traps instead
        // of pinning a host thread forever.
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| anyhow!("wasmtime engine: {e:?}"))?;

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(|e| anyhow!("linking WASI: {e:?}"))?;
        bindings::Sink::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)
            .map_err(|e| anyhow!("linking spillway imports: {e:?}"))?;

        start_epoch_ticker(&engine);
        let cache = ComponentCache::new(engine.clone(), cache_dir)?;
        Ok(Runtime { inner: Arc::new(Inner { engine, linker, cache }) })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Plugins compiled since start: a restart with a warm cache compiles none.
    pub fn compilations(&self) -> u64 {
        self.inner.cache.compilations()
    }

    /// Compiles (or loads from the cache) a plugin and reads its metadata.
    pub fn load(&self, wasm: &[u8]) -> Result<Plugin> {
        let (digest, component) = self.inner.cache.get_or_compile(wasm)?;
        let mut probe = self
            .instantiate_component(&component, "plugin-probe", &Grants::default(), &Limits::default())
            .context("instantiating plugin to read its metadata")?;
        let metadata = probe.metadata().map_err(|e| anyhow!("reading plugin metadata: {e}"))?;
        Ok(Plugin { digest, metadata, component })
    }

    /// Reads a plugin file and loads it.
    pub fn load_file(&self, path: &Path) -> Result<Plugin> {
        let wasm = std::fs::read(path).with_context(|| format!("reading plugin {}", path.display()))?;
        self.load(&wasm).with_context(|| format!("loading plugin {}", path.display()))
    }

    /// A fresh, isolated instance of `plugin` for one task.
    pub fn instantiate(&self, plugin: &Plugin, name: &str, grants: &Grants, limits: &Limits) -> Result<PluginInstance> {
        self.instantiate_component(&plugin.component, name, grants, limits)
    }

    fn instantiate_component(
        &self,
        component: &Component,
        name: &str,
        grants: &Grants,
        limits: &Limits,
    ) -> Result<PluginInstance> {
        capabilities::check_imports(&self.inner.engine, component, grants)?;
        check_contract(&self.inner.engine, component)?;
        PluginInstance::new(&self.inner.engine, &self.inner.linker, component, name, grants, limits)
    }
}

/// Refuses a component built against another version of the contract, or
/// against none, before linking would fail with a less helpful message.
fn check_contract(engine: &Engine, component: &Component) -> Result<()> {
    let ty = component.component_type();
    let names: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_string()).collect();
    let ours = format!("{CONTRACT_PACKAGE}/sink-task@{CONTRACT_VERSION}");
    if names.contains(&ours) {
        return Ok(());
    }
    let prefix = format!("{CONTRACT_PACKAGE}/sink-task@");
    match names.iter().find_map(|n| n.strip_prefix(&prefix)) {
        Some(theirs) => Err(anyhow!(
            "plugin was built against contract {CONTRACT_PACKAGE}@{theirs}, but this host speaks \
             {CONTRACT_PACKAGE}@{CONTRACT_VERSION}: rebuild it with a matching spillway-sdk"
        )),
        None => Err(anyhow!("not a sink plugin: the component exports no {CONTRACT_PACKAGE}/sink-task interface")),
    }
}

/// One thread for the whole process advances the engine's epoch; it holds only
/// a weak reference so that dropping the engine ends it.
fn start_epoch_ticker(engine: &Engine) {
    let weak = engine.weak();
    thread::Builder::new()
        .name("wasm-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                thread::sleep(EPOCH_TICK);
            }
        })
        .expect("spawning the epoch thread");
}
