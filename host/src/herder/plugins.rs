//! The installed plugins: every component in the plugin directory, compiled
//! (or loaded from the cache) once at start-up and known by its name.

use super::types::PluginInfo;
use crate::runtime::{Plugin, Runtime};
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Clone, Default)]
pub struct PluginRegistry {
    plugins: BTreeMap<String, Plugin>,
}

impl PluginRegistry {
    /// Loads every `*.wasm` in `dir`. A plugin that fails to load is logged
    /// and left out; it does not keep the others from serving.
    pub async fn scan(runtime: &Runtime, dir: &Path) -> Self {
        let mut registry = PluginRegistry::default();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read the plugin directory");
                return registry;
            }
        };
        let mut paths: Vec<_> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        paths.sort();
        for path in paths.into_iter().filter(|p| p.extension().is_some_and(|e| e == "wasm")) {
            match runtime.load_file(&path).await {
                Ok(plugin) => {
                    tracing::info!(plugin = plugin.metadata.name, version = plugin.metadata.version,
                        digest = plugin.digest, path = %path.display(), "plugin installed");
                    registry.insert(plugin);
                }
                Err(e) => tracing::error!(path = %path.display(), error = format!("{e:#}"), "plugin not installed"),
            }
        }
        registry
    }

    pub fn insert(&mut self, plugin: Plugin) {
        if let Some(old) = self.plugins.insert(plugin.metadata.name.clone(), plugin)
            && let Some(new) = self.plugins.get(&old.metadata.name)
        {
            tracing::warn!(
                plugin = old.metadata.name,
                replaced = old.digest,
                by = new.digest,
                "two plugins share a name"
            );
        }
    }

    pub fn get(&self, name: &str) -> Option<&Plugin> {
        self.plugins.get(name)
    }

    pub fn infos(&self) -> Vec<PluginInfo> {
        self.plugins
            .values()
            .map(|p| PluginInfo {
                class: p.metadata.name.clone(),
                kind: "sink".into(),
                version: p.metadata.version.clone(),
                digest: p.digest.clone(),
            })
            .collect()
    }
}
