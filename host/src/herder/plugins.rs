//! The installed plugins: every component in the plugin directory, compiled
//! (or loaded from the cache) when it is found, and known by its embedded
//! name and version and by its digest. Several versions of one plugin live
//! side by side (as KIP-891 allows in Connect); a connector picks one with
//! `connector.plugin.version` (a semver range) and `connector.plugin.digest`,
//! else runs the newest.

use super::types::PluginInfo;
use crate::connector::{
    ConnectorConfig, InstalledNames, PluginPick, VersionRange, answers_to, builtin_transforms, check_connect_names,
    connector_keys,
};
use crate::runtime::{Plugin, PluginKind, Runtime};
use semver::Version;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Clone, Default)]
pub struct PluginRegistry {
    /// Each name's versions, oldest first.
    plugins: BTreeMap<String, BTreeMap<Version, Installed>>,
    /// The Connect names each plugin's newest build answers to, published
    /// for config parsing; this registry is their one writer.
    connect_names: InstalledNames,
}

#[derive(Clone)]
struct Installed {
    plugin: Plugin,
    /// The file it was read from.
    path: PathBuf,
}

/// What one scan of the plugin directory changed.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ScanReport {
    /// `name@version` of each plugin installed by this scan.
    pub installed: Vec<String>,
    /// `name@version` of each plugin whose file is gone.
    pub removed: Vec<String>,
    /// `path: why` of each file that could not be installed.
    pub refused: Vec<String>,
}

impl PluginRegistry {
    /// Loads every `*.wasm` in `dir`. A plugin that fails to load is logged
    /// and left out; it does not keep the others from serving.
    pub async fn scan(runtime: &Runtime, dir: &Path, connect_names: InstalledNames) -> Self {
        let mut registry = PluginRegistry { plugins: BTreeMap::new(), connect_names };
        registry.apply(load_dir(runtime, dir).await);
        registry
    }

    /// Brings the registry in step with a fresh load of the plugin
    /// directory: new and changed files are installed, plugins whose file is
    /// gone are removed. (Running tasks keep the build they run.)
    pub fn apply(&mut self, loaded: Option<Vec<Loaded>>) -> ScanReport {
        let mut report = ScanReport::default();
        let Some(loaded) = loaded else { return report };
        let mut seen = Vec::new();
        for Loaded { path, plugin } in loaded {
            let installed = plugin.and_then(|plugin| {
                seen.push(plugin.digest.clone());
                self.insert(plugin, &path)
            });
            match installed {
                Ok(Some(installed)) => report.installed.push(installed),
                Ok(None) => {}
                Err(why) => {
                    tracing::error!(path = %path.display(), why, "plugin not installed");
                    report.refused.push(format!("{}: {why}", path.display()));
                }
            }
        }
        for (name, versions) in self.plugins.iter_mut() {
            let count = versions.len();
            versions.retain(|version, installed| {
                let keep = seen.contains(&installed.plugin.digest);
                if !keep {
                    let name = format!("{}@{version}", installed.plugin.metadata.name);
                    tracing::info!(plugin = name, path = %installed.path.display(), "plugin removed: its file is gone");
                    report.removed.push(name);
                }
                keep
            });
            if versions.len() != count {
                publish(&self.connect_names, name, versions);
            }
        }
        self.plugins.retain(|_, versions| !versions.is_empty());
        report
    }

    /// Installs `plugin`, read from `path`. `Ok(None)` when it was installed
    /// already; refused when another file holds the same name and version
    /// with other bytes, which a digest pin could not tell apart by version.
    pub fn insert(&mut self, plugin: Plugin, path: &Path) -> Result<Option<String>, String> {
        let version = plugin_version(&plugin)?;
        check_connect_names(&plugin.connect, |key| connector_keys().find(key).is_some())
            .map_err(|why| format!("plugin {} {why}", plugin.metadata.name))?;
        let name = plugin.metadata.name.clone();
        let versions = self.plugins.entry(name.clone()).or_default();
        if let Some(existing) = versions.get(&version) {
            if existing.plugin.digest == plugin.digest {
                return Ok(None);
            }
            // The same file rewritten (a rebuild, an upload) replaces itself.
            if existing.path != path {
                return Err(format!(
                    "{name} {version} is installed already from {} with digest {}, and this file's digest is {}: \
                     give the new build another version",
                    existing.path.display(),
                    existing.plugin.digest,
                    plugin.digest
                ));
            }
        }
        tracing::info!(plugin = name, %version, digest = plugin.digest, path = %path.display(), "plugin installed");
        versions.insert(version.clone(), Installed { plugin, path: path.to_path_buf() });
        publish(&self.connect_names, &name, versions);
        Ok(Some(format!("{name}@{version}")))
    }

