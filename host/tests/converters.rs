//! Connect's AvroConverter in the host, against a real Confluent-compatible
//! Schema Registry (the one `SPILLWAY_TEST_SCHEMA_REGISTRY_URL` names, or
//! Apicurio Registry from Maven Central, `scripts/registry.sh`), with records
//! written by confluent-kafka's own AvroSerializer
//! (`tests/support/avro-produce.py`), through the SQL sink into PostgreSQL:
//! every logical type lands as its column type and value, a schema evolved
//! mid-stream adds its column, and a record whose schema id the registry
//! does not know goes to the dead-letter queue at stage VALUE_CONVERTER. No
//! fault is injected: each record is one row.

mod support;

use spillway::capabilities::sql::bindings::spillway::sql::databases::Value;
use spillway::herder::{ConfigMap, State};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use support::cluster::read_all;
use support::databases::{Reader, postgres};
use support::herder::{start_herder, wait_running};
use support::registry::{Registry, produce_avro};
use support::{Broker, assert_each_exactly_once};

/// A name for a topic and its table: letters, digits and underscores.
fn name(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

/// 2024-01-01, where avro-produce.py's dates and timestamps start.
const DAY0: i32 = 19_723;
const SECOND0: i64 = 1_704_067_200;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn avro_records_reach_postgresql_typed_across_a_schema_change_and_an_unknown_id_goes_to_the_dlq() {
    let broker = Broker::start_or_env();
    let registry = Registry::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let (topic, dlq) = (name("avro"), name("avro_dlq"));
    let grant = postgres().grant("db");
    let mut config: ConfigMap = [
        ("name", "avro"),
        ("connector.class", "sql-sink"),
        ("topics", &topic),
        ("tasks.max", "1"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
        ("value.converter", "io.confluent.connect.avro.AvroConverter"),
        ("value.converter.schema.registry.url", &registry.url),
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", &dlq),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    config.extend(grant.clone());
    let herder = start_herder(&broker, dir.path()).await;
    herder.create("avro".into(), config, None).await.unwrap();
    wait_running(&herder, "avro", 1).await;

    // Version 1 of the schema, three records naming a schema id the
    // registry never gave, then version 2 (one more optional field).
    let produce = |args: Vec<String>| {
        let (bootstrap, url, topic) = (broker.bootstrap.clone(), registry.url.clone(), topic.clone());
        tokio::task::spawn_blocking(move || {
            let (count, rest) = args.split_first().unwrap();
            let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
            produce_avro(&bootstrap, &url, &topic, count.parse().unwrap(), &rest)
        })
    };
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let v1 = produce(args(&["30", "--key-prefix", "v1"])).await.unwrap();
    let unknown = produce(args(&["0", "--raw-unknown-id", "3", "--key-prefix", "unknown"])).await.unwrap();
    let v2 = produce(args(&["20", "--schema", "v2", "--first", "30", "--key-prefix", "v2"])).await.unwrap();
    assert_eq!((v1.len(), unknown.len(), v2.len()), (30, 3, 20));

    let mut reader = Reader::open(&grant).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    while reader.count(&topic).await.unwrap_or(0) < 50 {
        let status = herder.status("avro".into()).await.unwrap();
        if let Some(failed) = status.tasks.iter().find(|t| t.state == State::Failed) {
            panic!("the task failed: {:?}", failed.trace);
        }
        assert!(Instant::now() < deadline, "{:?} rows of 50", reader.count(&topic).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let columns = ["id", "name", "note", "amount", "day", "at", "at_time", "ok", "ratio", "tags", "extra"];
    let list: Vec<String> = columns.iter().map(|c| reader.quote(c)).collect();
    let rows = reader.query(&format!("SELECT {} FROM {}", list.join(", "), reader.quote(&topic))).await;
    let ids: Vec<String> = rows.iter().map(|row| format!("{:?}", row[0])).collect();
    let expected: Vec<String> = (0..50).map(|i| format!("{:?}", Value::Int(i))).collect();
    assert_each_exactly_once(&ids, &expected, "Avro records, v1 and v2, as rows");
    for row in &rows {
        let Value::Int(i) = row[0] else { unreachable!() };
        let by_column: BTreeMap<&str, &Value> = columns.iter().copied().zip(row).collect();
        let amount = match by_column["amount"] {
            Value::Decimal(d) => d.parse::<f64>().unwrap(),
            other => panic!("amount of {i}: {other:?}, not a decimal"),
        };
        let tags = match by_column["tags"] {
            Value::Json(json) => serde_json::from_str::<serde_json::Value>(json).unwrap(),
            other => panic!("tags of {i}: {other:?}, not JSON"),
        };
        let note = if i % 2 == 0 { Value::Null } else { Value::Text(format!("note-{i}")) };
        let extra = if i < 30 { Value::Null } else { Value::Text(format!("x{i}")) };
        assert_eq!(
            (by_column["name"], by_column["note"], by_column["day"], by_column["at"], by_column["at_time"]),
            (
                &Value::Text(format!("name-{i}")),
                &note,
                &Value::Date(DAY0 + i as i32),
                &Value::Timestamp((SECOND0 + i) * 1_000_000),
                &Value::Time(i * 1_000_000),
            ),
            "row {i}"
        );
        assert_eq!(
            (by_column["ok"], by_column["ratio"]),
            (&Value::Boolean(i % 2 == 0), &Value::Double(i as f64 / 4.0))
        );
        assert_eq!(
            (amount, tags, by_column["extra"]),
            ((i * 100 + 5) as f64 / 100.0, serde_json::json!([format!("t{i}")]), &extra)
        );
    }
    // The table was created from the Avro schema, as Connect's AvroData maps it.
    let described = reader.describe(&topic).await.unwrap();
    let types: BTreeMap<String, String> = described.into_iter().map(|c| (c.name, c.data_type.to_lowercase())).collect();
    println!("PostgreSQL columns from the Avro schema: {types:?}");
    for (column, sql_type) in
        [("amount", "numeric"), ("day", "date"), ("at", "timestamp"), ("at_time", "time"), ("id", "bigint")]
    {
        assert!(types[column].starts_with(sql_type), "{column}: {} is not {sql_type}", types[column]);
    }

    // The unknown schema id: the dead-letter queue, stage VALUE_CONVERTER.
    let deadline = Instant::now() + Duration::from_secs(30);
    while read_all(&broker.bootstrap, &dlq, "read_uncommitted").len() < unknown.len() {
        assert!(Instant::now() < deadline, "the records of an unknown schema id never reached the DLQ");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A moment more, so that a fourth would show.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut dead = Vec::new();
    for record in read_all(&broker.bootstrap, &dlq, "read_uncommitted") {
        let header = |name: &str| {
            let value = record.headers.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.clone());
            String::from_utf8_lossy(&value.unwrap_or_default()).to_string()
        };
        let (stage, message) = (header("__connect.errors.stage"), header("__connect.errors.exception.message"));
        assert_eq!(stage, "VALUE_CONVERTER", "{message}");
        assert!(message.contains("999999"), "{message}");
        dead.push(record.key);
    }
    assert_each_exactly_once(&dead, &unknown, "records of an unknown schema id, dead-lettered");
    println!("on {} with the schema registry at {}", broker.description, registry.url);
    herder.shutdown().await.unwrap();
}
