//! Every capability this host implements, one registration each: its WIT
//! package and version, and for a granted one its grant's settings, how a
//! grant is read and checked, and what a grant reaches. The runtime links,
//! `contract::check` admits, the connector's key table documents, the grant
//! parser reads and the policy checks by iterating [`CAPABILITIES`]; adding a
//! capability is its own folder, a line there and a context in
//! [`crate::contexts`].

use super::grants::Grants;
use super::reach::{GrantSettings, Reach};
use super::{errors, kafka, log, object_store, sql};
use anyhow::Result;
use spillway_config::KeyDef;
use std::collections::BTreeMap;

/// Every `spillway:*` package this host implements.
pub const CAPABILITIES: &[Capability] =
    &[errors::CAPABILITY, log::CAPABILITY, object_store::CAPABILITY, sql::CAPABILITY, kafka::CAPABILITY];

/// One WIT package a plugin may import, and what grants it.
pub struct Capability {
    /// The package, without its version: `spillway:object-store`.
    pub package: &'static str,
    /// The version of the package this host implements.
    pub version: &'static str,
    /// The package's interfaces, each linked when the package is.
    pub interfaces: &'static [&'static str],
    /// How a connector grants it; `None` for what every plugin gets.
    pub grant: Option<GrantKind>,
}

/// How a connector config grants a capability: the grants
/// `plugin.grant.<name>.<grant>.*`.
pub struct GrantKind {
    /// The capability segment of its grants' keys, and its metrics' label.
    pub name: &'static str,
    /// A grant's settings: the table behind parsing, validation, the
    /// connector's key listing and README.
    pub setting_keys: fn() -> Vec<KeyDef>,
    /// Reads one named grant's settings into the connector's grants; an
    /// error names the key.
    pub parse: fn(&mut Grants, &str, &BTreeMap<String, String>) -> Result<()>,
    /// Checks the capability's grants once all of a config's are read
    /// (against each other and the WASI grants).
    pub check: fn(&Grants) -> Result<()>,
    /// What one grant reaches, each with its key, for the policy: read the
    /// way `parse` reads the same settings, so that what is checked is what
    /// is opened.
    pub reach: for<'a> fn(&GrantSettings<'a>, &mut Reach<'a>),
    /// Whether a connector's grants include it.
    pub granted: fn(&Grants) -> bool,
}

impl Capability {
    /// If `imported` (`package/interface@version`, as a plugin names an
    /// import) is one of this package's interfaces: that interface and the
    /// version the plugin asks for.
    pub fn imported_version<'a>(&self, imported: &'a str) -> Option<(&'static str, &'a str)> {
        let rest = imported.strip_prefix(self.package)?.strip_prefix('/')?;
        let (interface, version) = rest.split_once('@')?;
        let interface = self.interfaces.iter().find(|i| **i == interface)?;
        Some((interface, version))
    }

    /// Whether a connector's grants link it: always for what every plugin
    /// gets.
    pub fn granted(&self, grants: &Grants) -> bool {
        self.grant.as_ref().is_none_or(|grant| (grant.granted)(grants))
    }
}

/// The granted capabilities' grant kinds.
pub fn grant_kinds() -> impl Iterator<Item = &'static GrantKind> {
    CAPABILITIES.iter().filter_map(|c| c.grant.as_ref())
}

/// The grant kind whose keys read `plugin.grant.<name>.*`.
pub fn grant_kind(name: &str) -> Option<&'static GrantKind> {
    grant_kinds().find(|kind| kind.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_is_found_by_package_and_interface() {
        let kafka = CAPABILITIES.iter().find(|c| c.package == "spillway:kafka").unwrap();
        assert_eq!(kafka.imported_version("spillway:kafka/source@0.1.0"), Some(("source", "0.1.0")));
        assert_eq!(kafka.imported_version("spillway:kafka/sourcery@0.1.0"), None);
        assert_eq!(kafka.imported_version("spillway:kafkaesque/source@0.1.0"), None);
    }

    #[test]
    fn packages_and_grant_names_are_unique() {
        let packages: std::collections::BTreeSet<&str> = CAPABILITIES.iter().map(|c| c.package).collect();
        assert_eq!(packages.len(), CAPABILITIES.len());
        let names: std::collections::BTreeSet<&str> = grant_kinds().map(|k| k.name).collect();
        assert_eq!(names.len(), grant_kinds().count());
    }
}