    /// The plugin a connector runs: the newest version of `name` that the
    /// range `version` admits and, with `digest`, whose digest it is. The
    /// error says what is installed instead.
    pub fn resolve(&self, name: &str, pick: &PluginPick) -> Result<&Plugin, Refusal> {
        let keys = ["connector.class", "connector.plugin.version", "connector.plugin.digest"];
        let plugin = self.pick(name, pick, keys, Some(PluginKind::Sink))?;
        if plugin.kind == PluginKind::Transform {
            return Err(Refusal {
                key: keys[0].into(),
                message: format!("'{name}' is a transform plugin: name it in transforms.<alias>.type"),
            });
        }
        Ok(plugin)
    }

    /// The transform plugin of each plugin stage of `config`'s transforms,
    /// in order: the newest build its `transforms.<alias>.version` admits.
    pub fn resolve_transforms(&self, config: &ConnectorConfig) -> Result<Vec<Plugin>, Refusal> {
        let mut plugins = Vec::new();
        for (alias, step) in config.transforms.plugins() {
            let version_key = format!("transforms.{alias}.version");
            let version = match step.version.as_deref().map(VersionRange::parse).transpose() {
                Ok(version) => version,
                Err(e) => return Err(Refusal { key: version_key, message: e.to_string() }),
            };
            let keys = [format!("transforms.{alias}.type"), version_key, String::new()];
            let plugin =
                self.pick(&step.name, &PluginPick { version, digest: None }, keys, Some(PluginKind::Transform))?;
            if plugin.kind != PluginKind::Transform {
                let message = format!("'{}' is a sink plugin, not a transform", step.name);
                return Err(Refusal { key: format!("transforms.{alias}.type"), message });
            }
            plugins.push(plugin.clone());
        }
        Ok(plugins)
    }

    /// The newest build of `name`, a sink or a transform, that `pick` admits.
    pub fn resolve_any(&self, name: &str, pick: &PluginPick) -> Result<&Plugin, Refusal> {
        self.pick(name, pick, ["connector.class", "connector.plugin.version", "connector.plugin.digest"], None)
    }

    /// The newest installed build of `name` that `pick` admits; a refusal
    /// blames `keys`: the one naming the plugin, its version, its digest. A
    /// Connect class name finds a plugin of `kind` that answers to it.
    fn pick(
        &self,
        name: &str,
        pick: &PluginPick,
        keys: [impl Into<String>; 3],
        kind: Option<PluginKind>,
    ) -> Result<&Plugin, Refusal> {
        let [name_key, version_key, digest_key] = keys.map(Into::into);
        let (version, digest) = (pick.version.as_ref(), pick.digest.as_deref());
        // A Connect class name stands for the plugin whose newest build
        // answers to it.
        let versions = self.plugins.get(name).or_else(|| {
            let answers = |v: &&BTreeMap<Version, Installed>| {
                v.values().next_back().is_some_and(|newest| {
                    kind.is_none_or(|kind| newest.plugin.kind == kind) && answers_to(&newest.plugin.connect, name)
                })
            };
            self.plugins.values().find(answers)
        });
        let versions = versions.ok_or_else(|| Refusal {
            key: name_key,
            message: format!("Failed to find any installed plugin named '{name}'"),
        })?;
        let installed = || versions.keys().map(Version::to_string).collect::<Vec<_>>().join(", ");
        let mut matching =
            versions.iter().rev().filter(|(v, _)| version.is_none_or(|range| range.admits(v))).peekable();
        if matching.peek().is_none() {
            return Err(Refusal {
                key: version_key,
                message: format!(
                    "no installed version of plugin '{name}' matches '{}'; installed: {}",
                    version.map(ToString::to_string).unwrap_or_default(),
                    installed()
                ),
            });
        }
        let Some(digest) = digest else { return Ok(&matching.next().expect("peeked").1.plugin) };
        let mut candidates = Vec::new();
        for (v, installed) in matching {
            if installed.plugin.digest == digest {
                return Ok(&installed.plugin);
            }
            candidates.push(format!("{v} ({})", installed.plugin.digest));
        }
        Err(Refusal {
            key: digest_key,
            message: format!(
                "no installed file of plugin '{name}' has digest {digest} (a file that was changed, or another \
                 build); installed: {}",
                candidates.join(", ")
            ),
        })
    }

