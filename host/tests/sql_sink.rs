//! The SQL sink through the whole host (broker, herder, task loop, plugin,
//! capability) into real PostgreSQL and MariaDB servers and SQLite. Every
//! test reads the table back and checks it row by row; where no fault is
//! injected, each record must be exactly one row.

mod support;

use base64::Engine;
use serde_json::json;
use spillway::capabilities::sql::bindings::spillway::sql::databases::Value;
use spillway::herder::{ConfigMap, Herder, State};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use support::databases::{Cuttable, DbServer, Reader, mariadb, postgres};
use support::herder::{start_herder, wait_running};
use support::{Broker, Produce, assert_each_exactly_once, assert_none_lost, produce_records};

/// Where a connector writes: a server's grant, or a SQLite file in a
/// directory granted to it.
enum Target {
    Server(&'static DbServer),
    Sqlite,
}

impl Target {
    fn grant(&self, dir: &Path) -> Vec<(String, String)> {
        match self {
            Target::Server(server) => server.grant("db"),
            Target::Sqlite => vec![
                ("plugin.grant.sql.db.url".into(), format!("sqlite://{}/sink.db", dir.display())),
                ("plugin.grant.fs.data.path".into(), dir.display().to_string()),
            ],
        }
    }
}

/// A name for a topic and its table: letters, digits and underscores.
fn name(prefix: &str) -> String {
    format!("{prefix}_{}", &uuid::Uuid::new_v4().simple().to_string()[..10])
}

fn sql_config(name: &str, topic: &str, grant: Vec<(String, String)>, extra: &[(&str, &str)]) -> ConfigMap {
    let mut config: ConfigMap =
        [("name", name), ("connector.class", "sql-sink"), ("topics", topic), ("tasks.max", "1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    config.extend(grant);
    config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    config
}

async fn start(broker: &Broker, dir: &Path, name: &str, config: ConfigMap) -> Herder {
    let herder = start_herder(broker, dir).await;
    herder.create(name.into(), config, None).await.unwrap();
    wait_running(&herder, name, 1).await;
    herder
}

/// Waits until the table holds `rows` rows (and a moment more, so that a
/// duplicate still on its way would show).
async fn wait_for_rows(reader: &mut Reader, herder: &Herder, table: &str, name: &str, rows: usize) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if reader.count(table).await.unwrap_or(0) >= rows {
            break;
        }
        let status = herder.status(name.into()).await.unwrap();
        if let Some(failed) = status.tasks.iter().find(|t| t.state == State::Failed) {
            panic!("{name}: task failed: {:?}", failed.trace);
        }
        assert!(Instant::now() < deadline, "{table}: {:?} rows of {rows}", reader.count(table).await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A value as text that reads the same from every database: dates, times
/// and timestamps as ISO-8601, JSON normalized, booleans as 0 / 1.
fn canonical(value: &Value) -> String {
    use chrono::{DateTime, NaiveDate, NaiveTime, TimeDelta};
    match value {
        Value::Null => "NULL".into(),
        Value::Boolean(b) => u8::from(*b).to_string(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => format!("{d:.3}"),
        Value::Decimal(d) => format!("{:.3}", d.parse::<f64>().unwrap()),
        Value::Text(s) | Value::Json(s) | Value::Uuid(s) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(json @ serde_json::Value::Object(_)) => json.to_string(),
            _ => s.clone(),
        },
        Value::Bytes(b) => canonical(&Value::Text(String::from_utf8_lossy(b).into_owned())),
        Value::Date(d) => (NaiveDate::from_ymd_opt(1970, 1, 1).unwrap() + TimeDelta::days(*d as i64)).to_string(),
        Value::Time(us) => (NaiveTime::MIN + TimeDelta::microseconds(*us)).format("%H:%M:%S%.6f").to_string(),
        Value::Timestamp(us) => {
            DateTime::from_timestamp_micros(*us).unwrap().naive_utc().format("%Y-%m-%d %H:%M:%S%.6f").to_string()
        }
    }
}

/// Rows of `table` by their `id` column, each as canonical text per column.
async fn rows_by_id(reader: &mut Reader, table: &str, columns: &[&str]) -> BTreeMap<String, Vec<String>> {
    let list: Vec<String> = columns.iter().map(|c| reader.quote(c)).collect();
    let sql = format!("SELECT {} FROM {}", list.join(", "), reader.quote(table));
    let rows = reader.query(&sql).await;
    let mut by_id = BTreeMap::new();
    for row in rows {
        let row: Vec<String> = row.iter().map(canonical).collect();
        assert!(by_id.insert(row[0].clone(), row[1..].to_vec()).is_none(), "id {} twice in {table}", row[0]);
    }
    by_id
}

// -- Connect-schema'd records, every logical type, plain inserts ----------

const DAY0: i32 = 19_782; // 2024-02-29

/// A JsonConverter envelope with every type the sink maps, a Decimal
/// (base64, as Connect writes it), Date, Time, Timestamp and a nested struct.
fn typed_record(id: &str, i: i64) -> Vec<u8> {
    let unscaled = i * 100 + 5; // scale 2: i.05
    let bytes = unscaled.to_be_bytes();
    let first = bytes.iter().position(|&b| b != 0).unwrap_or(7).min(6);
    let amount = base64::engine::general_purpose::STANDARD.encode(&bytes[first..]);
    json!({
        "schema": {"type": "struct", "name": "order", "optional": false, "fields": [
            {"field": "id", "type": "string", "optional": false},
            {"field": "n", "type": "int32", "optional": false},
            {"field": "amount", "type": "bytes", "optional": true,
             "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}},
            {"field": "day", "type": "int32", "optional": true, "name": "org.apache.kafka.connect.data.Date"},
            {"field": "at_time", "type": "int32", "optional": true, "name": "org.apache.kafka.connect.data.Time"},
            {"field": "at", "type": "int64", "optional": true, "name": "org.apache.kafka.connect.data.Timestamp"},
            {"field": "ok", "type": "boolean", "optional": true},
            {"field": "ratio", "type": "double", "optional": true},
            {"field": "note", "type": "string", "optional": true},
            {"field": "meta", "type": "struct", "optional": true, "fields": [
                {"field": "tag", "type": "string", "optional": true},
                {"field": "level", "type": "int64", "optional": true}]}
        ]},
        "payload": {
            "id": id, "n": i, "amount": amount, "day": DAY0 + i as i32, "at_time": 45_296_789 + i,
            "at": 1_709_210_096_789 + i * 1000, "ok": i % 2 == 0, "ratio": i as f64 / 8.0,
            "note": if i % 5 == 0 { serde_json::Value::Null } else { json!(format!("note \"{i}\"\n")) },
            "meta": {"tag": format!("t{i}"), "level": i}
        }
    })
    .to_string()
    .into_bytes()
}

/// What `typed_record(id, i)` must read back as, column by column.
fn typed_expected(i: i64) -> Vec<String> {
    let v = |value: Value| canonical(&value);
    vec![
        v(Value::Int(i)),
        v(Value::Decimal(format!("{i}.05"))),
        v(Value::Date(DAY0 + i as i32)),
        v(Value::Time((45_296_789 + i) * 1000)),
        v(Value::Timestamp((1_709_210_096_789 + i * 1000) * 1000)),
        v(Value::Boolean(i % 2 == 0)),
        v(Value::Double(i as f64 / 8.0)),
        if i % 5 == 0 { "NULL".into() } else { format!("note \"{i}\"\n") },
        json!({"tag": format!("t{i}"), "level": i}).to_string(),
    ]
}

const TYPED_COLUMNS: &[&str] = &["id", "n", "amount", "day", "at_time", "at", "ok", "ratio", "note", "meta"];

async fn schemad_records_of_every_type_become_one_row_each(target: Target) {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("typed");
    let grant = target.grant(dir.path());
    let config = sql_config("typed", &topic, grant.clone(), &[("auto.create", "true")]);
    let herder = start(&broker, dir.path(), "typed", config).await;
    let records: Vec<Produce> = (0..300)
        .map(|i| Produce {
            partition: None,
            key: format!("k{i}"),
            value: typed_record(&format!("r{i:03}"), i),
            timestamp: None,
        })
        .collect();
    produce_records(&broker.bootstrap, &topic, &records).await;
    let mut reader = Reader::open(&grant).await;
    wait_for_rows(&mut reader, &herder, &topic, "typed", 300).await;
    let ids: Vec<String> = reader
        .query(&format!("SELECT id FROM {}", reader.quote(&topic)))
        .await
        .iter()
        .map(|r| canonical(&r[0]))
        .collect();
    let expected: Vec<String> = (0..300).map(|i| format!("r{i:03}")).collect();
    assert_each_exactly_once(&ids, &expected, &format!("{:?}", reader.dialect));
    let rows = rows_by_id(&mut reader, &topic, TYPED_COLUMNS).await;
    for i in 0..300 {
        assert_eq!(rows[&format!("r{i:03}")], typed_expected(i), "row r{i:03} in {:?}", reader.dialect);
    }
    // The table was created from the schema: NOT NULL where the field is required.
    let columns = describe(&mut reader, &topic).await;
    assert_eq!(columns.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), TYPED_COLUMNS);
    assert!(!columns[0].2 && !columns[1].2 && columns[2].2, "{columns:?}");
    println!("{:?} created {columns:?}", reader.dialect);
    herder.shutdown().await.unwrap();
}

/// The table's columns (name, type, nullable), as the capability's
/// catalogue reads them: a plugin's own statements may not read the
/// database's catalogue.
async fn describe(reader: &mut Reader, table: &str) -> Vec<(String, String, bool)> {
    let columns = reader.describe(table).await.unwrap_or_else(|| panic!("no table {table}"));
    columns.into_iter().map(|c| (c.name, c.data_type, c.nullable)).collect()
}

// -- Plain JSON, upserts by key, deletes, evolution, redelivery -----------

async fn upserts_deletes_and_new_fields_leave_the_table_right_even_when_redelivered(target: Target) {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("upsert");
    let grant = target.grant(dir.path());
    let extra = [
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("pk.fields", "id"),
        ("delete.enabled", "true"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
    ];
    let herder = start(&broker, dir.path(), "upsert", sql_config("upsert", &topic, grant.clone(), &extra)).await;
    let record = |key: &str, value: Option<serde_json::Value>| Produce {
        partition: Some(0),
        key: key.to_string(),
        value: value.map(|v| v.to_string().into_bytes()).unwrap_or_default(),
        timestamp: None,
    };
    // 50 rows; then 25 of them change and gain a field; then 10 are deleted.
    let first: Vec<Produce> = (0..50)
        .map(|i| record(&format!("\"k{i:02}\""), Some(json!({"name": format!("first {i}"), "qty": i}))))
        .collect();
    let second: Vec<Produce> = (0..25)
        .map(|i| {
            record(
                &format!("\"k{i:02}\""),
                Some(json!({"name": format!("second {i}"), "qty": i * 10, "city": format!("c{i}")})),
            )
        })
        .collect();
    let deletes: Vec<Produce> = (40..50).map(|i| record(&format!("\"k{i:02}\""), None)).collect();
    let mut reader = Reader::open(&grant).await;
    let expect = |reader: &Reader| {
        let mut rows = BTreeMap::new();
        for i in 0..40 {
            let row = if i < 25 {
                vec![format!("second {i}"), (i * 10).to_string(), format!("c{i}")]
            } else {
                vec![format!("first {i}"), i.to_string(), "NULL".to_string()]
            };
            rows.insert(format!("k{i:02}"), row);
        }
        let _ = reader;
        rows
    };
    // Twice: the second time is a redelivery of everything, as after a crash.
    for round in 0..2 {
        produce_records(&broker.bootstrap, &topic, &first).await;
        produce_records(&broker.bootstrap, &topic, &second).await;
        produce_records(&broker.bootstrap, &topic, &deletes).await;
        let processed = 85 * (round + 1);
        let deadline = Instant::now() + Duration::from_secs(90);
        while herder.task_metrics().await.unwrap()[0].metrics.accepted.load(Relaxed) < processed {
            assert!(Instant::now() < deadline, "round {round}: records not all written");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let rows = rows_by_id(&mut reader, &topic, &["id", "name", "qty", "city"]).await;
        assert_eq!(rows, expect(&reader), "round {round} in {:?}", reader.dialect);
    }
    herder.shutdown().await.unwrap();
}

macro_rules! on_each_database {
    ($($test:ident),* $(,)?) => {
        mod on_postgres {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() { super::$test(super::Target::Server(super::postgres())).await })*
        }
        mod on_mariadb {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() { super::$test(super::Target::Server(super::mariadb())).await })*
        }
        mod on_sqlite {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() { super::$test(super::Target::Sqlite).await })*
        }
    };
}

on_each_database!(
    schemad_records_of_every_type_become_one_row_each,
    upserts_deletes_and_new_fields_leave_the_table_right_even_when_redelivered,
);

// -- Update mode, PostgreSQL's types Confluent's sink cannot bind ---------

/// Update mode changes rows that exist and adds none; plain JSON strings go
/// into `uuid` and `jsonb` columns of a table the user made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_reach_existing_rows_and_uuid_and_jsonb_columns_take_plain_json() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("update");
    let grant = postgres().grant("db");
    let mut reader = Reader::open(&grant).await;
    reader
        .execute(&format!(
            "CREATE TABLE \"{topic}\" (id BIGINT PRIMARY KEY, ref UUID, doc JSONB, qty INTEGER, updated BOOLEAN DEFAULT false)"
        ))
        .await;
    for i in 0..20 {
        reader.execute(&format!("INSERT INTO \"{topic}\" (id, qty) VALUES ({i}, 0)")).await;
    }
    let extra = [("insert.mode", "update"), ("pk.mode", "record_value"), ("pk.fields", "id")];
    let herder = start(&broker, dir.path(), "update", sql_config("update", &topic, grant, &extra)).await;
    // Ids 10..30: the first ten exist, the rest do not.
    let records: Vec<Produce> = (10..30)
        .map(|i| Produce {
            partition: Some(0),
            key: format!("k{i}"),
            value: json!({"id": i, "ref": format!("6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b{i:04}"), "doc": {"i": i, "tags": ["a"]},
                          "qty": i, "updated": true})
                .to_string()
                .into_bytes(),
            timestamp: None,
        })
        .collect();
    produce_records(&broker.bootstrap, &topic, &records).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while herder.task_metrics().await.unwrap()[0].metrics.accepted.load(Relaxed) < 20 {
        assert!(Instant::now() < deadline, "updates not all settled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let rows =
        reader.query(&format!("SELECT id, ref::text, doc->>'i', qty, updated FROM \"{topic}\" ORDER BY id")).await;
    assert_eq!(rows.len(), 20, "update mode added rows");
    for row in rows {
        let Value::Int(id) = row[0] else { panic!("{row:?}") };
        if id >= 10 {
            let expected = [
                Value::Text(format!("6f1c9c1e-3c3a-4b5e-9a57-0d3f4a2b{id:04}")),
                Value::Text(id.to_string()),
                Value::Int(id),
                Value::Boolean(true),
            ];
            assert_eq!(row[1..], expected, "row {id}");
        } else {
            assert_eq!(row[1..], [Value::Null, Value::Null, Value::Int(0), Value::Boolean(false)], "row {id}");
        }
    }
    herder.shutdown().await.unwrap();
}

// -- Bad records: rejected to the DLQ, the rest of the batch written ------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_that_cannot_be_rows_go_to_the_dlq_and_the_rest_are_written() {
    use rdkafka::Message;
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::Headers;

    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("bad");
    let dlq = name("bad_dlq");
    let grant = postgres().grant("db");
    let mut reader = Reader::open(&grant).await;
    // A table the user made, with a constraint the data can break.
    reader
        .execute(&format!("CREATE TABLE \"{topic}\" (id TEXT PRIMARY KEY, qty INTEGER NOT NULL CHECK (qty >= 0))"))
        .await;
    let extra = [
        ("insert.mode", "upsert"),
        ("pk.mode", "record_value"),
        ("pk.fields", "id"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq.as_str()),
        ("batch.max.records", "500"),
    ];
    let herder = start(&broker, dir.path(), "bad", sql_config("bad", &topic, grant, &extra)).await;
    let mut good = Vec::new();
    let mut bad = BTreeMap::new();
    let records: Vec<Produce> = (0..400)
        .map(|i| {
            let id = format!("r{i:03}");
            let value = match i % 50 {
                7 => {
                    bad.insert(id.clone(), "not JSON");
                    b"{not json".to_vec()
                }
                17 => {
                    bad.insert(id.clone(), "missing key field");
                    json!({"qty": i}).to_string().into_bytes()
                }
                27 => {
                    bad.insert(id.clone(), "not an integer");
                    json!({"id": id, "qty": "many"}).to_string().into_bytes()
                }
                37 => {
                    bad.insert(id.clone(), "breaks the CHECK");
                    json!({"id": id, "qty": -1}).to_string().into_bytes()
                }
                _ => {
                    good.push(id.clone());
                    json!({"id": id, "qty": i}).to_string().into_bytes()
                }
            };
            Produce { partition: Some(0), key: id, value, timestamp: None }
        })
        .collect();
    // One produce call: the records reach the task in large batches, so the
    // bad ones share batches with good ones.
    produce_records(&broker.bootstrap, &topic, &records).await;
    wait_for_rows(&mut reader, &herder, &topic, "bad", good.len()).await;
    let ids: Vec<String> =
        reader.query(&format!("SELECT id FROM \"{topic}\"")).await.iter().map(|r| canonical(&r[0])).collect();
    assert_each_exactly_once(&ids, &good, "good records");

    let consumer: StreamConsumer = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &broker.bootstrap)
        .set("group.id", name("dlq_reader"))
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&[&dlq]).unwrap();
    let mut dead = BTreeMap::new();
    while dead.len() < bad.len() {
        let m = tokio::time::timeout(Duration::from_secs(30), consumer.recv()).await.expect("a DLQ record").unwrap();
        let key = String::from_utf8(m.key().unwrap().to_vec()).unwrap();
        let reason = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "__connect.errors.exception.message"))
            .and_then(|h| h.value.map(|v| String::from_utf8_lossy(v).to_string()))
            .unwrap_or_default();
        assert!(dead.insert(key.clone(), reason).is_none(), "{key} dead-lettered twice");
    }
    assert_eq!(dead.keys().collect::<Vec<_>>(), bad.keys().collect::<Vec<_>>());
    for (key, reason) in &dead {
        println!("{key} ({}): {reason}", bad[key]);
        let expected = match bad[key] {
            "not JSON" => "JSON",
            "missing key field" => "id",
            "not an integer" => "qty",
            _ => "23514", // PostgreSQL's check_violation, from the database
        };
        assert!(reason.contains(expected), "{key}: {reason}");
    }
    herder.shutdown().await.unwrap();
}

