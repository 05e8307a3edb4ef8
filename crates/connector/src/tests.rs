use super::keys::REFRESH_KEY;
use super::parse::grant_key_named_in;
use super::*;
use spillway_kafka::clients::Role;
use spillway_kafka::share::TOPICS_REGEX_REFRESH;

fn config(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut base: BTreeMap<String, String> = [("name", "c1"), ("connector.class", "noop-sink"), ("topics", "a, b")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    base.extend(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    base
}

#[test]
fn classic_by_default_then_the_workers_protocol_then_the_connectors_override() {
    // KIP-1302: standard consumer groups remain the default.
    let unset = ConnectorConfig::parse(&config(&[]), &WorkerDefaults::default()).unwrap();
    assert_eq!(unset.group_protocol, GroupProtocol::Classic);
    assert_eq!(unset.group_id, "connect-c1");

    let worker = WorkerDefaults { group_protocol: GroupProtocol::Share, ..Default::default() };
    let shared = ConnectorConfig::parse(&config(&[]), &worker).unwrap();
    assert_eq!(shared.group_protocol, GroupProtocol::Share);
    assert_eq!(shared.topics, vec!["a", "b"]);
    assert_eq!(shared.group_id, "connect-c1");

    let classic = ConnectorConfig::parse(&config(&[("consumer.override.group.protocol", "classic")]), &worker).unwrap();
    assert_eq!(classic.group_protocol, GroupProtocol::Classic);
    // `classic` passes through to the consumer; `share` never does.
    assert!(classic.clients.for_role(Role::Consumer).contains(&("group.protocol".into(), "classic".into())));
    assert!(!shared.clients.for_role(Role::Consumer).iter().any(|(k, _)| k == "group.protocol"));

    let classic_worker = WorkerDefaults { group_protocol: GroupProtocol::Classic, ..Default::default() };
    let over =
        ConnectorConfig::parse(&config(&[("consumer.override.group.protocol", "share")]), &classic_worker).unwrap();
    assert_eq!(over.group_protocol, GroupProtocol::Share);
}

#[test]
fn other_consumer_overrides_pass_through() {
    let c =
        ConnectorConfig::parse(&config(&[("consumer.override.fetch.min.bytes", "1024")]), &Default::default()).unwrap();
    assert_eq!(c.clients.for_role(Role::Consumer), vec![("fetch.min.bytes".to_string(), "1024".to_string())]);
}

#[test]
fn every_problem_is_reported() {
    let raw: BTreeMap<String, String> = [("tasks.max", "zero"), ("errors.tolerance", "some")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let problems = ConnectorConfig::parse(&raw, &Default::default()).unwrap_err();
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    for key in ["name", "connector.class", "topics", "topics.regex", "tasks.max", "errors.tolerance"] {
        assert!(keys.contains(&key), "{key} not reported in {problems:?}");
    }
}

#[test]
fn dead_letter_queue_needs_tolerance_all() {
    let bad = config(&[("errors.deadletterqueue.topic.name", "dlq")]);
    let problems = ConnectorConfig::parse(&bad, &Default::default()).unwrap_err();
    assert_eq!(problems[0].key, "errors.deadletterqueue.topic.name");
    let good = config(&[("errors.deadletterqueue.topic.name", "dlq"), ("errors.tolerance", "all")]);
    let c = ConnectorConfig::parse(&good, &Default::default()).unwrap();
    assert_eq!(c.errors.dlq_topic.as_deref(), Some("dlq"));
    assert_eq!(c.errors.tolerance, Tolerance::All);
}

#[test]
fn defaults_come_from_the_table() {
    let c = ConnectorConfig::parse(&config(&[]), &Default::default()).unwrap();
    let default = |key: &str| connector_keys().find(key).unwrap().default_value().unwrap().to_string();
    assert_eq!(c.tasks_max.to_string(), default("tasks.max"));
    assert_eq!(c.batch_max_records.to_string(), default("batch.max.records"));
    assert_eq!(c.flush_interval.as_millis().to_string(), default("flush.interval.ms"));
    assert_eq!(c.limits.memory_bytes.to_string(), default("plugin.memory.max.bytes"));
    assert_eq!(c.limits.call_timeout.as_millis().to_string(), default("plugin.call.timeout.ms"));
    assert_eq!(c.errors.retry_timeout.unwrap().as_millis().to_string(), default("errors.retry.timeout"));
    assert_eq!(c.errors.retry_delay_max.as_millis().to_string(), default("errors.retry.delay.max.ms"));
    assert_eq!(c.errors.dlq_context_headers.to_string(), default("errors.deadletterqueue.context.headers.enable"));
    assert_eq!(c.grants.wasi.deterministic.to_string(), default("plugin.deterministic"));
    assert_eq!(c.errors.tolerance, Tolerance::None);
    assert_eq!(default("errors.tolerance"), "none");
}

#[test]
fn given_values_are_read() {
    let c = ConnectorConfig::parse(
        &config(&[
            ("tasks.max", "3"),
            ("batch.max.records", "7"),
            ("flush.interval.ms", "250"),
            ("plugin.memory.max.bytes", "1048576"),
            ("plugin.call.timeout.ms", "900"),
            ("plugin.deterministic", "true"),
            ("errors.retry.timeout", "-1"),
            ("errors.deadletterqueue.context.headers.enable", "false"),
            ("consumer.override.group.id", "mine"),
        ]),
        &Default::default(),
    )
    .unwrap();
    assert_eq!((c.tasks_max, c.batch_max_records), (3, 7));
    assert_eq!(c.flush_interval, Duration::from_millis(250));
    assert_eq!(c.limits.memory_bytes, 1 << 20);
    assert_eq!(c.limits.call_timeout, Duration::from_millis(900));
    assert!(c.grants.wasi.deterministic);
    assert_eq!(c.errors.retry_timeout, None);
    assert!(!c.errors.dlq_context_headers);
    assert_eq!(c.group_id, "mine");
}

#[test]
fn ranges_and_types_are_checked_for_every_key() {
    let problems = ConnectorConfig::parse(
        &config(&[
            ("batch.max.records", "0"),
            ("plugin.call.timeout.ms", "0"),
            ("plugin.memory.max.bytes", "-1"),
            ("plugin.deterministic", "yes"),
            ("consumer.override.group.protocol", "streams"),
            ("topics", " , "),
        ]),
        &Default::default(),
    )
    .unwrap_err();
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "batch.max.records",
            "consumer.override.group.protocol",
            "plugin.memory.max.bytes",
            "plugin.call.timeout.ms",
            "plugin.deterministic",
            "topics",
        ],
        "{problems:#?}"
    );
    assert_eq!(problems[5].message, "Invalid value ' , ' for configuration topics: names no topic");
}

/// Like `config`, with `topics` as given in `pairs` (or not at all).
fn config_without_topics(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut raw = config(pairs);
    if !pairs.iter().any(|(k, _)| *k == "topics") {
        raw.remove("topics");
    }
    raw
}

#[test]
fn transforms_are_read_in_connects_grammar_and_their_problems_reported() {
    let mut raw = BTreeMap::from([
        ("name".to_string(), "c".to_string()),
        ("connector.class".to_string(), "noop-sink".to_string()),
        ("topics".to_string(), "t".to_string()),
        ("transforms".to_string(), "".to_string()),
    ]);
    let parsed = ConnectorConfig::parse(&raw, &Default::default()).expect("empty, as Connect's default");
    assert!(parsed.transforms.is_empty());
    raw.insert("transforms".into(), "route".into());
    raw.insert("transforms.route.type".into(), "org.apache.kafka.connect.transforms.RegexRouter".into());
    raw.insert("transforms.route.regex".into(), "t".into());
    raw.insert("transforms.route.replacement".into(), "u".into());
    let parsed = ConnectorConfig::parse(&raw, &Default::default()).expect("a RegexRouter");
    assert_eq!(format!("{:?}", parsed.transforms), r#"["route=org.apache.kafka.connect.transforms.RegexRouter"]"#);
    raw.insert("predicates".into(), "isFoo".into());
    let keys: Vec<String> = problems_of(&raw).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, ["predicates.isFoo.type"]);
}

fn problems_of(raw: &BTreeMap<String, String>) -> Vec<(String, String)> {
    let problems = ConnectorConfig::parse(raw, &Default::default()).unwrap_err();
    problems.into_iter().map(|p| (p.key, p.message)).collect()
}

#[test]
fn exactly_one_of_topics_and_topics_regex() {
    let both_keys = |message: &str| {
        vec![("topics".to_string(), message.to_string()), ("topics.regex".to_string(), message.to_string())]
    };
    assert_eq!(problems_of(&config_without_topics(&[])), both_keys("Must configure one of topics or topics.regex"));
    assert_eq!(
        problems_of(&config(&[("topics.regex", "orders-.*")])),
        both_keys("topics and topics.regex are mutually exclusive options, but both are set.")
    );
    // Blank counts as not given, as in Connect.
    assert_eq!(
        problems_of(&config_without_topics(&[("topics", " "), ("topics.regex", "")])),
        both_keys("Must configure one of topics or topics.regex")
    );
    let by_regex = ConnectorConfig::parse(
        &config_without_topics(&[("topics", ""), ("topics.regex", "orders-.*")]),
        &Default::default(),
    )
    .unwrap();
    assert!(by_regex.topics.is_empty());
    assert_eq!(by_regex.topics_regex.as_deref(), Some("orders-.*"));
    let by_name = ConnectorConfig::parse(&config(&[]), &Default::default()).unwrap();
    assert!(by_name.topics_regex.is_none() && by_name.topics_pattern().is_none());
}

#[test]
fn topics_regex_matches_whole_names() {
    let c = ConnectorConfig::parse(
        &config_without_topics(&[("topics.regex", "orders|payments-[0-9]+")]),
        &Default::default(),
    )
    .unwrap();
    let pattern = c.topics_pattern().unwrap();
    for name in ["orders", "payments-7"] {
        assert!(pattern.is_match(name), "{name}");
    }
    for name in ["orders-eu", "old-orders", "payments-", "xpayments-7"] {
        assert!(!pattern.is_match(name), "{name}");
    }
}

#[test]
fn an_invalid_topics_regex_is_a_problem_of_its_key() {
    assert_eq!(
        problems_of(&config_without_topics(&[("topics.regex", "orders-(")])),
        [(
            "topics.regex".to_string(),
            "Invalid value 'orders-(' for configuration topics.regex: not a valid regular expression: unclosed \
             group"
                .to_string()
        )]
    );
}

#[test]
fn the_dead_letter_topic_must_not_match_topics_regex() {
    let raw = config_without_topics(&[
        ("topics.regex", "orders-.*"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", "orders-dlq"),
    ]);
    let problems = problems_of(&raw);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].0, "errors.deadletterqueue.topic.name");
    assert!(problems[0].1.contains("topics.regex matches it"), "{problems:?}");
    let mut elsewhere = raw.clone();
    elsewhere.insert("errors.deadletterqueue.topic.name".into(), "dlq-orders".into());
    assert!(ConnectorConfig::parse(&elsewhere, &Default::default()).is_ok());
}

