//! The sandboxed WebAssembly runtime: one wasmtime engine per host, compiled
//! plugins cached by content digest, and one store per task instance.
//!
//! Calls into plugins are async: wasm yields to the executor at every epoch
//! tick, and host calls (WASI, capabilities) are futures, so one deadline
//! bounds a call wherever it is stuck, and a task that stops drops it.

pub mod batch;
mod cache;
mod contract;
mod instance;
mod limits;
mod state;

pub use cache::ComponentCache;
pub use contract::{CONTRACT_VERSION, PluginKind};
pub use instance::{PluginError, PluginInstance};
pub use limits::Limits;
pub use state::PluginState;

use anyhow::{Context, Result, anyhow};
use contract::Linking;
use spillway_capabilities::{self as capabilities, CapabilityMetrics, Grants};
use std::path::Path;
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine};

/// The generated host side of `wit/connector.wit`: the exports a sink
/// offers. The imports are each capability's own bindings.
pub mod bindings {
    wasmtime::component::bindgen!({
        path: "../../wit",
        // The exports are all the runtime calls; the imports are linked
        // by each capability's registration, whatever the world.
        world: "spillway:connector/sink",
        exports: { default: async },
        additional_derives: [PartialEq],
        with: {
            "spillway:types/errors": spillway_capabilities::errors::bindings::spillway::types::errors,
            "spillway:log/log": spillway_capabilities::log::bindings::spillway::log::log,
        },
    });
    pub use self::spillway::connector::types::*;

    /// The `transform` world: a component that exports `transformation`
    /// instead of `sink-task`. Its types are the sink world's.
    pub mod transform {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "spillway:connector/transform",
            exports: { default: async },
            with: {
                "spillway:types/errors": spillway_capabilities::errors::bindings::spillway::types::errors,
                "spillway:log/log": spillway_capabilities::log::bindings::spillway::log::log,
                "spillway:connector/types": super::spillway::connector::types,
            },
        });
    }

    /// `spillway:connect`, which a plugin may export beside the contract:
    /// the Kafka Connect names it answers to.
    pub mod connect {
        wasmtime::component::bindgen!({
            path: "../../wit",
            world: "spillway:connect/provider",
            exports: { default: async },
            additional_derives: [PartialEq, Default],
        });
        pub use self::exports::spillway::connect::names::{ConnectNames, GrantSource};
        /// The export's name, as a component carries it.
        pub const EXPORT: &str = "spillway:connect/names@0.1.0";
    }
}

use bindings::PluginMetadata;
pub use bindings::connect::{ConnectNames, GrantSource};

/// How often the epoch advances: how often running wasm yields, and so the
/// granularity of per-call deadlines and stops.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The engine and the compiled-component cache. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    cache: ComponentCache,
    capability_metrics: Arc<CapabilityMetrics>,
}

/// A compiled plugin: what instances of it are made from.
#[derive(Clone)]
pub struct Plugin {
    pub digest: String,
    /// A sink, or a transform that records pass through before one.
    pub kind: PluginKind,
    pub metadata: PluginMetadata,
    /// The Kafka Connect names it answers to; empty if it exports none.
    pub connect: ConnectNames,
    component: Component,
}

impl Runtime {
    /// Creates the engine and starts the epoch ticker. `cache_dir` holds
    /// compiled components across host restarts.
    pub fn new(cache_dir: &Path) -> Result<Self> {
        let mut config = Config::new();
        // Epoch interruption makes running wasm yield, so that a deadline or
        // a stop can end a call that never reaches a host call.
        config.epoch_interruption(true);
        let engine = Engine::new(&config).map_err(|e| anyhow!("wasmtime engine: {e:?}"))?;
        start_epoch_ticker(&engine);
        let cache = ComponentCache::new(engine.clone(), cache_dir)?;
        Ok(Runtime { inner: Arc::new(Inner { engine, cache, capability_metrics: Arc::default() }) })
    }

    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// Where compiled plugins are kept.
    pub fn cache_dir(&self) -> &Path {
        self.inner.cache.dir()
    }

    /// Plugins compiled since start: a restart with a warm cache compiles none.
    pub fn compilations(&self) -> u64 {
        self.inner.cache.compilations()
    }

