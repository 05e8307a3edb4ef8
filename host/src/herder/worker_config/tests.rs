use super::*;
use crate::connector::ConnectorConfig;
use std::io::Write;

/// A connector config with `pairs` over a minimal one.
fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut base: BTreeMap<String, String> = [("name", "c1"), ("connector.class", "noop-sink"), ("topics", "a")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    base.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    base
}

#[test]
fn the_file_is_read_as_java_properties_and_flags_override_it() {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(
        file,
        "# a comment\nbootstrap.servers = kafka:9092\nlisteners=http://0.0.0.0:8084\n\
         policy.fs.dirs=/srv/a, \\\n  /srv/b\npolicy.net.connect: 10.0.0.0/8:5432\npolicy.tasks.max=8"
    )
    .unwrap();
    let overrides = BTreeMap::from([("plugin.path".to_string(), "/opt/plugins".to_string())]);
    let worker = WorkerConfig::load(Some(file.path()), &overrides).unwrap();
    assert_eq!(worker.bootstrap_servers.as_deref(), Some("kafka:9092"));
    assert_eq!(worker.listener, "0.0.0.0:8084".parse().unwrap());
    assert_eq!((worker.listener_tls, worker.rest_users), (None, None));
    assert_eq!(worker.plugin_dir, PathBuf::from("/opt/plugins"));
    assert_eq!(worker.state_file, PathBuf::from(".spillway/connectors.json"), "the default");
    let policy = &worker.defaults.policy;
    assert_eq!(policy.fs_dirs, [PathBuf::from("/srv/a"), PathBuf::from("/srv/b")]);
    assert_eq!(policy.net_connect.len(), 1);
    assert_eq!((policy.tasks_max, policy.memory_max_bytes), (Some(8), None));
}

/// KIP-1302's resolution order: the worker's `consumer.group.protocol`
/// (classic when unset), then the connector's override; removing the
/// override rolls the connector back to the worker's.
#[test]
fn the_workers_group_protocol_is_the_default_a_connector_overrides() {
    let protocol_under = |worker: &[(&str, &str)], connector: &[(&str, &str)]| {
        let raw = worker.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let worker = WorkerConfig::parse(&raw).unwrap();
        ConnectorConfig::parse(&config(connector), &worker.defaults).unwrap().group_protocol
    };
    let (share, classic) =
        (("consumer.override.group.protocol", "share"), ("consumer.override.group.protocol", "classic"));
    assert_eq!(protocol_under(&[], &[]), GroupProtocol::Classic);
    assert_eq!(protocol_under(&[], &[share]), GroupProtocol::Share);
    assert_eq!(protocol_under(&[("consumer.group.protocol", "share")], &[]), GroupProtocol::Share);
    assert_eq!(protocol_under(&[("consumer.group.protocol", "share")], &[classic]), GroupProtocol::Classic);
    assert_eq!(protocol_under(&[("consumer.group.protocol", "consumer")], &[]), GroupProtocol::Classic);
    // KIP-848's protocol reaches librdkafka; share never does.
    let raw = BTreeMap::from([("consumer.group.protocol".to_string(), "consumer".to_string())]);
    let settings = WorkerConfig::parse(&raw).unwrap().defaults.clients;
    assert!(
        settings
            .for_role(crate::kafka::clients::Role::Consumer)
            .contains(&("group.protocol".into(), "consumer".into()))
    );
    let raw = BTreeMap::from([("consumer.group.protocol".to_string(), "streams".to_string())]);
    let problems = WorkerConfig::parse(&raw).unwrap_err();
    assert_eq!(problems.iter().map(|p| p.key.as_str()).collect::<Vec<_>>(), ["consumer.group.protocol"]);
}

#[test]
fn readme_documents_the_table() {
    crate::config::assert_readme_documents(worker_keys(), "worker-keys", "config-keys --worker");
}

#[test]
fn every_problem_is_reported_on_its_key() {
    let raw: BTreeMap<String, String> = [
        ("listeners", "https://example:1"),
        ("policy.fs.dirs", "relative"),
        ("policy.net.connect", "db.internal:5432"),
        ("policy.tasks.max", "0"),
        ("policy.fs.dir", "/typo"),
        // Without bootstrap.servers, and with no replicas.
        ("status.storage.topic", "statuses"),
        ("config.storage.replication.factor", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let problems = WorkerConfig::parse(&raw).unwrap_err();
    let mut keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "config.storage.replication.factor",
            "listeners",
            "policy.fs.dir",
            "policy.fs.dirs",
            "policy.net.connect",
            "policy.tasks.max",
            "status.storage.topic"
        ]
    );
}