#[test]
fn the_regex_refresh_defaults_to_thirty_seconds_and_follows_librdkafka() {
    let refresh = |value: Option<&str>| {
        let pairs: Vec<(&str, &str)> = value.map(|v| (REFRESH_KEY, v)).into_iter().collect();
        ConnectorConfig::parse(&config(&pairs), &Default::default()).map(|c| c.topics_refresh)
    };
    assert_eq!(refresh(None).unwrap(), Some(TOPICS_REGEX_REFRESH));
    assert_eq!(refresh(Some("500")).unwrap(), Some(Duration::from_millis(500)));
    assert_eq!(refresh(Some("-1")).unwrap(), None, "librdkafka's 'never'");
    assert_eq!(refresh(Some("0")).unwrap(), None);
    assert_eq!(refresh(Some("-2")).unwrap_err()[0].key, REFRESH_KEY);
    // A classic group's librdkafka gets it as it was given.
    let c = ConnectorConfig::parse(&config(&[(REFRESH_KEY, "500")]), &Default::default()).unwrap();
    assert!(c.clients.for_role(Role::Consumer).contains(&("topic.metadata.refresh.interval.ms".into(), "500".into())));
}

#[test]
fn a_grant_error_is_reported_under_its_key() {
    let problems = ConnectorConfig::parse(
        &config(&[("plugin.grant.fs.dirs", "relative/dir"), ("plugin.grant.env.A", "1")]),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].key, "plugin.grant.fs.dirs");
    assert!(problems[0].message.contains("absolute"), "{problems:#?}");

    // The table's type check and the grant's own say the same: once.
    let problems =
        ConnectorConfig::parse(&config(&[("plugin.grant.clock", "maybe")]), &Default::default()).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert_eq!(problems[0].key, "plugin.grant.clock");
}