// -- An outage: records kept and retried, the task recovers by itself ----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_loses_no_record_and_the_task_recovers_by_itself() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("outage");
    let server = postgres();
    let target = url::Url::parse(&server.url).unwrap();
    let proxy = Cuttable::start(format!("127.0.0.1:{}", target.port().unwrap())).await;
    let mut via_proxy = target.clone();
    via_proxy.set_port(Some(proxy.port)).unwrap();
    let grant = vec![
        ("plugin.grant.sql.db.url".to_string(), via_proxy.to_string()),
        ("plugin.grant.sql.db.password".to_string(), server.password.clone()),
        ("plugin.grant.sql.db.timeout.ms".to_string(), "2000".to_string()),
    ];
    let extra = [("auto.create", "true"), ("errors.retry.timeout", "-1"), ("errors.retry.delay.max.ms", "1000")];
    let herder = start(&broker, dir.path(), "outage", sql_config("outage", &topic, grant, &extra)).await;
    let mut reader = Reader::open(&server.grant("db")).await;
    let batch = |from: usize| -> Vec<Produce> {
        (from..from + 100)
            .map(|i| Produce {
                partition: Some(0),
                key: format!("k{i}"),
                value: json!({"id": format!("r{i:03}"), "n": i}).to_string().into_bytes(),
                timestamp: None,
            })
            .collect()
    };
    produce_records(&broker.bootstrap, &topic, &batch(0)).await;
    wait_for_rows(&mut reader, &herder, &topic, "outage", 100).await;

    proxy.cut();
    produce_records(&broker.bootstrap, &topic, &batch(100)).await;
    // The task keeps the records and retries; it does not fail.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let m = &herder.task_metrics().await.unwrap()[0].metrics;
        if m.polled.load(Relaxed) >= 200 {
            break;
        }
        assert!(Instant::now() < deadline, "the records produced during the outage were not polled");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let status = herder.status("outage".into()).await.unwrap();
    assert!(status.tasks.iter().all(|t| t.state == State::Running), "{status:?}");
    assert_eq!(reader.count(&topic).await, Some(100), "nothing can have been written during the outage");

    proxy.restore();
    wait_for_rows(&mut reader, &herder, &topic, "outage", 200).await;
    let ids: Vec<String> =
        reader.query(&format!("SELECT id FROM \"{topic}\"")).await.iter().map(|r| canonical(&r[0])).collect();
    let expected: Vec<String> = (0..200).map(|i| format!("r{i:03}")).collect();
    // A commit whose answer the cut lost may land twice (plain inserts).
    let duplicates = assert_none_lost(&ids, &expected, "across a database outage");
    println!("duplicates across the outage: {duplicates}");
    herder.shutdown().await.unwrap();
}

