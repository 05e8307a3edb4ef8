//! Kafka Connect users' configs, as the connectors' documentation writes
//! them (with JSON, not Avro), run unchanged: Confluent's S3 sink against
//! the S3-compatible server, Confluent's and Debezium's JDBC sinks against
//! PostgreSQL, read back bypassing Spillway; MirrorMaker 2's source
//! connector validated. Each Connect class names the plugin that declares it,
//! and each key that names a target gives a grant, which the worker's policy
//! checks as it checks an explicit one. The worker runs at its defaults
//! (a classic consumer group), as Connect's does; the broker is
//! `SPILLWAY_TEST_BOOTSTRAP`, or the mock.

mod support;

use futures::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};
use spillway::capabilities::sql::bindings::spillway::sql::databases::Value as SqlValue;
use spillway::connector::DerivedKey;
use spillway::herder::{ConfigInfos, ConfigMap, Herder, HerderError, State};
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};
use support::databases::{Reader, postgres};
use support::herder::{plugin_dir, test_runtime, worker_config_with};
use support::{Broker, Produce, assert_each_exactly_once, produce_records, s3_server, unique};

fn config(pairs: &[(&str, &str)]) -> ConfigMap {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// A worker at Connect's defaults (a classic group), with `extra` worker keys.
async fn connect_worker(broker: &Broker, dir: &Path, extra: &[(&str, &str)]) -> Herder {
    let mut keys = vec![("consumer.group.protocol", "classic")];
    keys.extend_from_slice(extra);
    let worker = worker_config_with(&broker.bootstrap, &support::worker_state_file(dir), &plugin_dir(), &keys);
    Herder::start(worker, test_runtime()).await.unwrap()
}

fn errors(infos: &ConfigInfos) -> Vec<(String, Vec<String>)> {
    infos
        .configs
        .iter()
        .filter(|c| !c.value.errors.is_empty())
        .map(|c| (c.value.name.clone(), c.value.errors.clone()))
        .collect()
}

/// Validates as `PUT /connector-plugins/{class}/config/validate` does, and
/// asserts that nothing is wrong and nothing is ignored.
async fn assert_validates_clean(herder: &Herder, config: &ConfigMap) -> ConfigInfos {
    let class = config["connector.class"].clone();
    let infos = herder.validate(class, config.clone()).await.unwrap();
    assert_eq!(infos.error_count, 0, "{:?}", errors(&infos));
    assert!(infos.warnings.is_empty(), "{:?}", infos.warnings);
    infos
}

/// `n` JSON records in partition 0, keyed `<topic>-<i>`.
fn records(topic: &str, n: usize, value: impl Fn(usize, &str) -> Value) -> (Vec<String>, Vec<Produce>) {
    let keys: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    let records = keys
        .iter()
        .enumerate()
        .map(|(i, key)| Produce {
            partition: Some(0),
            key: key.clone(),
            value: value(i, key).to_string().into_bytes(),
            timestamp: None,
        })
        .collect();
    (keys, records)
}

async fn wait_for<T>(what: &str, herder: &Herder, name: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Some(done) = check().await {
            return done;
        }
        let status = herder.status(name.into()).await.unwrap();
        if let Some(failed) = status.tasks.iter().find(|t| t.state == State::Failed) {
            panic!("{name}: task failed: {:?}", failed.trace);
        }
        assert!(Instant::now() < deadline, "{name}: {what} never happened: {status:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Confluent's quick-start config for its S3 sink, with JSON instead of
/// Avro and an S3-compatible store (`store.url`), as written: the class,
/// the bucket, region and credentials, `s3.compression.type`,
/// `storage.class`, `schema.compatibility`, Connect's converters.
fn confluent_s3(name: &str, topic: &str, bucket: &str) -> ConfigMap {
    let s3 = s3_server();
    config(&[
        ("name", name),
        ("connector.class", "io.confluent.connect.s3.S3SinkConnector"),
        ("tasks.max", "1"),
        ("topics", topic),
        ("s3.region", "us-east-1"),
        ("s3.bucket.name", bucket),
        ("store.url", &s3.endpoint),
        ("aws.access.key.id", &s3.access_key),
        ("aws.secret.access.key", &s3.secret_key),
        ("s3.part.size", "5242880"),
        ("flush.size", "3"),
        ("storage.class", "io.confluent.connect.s3.storage.S3Storage"),
        ("format.class", "io.confluent.connect.s3.format.json.JsonFormat"),
        ("partitioner.class", "io.confluent.connect.storage.partitioner.DefaultPartitioner"),
        ("schema.compatibility", "NONE"),
        ("s3.compression.type", "gzip"),
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
        ("value.converter.schemas.enable", "false"),
    ])
}

/// The S3 sink's quick start as written: 0 errors, nothing ignored, and 9
/// records in 3 gzip objects of 3 (flush.size) under Confluent's layout,
/// each record exactly once; the grant it derived shows in the status, and
/// its secret nowhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn confluents_s3_sink_quick_start_runs_as_written() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = connect_worker(&broker, dir.path(), &[]).await;
    let (name, topic, bucket) = (unique("confluent-s3"), unique("orders"), s3.new_bucket("connect"));
    let (keys, produced) = records(&topic, 9, |i, key| json!({"id": key, "amount": i}));
    produce_records(&broker.bootstrap, &topic, &produced).await;

    let config = confluent_s3(&name, &topic, &bucket);
    let infos = assert_validates_clean(&herder, &config).await;
    let shown = |key: &str| infos.configs.iter().find(|c| c.value.name == key).and_then(|c| c.value.value.clone());
    assert_eq!(shown("s3.compression.type").as_deref(), Some("gzip"), "the sink declares Confluent's key");
    let secret = &s3.secret_key;
    let answer = serde_json::to_string(&infos).unwrap();
    assert!(!answer.contains(&format!("\"{secret}\"")), "validation shows the secret: {answer}");

    herder.create(name.clone(), config, None).await.unwrap();
    let store = s3.bucket(&bucket);
    let prefix = format!("topics/{topic}/partition=0/");
    let objects = wait_for("three objects", &herder, &name, async || {
        let listed: Vec<_> = store.list(Some(&ObjectPath::from(prefix.as_str()))).try_collect().await.unwrap();
        let names: Vec<String> = listed.iter().map(|m| m.location.to_string()).filter(|n| !n.contains("/_")).collect();
        (names.len() >= 3).then_some(names)
    })
    .await;
    let mut ids = Vec::new();
    for object in &objects {
        assert!(object.starts_with(&format!("{prefix}{topic}+0+")) && object.ends_with(".json.gz"), "{object}");
        let bytes = store.get(&ObjectPath::from(object.as_str())).await.unwrap().bytes().await.unwrap();
        let mut text = String::new();
        flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_string(&mut text).unwrap();
        assert_eq!(text.lines().count(), 3, "flush.size=3: {object}");
        ids.extend(text.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].as_str().unwrap().to_string()));
    }
    assert_each_exactly_once(&ids, &keys, "Confluent's S3 quick start");

    let shown = herder.info(name.clone()).await.unwrap().config;
    assert_eq!(shown["aws.secret.access.key"], "[hidden]", "GET /connectors/{name} shows the secret");
    assert_eq!(shown["s3.bucket.name"], bucket);
    let status = herder.status(name.clone()).await.unwrap();
    let derived =
        |key: &str, from: &str| DerivedKey { key: format!("plugin.grant.object-store.s3.{key}"), from: from.into() };
    for expected in [
        derived("url", "s3.bucket.name"),
        derived("region", "s3.region"),
        derived("endpoint", "store.url"),
        derived("secret.access.key", "aws.secret.access.key"),
    ] {
        assert!(
            status.connector.derived_grants.contains(&expected),
            "{expected:?} in {:?}",
            status.connector.derived_grants
        );
    }
    herder.shutdown().await.unwrap();
}

