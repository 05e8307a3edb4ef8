//! Connect's config providers (KIP-297): a connector config value may hold
//! `${file:PATH:KEY}` (KEY of the properties file PATH), `${dir:PATH:FILE}`
//! (the contents of FILE in directory PATH) or `${env:NAME}` (an environment
//! variable of the worker). The host replaces them when it reads the config,
//! to validate it or to start a task; the stored config, and so every REST
//! answer, keeps the placeholder. The operator enables providers in the
//! worker config (`config.providers=file,env,dir`) and can bound them:
//! `config.providers.<name>.param.allowed.paths` (KIP-993) for files and
//! directories, `config.providers.<name>.param.allowlist.pattern` (KIP-887)
//! for variable names. Stricter than Connect, a placeholder that cannot be
//! resolved is an error on its key, not a value left as written: a password
//! that reads `${file:…}` would only fail later, and less clearly.

use super::{Importance, KeyDef, Problem, Type, Values};
use regex::Regex;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

/// Connect's class names for the providers this host has built in.
const CLASSES: [(&str, Kind); 3] = [
    ("org.apache.kafka.common.config.provider.FileConfigProvider", Kind::File),
    ("org.apache.kafka.common.config.provider.DirectoryConfigProvider", Kind::Dir),
    ("org.apache.kafka.common.config.provider.EnvVarConfigProvider", Kind::Env),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Env,
}

#[derive(Clone, Debug)]
struct Provider {
    kind: Kind,
    /// Files and directories must lie under one of these; empty allows any.
    allowed_paths: Vec<PathBuf>,
    /// Variable names must match it (whole), when set.
    allowlist: Option<Regex>,
}

/// The providers a worker enabled, by the name placeholders use.
#[derive(Clone, Debug, Default)]
pub struct ConfigProviders {
    providers: BTreeMap<String, Provider>,
    /// Never read, whatever `allowed.paths` says: the worker's own files.
    protected: Vec<PathBuf>,
}

/// `${provider:path:key}` or `${provider:key}`, as Connect's
/// `ConfigTransformer` reads them.
static PLACEHOLDER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\$\{([^}]*?):(?:([^}]*?):)?([^}]*?)\}").expect("placeholder pattern"));

/// The worker config's keys for providers.
pub fn keys() -> [KeyDef; 4] {
    use Importance::{High, Medium};
    [
        KeyDef::new(
            "config.providers",
            Type::List,
            High,
            "Config providers that connector configs may use, by name: file, dir and env are built in. None by \
             default.",
        )
        .with_default(""),
        KeyDef::new(
            "config.providers.<name>.class",
            Type::String,
            Medium,
            "The provider's kind, as Connect names it (FileConfigProvider, DirectoryConfigProvider, \
             EnvVarConfigProvider, under org.apache.kafka.common.config.provider); defaults to the built-in of the \
             provider's name.",
        )
        .with_default(""),
        KeyDef::new(
            "config.providers.<name>.param.allowed.paths",
            Type::List,
            High,
            "Absolute paths under which a file or dir provider may read (KIP-993); empty allows any. The worker's \
             own files are never read.",
        )
        .with_default(""),
        KeyDef::new(
            "config.providers.<name>.param.allowlist.pattern",
            Type::String,
            High,
            "A regular expression that the names an env provider reads must match whole (KIP-887); empty allows \
             any.",
        )
        .with_default(""),
    ]
}

impl ConfigProviders {
    /// The `config.providers*` keys of the worker config. A provider is
    /// named in `config.providers`; its `class` defaults to the built-in of
    /// the same name (`file`, `dir`, `env`) and may be Connect's class name
    /// for one of them.
    pub fn from_worker(values: &Values) -> Result<Self, Vec<Problem>> {
        let mut problems = Vec::new();
        let mut providers = BTreeMap::new();
        for name in values.list("config.providers") {
            let key = |setting: &str| format!("config.providers.{name}.{setting}");
            let original = |setting: &str| Some(values.string(&key(setting))).filter(|v| !v.is_empty());
            let kind = match original("class") {
                Some(class) => CLASSES.iter().find(|(c, _)| *c == class).map(|(_, kind)| *kind).ok_or_else(|| {
                    let known: Vec<&str> = CLASSES.iter().map(|(c, _)| *c).collect();
                    Problem::new(
                        key("class"),
                        format!("'{class}' is not a provider this host has ({})", known.join(", ")),
                    )
                }),
                None => match name.as_str() {
                    "file" => Ok(Kind::File),
                    "dir" => Ok(Kind::Dir),
                    "env" => Ok(Kind::Env),
                    _ => Err(Problem::new(key("class"), "required for a provider not named file, dir or env")),
                },
            };
            let allowed_paths: Vec<PathBuf> =
                values.list(&key("param.allowed.paths")).iter().map(PathBuf::from).collect();
            if let Some(relative) = allowed_paths.iter().find(|p| !p.is_absolute()) {
                problems.push(Problem::new(
                    key("param.allowed.paths"),
                    format!("'{}' must be an absolute path", relative.display()),
                ));
            }
            let allowlist = match original("param.allowlist.pattern").map(|p| Regex::new(&format!("^(?:{p})$"))) {
                Some(Err(e)) => {
                    problems
                        .push(Problem::new(key("param.allowlist.pattern"), format!("not a regular expression: {e}")));
                    None
                }
                Some(Ok(regex)) => Some(regex),
                None => None,
            };
            match kind {
                Ok(kind) => {
                    providers.insert(name.clone(), Provider { kind, allowed_paths, allowlist });
                }
                Err(problem) => problems.push(problem),
            }
        }
        if problems.is_empty() { Ok(ConfigProviders { providers, protected: Vec::new() }) } else { Err(problems) }
    }

