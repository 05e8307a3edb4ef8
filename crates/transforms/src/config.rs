//! Connect's grammar for transforms and predicates, read into a [`Chain`]:
//! every problem reported under the key it concerns, in Connect's words
//! where Connect has them, and no key under `transforms.` or `predicates.`
//! passed over in silence.

use super::builtin::{self, Class};
use super::predicates;
use super::{Failure, Predicate, Record, Transform};
use spillway_config::ConfigDef;
pub use spillway_config::Problem;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The transforms of a connector, in order.
#[derive(Default)]
pub struct Chain {
    stages: Vec<Stage>,
}

/// One alias of `transforms`: what it runs, and on which records.
pub struct Stage {
    alias: String,
    step: Step,
    /// The predicate, and whether the transform runs where it does not hold.
    predicate: Option<(Arc<dyn Predicate>, bool)>,
}

/// What a stage runs.
pub enum Step {
    /// A transform built in to the host, by its Connect class.
    Builtin { class: &'static str, transform: Box<dyn Transform> },
    /// A transform plugin (a component exporting `transformation`), which
    /// the task instantiates and calls a batch at a time.
    Plugin(PluginStep),
}

/// A transform plugin that `transforms.<alias>.type` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginStep {
    /// The plugin's name, as `GET /connector-plugins` lists it.
    pub name: String,
    /// `transforms.<alias>.version` (KIP-891): the semver range of builds
    /// the stage may run, read by the host's plugin registry.
    pub version: Option<String>,
    /// The stage's own keys with `transforms.<alias>.` taken off (not
    /// `type`, `version`, `predicate`, `negate`): what the plugin's `start`
    /// and `validate` get.
    pub settings: Vec<(String, String)>,
}

impl Stage {
    pub fn alias(&self) -> &str {
        &self.alias
    }

    pub fn step(&self) -> &Step {
        &self.step
    }

    /// The class (or plugin) the dead-letter queue names for a record this
    /// stage could not transform.
    pub fn class(&self) -> &str {
        match &self.step {
            Step::Builtin { class, .. } => class,
            Step::Plugin(plugin) => &plugin.name,
        }
    }

    /// Whether a predicate decides which records the stage transforms;
    /// without one it transforms every record.
    pub fn has_predicate(&self) -> bool {
        self.predicate.is_some()
    }

    /// Whether the stage transforms `record`: it has no predicate, or its
    /// predicate holds (fails, when negated). A record it does not apply to
    /// passes on unchanged, as in Connect's `TransformationStage`.
    pub fn applies_to(&self, record: &Record) -> bool {
        self.predicate.as_ref().is_none_or(|(predicate, negate)| predicate.test(record) != *negate)
    }
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.stages.iter().map(|s| format!("{}={}", s.alias, s.class()))).finish()
    }
}

impl Chain {
    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The stages that run transform plugins, in order.
    pub fn plugins(&self) -> impl Iterator<Item = (&str, &PluginStep)> {
        self.stages.iter().filter_map(|s| match &s.step {
            Step::Plugin(plugin) => Some((s.alias.as_str(), plugin)),
            Step::Builtin { .. } => None,
        })
    }

    /// Runs the record through a chain of built-ins, as Connect's
    /// `TransformationChain`: a stage whose predicate says no passes it on
    /// unchanged; the first stage that drops it ends the chain. A plugin
    /// stage is the task's to run: here it fails the record.
    pub fn apply(&self, mut record: Record) -> Result<Option<Record>, Failure> {
        for stage in &self.stages {
            if !stage.applies_to(&record) {
                continue;
            }
            let failure = |message| Failure { class: stage.class().to_string(), message };
            let Step::Builtin { transform, .. } = &stage.step else {
                return Err(failure("a transform plugin runs only in a task".into()));
            };
            match transform.apply(record) {
                Ok(Some(next)) => record = next,
                Ok(None) => return Ok(None),
                Err(message) => return Err(failure(message)),
            }
        }
        Ok(Some(record))
    }