/// The same key misspelt is named with the spelling that is read; a key
/// that reaches outside the worker's policy is refused on the key the user
/// wrote, as the explicit grant it gives is.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_misspelt_connect_key_warns_and_a_derived_grant_outside_the_policy_is_refused() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let policy = [("policy.object-store.urls", "s3://allowed-bucket"), ("policy.sql.urls", "postgres://127.0.0.1:1")];
    let herder = connect_worker(&broker, dir.path(), &policy).await;
    let name = unique("policy");

    let mut misspelt = confluent_s3(&name, "orders", "allowed-bucket");
    let value = misspelt.remove("s3.compression.type").unwrap();
    misspelt.insert("s3.compresion.type".into(), value);
    let infos = herder.validate("S3SinkConnector".into(), misspelt).await.unwrap();
    assert!(
        infos
            .warnings
            .iter()
            .any(|w| w.starts_with("s3.compresion.type:") && w.ends_with("did you mean s3.compression.type?")),
        "{:?}",
        infos.warnings
    );

    // Derived and explicit alike: refused, each on the key given.
    let derived = confluent_s3(&name, "orders", "another-bucket");
    let infos = herder.validate("io.confluent.connect.s3.S3SinkConnector".into(), derived.clone()).await.unwrap();
    let errs = errors(&infos);
    let (key, messages) = errs.iter().find(|(key, _)| key == "s3.bucket.name").unwrap_or_else(|| panic!("{errs:?}"));
    assert!(
        messages[0].contains("as plugin.grant.object-store.s3.url") && messages[0].contains("another-bucket"),
        "{key}: {messages:?}"
    );
    let mut explicit: ConfigMap = derived.clone();
    for key in ["s3.bucket.name", "s3.region", "store.url", "aws.access.key.id", "aws.secret.access.key"] {
        explicit.remove(key);
    }
    explicit.insert("connector.class".into(), "s3-sink".into());
    explicit.insert("plugin.grant.object-store.s3.url".into(), "s3://another-bucket".into());
    let explicit_infos = herder.validate("s3-sink".into(), explicit).await.unwrap();
    let explicit_errors = errors(&explicit_infos);
    let explicit_message = &explicit_errors.iter().find(|(k, _)| k == "plugin.grant.object-store.s3.url").unwrap().1[0];
    assert_eq!(messages[0], format!("as plugin.grant.object-store.s3.url: {explicit_message}"));
    match herder.create(name.clone(), derived, None).await {
        Err(HerderError::BadRequest(message)) => assert!(message.contains("s3.bucket.name"), "{message}"),
        other => panic!("created outside the policy: {other:?}"),
    }

    let jdbc = config(&[
        ("name", &name),
        ("connector.class", "io.confluent.connect.jdbc.JdbcSinkConnector"),
        ("topics", "orders"),
        ("connection.url", "jdbc:postgresql://127.0.0.1:5432/sink"),
        ("connection.user", "app"),
        ("connection.password", "a-secret-password"),
    ]);
    let infos = herder.validate("JdbcSinkConnector".into(), jdbc).await.unwrap();
    let errs = errors(&infos);
    assert!(
        errs.iter().any(|(key, m)| key == "connection.url" && m[0].contains("as plugin.grant.sql.db.url")),
        "{errs:?}"
    );
    let answer = serde_json::to_string(&infos).unwrap();
    assert!(!answer.contains("a-secret-password"), "validation shows the password: {answer}");
    herder.shutdown().await.unwrap();
}