    /// Whether a build with `digest` is installed.
    pub fn has_digest(&self, digest: &str) -> bool {
        self.plugins.values().flat_map(|versions| versions.values()).any(|i| i.plugin.digest == digest)
    }

    /// The installed build of `name` at exactly `version`.
    pub fn exact(&self, name: &str, version: &str) -> Option<&Plugin> {
        let version = Version::parse(version).ok()?;
        self.plugins.get(name)?.get(&version).map(|i| &i.plugin)
    }

    /// One entry per installed version, as KIP-891 lists them.
    pub fn infos(&self) -> Vec<PluginInfo> {
        self.plugins
            .values()
            .flat_map(|versions| versions.values())
            .map(|installed| plugin_info(&installed.plugin))
            .collect()
    }
}

pub fn plugin_info(p: &Plugin) -> PluginInfo {
    PluginInfo {
        class: p.metadata.name.clone(),
        kind: p.kind.connect_type().into(),
        version: p.metadata.version.clone(),
        digest: Some(p.digest.clone()),
    }
}

/// The transforms and predicates built in to the host, as Connect lists
/// its own with `?connectorsOnly=false`: the host's version, no digest.
pub fn builtin_infos() -> Vec<PluginInfo> {
    builtin_transforms()
        .map(|b| PluginInfo {
            class: b.class.to_string(),
            kind: b.kind.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            digest: None,
        })
        .collect()
}

/// Publishes what the newest of `versions` answers to under `name`.
fn publish(names: &InstalledNames, name: &str, versions: &BTreeMap<Version, Installed>) {
    match versions.values().next_back() {
        Some(newest) => names.set(name, &newest.plugin.connect, newest.plugin.kind),
        None => names.remove(name),
    }
}

/// Why a connector config's plugin cannot be used, and the key to blame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub key: String,
    pub message: String,
}

/// A plugin's embedded version, which must be semver for ranges to pick it.
fn plugin_version(plugin: &Plugin) -> Result<Version, String> {
    Version::parse(&plugin.metadata.version).map_err(|e| {
        format!(
            "plugin {} declares version '{}', which is not semver: {e}",
            plugin.metadata.name, plugin.metadata.version
        )
    })
}

/// One file of the plugin directory, compiled, or why it could not be.
pub struct Loaded {
    pub path: PathBuf,
    pub plugin: Result<Plugin, String>,
}

/// Reads and compiles (or finds in the cache) every `*.wasm` in `dir`,
/// off the herder's loop: compiling takes seconds. `None` if the directory
/// cannot be read, which changes nothing.
pub async fn load_dir(runtime: &Runtime, dir: &Path) -> Option<Vec<Loaded>> {
    let paths = match wasm_files(dir) {
        Ok(paths) => paths,
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot read the plugin directory");
            return None;
        }
    };
    let mut loaded = Vec::with_capacity(paths.len());
    for path in paths {
        let plugin = runtime.load_file(&path).await.map_err(|e| format!("{e:#}"));
        loaded.push(Loaded { path, plugin });
    }
    Some(loaded)
}

/// What the plugin directory holds, cheaply: each file's name, size and
/// modification time, for the watcher to see a change without reading files.
pub type DirListing = Vec<(PathBuf, u64, Option<std::time::SystemTime>)>;

pub fn dir_listing(dir: &Path) -> DirListing {
    let mut listing: Vec<_> = wasm_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|path| {
            let meta = std::fs::metadata(&path).ok();
            let (len, modified) = meta.map_or((0, None), |m| (m.len(), m.modified().ok()));
            (path, len, modified)
        })
        .collect();
    listing.sort();
    listing
}

fn wasm_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
        .collect();
    paths.sort();
    Ok(paths)
}
