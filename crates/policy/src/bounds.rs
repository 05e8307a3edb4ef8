//! What one plugin instance may take from its worker besides memory and
//! call time (which a connector asks for, under `policy.plugin.*.max`): log
//! rate, wasm tables, work held in the host, open uploads, and what one host
//! call may return; and what one REST request may make the worker do. The
//! operator sets each for every connector of the worker (`policy.*`); a
//! connector config cannot raise them. The keys, their defaults and their
//! docs are declared here once.

use spillway_config::{Importance, KeyDef, Type, Validator, Values};
use std::time::Duration;

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

/// What one REST request may make the worker do, whoever sends it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestBounds {
    /// How long a plugin's `validate` may run, instantiation included.
    pub validate_timeout: Duration,
    /// Plugin `validate` calls running at once; others wait their turn.
    pub validations: usize,
    /// Keys one connector config may have.
    pub config_keys: usize,
    /// Transform plugin stages one connector may chain: each is a plugin
    /// instance per task, of up to the memory budget.
    pub transform_plugins: usize,
}

impl Default for RequestBounds {
    fn default() -> Self {
        RequestBounds {
            validate_timeout: Duration::from_secs(10),
            validations: 2,
            config_keys: 1000,
            transform_plugins: 4,
        }
    }
}

/// Each bound's key, with how to read it into and out of its struct.
struct Bound<T> {
    key: &'static str,
    doc: &'static str,
    get: fn(&T) -> u64,
    set: fn(&mut T, u64),
}

impl<T: Default> Bound<T> {
    fn keys(table: &'static [Bound<T>]) -> impl Iterator<Item = KeyDef> {
        let defaults = T::default();
        table.iter().map(move |bound| {
            KeyDef::new(bound.key, Type::Long, Importance::Medium, bound.doc)
                .with_default(&(bound.get)(&defaults).to_string())
                .with_validator(Validator::at_least(1))
        })
    }

    fn from_worker(table: &[Bound<T>], values: &Values) -> T {
        let mut bounds = T::default();
        for bound in table {
            (bound.set)(&mut bounds, values.long(bound.key) as u64);
        }
        bounds
    }
}

const REQUEST_BOUNDS: [Bound<RequestBounds>; 4] = [
    Bound {
        key: "policy.plugin.validate.timeout.ms",
        doc: "How long a plugin's validate may run (REST validate, create and update), instantiation \
              included; past it, the config has an error on connector.class saying so.",
        get: |b| b.validate_timeout.as_millis() as u64,
        set: |b, v| b.validate_timeout = Duration::from_millis(v),
    },
    Bound {
        key: "policy.plugin.validations.max",
        doc: "Plugin validate calls the worker runs at once (each an instance of up to the memory budget, \
              which any REST client can start), and as many group id checks with the broker; others wait \
              their turn.",
        get: |b| b.validations as u64,
        set: |b, v| b.validations = v as usize,
    },
    Bound {
        key: "policy.connector.config.keys.max",
        doc: "Keys a connector config may have; a config of more is refused before any key is read.",
        get: |b| b.config_keys as u64,
        set: |b, v| b.config_keys = v as usize,
    },
    Bound {
        key: "policy.transform.plugins.max",
        doc: "Transform plugin stages one connector may chain (transforms.<alias>.type naming a plugin); each \
              is a plugin instance per task, of up to the memory budget. Built-in transforms do not count.",
        get: |b| b.transform_plugins as u64,
        set: |b, v| b.transform_plugins = v as usize,
    },
];

impl RequestBounds {
    /// The worker config's keys, defaults from [`RequestBounds::default`].
    pub fn keys() -> impl Iterator<Item = KeyDef> {
        Bound::keys(&REQUEST_BOUNDS)
    }

    /// The bounds the worker config sets (checked against the keys already).
    pub fn from_worker(values: &Values) -> RequestBounds {
        Bound::from_worker(&REQUEST_BOUNDS, values)
    }
}

const BOUNDS: [Bound<InstanceBounds>; 7] = [
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
        Bound::keys(&BOUNDS)
    }

    /// The bounds the worker config sets (its values checked against
    /// [`InstanceBounds::keys`] already).
    pub fn from_worker(values: &Values) -> InstanceBounds {
        Bound::from_worker(&BOUNDS, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spillway_config::ConfigDef;
    use std::collections::BTreeMap;

    fn parse(raw: &[(&str, &str)]) -> Result<(InstanceBounds, RequestBounds), Vec<String>> {
        let def = ConfigDef::new().group("Bounds", InstanceBounds::keys().chain(RequestBounds::keys()));
        let raw: BTreeMap<String, String> = raw.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let (values, problems) = def.parse(&raw);
        match problems.is_empty() {
            true => Ok((InstanceBounds::from_worker(&values), RequestBounds::from_worker(&values))),
            false => Err(problems.into_iter().map(|p| format!("{}: {}", p.key, p.message)).collect()),
        }
    }

    /// Sets every key of `table` to a value of its own and reads each back.
    fn each_key_sets_its_bound<T>(table: &[Bound<T>], read: impl Fn(&(InstanceBounds, RequestBounds)) -> &T) {
        let set: Vec<(&str, String)> =
            table.iter().enumerate().map(|(i, b)| (b.key, (i as u64 + 2).to_string())).collect();
        let set: Vec<(&str, &str)> = set.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let parsed = parse(&set).unwrap();
        for (i, bound) in table.iter().enumerate() {
            assert_eq!((bound.get)(read(&parsed)), i as u64 + 2, "{}", bound.key);
        }
    }

    #[test]
    fn each_key_sets_its_bound_and_the_defaults_are_the_structs() {
        assert_eq!(parse(&[]).unwrap(), (InstanceBounds::default(), RequestBounds::default()));
        each_key_sets_its_bound(&BOUNDS, |(instance, _)| instance);
        each_key_sets_its_bound(&REQUEST_BOUNDS, |(_, requests)| requests);
    }

    #[test]
    fn a_bound_below_one_is_refused() {
        for key in ["policy.plugin.uploads.open.max", "policy.plugin.validate.timeout.ms"] {
            let problems = parse(&[(key, "0")]).unwrap_err();
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(problems[0].starts_with(key), "{problems:?}");
        }
    }
}
