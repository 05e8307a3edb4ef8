//! What a component must be to run here: a sink or a transform that
//! exports this host's contract, and imports only capabilities its connector was granted, each
//! at a version this host speaks.
//!
//! The versioning rule, one for every `spillway:*` package: while a package
//! is 0.x, a change a plugin could notice raises the minor version and only
//! additions raise the patch. A plugin built against `0.m.p` runs on a host
//! that speaks `0.m.q` with `q >= p` (wasmtime links such names to each
//! other); any other version is refused here, naming both.

use anyhow::{Result, bail};
use spillway_capabilities::{CAPABILITIES, Capability, GRANT_PREFIX, Grants};
use wasmtime::Engine;
use wasmtime::component::Component;

/// The version of `wit/connector.wit` this host speaks.
pub const CONTRACT_VERSION: &str = "0.4.1";
const CONTRACT_PACKAGE: &str = "spillway:connector";
/// The contract's type-only interface, which a plugin imports for the types
/// its exports use.
pub(super) const CONTRACT_TYPES: &str = "spillway:connector/types";

/// What a component gets linked: what its grants allow, or (for the
/// metadata and validation probes, which run no task) every capability with
/// no grant in it.
#[derive(Clone, Copy)]
pub enum Linking<'a> {
    Granted(&'a Grants),
    Probe,
}

impl Linking<'_> {
    /// Whether `capability` is linked: always for a probe, else when granted.
    pub fn grants(&self, capability: &Capability) -> bool {
        match self {
            Linking::Granted(grants) => capability.granted(grants),
            Linking::Probe => true,
        }
    }
}

/// What a plugin is, by the interface it exports beside `plugin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    /// Exports `sink-task`: runs as a connector (`connector.class`).
    Sink,
    /// Exports `transformation`: runs as a stage of a connector's chain
    /// (`transforms.<alias>.type`).
    Transform,
}

impl PluginKind {
    /// As Connect's `GET /connector-plugins` names plugin types.
    pub fn connect_type(self) -> &'static str {
        match self {
            PluginKind::Sink => "sink",
            PluginKind::Transform => "transformation",
        }
    }
}

/// Checks a component's exports and imports before it is linked, so that a
/// mismatch fails with a message that says what to do, and tells what kind
/// of plugin it is.
pub fn check(engine: &Engine, component: &Component, linking: Linking) -> Result<PluginKind> {
    let ty = component.component_type();
    let exports: Vec<String> = ty.exports(engine).map(|(name, _)| name.to_string()).collect();
    let sink_task = format!("{CONTRACT_PACKAGE}/sink-task");
    let transformation = format!("{CONTRACT_PACKAGE}/transformation");
    let exported = |interface: &str| exports.iter().find_map(|name| versioned(name, interface));
    let (kind, theirs) = match (exported(&sink_task), exported(&transformation)) {
        (Some(theirs), None) => (PluginKind::Sink, theirs),
        (None, Some(theirs)) => (PluginKind::Transform, theirs),
        (Some(_), Some(_)) => bail!("the component exports both {sink_task} and {transformation}: a plugin is one"),
        (None, None) => bail!("not a plugin: the component exports neither {sink_task} nor {transformation}"),
    };
    if !compatible(theirs, CONTRACT_VERSION) {
        bail!(
            "plugin was built against contract {CONTRACT_PACKAGE}@{theirs}, but this host speaks \
             {CONTRACT_PACKAGE}@{CONTRACT_VERSION}: rebuild it with a matching spillway-sdk"
        );
    }
    let connect = super::bindings::connect::EXPORT;
    let (connect_interface, connect_version) = connect.split_once('@').expect("a versioned name");
    if let Some(theirs) = exports.iter().find_map(|name| versioned(name, connect_interface))
        && !compatible(theirs, connect_version)
    {
        bail!(
            "plugin exports {connect_interface}@{theirs}, but this host speaks {connect}: rebuild it with a matching \
             spillway-sdk"
        );
    }
    for (name, _) in ty.imports(engine) {
        if name.starts_with("wasi:") {
            // Always linked; the WASI context holds only what was granted.
            continue;
        }
        if let Some(theirs) = versioned(name, CONTRACT_TYPES) {
            if !compatible(theirs, CONTRACT_VERSION) {
                bail!("plugin imports {name}, but this host speaks {CONTRACT_PACKAGE}@{CONTRACT_VERSION}");
            }
            continue;
        }
        let Some((capability, (interface, theirs))) =
            CAPABILITIES.iter().find_map(|c| Some((c, c.imported_version(name)?)))
        else {
            bail!("plugin imports '{name}', a capability this host does not provide");
        };
        if !compatible(theirs, capability.version) {
            let interface = format!("{}/{interface}", capability.package);
            bail!(
                "plugin imports {interface}@{theirs}, but this host speaks {interface}@{}: rebuild it with a \
                 matching spillway-sdk",
                capability.version
            );
        }
        if kind == PluginKind::Transform && capability.grant.is_some() {
            // A transform shapes records; what reaches the outside is the
            // sink's, under the sink's grants.
            bail!("transform imports '{name}': a transform is linked with no capability but logging");
        }
        if let (false, Some(grant)) = (linking.grants(capability), &capability.grant) {
            let grant = grant.name;
            bail!(
                "plugin imports '{name}', but its connector grants no {grant}: add \
                 {GRANT_PREFIX}{grant}.<name>.* to the connector config (see GET /connector-plugins/<plugin>/config)"
            );
        }
    }
    Ok(kind)
}

/// The version in `interface@version`, if `name` is that interface.
fn versioned<'a>(name: &'a str, interface: &str) -> Option<&'a str> {
    name.strip_prefix(interface)?.strip_prefix('@')
}

/// Whether a plugin built against `theirs` runs on a host speaking `ours`.
fn compatible(theirs: &str, ours: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut parts = v.split(['.', '-', '+']).map(|p| p.parse::<u64>().ok());
        Some((parts.next()??, parts.next()??, parts.next()??))
    };
    match (parse(theirs), parse(ours)) {
        (Some((0, m1, p1)), Some((0, m2, p2))) => m1 == m2 && p1 <= p2,
        (Some((a1, m1, _)), Some((a2, m2, _))) => a1 == a2 && a1 > 0 && m1 <= m2,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::compatible;

    #[test]
    fn the_versioning_rule() {
        assert!(compatible("0.3.0", "0.3.0"));
        assert!(compatible("0.3.0", "0.3.2"), "a newer patch only adds");
        assert!(!compatible("0.3.2", "0.3.0"), "a plugin may use what an older host lacks");
        assert!(!compatible("0.2.0", "0.3.0"));
        assert!(!compatible("0.4.0", "0.3.0"));
        assert!(compatible("1.0.0", "1.2.0"));
        assert!(!compatible("1.3.0", "1.2.0"));
        assert!(!compatible("2.0.0", "1.2.0"));
        assert!(!compatible("x", "0.3.0"));
    }
}