    /// Reads `transforms`, `predicates` and the keys under them from a
    /// connector config. A `type` that is no built-in class names a
    /// transform plugin where `is_plugin` knows it. Every problem is
    /// reported.
    pub fn parse(raw: &BTreeMap<String, String>, is_plugin: &dyn Fn(&str) -> bool) -> Result<Chain, Vec<Problem>> {
        let mut problems = Vec::new();
        let transforms = aliases(raw, "transforms", &mut problems);
        let predicate_aliases = aliases(raw, "predicates", &mut problems);
        let mut built_predicates: BTreeMap<&str, Arc<dyn Predicate>> = BTreeMap::new();
        for alias in &predicate_aliases {
            let prefix = format!("predicates.{alias}.");
            let Some(class) = class_of(raw, &prefix, predicates::find, &mut problems) else { continue };
            let values = settings(raw, &prefix, &class.def, &[], class.name, &mut problems);
            if let Some(values) = values {
                match (class.build)(&values) {
                    Ok(predicate) => {
                        built_predicates.insert(alias, Arc::from(predicate));
                    }
                    Err((key, message)) => problems.push(Problem::new(prefix.clone() + key.unwrap_or("type"), message)),
                }
            }
        }
        let mut stages = Vec::new();
        for alias in &transforms {
            let prefix = format!("transforms.{alias}.");
            let predicate_key = format!("{prefix}predicate");
            let negate_key = format!("{prefix}negate");
            let predicate = given(raw, &predicate_key);
            let negate = match given(raw, &negate_key) {
                None => false,
                Some(v) if v.eq_ignore_ascii_case("true") => true,
                Some(v) if v.eq_ignore_ascii_case("false") => false,
                Some(v) => {
                    let message = format!(
                        "Invalid value {v} for configuration {negate_key}: Expected value to be either true or false"
                    );
                    problems.push(Problem::new(&negate_key, message));
                    false
                }
            };
            if given(raw, &negate_key).is_some() && predicate.is_none() {
                problems.push(Problem::new(
                    &negate_key,
                    format!(
                        "Config '{negate_key}' was provided but there is no config '{predicate_key}' defining a predicate to be negated."
                    ),
                ));
            }
            let predicate = match predicate {
                None => None,
                Some(p) if predicate_aliases.iter().any(|a| a == p) => {
                    built_predicates.get(p).map(|b| (b.clone(), negate))
                }
                Some(p) => {
                    problems.push(Problem::new(
                        &predicate_key,
                        format!("Invalid value {p} for configuration {predicate_key}: no predicate {p} is listed in predicates"),
                    ));
                    None
                }
            };
            if let Some(name) = given(raw, &format!("{prefix}type"))
                && builtin::find(name).is_err()
                && is_plugin(name)
            {
                let own = |k: &String| k.strip_prefix(&prefix).map(String::from);
                let settings = raw
                    .iter()
                    .filter_map(|(k, v)| Some((own(k)?, v.clone())))
                    .filter(|(k, _)| !["type", "version", "predicate", "negate"].contains(&k.as_str()))
                    .collect();
                let version = given(raw, &format!("{prefix}version")).map(String::from);
                let step = Step::Plugin(PluginStep { name: name.to_string(), version, settings });
                stages.push(Stage { alias: alias.clone(), step, predicate });
                continue;
            }
            let Some(class) = class_of(raw, &prefix, builtin::find, &mut problems) else { continue };
            let Some(values) = settings(raw, &prefix, &class.def, &["predicate", "negate"], class.name, &mut problems)
            else {
                continue;
            };
            match (class.build)(&values) {
                Ok(transform) => {
                    let step = Step::Builtin { class: class.name, transform };
                    stages.push(Stage { alias: alias.clone(), step, predicate })
                }
                Err((key, message)) => problems.push(Problem::new(prefix.clone() + key.unwrap_or("type"), message)),
            }
        }
        // A key under an alias that is not listed would change nothing.
        for (family, listed) in [("transforms", &transforms), ("predicates", &predicate_aliases)] {
            let stray = raw.keys().filter(|k| {
                k.strip_prefix(family).and_then(|rest| rest.strip_prefix('.')).is_some_and(|rest| {
                    !listed.iter().any(|alias| rest.strip_prefix(alias.as_str()).is_some_and(|r| r.starts_with('.')))
                })
            });
            for key in stray {
                let message =
                    format!("names no alias listed in {family} ({}), so it would change nothing", listed.join(","));
                problems.push(Problem::new(key, message));
            }
        }
        if problems.is_empty() { Ok(Chain { stages }) } else { Err(problems) }
    }
}

/// A key's value, unless it is missing or blank.
fn given<'a>(raw: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    raw.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The aliases listed in `key`, each once.
fn aliases(raw: &BTreeMap<String, String>, key: &str, problems: &mut Vec<Problem>) -> Vec<String> {
    let list: Vec<String> = given(raw, key)
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    let mut seen = Vec::new();
    for alias in &list {
        if seen.contains(alias) {
            let message =
                format!("Invalid value {} for configuration {key}: Duplicate alias provided.", raw[key].trim());
            problems.push(Problem::new(key, message));
            break;
        }
        seen.push(alias.clone());
    }
    seen
}

/// The class `<prefix>type` names, found by `find`.
fn class_of<T: ?Sized + 'static>(
    raw: &BTreeMap<String, String>,
    prefix: &str,
    find: fn(&str) -> Result<&'static Class<T>, String>,
    problems: &mut Vec<Problem>,
) -> Option<&'static Class<T>> {
    let key = format!("{prefix}type");
    let Some(name) = given(raw, &key) else {
        problems
            .push(Problem::new(&key, format!("Missing required configuration \"{key}\" which has no default value.")));
        return None;
    };
    match find(name) {
        Ok(class) => Some(class),
        Err(why) => {
            problems.push(Problem::new(&key, format!("Invalid value {name} for configuration {key}: {why}")));
            None
        }
    }
}

/// The keys under `prefix` read with the class's table; a key the class
/// does not define (nor `also`, the stage's own) is refused. `None` when
/// any key had a problem.
fn settings<'d>(
    raw: &BTreeMap<String, String>,
    prefix: &str,
    def: &'d ConfigDef,
    also: &[&str],
    class: &str,
    problems: &mut Vec<Problem>,
) -> Option<spillway_config::Values<'d>> {
    let own: BTreeMap<String, String> = raw
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(prefix)?.to_string(), v.clone())))
        .filter(|(k, _)| k != "type" && !also.contains(&k.as_str()))
        .collect();
    let before = problems.len();
    for key in own.keys().filter(|k| def.find(k).is_none()) {
        let known: Vec<&str> = def.keys().iter().map(|k| k.name()).collect();
        let keys = if known.is_empty() { "none".to_string() } else { known.join(", ") };
        problems.push(Problem::new(
            format!("{prefix}{key}"),
            format!("{class} has no key {key}, so it would change nothing (its keys: {keys})"),
        ));
    }
    let (values, found) = def.parse(&own);
    problems.extend(found.into_iter().map(|p| Problem::new(format!("{prefix}{}", p.key), p.message)));
    (problems.len() == before).then_some(values)
}