#[test]
fn a_grant_error_naming_no_given_key_goes_under_plugin_grant() {
    let raw = config(&[("plugin.grant.env.A", "1")]);
    assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.AB: refused"), "plugin.grant");
    assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.A: refused"), "plugin.grant.env.A");
    let raw = config(&[("plugin.grant.env.A", "1"), ("plugin.grant.env.AB", "2")]);
    assert_eq!(grant_key_named_in(&raw, "plugin.grant.env.AB: refused"), "plugin.grant.env.AB");
}

#[test]
fn grant_keys_old_and_new_find_their_entries() {
    let keys = connector_keys();
    for (key, entry) in [
        ("plugin.grant.fs.logs.path", "plugin.grant.fs.<name>.path"),
        ("plugin.grant.fs.logs.read-only", "plugin.grant.fs.<name>.read-only"),
        ("plugin.grant.net.db.connect", "plugin.grant.net.<name>.connect"),
        ("plugin.grant.env.api-url.value", "plugin.grant.env.<name>.value"),
        ("plugin.grant.env.API_URL", "plugin.grant.env.<NAME>"),
        ("plugin.grant.fs.dirs", "plugin.grant.fs.dirs"),
        ("plugin.grant.net.connect", "plugin.grant.net.connect"),
        ("plugin.grant.net.db.token", "plugin.grant.<capability>.<name>.token"),
        ("consumer.override.fetch.min.bytes", "consumer.override.*"),
        ("consumer.override.group.id", "consumer.override.group.id"),
    ] {
        assert_eq!(keys.find(key).map(|k| k.name()), Some(entry), "{key}");
    }
    assert!(keys.find("plugin.grant.fs.My_Dir.path").is_none(), "a grant's name is [a-z0-9-]+");
    // Set on the connector's share group, not a client setting.
    assert_eq!(keys.find("share.delivery.count.limit").map(|k| k.group()), Some("Share group"));
}

