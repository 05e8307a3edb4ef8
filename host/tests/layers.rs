//! `docs/architecture.md`'s table of layers is what the code does: every
//! `crate::…` path in a module's code (its tests aside) names a module that
//! the table lets it import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each module of the table with the modules it may import.
fn allowed_imports(doc: &str) -> BTreeMap<String, BTreeSet<String>> {
    let modules = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(|m| m.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .collect()
    };
    let mut layers: Vec<(u32, Vec<String>, String)> = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| layer")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let Ok(layer) = cells[1].parse::<u32>() else { continue };
        layers.push((layer, modules(cells[2]), cells[4].to_string()));
    }
    assert!(layers.len() >= 8, "the table of layers was not found in docs/architecture.md");
    let below = |layer: u32, upto: u32| -> BTreeSet<String> {
        layers.iter().filter(|(l, _, _)| *l < layer && *l <= upto).flat_map(|(_, m, _)| m.clone()).collect()
    };
    let mut allowed = BTreeMap::new();
    for (layer, own, may) in &layers {
        let set: BTreeSet<String> = if may.starts_with("nothing") {
            BTreeSet::new()
        } else if may.starts_with("everything below") {
            below(*layer, u32::MAX)
        } else if let Some(range) = may.strip_prefix("layers 0-") {
            below(*layer, range.parse().expect("a layer number"))
        } else {
            modules(may).into_iter().collect()
        };
        for module in own {
            allowed.insert(module.clone(), set.clone());
        }
    }
    allowed
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") && path.file_name().is_some_and(|n| n != "tests.rs") {
        out.push(path.to_path_buf());
    }
}

/// The `crate::<module>` paths of a file's code, its test module cut off.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    code.match_indices("crate::")
        .map(|(at, _)| {
            let rest = &code[at + "crate::".len()..];
            rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_import_points_down_the_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/architecture.md")).unwrap();
    let allowed = allowed_imports(&doc);
    let mut checked = 0;
    let mut wrong = Vec::new();
    for (module, may) in &allowed {
        if module == "main" {
            continue; // the binary: it imports the crate as `spillway::`
        }
        if let Some(deps) = crate_dependencies(root, module) {
            // A crate of its own: the compiler holds it to its Cargo.toml,
            // which may name only the crates of the layers it may import.
            checked += 1;
            // Crates outside the table (the record types the SDK shares)
            // are no layer of the host.
            for used in deps.into_iter().filter(|d| allowed.contains_key(d)) {
                if !may.contains(&used) {
                    wrong.push(format!("crates/{module}/Cargo.toml depends on spillway-{used}"));
                }
            }
            continue;
        }
        let mut files = Vec::new();
        for path in [root.join("src").join(module), root.join("src").join(format!("{module}.rs"))] {
            if path.exists() {
                rust_files(&path, &mut files);
            }
        }
        assert!(!files.is_empty(), "docs/architecture.md names {module}, which host/src does not have");
        for file in files {
            checked += 1;
            for used in crate_paths(&std::fs::read_to_string(&file).unwrap()) {
                if used != *module && !may.contains(&used) {
                    wrong.push(format!("{} imports crate::{used}", file.strip_prefix(root).unwrap().display()));
                }
            }
        }
    }
    println!("{checked} files in {} modules checked", allowed.len());
    assert!(wrong.is_empty(), "imports against docs/architecture.md's layers:\n{}", wrong.join("\n"));
}

/// For a module that `lib.rs` re-exports from a crate of its own
/// (`pub use spillway_<module> as <module>;`), the Spillway crates its
/// Cargo.toml depends on, as module names.
fn crate_dependencies(root: &Path, module: &str) -> Option<Vec<String>> {
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    if !lib.lines().any(|l| l == format!("pub use spillway_{module} as {module};")) {
        return None;
    }
    let manifest = std::fs::read_to_string(root.join(format!("../crates/{module}/Cargo.toml"))).unwrap();
    let dependencies = manifest.split("[dependencies]").nth(1).unwrap_or_default();
    let dependencies = dependencies.split("\n[").next().unwrap_or_default();
    Some(
        dependencies
            .lines()
            .filter_map(|l| l.strip_prefix("spillway-"))
            .map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).next().unwrap().replace('-', "_"))
            .collect(),
    )
}

#[test]
fn every_module_is_in_a_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("../docs/architecture.md")).unwrap();
    let allowed = allowed_imports(&doc);
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    let declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            let crate_of_its_own =
                l.strip_prefix("pub use spillway_").and_then(|l| l.split_once(" as ")).map(|(_, m)| m);
            l.strip_prefix("pub mod ").or(crate_of_its_own).and_then(|m| m.strip_suffix(';'))
        })
        .collect();
    assert!(!declared.is_empty());
    for module in declared {
        assert!(allowed.contains_key(module), "{module} is in no layer of docs/architecture.md");
    }
}
