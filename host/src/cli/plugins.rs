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
    Config { name: String },
}

/// Runs one `plugins` command and returns what to print.
pub async fn plugins(args: &ClientArgs, command: PluginsCommand) -> Result<String, CliError> {
    let s = Session::new(args)?;
    match command {
        PluginsCommand::List => {
            let answer = s.get("/connector-plugins").await?;
            s.show(answer, |a| {
                let plugins: Vec<PluginInfo> = a.json()?;
                let rows: Vec<Vec<String>> = plugins
                    .iter()
                    .map(|p| vec![p.class.clone(), p.kind.clone(), p.version.clone(), short_digest(&p.digest)])
                    .collect();
                Ok(table::render(&["PLUGIN", "TYPE", "VERSION", "DIGEST"], &rows))
            })
        }
        PluginsCommand::Config { name } => {
            let answer = s.get(&format!("/connector-plugins/{}/config", segment(&name))).await?;
            s.show(answer, |a| Ok(keys_table(&a.json::<Vec<ConfigKeyInfo>>()?)))
        }
    }
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