/// The `share.*` keys given become the share group's configs, checked by
/// the table; a classic group has no share group to set them on.
#[test]
fn share_group_keys_are_the_groups_configs_and_refused_for_a_classic_group() {
    let share = ("consumer.override.group.protocol", "share");
    let asked = [("share.record.lock.duration.ms", "20000"), ("share.auto.offset.reset", "by_duration:PT1H")];
    let parsed = ConnectorConfig::parse(&config(&[share, asked[0], asked[1]]), &WorkerDefaults::default()).unwrap();
    let expected: BTreeMap<String, String> = asked.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    assert_eq!(parsed.share_group_configs, expected);
    assert!(
        ConnectorConfig::parse(&config(&[share]), &WorkerDefaults::default()).unwrap().share_group_configs.is_empty()
    );

    // Under the default, a classic group.
    assert_eq!(problems_of(&config(&[asked[0]])).iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), [asked[0].0]);
    for (key, bad) in [
        ("share.auto.offset.reset", "yesterday"),
        ("share.auto.offset.reset", "by_duration:1h"),
        ("share.delivery.count.limit", "1"),
        ("share.isolation.level", "serializable"),
        ("share.record.lock.duration.ms", "999"),
    ] {
        let problems = problems_of(&config(&[share, (key, bad)]));
        assert_eq!(problems.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), [key], "{key}={bad}");
    }
}

#[test]
fn grant_credentials_are_secret_and_nothing_else_is() {
    let keys = connector_keys();
    for key in [
        "plugin.grant.net.db.password",
        "plugin.grant.s3.bucket.secret.access.key",
        "plugin.grant.http.api.token",
        "plugin.grant.net.db.secret",
        "plugin.grant.object-store.archive.secret.access.key",
        "plugin.grant.sql.db.password",
        "plugin.grant.kafka.target.sasl.password",
        "plugin.grant.kafka.target.ssl.key.password",
        "consumer.override.sasl.password",
        "producer.override.ssl.key.password",
        "admin.override.sasl.jaas.config",
    ] {
        assert!(keys.is_secret(key), "{key}");
    }
    let secret_entries: Vec<&str> = keys.keys().iter().filter(|k| k.is_secret()).map(|k| k.name()).collect();
    // Eight of grants, three per kind of Kafka client, a registry's
    // credentials per converter (key, value).
    assert_eq!(secret_entries.len(), 19, "{secret_entries:?}");
    for key in [
        "plugin.grant.fs.logs.path",
        "plugin.grant.env.TOKEN",
        "plugin.grant.s3.bucket.access.key",
        "plugin.grant.object-store.archive.access.key.id",
        "plugin.grant.sql.db.user",
        "plugin.grant.sql.db.url",
        "plugin.grant.kafka.target.sasl.username",
        "plugin.grant.kafka.target.bootstrap.servers",
        "name",
    ] {
        assert!(!keys.is_secret(key), "{key}");
    }
}