/// The worker's policy keys reach the connector's checks.
#[test]
fn capability_targets_outside_the_workers_policy_are_refused_on_their_keys() {
    let worker_config: BTreeMap<String, String> =
        [("policy.sql.urls", "postgres://db.internal:5432"), ("policy.kafka.bootstrap.servers", "target:9092")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let policy = WorkerConfig::parse(&worker_config).unwrap().defaults.policy;
    let worker = WorkerDefaults { policy, ..Default::default() };
    let admitted = config(&[
        ("plugin.grant.sql.db.url", "postgres://db.internal:5432/sink"),
        ("plugin.grant.kafka.out.bootstrap.servers", "target:9092"),
    ]);
    ConnectorConfig::parse(&admitted, &worker).unwrap();
    let refused = config(&[
        ("plugin.grant.sql.db.url", "postgres://db.internal.evil.example:5432/sink"),
        ("plugin.grant.kafka.out.bootstrap.servers", "target:9092,elsewhere:9092"),
    ]);
    let problems = ConnectorConfig::parse(&refused, &worker).unwrap_err();
    let got: Vec<(&str, bool)> =
        problems.iter().map(|p| (p.key.as_str(), p.message.contains("is outside what the worker's policy"))).collect();
    assert_eq!(
        got,
        [("plugin.grant.kafka.out.bootstrap.servers", true), ("plugin.grant.sql.db.url", true)],
        "{problems:?}"
    );
}

/// The worker's `policy.plugin.*` bounds reach every connector's
/// instances, whatever the connector config says.
#[test]
fn the_workers_sandbox_bounds_reach_the_connectors_grants() {
    let worker_config: BTreeMap<String, String> =
        [("policy.plugin.uploads.open.max", "3")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let policy = WorkerConfig::parse(&worker_config).unwrap().defaults.policy;
    let worker = WorkerDefaults { policy, ..Default::default() };
    let connector = ConnectorConfig::parse(&config(&[]), &worker).unwrap();
    assert_eq!(connector.grants.bounds.uploads_open, 3);
    assert_eq!(connector.grants.bounds.work_in_flight, InstanceBounds::default().work_in_flight);
}

/// The worker's request bounds reach the connector config's parse: a
/// config of more keys than `policy.connector.config.keys.max` is
/// refused, one of as many is not.
#[test]
fn the_workers_key_count_bound_refuses_a_larger_config() {
    let given = config(&[]).len();
    let worker_config: BTreeMap<String, String> =
        [("policy.connector.config.keys.max".to_string(), given.to_string())].into();
    let policy = WorkerConfig::parse(&worker_config).unwrap().defaults.policy;
    let worker = WorkerDefaults { policy, ..Default::default() };
    assert!(ConnectorConfig::parse(&config(&[]), &worker).is_ok());
    let problems = ConnectorConfig::parse(&config(&[("extra", "x")]), &worker).unwrap_err();
    let expected = format!("the config has {} keys; a connector config may have at most {given}", given + 1);
    assert_eq!(problems.iter().map(|p| p.message.as_str()).collect::<Vec<_>>(), [expected.as_str()]);
}

/// `policy.sql.pool.size.max` refuses a larger given pool size and
/// lowers the default to it.
#[test]
fn an_sql_pool_above_the_workers_ceiling_is_refused_or_lowered() {
    let worker_config: BTreeMap<String, String> =
        [("policy.sql.pool.size.max", "1")].into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let policy = WorkerConfig::parse(&worker_config).unwrap().defaults.policy;
    let worker = WorkerDefaults { policy, ..Default::default() };
    let url = ("plugin.grant.sql.db.url", "postgres://db.internal:5432/sink");
    let lowered = ConnectorConfig::parse(&config(&[url]), &worker).unwrap();
    assert_eq!(lowered.grants.sql["db"].pool_size, 1);
    let asked = config(&[url, ("plugin.grant.sql.db.pool.size", "4")]);
    let problems = ConnectorConfig::parse(&asked, &worker).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].key, "plugin.grant.sql.db.pool.size");
    assert!(problems[0].message.contains("above the worker's policy.sql.pool.size.max (1)"), "{problems:?}");
}