/// Confluent's JDBC sink's example and Debezium's, each as written (a JDBC
/// URL, the user and password keys each names them by, upserts by the
/// value's id, tables created): every record exactly one row.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn confluents_and_debeziums_jdbc_sink_examples_run_as_written() {
    let (broker, db) = (Broker::start_or_env(), postgres());
    let dir = tempfile::tempdir().unwrap();
    let herder = connect_worker(&broker, dir.path(), &[]).await;
    let url = url::Url::parse(&db.url).unwrap();
    let jdbc_url =
        format!("jdbc:postgresql://{}:{}{}", url.host_str().unwrap(), url.port().unwrap_or(5432), url.path());
    let user = url.username().to_string();
    let schema = json!({"type": "struct", "name": "order", "fields": [
        {"field": "id", "type": "string", "optional": false},
        {"field": "amount", "type": "int64", "optional": false},
    ]});
    let mut reader = Reader::open(&db.grant("check")).await;
    for (anchor, class, user_key, extra) in [
        (
            "confluent",
            "io.confluent.connect.jdbc.JdbcSinkConnector",
            "connection.user",
            vec![("pk.mode", "record_value"), ("pk.fields", "id"), ("auto.create", "true"), ("max.retries", "10")],
        ),
        (
            "debezium",
            "io.debezium.connector.jdbc.JdbcSinkConnector",
            "connection.username",
            vec![("primary.key.mode", "record_value"), ("primary.key.fields", "id"), ("schema.evolution", "basic")],
        ),
    ] {
        let topic = format!("{anchor}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
        let name = unique(anchor);
        let (keys, produced) =
            records(&topic, 20, |i, key| json!({"schema": schema, "payload": {"id": key, "amount": i}}));
        produce_records(&broker.bootstrap, &topic, &produced).await;
        let mut config = config(&[
            ("name", &name),
            ("connector.class", class),
            ("tasks.max", "1"),
            ("topics", &topic),
            ("connection.url", &jdbc_url),
            (user_key, &user),
            ("connection.password", &db.password),
            ("insert.mode", "upsert"),
            ("table.name.format", "${topic}"),
            ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
            ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
            ("value.converter.schemas.enable", "true"),
        ]);
        config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        assert_validates_clean(&herder, &config).await;
        herder.create(name.clone(), config, None).await.unwrap();
        let quoted = reader.quote(&topic);
        wait_for("20 rows", &herder, &name, async || (reader.count(&topic).await? >= 20).then_some(())).await;
        // A duplicate still on its way would show by now.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rows = reader.query(&format!("SELECT id FROM {quoted}")).await;
        let ids: Vec<String> = rows
            .iter()
            .map(|row| match &row[0] {
                SqlValue::Text(id) => id.clone(),
                other => panic!("{anchor}: an id of {other:?}"),
            })
            .collect();
        assert_each_exactly_once(&ids, &keys, anchor);
        let shown = herder.info(name.clone()).await.unwrap().config;
        assert_eq!(shown["connection.password"], "[hidden]", "{anchor}: GET /connectors/{name} shows the password");
        assert_eq!(shown[user_key], user);
        let status = herder.status(name.clone()).await.unwrap();
        let from_user = DerivedKey { key: "plugin.grant.sql.db.user".into(), from: user_key.into() };
        assert!(
            status.connector.derived_grants.contains(&from_user),
            "{anchor}: {:?}",
            status.connector.derived_grants
        );
    }
    herder.shutdown().await.unwrap();
}