    /// Where the file and directory providers read secrets: no grant may
    /// reach them.
    pub fn secret_paths(&self) -> Vec<PathBuf> {
        let readers = self.providers.values().filter(|p| matches!(p.kind, Kind::File | Kind::Dir));
        readers.flat_map(|p| p.allowed_paths.iter().cloned()).collect()
    }

    /// Never read `path` (the worker's own state, say), nor what is in it.
    pub fn protect(&mut self, path: &Path) {
        self.protected.push(path.to_path_buf());
    }

    /// `raw` with every placeholder of an enabled provider replaced; each
    /// one that cannot be is a problem on its key. Placeholders of providers
    /// not enabled stay as written, as in Connect.
    pub fn resolve(&self, raw: &BTreeMap<String, String>) -> (BTreeMap<String, String>, Vec<Problem>) {
        let mut problems = Vec::new();
        let mut resolved = raw.clone();
        if self.providers.is_empty() {
            return (resolved, problems);
        }
        for (key, value) in resolved.iter_mut() {
            let mut failure = None;
            let replaced = PLACEHOLDER.replace_all(value, |caps: &regex::Captures| {
                let whole = caps[0].to_string();
                let Some(provider) = self.providers.get(&caps[1]) else { return whole };
                let path = caps.get(2).map_or("", |m| m.as_str());
                match self.lookup(provider, path, &caps[3]) {
                    Ok(found) => found,
                    Err(reason) => {
                        failure.get_or_insert(format!("{whole}: {reason}"));
                        whole
                    }
                }
            });
            match failure {
                Some(message) => problems.push(Problem::new(key.as_str(), message)),
                None => *value = replaced.into_owned(),
            }
        }
        (resolved, problems)
    }

