//! `spillway plugins …`.

use super::client::segment;
use super::error::CliError;
use super::{ClientArgs, Session, table};
use crate::herder::{ConfigKeyInfo, PluginInfo};

#[derive(clap::Subcommand, Clone, Debug)]
pub enum PluginsCommand {
    /// Lists the installed plugins (what `spillway plugins` alone does).
    List,
    /// Shows the config keys a plugin's connectors take: the host's and its
    /// own.
    Config {
        name: String,
        /// A semver range: the newest installed version it admits.
        #[arg(long)]
        version: Option<String>,
    },
    /// Uploads a component (.wasm) to the worker, which checks it and
    /// installs it beside the other versions.
    Install {
        file: std::path::PathBuf,
        /// The plugin's name, which the component must carry; unset: the
        /// file's name up to its first `.` or its version (`my-sink-0.2.0.wasm`: `my-sink`).
        #[arg(long)]
        name: Option<String>,
    },
    /// Scans the worker's plugin directory again.
    Reload,
}

/// Runs one `plugins` command and returns what to print.
pub async fn plugins(args: &ClientArgs, command: PluginsCommand) -> Result<String, CliError> {
    let s = Session::new(args)?;
    match command {
        PluginsCommand::List => {
            let answer = s.get("/connector-plugins?connectorsOnly=false").await?;
            s.show(answer, |a| {
                let plugins: Vec<PluginInfo> = a.json()?;
                // The installed plugins, sinks and transforms: what has a
                // digest. The built-in transforms, which the REST answer
                // lists too, are the host's (README lists them).
                let rows: Vec<Vec<String>> = plugins
                    .iter()
                    .filter(|p| p.digest.is_some())
                    .map(|p| {
                        vec![
                            p.class.clone(),
                            p.kind.clone(),
                            p.version.clone(),
                            p.digest.as_deref().map(short_digest).unwrap_or_default(),
                        ]
                    })
                    .collect();
                Ok(table::render(&["PLUGIN", "TYPE", "VERSION", "DIGEST"], &rows))
            })
        }
        PluginsCommand::Config { name, version } => {
            let query = version.map(|v| format!("?version={}", segment(&v))).unwrap_or_default();
            let answer = s.get(&format!("/connector-plugins/{}/config{query}", segment(&name))).await?;
            s.show(answer, |a| Ok(keys_table(&a.json::<Vec<ConfigKeyInfo>>()?)))
        }
        PluginsCommand::Install { file, name } => {
            let bytes =
                std::fs::read(&file).map_err(|e| CliError::local(format!("reading {}: {e}", file.display())))?;
            let name = match name {
                Some(name) => name,
                None => plugin_name_of(&file)?,
            };
            let answer = s.put_bytes(&format!("/connector-plugins/{}", segment(&name)), bytes).await?;
            let created = answer.status == reqwest::StatusCode::CREATED;
            s.show(answer, |a| {
                let p: PluginInfo = a.json()?;
                let what = if created { "installed" } else { "already installed" };
                Ok(format!("{what}: {} {} ({})\n", p.class, p.version, p.digest.unwrap_or_default()))
            })
        }
        PluginsCommand::Reload => {
            let answer = s.send(reqwest::Method::POST, "/connector-plugins/reload", None).await?;
            s.show(answer, |a| {
                let report: crate::herder::ScanReport = a.json()?;
                let mut text = String::new();
                for (what, items) in
                    [("installed", &report.installed), ("removed", &report.removed), ("refused", &report.refused)]
                {
                    for item in items {
                        text.push_str(&format!("{what}: {item}\n"));
                    }
                }
                Ok(if text.is_empty() { "no change\n".into() } else { text })
            })
        }
    }
}

/// `my-sink-0.2.0.wasm` and `my-sink.wasm` name `my-sink`.
fn plugin_name_of(file: &std::path::Path) -> Result<String, CliError> {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
    let name = match stem.rsplit_once('-') {
        Some((name, version)) if version.starts_with(|c: char| c.is_ascii_digit()) && version.contains('.') => name,
        _ => stem,
    };
    if name.is_empty() {
        return Err(CliError::local(format!("cannot tell the plugin's name from {}: give --name", file.display())));
    }
    Ok(name.to_string())
}

/// Documentation last, where a long text does not widen the other columns.
fn keys_table(keys: &[ConfigKeyInfo]) -> String {
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            vec![
                k.name.clone(),
                k.kind.clone(),
                k.required.to_string(),
                default_value(k.default_value.as_deref()),
                k.importance.clone(),
                k.documentation.clone(),
            ]
        })
        .collect();
    table::render(&["KEY", "TYPE", "REQUIRED", "DEFAULT", "IMPORTANCE", "DOCUMENTATION"], &rows)
}

/// No default is left blank; an empty one is shown as `""`, so the two are
/// told apart.
fn default_value(value: Option<&str>) -> String {
    match value {
        None => String::new(),
        Some("") => "\"\"".into(),
        Some(v) => v.into(),
    }
}

fn short_digest(digest: &str) -> String {
    digest.chars().take("sha256:".len() + 12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_names_its_plugin() {
        let name = |f: &str| plugin_name_of(std::path::Path::new(f)).unwrap();
        assert_eq!(name("dir/my-sink.wasm"), "my-sink");
        assert_eq!(name("my-sink-0.2.0.wasm"), "my-sink");
        assert_eq!(name("sink-v2.wasm"), "sink-v2");
    }

    #[test]
    fn keys_table_tells_no_default_from_an_empty_one() {
        let key = |name: &str, required, default: Option<&str>| ConfigKeyInfo {
            name: name.into(),
            kind: "STRING".into(),
            required,
            default_value: default.map(String::from),
            importance: "HIGH".into(),
            documentation: format!("what {name} is"),
            group: None,
            width: "NONE".into(),
            display_name: name.into(),
            dependents: vec![],
            order: 0,
        };
        let text = keys_table(&[key("file", true, None), key("topics", false, Some("")), key("n", false, Some("1"))]);
        assert_eq!(
            text,
            "KEY     TYPE    REQUIRED  DEFAULT  IMPORTANCE  DOCUMENTATION\n\
             file    STRING  true               HIGH        what file is\n\
             topics  STRING  false     \"\"       HIGH        what topics is\n\
             n       STRING  false     1        HIGH        what n is\n"
        );
    }
}
