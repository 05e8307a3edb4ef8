use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Compiled components, in memory and on disk, keyed by the SHA-256 of the
/// plugin's bytes, so that neither a second task nor a host restart compiles a
/// plugin again. The on-disk name also carries the engine's compatibility hash:
/// a different wasmtime or engine config never reads another's artifacts.
pub struct ComponentCache {
    engine: Engine,
    dir: PathBuf,
    compiled: Mutex<HashMap<String, Component>>,
    compilations: AtomicU64,
}

impl ComponentCache {
    pub fn new(engine: Engine, dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating cache dir {}", dir.display()))?;
        Ok(ComponentCache {
            engine,
            dir: dir.to_path_buf(),
            compiled: Mutex::new(HashMap::new()),
            compilations: AtomicU64::new(0),
        })
    }

    /// The plugin's digest (`sha256:<hex>`) and its compiled component.
    pub fn get_or_compile(&self, wasm: &[u8]) -> Result<(String, Component)> {
        let hex = hex::encode(Sha256::digest(wasm));
        let digest = format!("sha256:{hex}");
        if let Some(component) = self.compiled.lock().unwrap().get(&digest) {
            return Ok((digest, component.clone()));
        }
        let path = self.dir.join(format!("{hex}-{}.cwasm", self.engine_tag()));
        let component = match self.read(&path) {
            Some(component) => component,
            None => self.compile_and_store(wasm, &path)?,
        };
        self.compiled.lock().unwrap().insert(digest.clone(), component.clone());
        Ok((digest, component))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Drops the compiled `digest` from memory and disk: what was refused
    /// leaves nothing behind (compiled code is native code, and a refused
    /// upload must not fill the disk).
    pub fn forget(&self, digest: &str) {
        self.compiled.lock().unwrap().remove(digest);
        let Some(hex) = digest.strip_prefix("sha256:") else { return };
        let path = self.dir.join(format!("{hex}-{}.cwasm", self.engine_tag()));
        for file in [digest_path(&path), path] {
            if let Err(e) = std::fs::remove_file(&file)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %file.display(), error = %e, "could not remove a refused plugin's compiled code");
            }
        }
    }

    /// How many plugins this cache had to compile (not found in memory or on disk).
    pub fn compilations(&self) -> u64 {
        self.compilations.load(Ordering::Relaxed)
    }

    fn engine_tag(&self) -> String {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut hasher = DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut hasher);
        format!("{:016x}", hasher.finish())
    }

    /// A cache entry, if it is one this host wrote: its bytes must have the
    /// digest recorded beside them when they were written, since
    /// deserializing runs them as native code unchecked.
    fn read(&self, path: &Path) -> Option<Component> {
        let bytes = std::fs::read(path).ok()?;
        let recorded = std::fs::read_to_string(digest_path(path)).unwrap_or_default();
        if recorded.trim() != hex::encode(Sha256::digest(&bytes)) {
            tracing::warn!(path = %path.display(), "cache entry does not match its recorded digest; recompiling");
            return None;
        }
        // SAFETY: the bytes are what `compile_and_store` wrote (their digest
        // is the one it recorded), from an engine with the same compatibility
        // hash (it is in the name).
        match unsafe { Component::deserialize(&self.engine, &bytes) } {
            Ok(component) => {
                tracing::debug!(path = %path.display(), "compiled plugin loaded from cache");
                Some(component)
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unusable cache entry, recompiling");
                None
            }
        }
    }

    fn compile_and_store(&self, wasm: &[u8], path: &Path) -> Result<Component> {
        self.compilations.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let component =
            Component::new(&self.engine, wasm).map_err(anyhow::Error::from).context("compiling plugin component")?;
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "compiled plugin");
        let bytes = component.serialize().map_err(anyhow::Error::from).context("serializing compiled plugin")?;
        // The digest goes first: an entry is never there without it.
        write_atomically(&digest_path(path), hex::encode(Sha256::digest(&bytes)).as_bytes())?;
        write_atomically(path, &bytes)?;
        Ok(component)
    }
}

/// Where the digest of the entry at `path` is recorded.
fn digest_path(path: &Path) -> PathBuf {
    path.with_extension("cwasm.sha256")
}

/// Write then rename: a crash never leaves a half-written file. A name of
/// its own: tasks of one process may compile the same plugin at once.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::write(&tmp, bytes)
        .and_then(|()| std::fs::rename(&tmp, path))
        .with_context(|| format!("writing {}", path.display()))
}
