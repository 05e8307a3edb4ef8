//! Connect's transforms in the host: a Debezium change stream (creates,
//! updates, deletes each followed by its tombstone), as Debezium's
//! PostgreSQL connector writes it with JsonConverter, applied to PostgreSQL
//! by the SQL sink through ExtractNewRecordState and InsertField under a
//! classic consumer group: upserts and deletes by key. Records a transform
//! cannot read go to the dead-letter queue at stage TRANSFORMATION, as they
//! were consumed. No fault is injected: each record is put once.

mod support;

use serde_json::{Value, json};
use spillway::herder::{ConfigMap, State};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use support::cluster::read_all;
use support::databases::{Reader, postgres};
use support::herder::{start_herder, wait_running};
use support::{Broker, Produce, produce_records};

fn name(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

/// The row's schema, as Debezium names it.
fn row_schema() -> Value {
    json!({"type": "struct", "optional": true, "name": "dbserver1.inventory.customers.Value", "fields": [
        {"field": "id", "type": "int32", "optional": false},
        {"field": "email", "type": "string", "optional": true}]})
}

/// A change event's key and value, as JsonConverter (schemas.enable) writes them.
fn change(id: i32, op: &str, before: Option<&str>, after: Option<&str>) -> Produce {
    let row = |email: Option<&str>| email.map(|e| json!({"id": id, "email": e}));
    let field = |name: &str, mut schema: Value| {
        schema["field"] = json!(name);
        schema
    };
    let source = json!({"type": "struct", "optional": false, "name": "io.debezium.connector.postgresql.Source",
        "fields": [{"field": "table", "type": "string", "optional": true}, {"field": "lsn", "type": "int64", "optional": true}]});
    let value = json!({
        "schema": {"type": "struct", "optional": false, "name": "dbserver1.inventory.customers.Envelope", "fields": [
            field("before", row_schema()), field("after", row_schema()), field("source", source),
            {"field": "op", "type": "string", "optional": false}, {"field": "ts_ms", "type": "int64", "optional": true}]},
        "payload": {"before": row(before), "after": row(after), "source": {"table": "customers", "lsn": id}, "op": op, "ts_ms": 1}
    });
    Produce { partition: None, key: key(id), value: value.to_string().into_bytes(), timestamp: None }
}

fn key(id: i32) -> String {
    json!({"schema": {"type": "struct", "optional": false, "name": "dbserver1.inventory.customers.Key",
        "fields": [{"field": "id", "type": "int32", "optional": false}]}, "payload": {"id": id}})
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_debezium_change_stream_is_unwrapped_into_postgresql_upserts_and_deletes() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let (topic, dlq) = (name("customers"), name("customers_dlq"));
    let grant = postgres().grant("db");
    let mut config: ConfigMap = [
        ("name", "cdc"),
        ("connector.class", "sql-sink"),
        ("topics", &topic),
        ("consumer.override.group.protocol", "classic"),
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("delete.enabled", "true"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
        ("transforms", "unwrap,source"),
        ("transforms.unwrap.type", "io.debezium.transforms.ExtractNewRecordState"),
        ("transforms.unwrap.add.fields", "op"),
        ("transforms.source.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
        ("transforms.source.static.field", "source_system"),
        ("transforms.source.static.value", "debezium"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", &dlq),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    config.extend(grant.clone());
    let herder = start_herder(&broker, dir.path()).await;
    herder.create("cdc".into(), config, None).await.unwrap();
    wait_running(&herder, "cdc", 1).await;

    // 20 rows created, 8 updated, 4 deleted (each delete followed by its
    // tombstone), and 3 records that are not JSON, which InsertField cannot read.
    let email = |id: i32, round: &str| format!("{round}-{id}@example.com");
    let creates: Vec<Produce> = (0..20).map(|id| change(id, "c", None, Some(&email(id, "first")))).collect();
    let updates: Vec<Produce> =
        (0..8).map(|id| change(id, "u", Some(&email(id, "first")), Some(&email(id, "second")))).collect();
    let mut deletes = Vec::new();
    for id in 16..20 {
        deletes.push(change(id, "d", Some(&email(id, "first")), None));
        deletes.push(Produce { partition: None, key: key(id), value: Vec::new(), timestamp: None });
    }
    let unreadable: Vec<Produce> = (100..103)
        .map(|id| Produce {
            partition: None,
            key: key(id),
            value: format!("not json {id}").into_bytes(),
            timestamp: None,
        })
        .collect();
    for phase in [&creates, &updates, &deletes, &unreadable] {
        produce_records(&broker.bootstrap, &topic, phase).await;
    }

    // Every record settled: put (creates, updates, deletes), dropped (the
    // tombstones) or dead-lettered (the unreadable ones).
    let total = (creates.len() + updates.len() + deletes.len() + unreadable.len()) as u64;
    let deadline = Instant::now() + Duration::from_secs(90);
    let settled = || async {
        let metrics = &herder.task_metrics().await.unwrap()[0].metrics;
        let counts = [&metrics.accepted, &metrics.dropped_by_transforms, &metrics.dead_lettered];
        counts.map(|c| c.load(Relaxed))
    };
    while settled().await.iter().sum::<u64>() < total {
        let status = herder.status("cdc".into()).await.unwrap();
        if let Some(failed) = status.tasks.iter().find(|t| t.state == State::Failed) {
            panic!("the task failed: {:?}", failed.trace);
        }
        assert!(Instant::now() < deadline, "settled {:?} of {total}", settled().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A moment more, so that a record settled twice would show.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        settled().await,
        [20 + 8 + 4, 4, 3],
        "each record settled once: 32 put (20 creates, 8 updates, 4 deletes), 4 tombstones dropped, 3 dead-lettered"
    );
    println!("on {}: 32 put, 4 tombstones dropped by ExtractNewRecordState, 3 to the DLQ", broker.description);

    let mut reader = Reader::open(&grant).await;
    let columns = ["id", "email", "__op", "source_system"];
    let list: Vec<String> = columns.iter().map(|c| reader.quote(c)).collect();
    let rows = reader.query(&format!("SELECT {} FROM {} ORDER BY 1", list.join(", "), reader.quote(&topic))).await;
    let rows: Vec<String> = rows.iter().map(|row| format!("{row:?}")).collect();
    let expected: Vec<String> = (0..16i64)
        .map(|id| {
            use spillway::capabilities::sql::bindings::spillway::sql::databases::Value as Sql;
            let (round, op) = if id < 8 { ("second", "u") } else { ("first", "c") };
            let row =
                [Sql::Int(id), Sql::Text(email(id as i32, round)), Sql::Text(op.into()), Sql::Text("debezium".into())];
            format!("{row:?}")
        })
        .collect();
    assert_eq!(rows, expected, "rows 0-15: 0-7 updated, 16-19 deleted");

    // The unreadable records: in the dead-letter queue as consumed, each once.
    let dead = read_all(&broker.bootstrap, &dlq, "read_uncommitted");
    let mut seen: BTreeMap<String, [String; 3]> = BTreeMap::new();
    for record in &dead {
        let header = |name: &str| {
            let value = record.headers.iter().find(|(k, _)| k == name).and_then(|(_, v)| v.clone());
            String::from_utf8_lossy(&value.unwrap_or_default()).to_string()
        };
        let value = String::from_utf8_lossy(record.value.as_deref().unwrap_or_default()).to_string();
        let context = ["stage", "class.name", "exception.class.name"].map(|h| header(&format!("__connect.errors.{h}")));
        let previous = seen.insert(value, context);
        assert!(previous.is_none(), "a record reached the DLQ twice");
    }
    let stage = [
        "TRANSFORMATION",
        "org.apache.kafka.connect.transforms.InsertField$Value",
        "org.apache.kafka.connect.errors.DataException",
    ]
    .map(String::from);
    let expected: BTreeMap<String, [String; 3]> =
        (100..103).map(|id| (format!("not json {id}"), stage.clone())).collect();
    assert_eq!(seen, expected);
    herder.shutdown().await.unwrap();
}