    fn lookup(&self, provider: &Provider, path: &str, key: &str) -> Result<String, String> {
        match provider.kind {
            Kind::Env => {
                if !path.is_empty() {
                    return Err("write ${env:NAME}: the env provider takes no path".into());
                }
                if provider.allowlist.as_ref().is_some_and(|allow| !allow.is_match(key)) {
                    return Err(format!("{key} is not in the provider's allowlist.pattern"));
                }
                std::env::var(key).map_err(|_| format!("the worker has no environment variable {key}"))
            }
            Kind::File => {
                let file = self.allowed(provider, path)?;
                let text = std::fs::File::open(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
                let properties = java_properties::read(std::io::BufReader::new(text))
                    .map_err(|e| format!("{}: {e}", file.display()))?;
                properties.get(key).cloned().ok_or_else(|| format!("{} has no key {key}", file.display()))
            }
            Kind::Dir => {
                let dir = self.allowed(provider, path)?;
                if key.contains('/') || key == ".." {
                    return Err(format!("'{key}' is not a file name"));
                }
                let file = dir.join(key);
                let file = self.allowed(provider, file.to_str().unwrap_or_default())?;
                std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))
            }
        }
    }

    /// `path`, resolved, if the provider may read it.
    fn allowed(&self, provider: &Provider, path: &str) -> Result<PathBuf, String> {
        let given = Path::new(path);
        if !given.is_absolute() {
            return Err(format!("'{path}' must be an absolute path"));
        }
        let real = std::fs::canonicalize(given).map_err(|e| format!("cannot read {path}: {e}"))?;
        let canonical = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
        if self.protected.iter().map(canonical).any(|p| real.starts_with(&p) || p.starts_with(&real)) {
            return Err(format!("{path} is or holds the worker's own files, which no config may read"));
        }
        let allowed = &provider.allowed_paths;
        if !allowed.is_empty() && !allowed.iter().map(canonical).any(|a| real.starts_with(a)) {
            let list: Vec<String> = allowed.iter().map(|p| p.display().to_string()).collect();
            return Err(format!("{path} is outside the provider's allowed.paths ({})", list.join(", ")));
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ConfigDef;

    fn def() -> ConfigDef {
        ConfigDef::new().group("Config providers", keys())
    }

    fn providers(def: &ConfigDef, worker: &[(&str, &str)]) -> Result<ConfigProviders, Vec<Problem>> {
        let raw = worker.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (values, problems) = def.parse(&raw);
        assert!(problems.is_empty(), "{problems:?}");
        ConfigProviders::from_worker(&values)
    }

    fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn each_provider_resolves_its_placeholders_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("db.properties"), "user=spill\npassword=s3cret\n").unwrap();
        std::fs::write(dir.path().join("token"), "t0ken").unwrap();
        let d = dir.path().display();
        // SAFETY: the only test that sets this variable.
        unsafe { std::env::set_var("SPILLWAY_PROVIDER_TEST", "from-env") };
        let providers = providers(&def(), &[("config.providers", "file,dir,env")]).unwrap();
        let raw = config(&[
            ("user", &format!("${{file:{d}/db.properties:user}}")),
            ("dsn", &format!("postgres://${{file:{d}/db.properties:user}}:${{file:{d}/db.properties:password}}@db")),
            ("token", &format!("${{dir:{d}:token}}")),
            ("region", "${env:SPILLWAY_PROVIDER_TEST}"),
            ("other", "${vault:secret/x:y} and $notone"),
        ]);
        let (resolved, problems) = providers.resolve(&raw);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(resolved["user"], "spill");
        assert_eq!(resolved["dsn"], "postgres://spill:s3cret@db");
        assert_eq!(resolved["token"], "t0ken");
        assert_eq!(resolved["region"], "from-env");
        assert_eq!(resolved["other"], "${vault:secret/x:y} and $notone", "a provider not enabled is left as written");
    }

    #[test]
    fn what_cannot_be_resolved_is_an_error_on_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("allowed");
        std::fs::create_dir_all(&allowed).unwrap();
        std::fs::write(allowed.join("a.properties"), "k=v\n").unwrap();
        std::fs::write(dir.path().join("b.properties"), "k=v\n").unwrap();
        let state = dir.path().join("allowed/state.json");
        std::fs::write(&state, "{}").unwrap();
        let allowed_paths = allowed.display().to_string();
        let mut providers = providers(
            &def(),
            &[
                ("config.providers", "file,env"),
                ("config.providers.file.param.allowed.paths", &allowed_paths),
                ("config.providers.env.param.allowlist.pattern", "SPILLWAY_[A-Z_]+"),
            ],
        )
        .unwrap();
        providers.protect(&state);
        let (a, b) = (allowed.join("a.properties"), dir.path().join("b.properties"));
        let raw = config(&[
            ("missing", &format!("${{file:{}:nokey}}", a.display())),
            ("outside", &format!("${{file:{}:k}}", b.display())),
            ("escape", &format!("${{file:{}/../b.properties:k}}", allowed.display())),
            ("state", &format!("${{file:{}:k}}", state.display())),
            ("home", "${env:HOME}"),
            ("fine", &format!("${{file:{}:k}}", a.display())),
        ]);
        let (resolved, problems) = providers.resolve(&raw);
        let mut keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        keys.sort();
        assert_eq!(keys, ["escape", "home", "missing", "outside", "state"], "{problems:?}");
        assert_eq!(resolved["fine"], "v");
        assert_eq!(resolved["home"], "${env:HOME}", "an unresolved value is left as written, and refused");
        let message = |key: &str| &problems.iter().find(|p| p.key == key).unwrap().message;
        assert!(message("outside").contains("outside the provider's allowed.paths"), "{}", message("outside"));
        assert!(message("state").contains("worker's own files"), "{}", message("state"));
        assert!(message("home").contains("allowlist.pattern"), "{}", message("home"));
    }

    #[test]
    fn an_unknown_class_or_a_bad_parameter_is_refused_on_its_key() {
        let problems = providers(
            &def(),
            &[
                ("config.providers", "vault,file,secrets"),
                ("config.providers.vault.class", "com.example.VaultConfigProvider"),
                ("config.providers.file.param.allowed.paths", "relative"),
                ("config.providers.secrets.class", "org.apache.kafka.common.config.provider.FileConfigProvider"),
            ],
        )
        .unwrap_err();
        let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["config.providers.vault.class", "config.providers.file.param.allowed.paths"], "{problems:?}");
    }
}