/// The README's table is `connector_keys().markdown_table()`, verbatim.
#[test]
fn readme_documents_the_table() {
    spillway_config::assert_readme_documents(connector_keys(), "connector-keys", "config-keys");
}

/// Connect's converters whose output the SDK reads as it is are accepted by
/// their class names, and AvroConverter, which the host runs, with its
/// registry; the other converters of Confluent's wire format are refused,
/// saying why, rather than let their bytes reach a sink that reads JSON.
#[test]
fn converters_spillway_reads_or_runs_pass_and_the_others_are_refused() {
    let json = "org.apache.kafka.connect.json.JsonConverter";
    let avro = "io.confluent.connect.avro.AvroConverter";
    let ok = config(&[
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("value.converter", json),
        ("value.converter.schemas.enable", "false"),
        ("header.converter", "org.apache.kafka.connect.storage.SimpleHeaderConverter"),
    ]);
    assert_eq!(ConnectorConfig::parse(&ok, &Default::default()).unwrap().converters, Converters::default());
    let with_registry = config(&[
        ("value.converter", avro),
        ("value.converter.schema.registry.url", "https://registry:8081/apis/ccompat/v7"),
        ("value.converter.basic.auth.credentials.source", "USER_INFO"),
        ("value.converter.basic.auth.user.info", "reader:s3cret"),
    ]);
    let parsed = ConnectorConfig::parse(&with_registry, &Default::default()).unwrap();
    let registry =
        RegistryConfig { url: "https://registry:8081/apis/ccompat/v7".into(), user_info: Some("reader:s3cret".into()) };
    assert_eq!(parsed.converters, Converters { key: None, value: Some(registry) });
    assert!(connector_keys().is_secret("value.converter.basic.auth.user.info"), "credentials stay in the host");

    let problems = problems_of(&config(&[
        ("value.converter", "io.confluent.connect.protobuf.ProtobufConverter"),
        ("key.converter", avro),
        ("header.converter", avro),
    ]));
    let mut problems = problems;
    problems.sort();
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["header.converter", "key.converter.schema.registry.url", "value.converter"], "{problems:#?}");
    assert!(problems[0].1.contains("reads no AvroConverter"), "{problems:#?}");
    assert!(problems[1].1.contains("give its URL"), "{problems:#?}");
    assert!(problems[2].1.contains("reads no ProtobufConverter") && problems[2].1.contains(avro), "{problems:#?}");
    let problems = problems_of(&config(&[
        ("value.converter", avro),
        ("value.converter.schema.registry.url", "https://reader:s3cret@registry:8081"),
        ("key.converter", avro),
        ("key.converter.schema.registry.url", "file:///etc/passwd"),
    ]));
    assert!(problems.iter().all(|(_, m)| !m.contains("s3cret")), "a refusal shows no credentials: {problems:#?}");
    let mut problems = problems;
    problems.sort();
    let keys: Vec<&str> = problems.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["key.converter.schema.registry.url", "value.converter.schema.registry.url"], "{problems:#?}");
    // No colon: no credentials would be sent, and the registry's 401 would
    // be all the user saw.
    let problems = problems_of(&config(&[
        ("value.converter", avro),
        ("value.converter.schema.registry.url", "https://registry:8081"),
        ("value.converter.basic.auth.user.info", "readers3cret"),
    ]));
    assert_eq!(problems.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["value.converter.basic.auth.user.info"]);
    assert!(!problems[0].1.contains("readers3cret"), "{problems:#?}");
}

#[test]
fn a_key_whose_name_says_secret_is_treated_as_one() {
    use crate::looks_secret;
    for key in [
        "connection.password",
        "aws.secret.access.key",
        "target.cluster.sasl.jaas.config",
        "s3.sse.customer.key",
        "api.token",
        "ssl.key.password",
    ] {
        assert!(looks_secret(key), "{key}");
    }
    for key in ["connection.user", "password.policy", "s3.bucket.name", "topics", "aws.access.key.id", "tokens.max"] {
        assert!(!looks_secret(key), "{key}");
    }
}