/// MirrorMaker 2's source connector: its class names the mirror, the target
/// cluster's keys give the Kafka grant, and a source cluster other than the
/// worker's own is refused (the mirror consumes through its worker).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mirrormakers_source_connector_config_validates_on_the_workers_own_cluster_only() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let herder = connect_worker(&broker, dir.path(), &[]).await;
    let name = unique("mm2");
    let mm2 = |source: &str| {
        config(&[
            ("name", name.as_str()),
            ("connector.class", "org.apache.kafka.connect.mirror.MirrorSourceConnector"),
            ("topics", "orders"),
            ("source.cluster.alias", "primary"),
            ("target.cluster.alias", "backup"),
            ("source.cluster.bootstrap.servers", source),
            ("target.cluster.bootstrap.servers", &broker.bootstrap),
        ])
    };
    assert_validates_clean(&herder, &mm2(&broker.bootstrap)).await;
    let infos = herder.validate("MirrorSourceConnector".into(), mm2("elsewhere:9092")).await.unwrap();
    let errs = errors(&infos);
    assert!(
        errs.iter().any(|(key, m)| key == "source.cluster.bootstrap.servers" && m[0].contains("through its worker")),
        "{errs:?}"
    );
    herder.shutdown().await.unwrap();
}

/// `spillway connectors import` against a running worker: Confluent's S3
/// quick start as a standalone worker's `.properties` file, each key shown
/// with its fate, then created with `--apply` and running; a config with a
/// transform's key Spillway does not read is refused, naming the key, and
/// nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn import_shows_each_keys_fate_and_applies_a_connect_properties_file() {
    use spillway::cli::{ClientArgs, ConnectorsCommand as C, ErrorKind, Output, connectors};
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let worker = support::worker::Worker::start(&broker.bootstrap, dir.path(), "text", "worker.log").await;
    let args = ClientArgs::new(&worker.url, Output::Table);
    let (name, topic, bucket) = (unique("imported"), unique("orders"), s3.new_bucket("import"));
    let properties = |config: &ConfigMap| {
        let lines: Vec<String> = config.iter().map(|(k, v)| format!("{k}={}", v.replace(':', "\\:"))).collect();
        format!("# Confluent's S3 sink quick start\n{}\n", lines.join("\n"))
    };
    let file = dir.path().join("s3-sink.properties");
    std::fs::write(&file, properties(&confluent_s3(&name, &topic, &bucket))).unwrap();

    let report = connectors(&args, C::Import { file: file.clone(), apply: false }).await.unwrap();
    let row =
        |key: &str| report.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_default().to_string();
    assert!(row("s3.bucket.name").contains("gives plugin.grant.object-store.s3.url"), "{report}");
    assert!(row("aws.secret.access.key").contains("gives plugin.grant.object-store.s3.secret.access.key"), "{report}");
    assert!(row("flush.size").contains("read by the plugin"), "{report}");
    assert!(row("topics").contains("read by Spillway"), "{report}");
    assert!(!report.contains(&format!(" {} ", s3.secret_key)), "the report shows the secret: {report}");
    let (status, _) = worker.call(reqwest::Method::GET, &format!("/connectors/{name}"), Value::Null).await;
    assert_eq!(status, 404, "import without --apply created the connector");

    let report = connectors(&args, C::Import { file, apply: true }).await.unwrap();
    assert!(report.ends_with(&format!("created connector {name} (1 task(s))\n")), "{report}");
    worker.wait_running(&name, 1).await;

    let mut transformed = confluent_s3(&unique("transformed"), &topic, &bucket);
    // Debezium's ExtractNewRecordState runs; a key of it Spillway does not
    // read is refused, not passed over.
    transformed.insert("transforms".into(), "unwrap".into());
    transformed.insert("transforms.unwrap.type".into(), "io.debezium.transforms.ExtractNewRecordState".into());
    transformed.insert("transforms.unwrap.drop.fields.header.name".into(), "dropped".into());
    let file = dir.path().join("transformed.properties");
    std::fs::write(&file, properties(&transformed)).unwrap();
    let e = connectors(&args, C::Import { file, apply: true }).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Invalid, "{e}");
    let report = e.output.unwrap_or_default();
    let row = |key: &str| report.lines().find(|l| l.split_whitespace().next() == Some(key)).unwrap_or_default();
    assert!(row("transforms").contains("read by Spillway (Transforms)"), "{report}");
    let unread = row("transforms.unwrap.drop.fields.header.name");
    assert!(unread.contains("refused: io.debezium.transforms.ExtractNewRecordState has no key"), "{report}");
    let (status, _) =
        worker.call(reqwest::Method::GET, &format!("/connectors/{}", transformed["name"]), Value::Null).await;
    assert_eq!(status, 404, "a refused import created the connector");
}
