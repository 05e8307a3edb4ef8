//! `connector.plugin.version`: a semver range as Cargo reads one, with one
//! difference. semver ignores build metadata when it matches, so `=0.1.0`
//! would admit `0.1.0+patched`, another build that anyone may upload under a
//! pinned version. Here a build with metadata is admitted only by a range
//! that names it (`=0.1.0+patched`), and a range that names one admits
//! only it.

use semver::{BuildMetadata, Version, VersionReq};
use std::fmt;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
    req: VersionReq,
    /// The builds the range names; empty: builds without metadata only.
    builds: Vec<BuildMetadata>,
}

impl VersionRange {
    pub fn parse(text: &str) -> Result<Self, String> {
        let req = VersionReq::parse(text).map_err(|e| format!("not a semver range: {e}"))?;
        let mut builds = Vec::new();
        for comparator in text.split(',') {
            if let Some((_, build)) = comparator.split_once('+') {
                builds.push(BuildMetadata::new(build.trim()).map_err(|e| format!("not a semver range: {e}"))?);
            }
        }
        Ok(VersionRange { text: text.trim().to_string(), req, builds })
    }

    /// Whether the range admits `version`.
    pub fn admits(&self, version: &Version) -> bool {
        let build_named = match self.builds.is_empty() {
            true => version.build.is_empty(),
            false => self.builds.contains(&version.build),
        };
        self.req.matches(version) && build_named
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admits(range: &str, version: &str) -> bool {
        VersionRange::parse(range).unwrap().admits(&Version::parse(version).unwrap())
    }

    #[test]
    fn a_build_with_metadata_is_admitted_only_when_named() {
        assert!(admits("=0.1.0", "0.1.0"));
        assert!(!admits("=0.1.0", "0.1.0+patched"), "a pin does not admit another build of its version");
        assert!(!admits("^0.1", "0.1.3+patched"));
        assert!(admits("=0.1.0+patched", "0.1.0+patched"));
        assert!(!admits("=0.1.0+patched", "0.1.0"), "naming a build asks for it");
        assert!(!admits("=0.1.0+patched", "0.1.0+other"));
        assert!(admits(">=0.1.0+patched, <0.2", "0.1.5+patched"));
        assert!(admits("^0.1", "0.1.3"));
        assert!(!admits("^0.1", "0.2.0"));
    }

    #[test]
    fn what_is_not_a_range_says_so() {
        assert!(VersionRange::parse("one").unwrap_err().starts_with("not a semver range"));
        assert_eq!(VersionRange::parse(" =0.1.0+x ").unwrap().to_string(), "=0.1.0+x");
    }
}