// -- pk.mode=kafka: rows keyed by their record's coordinates -------------

/// Each row carries its record's topic, partition and offset as its primary
/// key; upserting on them makes a redelivered record land on its own row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_coordinates_key_each_row() {
    let broker = Broker::start_or_env();
    let dir = tempfile::tempdir().unwrap();
    let topic = name("coords");
    let grant = mariadb().grant("db");
    let extra = [("insert.mode", "upsert"), ("pk.mode", "kafka"), ("auto.create", "true")];
    let herder = start(&broker, dir.path(), "coords", sql_config("coords", &topic, grant.clone(), &extra)).await;
    let records: Vec<Produce> = (0..60)
        .map(|i| Produce {
            partition: Some(0),
            key: format!("k{i}"),
            value: json!({"n": i}).to_string().into_bytes(),
            timestamp: None,
        })
        .collect();
    produce_records(&broker.bootstrap, &topic, &records).await;
    let mut reader = Reader::open(&grant).await;
    wait_for_rows(&mut reader, &herder, &topic, "coords", 60).await;
    let rows =
        reader.query(&format!("SELECT __connect_topic, __connect_partition, __connect_offset, n FROM `{topic}`")).await;
    let mut got: Vec<Vec<String>> = rows.iter().map(|r| r.iter().map(canonical).collect()).collect();
    got.sort_by_key(|r| r[2].parse::<i64>().unwrap());
    let expected: Vec<Vec<String>> =
        (0..60).map(|i| vec![topic.clone(), "0".into(), i.to_string(), i.to_string()]).collect();
    assert_eq!(got, expected, "one row per record, keyed by its coordinates");
    let key: Vec<(String, String, bool)> = describe(&mut reader, &topic).await;
    assert!(key.iter().take(3).all(|(_, _, nullable)| !nullable), "{key:?}");
    herder.shutdown().await.unwrap();
}
