//! What one plugin instance may take from its worker besides memory and
//! call time (which a connector asks for, under `policy.plugin.*.max`): log
//! rate, wasm tables, work held in the host, open uploads, and what one host
//! call may return. The operator sets each for every connector of the
//! worker (`policy.plugin.*`); a connector config cannot raise them. The
//! keys, their defaults and their docs are declared here once.

use spillway_config::{Importance, KeyDef, Type, Validator, Values};

/// The bounds of one plugin instance. `Default` is the worker's default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceBounds {
    /// Log lines (its log capability and its stderr together) per second,
    /// and at once after a quiet second.
    pub log_lines_per_second: u32,
    /// Log bytes per second.
    pub log_bytes_per_second: usize,
    /// Wasm tables per instance.
    pub tables: usize,
    /// Elements per table (each also counted as 8 bytes of the memory budget).
    pub table_elements: usize,
    /// Work going on in the host per capability: SQL batches, Kafka sends,
    /// object-store writes (a `begin-*` past it waits for one to end).
    pub work_in_flight: usize,
    /// Multipart uploads open at once.
    pub uploads_open: usize,
    /// Bytes one host call may return (an SQL query's rows, an object `get`).
    pub return_bytes: usize,
}

impl Default for InstanceBounds {
    fn default() -> Self {
        InstanceBounds {
            log_lines_per_second: 100,
            log_bytes_per_second: 64 << 10,
            tables: 1000,
            table_elements: 1_000_000,
            work_in_flight: 4,
            uploads_open: 16,
            return_bytes: 64 << 20,
        }
    }
}

/// Each bound's key, with how to read it into and out of [`InstanceBounds`].
struct Bound {
    key: &'static str,
    doc: &'static str,
    get: fn(&InstanceBounds) -> u64,
    set: fn(&mut InstanceBounds, u64),
}

const BOUNDS: [Bound; 7] = [
    Bound {
        key: "policy.plugin.log.lines.per.second",
        doc: "Lines a plugin instance may log a second, its log capability and stderr together (and at once \
              after a quiet second); lines past it are dropped, and the next line written says how many.",
        get: |b| b.log_lines_per_second.into(),
        set: |b, v| b.log_lines_per_second = v as u32,
    },
    Bound {
        key: "policy.plugin.log.bytes.per.second",
        doc: "Bytes a plugin instance may log a second (lines are cut at 4 KiB).",
        get: |b| b.log_bytes_per_second as u64,
        set: |b, v| b.log_bytes_per_second = v as usize,
    },
    Bound {
        key: "policy.plugin.tables.max",
        doc: "Wasm tables a plugin instance may create.",
        get: |b| b.tables as u64,
        set: |b, v| b.tables = v as usize,
    },
    Bound {
        key: "policy.plugin.table.elements.max",
        doc: "Elements one wasm table may grow to; each also counts as 8 bytes of plugin.memory.max.bytes.",
        get: |b| b.table_elements as u64,
        set: |b, v| b.table_elements = v as usize,
    },
    Bound {
        key: "policy.plugin.work.in.flight.max",
        doc: "Work a plugin instance may have going on in the host, for each capability: SQL begin-batch and \
              begin-copy-in, Kafka begin-send, object-store begin-create, each holding its data in the host \
              until it ends. A begin-* past it waits, within the call, for one to end.",
        get: |b| b.work_in_flight as u64,
        set: |b, v| b.work_in_flight = v as usize,
    },
    Bound {
        key: "policy.plugin.uploads.open.max",
        doc: "Multipart uploads a plugin instance may hold open (each holds the store's upload, and its \
              billed parts, until completed or aborted); past it, start-upload fails.",
        get: |b| b.uploads_open as u64,
        set: |b, v| b.uploads_open = v as usize,
    },
    Bound {
        key: "policy.plugin.return.bytes.max",
        doc: "Bytes one host call may return to a plugin: an SQL query's rows, an object get. Past it the \
              call fails, saying so, rather than holding more in the host.",
        get: |b| b.return_bytes as u64,
        set: |b, v| b.return_bytes = v as usize,
    },
];

impl InstanceBounds {
    /// The worker config's keys, defaults from [`InstanceBounds::default`].
    pub fn keys() -> impl Iterator<Item = KeyDef> {
        let defaults = InstanceBounds::default();
        BOUNDS.iter().map(move |bound| {
            KeyDef::new(bound.key, Type::Long, Importance::Medium, bound.doc)
                .with_default(&(bound.get)(&defaults).to_string())
                .with_validator(Validator::at_least(1))
        })
    }

    /// The bounds the worker config sets (its values checked against
    /// [`InstanceBounds::keys`] already).
    pub fn from_worker(values: &Values) -> InstanceBounds {
        let mut bounds = InstanceBounds::default();
        for bound in &BOUNDS {
            (bound.set)(&mut bounds, values.long(bound.key) as u64);
        }
        bounds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_config::ConfigDef;
    use std::collections::BTreeMap;

    fn parse(raw: &[(&str, &str)]) -> Result<InstanceBounds, Vec<String>> {
        let def = ConfigDef::new().group("Bounds", InstanceBounds::keys());
        let raw: BTreeMap<String, String> = raw.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (values, problems) = def.parse(&raw);
        match problems.is_empty() {
            true => Ok(InstanceBounds::from_worker(&values)),
            false => Err(problems.into_iter().map(|p| format!("{}: {}", p.key, p.message)).collect()),
        }
    }

    #[test]
    fn each_key_sets_its_bound_and_the_defaults_are_the_structs() {
        assert_eq!(parse(&[]).unwrap(), InstanceBounds::default());
        let set: Vec<(&str, String)> =
            BOUNDS.iter().enumerate().map(|(i, b)| (b.key, (i as u64 + 2).to_string())).collect();
        let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let bounds = parse(&set).unwrap();
        for (i, bound) in BOUNDS.iter().enumerate() {
            assert_eq!((bound.get)(&bounds), i as u64 + 2, "{}", bound.key);
        }
    }

    #[test]
    fn a_bound_below_one_is_refused() {
        let problems = parse(&[("policy.plugin.uploads.open.max", "0")]).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("policy.plugin.uploads.open.max"), "{problems:?}");
    }
}
