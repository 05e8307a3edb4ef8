//! The sandbox probed as someone who may call the REST API would probe it:
//! connector configs that try to reach past the operator's policy, each
//! refused at validation on the key that asks, naming the rule. Every probe
//! parses the config as `PUT /connector-plugins/{p}/config/validate`, a
//! create and a task's start all do (`ConnectorConfig::parse` with the
//! worker's defaults, read from a worker config file); none needs a broker.
//! The REST API's own guards (415 for a browser's bodies, 421 for a foreign
//! Host) are probed in `rest_api.rs`.

use spillway::connector::ConnectorConfig;
use spillway::herder::WorkerConfig;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A worker as `spillway serve --config` sets one up: its config file read,
/// its own files protected as the worker protects them.
struct Worker {
    root: tempfile::TempDir,
    defaults: spillway::connector::WorkerDefaults,
}

impl Worker {
    /// `extra`: worker config lines; `{root}` is the worker's directory.
    fn new(extra: &[&str]) -> Worker {
        let root = tempfile::tempdir().unwrap();
        let at = |p: &str| root.path().join(p);
        for dir in ["allowed", "state", "plugins", "cache", "secrets"] {
            std::fs::create_dir_all(at(dir)).unwrap();
        }
        std::fs::write(at("secrets/db.properties"), "password=hunter2-0451\n").unwrap();
        let mut lines = vec![
            format!("policy.fs.dirs={}", at("allowed").display()),
            format!("plugin.path={}", at("plugins").display()),
            format!("config.storage.file={}", at("state/connectors.json").display()),
            "config.providers=file".to_string(),
            format!("config.providers.file.param.allowed.paths={}", at("secrets").display()),
        ];
        lines.extend(extra.iter().map(|l| l.replace("{root}", root.path().to_str().unwrap())));
        let file = at("worker.properties");
        std::fs::write(&file, lines.join("\n")).unwrap();
        let worker = WorkerConfig::load(Some(&file), &BTreeMap::new()).expect("a valid worker config");
        let mut defaults = worker.defaults;
        // What the herder's worker adds when it starts.
        for (path, what) in [
            (at("state/connectors.json"), "state file"),
            (at("cache"), "compiled-plugin cache"),
            (at("plugins"), "plugin directory"),
        ] {
            defaults.policy.protect(&path, what);
            defaults.providers.protect(&path);
        }
        if let Some(topic) = &worker.config_topic {
            defaults.policy.protect_topic(&topic.name);
        }
        Worker { root, defaults }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }

    /// The problems of a file-sink config with `pairs` over it, as
    /// `key: message` lines; empty if it is valid.
    fn problems(&self, pairs: &[(&str, &str)]) -> Vec<String> {
        let mut raw: BTreeMap<String, String> = [
            ("name", "probe"),
            ("connector.class", "file-sink"),
            ("topics", "orders"),
            ("plugin.grant.fs.out.path", self.path("allowed").to_str().unwrap()),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (key, value) in pairs {
            raw.insert(key.to_string(), value.to_string());
        }
        match ConnectorConfig::parse(&raw, &self.defaults) {
            Ok(_) => Vec::new(),
            Err(problems) => problems.iter().map(|p| format!("{}: {}", p.key, p.message)).collect(),
        }
    }

    /// Asserts that `pairs` is refused on `key`, with a message holding
    /// `rule`.
    fn assert_refused(&self, pairs: &[(&str, &str)], key: &str, rule: &str) {
        let problems = self.problems(pairs);
        assert!(
            problems.iter().any(|p| p.starts_with(&format!("{key}: ")) && p.contains(rule)),
            "{pairs:?} should be refused on {key} naming '{rule}', got {problems:#?}"
        );
    }
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn a_file_object_store_is_a_directory_grant() {
    let worker = Worker::new(&[]);
    let key = "plugin.grant.object-store.out.url";
    let allowed = worker.path("allowed/objects");
    assert_eq!(worker.problems(&[(key, &file_url(&allowed))]), Vec::<String>::new());
    for (dir, rule) in [
        (worker.path("state"), "worker's state file"),
        (worker.path("plugins"), "worker's plugin directory"),
        (worker.path("cache"), "worker's compiled-plugin cache"),
        (worker.path("secrets"), "config providers' secrets"),
        (worker.path(""), "worker's config file"),
        (PathBuf::from("/etc"), "outside what the worker's policy.fs.dirs allows"),
        (PathBuf::from("/proc/self"), "kernel's process view"),
    ] {
        worker.assert_refused(&[(key, &file_url(&dir))], key, rule);
    }
}

#[test]
fn the_kernels_directories_are_never_granted_even_under_an_open_policy() {
    let worker = Worker::new(&["policy.fs.dirs="]);
    let key = "plugin.grant.fs.out.path";
    assert_eq!(worker.problems(&[(key, "/srv/anything")]), Vec::<String>::new(), "an open policy");
    for (dir, rule) in [
        ("/proc", "kernel's process view"),
        ("/sys/kernel", "device view"),
        ("/dev", "device"),
        ("/", "cannot be granted"),
    ] {
        worker.assert_refused(&[(key, dir)], key, rule);
    }
}

#[test]
fn a_grant_path_is_checked_as_it_is_opened_and_again_at_task_start() {
    let worker = Worker::new(&["policy.fs.dirs="]);
    let key = "plugin.grant.fs.out.path";
    // One path, commas and all: `data,` then `..` is the worker's directory.
    std::fs::create_dir_all(worker.path("data,")).unwrap();
    let sneaky = format!("{},/../state", worker.path("data").display());
    worker.assert_refused(&[(key, &sneaky)], key, "worker's state file");

    // Valid when checked; a link put in its place before the task starts
    // is refused then, since a task's start parses the config again.
    let worker = Worker::new(&[]);
    let target = worker.path("allowed/out");
    std::fs::create_dir_all(&target).unwrap();
    let pairs = [(key, target.to_str().unwrap())];
    assert_eq!(worker.problems(&pairs), Vec::<String>::new());
    std::fs::remove_dir(&target).unwrap();
    std::os::unix::fs::symlink("/etc", &target).unwrap();
    worker.assert_refused(&pairs, key, "outside what the worker's policy.fs.dirs allows");
}

#[test]
fn client_overrides_reach_no_further_than_the_worker_allows() {
    let worker = Worker::new(&[]);
    // Tuning is a connector's to set.
    assert_eq!(
        worker.problems(&[("consumer.override.fetch.min.bytes", "1024"), ("consumer.override.group.id", "mine")]),
        Vec::<String>::new()
    );
    for (key, value, kind) in [
        ("consumer.override.bootstrap.servers", "attacker.example:9092", "servers"),
        ("producer.override.sasl.username", "other", "credentials"),
        ("admin.override.security.protocol", "PLAINTEXT", "security"),
        ("consumer.override.enable.ssl.certificate.verification", "false", "tls.verification"),
    ] {
        worker.assert_refused(
            &[(key, value)],
            key,
            &format!("is a {kind} setting, and the worker's policy.client.overrides allows tuning"),
        );
    }

    // Allowed servers are still servers: the policy's list applies.
    let servers =
        Worker::new(&["policy.client.overrides=tuning,servers", "policy.kafka.bootstrap.servers=target:9092"]);
    let key = "consumer.override.bootstrap.servers";
    assert_eq!(servers.problems(&[(key, "target:9092")]), Vec::<String>::new());
    servers.assert_refused(&[(key, "attacker.example:9092")], key, "policy.kafka.bootstrap.servers allows");
}

#[test]
fn a_plugin_cannot_plant_code_and_a_config_cannot_load_it() {
    let all = "policy.client.overrides=tuning,servers,security,credentials,tls.verification";
    let worker = Worker::new(&[all]);
    // Step one: a grant to write where the worker loads plugins from.
    let url = file_url(&worker.path("plugins"));
    worker.assert_refused(
        &[("plugin.grant.object-store.drop.url", &url)],
        "plugin.grant.object-store.drop.url",
        "plugin directory",
    );
    let plugins = worker.path("plugins");
    worker.assert_refused(
        &[("plugin.grant.fs.drop.path", plugins.to_str().unwrap())],
        "plugin.grant.fs.drop.path",
        "plugin directory",
    );
    // Step two: a library the plugin could write where it may, named for
    // librdkafka to load. Refused whatever the policy allows, before
    // librdkafka sees it (it would dlopen() it while checking the value).
    let planted = worker.path("allowed/evil.so");
    std::fs::write(&planted, b"not a library").unwrap();
    for setting in ["plugin.library.paths", "ssl.engine.location", "sasl.kerberos.kinit.cmd", "offset.store.path"] {
        let key = format!("consumer.override.{setting}");
        worker.assert_refused(&[(&key, planted.to_str().unwrap())], &key, "which no connector may ask for");
    }
    // And no worker may allow it.
    let file = worker.path("code.properties");
    std::fs::write(&file, "policy.client.overrides=tuning,code\n").unwrap();
    let Err(problems) = WorkerConfig::load(Some(&file), &BTreeMap::new()) else { panic!("a worker allowed code") };
    assert!(problems.iter().any(|p| p.key == "policy.client.overrides" && p.message.contains("never allowed")));
}

#[test]
fn internal_topics_are_never_a_connectors() {
    let worker = Worker::new(&["config.storage.topic=connect-configs", "bootstrap.servers=127.0.0.1:9092"]);
    worker.assert_refused(&[("topics", "orders,__consumer_offsets")], "topics", "Kafka's internal topics");
    worker.assert_refused(&[("topics", "spillway-offsets.m1.internal")], "topics", "exactly-once positions");
    let dlq = "errors.deadletterqueue.topic.name";
    worker.assert_refused(&[("errors.tolerance", "all"), (dlq, "connect-configs")], dlq, "the worker's own topic");
    worker.assert_refused(&[("errors.tolerance", "all"), (dlq, "__transaction_state")], dlq, "internal");
    for regex in [".*", "_.*", "connect-.*"] {
        worker.assert_refused(
            &[("topics", ""), ("topics.regex", regex)],
            "topics.regex",
            "which no connector may read",
        );
    }
    assert_eq!(worker.problems(&[("topics", ""), ("topics.regex", "orders-[0-9]+")]), Vec::<String>::new());
}

#[test]
fn no_secret_shows_in_a_problem() {
    let worker = Worker::new(&[]);
    let secrets = worker.path("secrets/db.properties");
    let placeholder = format!("${{file:{}:password}}", secrets.display());
    // A provider's value refused by the key it lands in: named, not shown.
    let problems = worker.problems(&[("tasks.max", &placeholder), ("batch.max.records", &placeholder)]);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(problems.iter().all(|p| !p.contains("hunter2") && p.contains("[hidden]")), "{problems:#?}");
    // A short secret is hidden on its own key too.
    std::fs::write(&secrets, "password=7x\n").unwrap();
    let problems = worker.problems(&[("tasks.max", &placeholder)]);
    assert!(problems.len() == 1 && !problems[0].contains("'7x'"), "{problems:#?}");
}

#[test]
fn a_database_url_may_not_choose_another_server_or_carry_a_password() {
    let worker = Worker::new(&["policy.sql.urls=postgres://db.internal:5432/app"]);
    let key = "plugin.grant.sql.db.url";
    assert_eq!(worker.problems(&[(key, "postgres://db.internal:5432/app?sslmode=require")]), Vec::<String>::new());
    for url in [
        "postgres://db.internal:5432/app?host=/var/run/postgresql&user=postgres",
        "postgres://db.internal:5432/app?hostaddr=10.9.9.9",
    ] {
        worker.assert_refused(&[(key, url)], key, "outside what the worker's policy.sql.urls allows");
    }
    worker.assert_refused(&[(key, "postgres://db.internal:5432/app?password=x")], key, "put the password in");
}

#[test]
fn instance_metadata_is_reached_only_where_the_policy_names_it() {
    let open = Worker::new(&[]);
    let endpoint = "plugin.grant.object-store.s3.endpoint";
    let s3 = [("plugin.grant.object-store.s3.url", "s3://bucket/p"), (endpoint, "http://169.254.169.254")];
    open.assert_refused(&s3, endpoint, "instance-metadata address");
    let connect = "plugin.grant.net.meta.connect";
    open.assert_refused(&[(connect, "169.254.169.254:80")], connect, "policy.net.connect names it");
    open.assert_refused(
        &[("plugin.grant.sql.db.url", "postgres://metadata.google.internal/x")],
        "plugin.grant.sql.db.url",
        "instance-metadata",
    );
    let everything = Worker::new(&["policy.net.connect=0.0.0.0/0:*"]);
    everything.assert_refused(&[(connect, "169.254.169.254:80")], connect, "policy.net.connect names it");
    let named = Worker::new(&["policy.net.connect=169.254.169.254/32:80"]);
    assert_eq!(named.problems(&[(connect, "169.254.169.254:80")]), Vec::<String>::new());
}