    /// Counts per capability operation, across every instance.
    pub fn capability_metrics(&self) -> &CapabilityMetrics {
        &self.inner.capability_metrics
    }

    /// Compiles (or loads from the cache) a plugin and reads its metadata.
    /// Compiling takes seconds of CPU: it runs on the blocking pool.
    pub async fn load(&self, wasm: Vec<u8>) -> Result<Plugin> {
        let runtime = self.clone();
        let (digest, component) =
            tokio::task::spawn_blocking(move || runtime.inner.cache.get_or_compile(&wasm)).await??;
        let metadata = async {
            let mut probe =
                self.probe(&component, "plugin-probe").await.context("instantiating plugin to read its metadata")?;
            let metadata = probe.metadata().await.map_err(|e| anyhow!("reading plugin metadata: {e}"))?;
            let connect = probe.connect_names().await.map_err(|e| anyhow!("reading plugin's Connect names: {e}"))?;
            anyhow::Ok((probe.kind(), metadata, connect))
        };
        match metadata.await {
            Ok((kind, metadata, connect)) => Ok(Plugin { digest, kind, metadata, connect, component }),
            Err(e) => {
                self.forget(&digest);
                Err(e)
            }
        }
    }

    /// Drops a refused plugin's compiled code from the cache.
    pub fn forget(&self, digest: &str) {
        self.inner.cache.forget(digest);
    }

    /// Reads a plugin file and loads it.
    pub async fn load_file(&self, path: &Path) -> Result<Plugin> {
        let wasm = std::fs::read(path).with_context(|| format!("reading plugin {}", path.display()))?;
        self.load(wasm).await.with_context(|| format!("loading plugin {}", path.display()))
    }

    /// A fresh, isolated instance of `plugin` for one task, linked with the
    /// capabilities its connector was granted and nothing else.
    pub async fn instantiate(
        &self,
        plugin: &Plugin,
        name: &str,
        grants: &Grants,
        limits: &Limits,
    ) -> Result<PluginInstance> {
        let kind = contract::check(&self.inner.engine, &plugin.component, Linking::Granted(grants))?;
        let linker = self.linker(Linking::Granted(grants))?;
        self.instantiate_with(&linker, &plugin.component, kind, name, grants, limits).await
    }

    /// An instance for `metadata` and `validate`, which run no task: every
    /// capability is linked, with no grants, so a capability it calls
    /// answers with a fatal error.
    pub async fn validation_probe(&self, plugin: &Plugin) -> Result<PluginInstance> {
        self.probe(&plugin.component, "plugin-validate").await
    }

    async fn probe(&self, component: &Component, name: &str) -> Result<PluginInstance> {
        let kind = contract::check(&self.inner.engine, component, Linking::Probe)?;
        let linker = self.linker(Linking::Probe)?;
        self.instantiate_with(&linker, component, kind, name, &Grants::default(), &Limits::default()).await
    }

    /// WASI (sandboxed by its context), the shared types and logging for
    /// every plugin; each other capability where `linking` grants it, by the
    /// same `granted` test that `contract::check` applies.
    fn linker(&self, linking: Linking) -> Result<Linker<PluginState>> {
        let mut linker = Linker::new(&self.inner.engine);
        capabilities::wasi::add_to_linker(&mut linker).map_err(|e| anyhow!("linking WASI: {e:?}"))?;
        linker.instance(&format!("{}@{CONTRACT_VERSION}", contract::CONTRACT_TYPES))?;
        for capability in capabilities::CAPABILITIES {
            if !linking.grants(capability) {
                continue;
            }
            capabilities::add_to_linker(&mut linker, capability)?;
        }
        Ok(linker)
    }

    async fn instantiate_with(
        &self,
        linker: &Linker<PluginState>,
        component: &Component,
        kind: PluginKind,
        name: &str,
        grants: &Grants,
        limits: &Limits,
    ) -> Result<PluginInstance> {
        let state = PluginState::new(name, grants, limits.memory_bytes, self.inner.capability_metrics.clone())?;
        PluginInstance::new(&self.inner.engine, linker, component, kind, state, limits).await
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
