//! The S3 sink through the whole host, against a real S3-compatible server
//! (`SPILLWAY_TEST_S3_ENDPOINT`, or moto started once for this file) and a
//! Kafka-protocol broker (`SPILLWAY_TEST_BOOTSTRAP`, or a mock per test).
//!
//! Every test reads the objects back from the server, bypassing Spillway, and
//! checks them record by record.

mod support;

use futures::TryStreamExt;
use object_store::aws::AmazonS3;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};
use serde_json::{Value, json};
use spillway::capabilities::Grants;
use spillway::connector::{ConnectorConfig, WorkerDefaults};
use spillway::herder::{ConfigMap, State};
use spillway::runtime::batch::{FlushScope, Outcome, SinkRecord, TaskError, TimestampType};
use spillway::runtime::{Limits, PluginError};
use spillway::task::{self, TaskExit, TaskMetrics, TaskSpec};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::herder::{plugin_dir, start_herder, test_runtime, wait_running};
use support::{
    Broker, Produce, S3Server, assert_each_exactly_once, assert_none_lost, produce_compressed, produce_records,
    s3_server, unique,
};
use tokio_util::sync::CancellationToken;

/// An s3-sink connector on `topic` writing under `s3://<bucket>/<name>/`:
/// its defaults, then `extra` over them.
fn s3_config(s3: &S3Server, name: &str, topic: &str, bucket: &str, extra: &[(&str, &str)]) -> ConfigMap {
    let mut config: ConfigMap = [
        ("name", name),
        ("connector.class", "s3-sink"),
        ("topics", topic),
        ("tasks.max", "1"),
        // Only the rules under test close objects.
        ("flush.interval.ms", "600000"),
        ("insert.offset.field", "__offset"),
        ("insert.partition.field", "__partition"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    config.extend(s3.grant("s3", bucket, name));
    config.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    config
}

/// `n` records whose values are JSON objects `{"id": <key>, "n": i, ...}`.
fn json_records(topic: &str, n: usize, partition: Option<i32>) -> (Vec<String>, Vec<Produce>) {
    let keys: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    let records = keys
        .iter()
        .enumerate()
        .map(|(i, key)| Produce {
            partition,
            key: key.clone(),
            value: json!({"id": key, "n": i, "amount": i as f64 * 1.5, "even": i % 2 == 0}).to_string().into_bytes(),
            timestamp: None,
        })
        .collect();
    (keys, records)
}

/// `n` records of about 1 KB, all in partition 0: `{"id": <key>, "padding": "xxx..."}`.
fn padded_records(topic: &str, n: usize) -> (Vec<String>, Vec<Produce>) {
    let padding = "x".repeat(1000);
    let keys: Vec<String> = (0..n).map(|i| format!("{topic}-{i}")).collect();
    let records = keys
        .iter()
        .map(|key| Produce {
            partition: Some(0),
            key: key.clone(),
            value: json!({"id": key, "padding": padding}).to_string().into_bytes(),
            timestamp: None,
        })
        .collect();
    (keys, records)
}

/// A record as the host hands it to the plugin, for tests without Kafka.
fn sink_record(id: u64, offset: i64, value: &[u8], lock_deadline: Option<i64>) -> SinkRecord {
    SinkRecord {
        id,
        topic: "t".into(),
        partition: 0,
        offset,
        timestamp: 1_700_000_000_000,
        timestamp_type: TimestampType::CreateTime,
        key: None,
        value: Some(value.to_vec()),
        headers: Vec::new(),
        delivery_count: if lock_deadline.is_some() { 2 } else { 1 },
        lock_deadline,
    }
}

/// Every object under `prefix`, with its bytes.
async fn objects(bucket: &AmazonS3, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let prefix = ObjectPath::from(prefix);
    let metas: Vec<_> = bucket.list(Some(&prefix)).try_collect().await.unwrap();
    let mut out = Vec::new();
    for meta in metas {
        let bytes = match bucket.get(&meta.location).await {
            Ok(got) => got.bytes().await.unwrap(),
            // An upload marker lives while its multipart upload does: it may
            // be gone between the listing and the read. Data objects are
            // never deleted.
            Err(object_store::Error::NotFound { .. }) if meta.location.as_ref().contains("/_uploads/") => continue,
            Err(e) => panic!("reading {}: {e}", meta.location),
        };
        out.push((meta.location.to_string(), bytes.to_vec()));
    }
    out.sort();
    out
}

/// The data objects (not key or header companions, not upload markers).
fn data_objects(all: &[(String, Vec<u8>)]) -> Vec<&(String, Vec<u8>)> {
    all.iter()
        .filter(|(path, _)| !path.contains(".keys.") && !path.contains(".headers.") && !path.contains("/_"))
        .collect()
}

/// An object's rows, decoded by its name's extensions as a reader would.
fn rows(path: &str, bytes: &[u8]) -> Vec<Value> {
    let mut name = path.to_string();
    let mut data = bytes.to_vec();
    if let Some(stem) = name.strip_suffix(".gz") {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&data[..]).read_to_end(&mut out).unwrap();
        (name, data) = (stem.to_string(), out);
    } else if let Some(stem) = name.strip_suffix(".snappy").filter(|_| !name.ends_with(".snappy.parquet")) {
        let mut out = Vec::new();
        snap::read::FrameDecoder::new(&data[..]).read_to_end(&mut out).unwrap();
        (name, data) = (stem.to_string(), out);
    } else if let Some(stem) = name.strip_suffix(".zst") {
        let mut out = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(&data[..]).unwrap().read_to_end(&mut out).unwrap();
        // A zstd stream may hold several frames.
        let mut rest = &data[..];
        out.clear();
        while !rest.is_empty() {
            let mut decoder = ruzstd::decoding::StreamingDecoder::new(&mut rest).unwrap();
            decoder.read_to_end(&mut out).unwrap();
        }
        (name, data) = (stem.to_string(), out);
    }
    let text = || String::from_utf8(data.clone()).unwrap();
    if name.ends_with(".json") {
        text().lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{path}: {l}: {e}"))).collect()
    } else if name.ends_with(".bin") {
        text().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    } else if name.ends_with(".csv") {
        let text = text();
        let mut lines = text.lines();
        let header: Vec<String> = lines.next().unwrap().split(',').map(|h| h.trim_matches('"').to_string()).collect();
        lines
            .map(|line| {
                let cells = line.split(',').map(|c| Value::String(c.trim_matches('"').to_string()));
                Value::Object(header.iter().cloned().zip(cells).collect())
            })
            .collect()
    } else if name.ends_with(".parquet") {
        use parquet::file::reader::{FileReader, SerializedFileReader};
        let reader = SerializedFileReader::new(bytes::Bytes::from(data)).unwrap();
        reader.get_row_iter(None).unwrap().map(|row| row.unwrap().to_json_value()).collect()
    } else {
        panic!("{path}: no reader for this extension")
    }
}

/// The `id` of each row of every data object under `prefix`, repeats kept.
async fn ids_under(bucket: &AmazonS3, prefix: &str) -> Vec<String> {
    let all = objects(bucket, prefix).await;
    data_objects(&all).iter().flat_map(|(path, bytes)| rows(path, bytes)).map(|row| id_of(&row)).collect()
}

fn id_of(row: &Value) -> String {
    row["id"].as_str().unwrap_or_else(|| panic!("a row without an id: {row}")).to_string()
}

/// Waits until the objects under `prefix` hold every one of `expected`.
async fn wait_for_ids(bucket: &AmazonS3, prefix: &str, expected: &[String], limit: Duration) -> Vec<String> {
    let want: BTreeSet<&String> = expected.iter().collect();
    let deadline = Instant::now() + limit;
    loop {
        let got = ids_under(bucket, prefix).await;
        let seen: BTreeSet<&String> = got.iter().collect();
        let missing = want.iter().filter(|k| !seen.contains(**k)).count();
        if missing == 0 {
            // A little longer, so that a late duplicate shows.
            tokio::time::sleep(Duration::from_secs(2)).await;
            return ids_under(bucket, prefix).await;
        }
        assert!(Instant::now() < deadline, "{prefix}: {missing} of {} records never arrived", expected.len());
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Each format and codec, each partitioner, keys and headers alongside:
/// every record read back exactly once, from where the partitioner put it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_format_codec_and_partitioner_reads_back_record_by_record() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder(&broker, dir.path()).await;
    let bucket_name = s3.new_bucket("formats");
    let bucket = s3.bucket(&bucket_name);
    let topic = unique("formats");
    let timezone = "Asia/Tokyo";
    let cases: Vec<(&str, Vec<(&str, &str)>)> = vec![
        ("json-plain", vec![("format.class", "json")]),
        (
            "json-gzip-field",
            vec![
                ("format.class", "io.confluent.connect.s3.format.json.JsonFormat"),
                ("compression.type", "gzip"),
                ("partitioner.class", "field"),
                ("partition.field.name", "even"),
            ],
        ),
        ("json-snappy", vec![("format.class", "json"), ("compression.type", "snappy")]),
        ("json-zstd", vec![("format.class", "json"), ("compression.type", "zstd")]),
        (
            "bytes-keys-headers",
            vec![("format.class", "bytes"), ("store.kafka.keys", "true"), ("store.kafka.headers", "true")],
        ),
        (
            "csv-gzip-daily",
            vec![
                ("format.class", "csv"),
                ("compression.type", "gzip"),
                ("partitioner.class", "time"),
                ("partition.duration.ms", "86400000"),
                ("path.format", "'year'=YYYY/'month'=MM/'day'=dd"),
                ("timezone", timezone),
                ("locale", "en"),
                ("timestamp.extractor", "Record"),
            ],
        ),
        ("parquet-snappy", vec![("format.class", "parquet"), ("parquet.codec", "snappy")]),
        ("parquet-gzip", vec![("format.class", "parquet"), ("parquet.codec", "gzip")]),
        (
            "parquet-none",
            vec![("format.class", "io.confluent.connect.s3.format.parquet.ParquetFormat"), ("parquet.codec", "none")],
        ),
    ];
    for (name, extra) in &cases {
        let mut extra = extra.clone();
        extra.push(("flush.size", "40"));
        herder.create(name.to_string(), s3_config(s3, name, &topic, &bucket_name, &extra), None).await.unwrap();
    }
    for (name, _) in &cases {
        wait_running(&herder, name, 1).await;
    }
    let (keys, records) = json_records(&topic, 200, None);
    produce_records(&broker.bootstrap, &topic, &records).await;
    let produced_on = chrono::Utc::now().with_timezone(&timezone.parse::<chrono_tz::Tz>().unwrap());

    for (name, _) in &cases {
        let got = wait_for_ids(&bucket, name, &keys, Duration::from_secs(90)).await;
        assert_each_exactly_once(&got, &keys, name);
    }
    let all = objects(&bucket, "").await;
    let names: Vec<&str> = all.iter().map(|(p, _)| p.as_str()).collect();
    let under = |case: &str| -> Vec<&(String, Vec<u8>)> {
        all.iter().filter(|(p, _)| p.starts_with(&format!("{case}/"))).collect()
    };
    // Default partitioner and Confluent's layout: <dir>/<topic>/partition=<p>/<topic>+<p>+<offset>...
    for (path, _) in under("json-plain") {
        let rest =
            path.strip_prefix(&format!("json-plain/topics/{topic}/partition=")).unwrap_or_else(|| panic!("{path}"));
        let (partition, file) = rest.split_once('/').unwrap();
        assert!(file.starts_with(&format!("{topic}+{partition}+")) && file.ends_with(".json"), "{path}");
    }
    // Field partitioner: each row lies under its own field's value.
    for (path, bytes) in data_objects(&under("json-gzip-field").into_iter().cloned().collect::<Vec<_>>()) {
        assert!(path.ends_with(".json.gz"), "{path}");
        let even = path.contains("/even=true/");
        assert!(even || path.contains("/even=false/"), "{path}");
        assert!(rows(path, bytes).iter().all(|row| row["even"] == json!(even)), "{path}");
    }
    // Time partitioner: the records' day in the configured zone.
    let day = produced_on.format("year=%Y/month=%m/day=%d").to_string();
    for (path, _) in under("csv-gzip-daily") {
        assert!(path.starts_with(&format!("csv-gzip-daily/topics/{topic}/{day}/")), "{path}, not under {day}");
        assert!(path.ends_with(".csv.gz"), "{path}");
    }
    assert!(under("json-snappy").iter().all(|(p, _)| p.ends_with(".json.snappy")), "{names:?}");
    assert!(under("parquet-snappy").iter().all(|(p, _)| p.ends_with(".snappy.parquet")), "{names:?}");
    assert!(under("parquet-gzip").iter().all(|(p, _)| p.ends_with(".gz.parquet")), "{names:?}");
    // Parquet keeps the types it inferred, and the fields inserted for readers.
    let parquet = data_objects(&under("parquet-none").into_iter().cloned().collect::<Vec<_>>())
        .iter()
        .flat_map(|(p, b)| rows(p, b))
        .collect::<Vec<_>>();
    let first = parquet.iter().find(|r| r["n"] == json!(3)).expect("row n=3");
    assert_eq!((first["amount"].as_f64(), first["even"].as_bool()), (Some(4.5), Some(false)), "{first}");
    assert!(first["__offset"].is_i64() && first["__partition"].is_i64(), "{first}");

    // Keys and headers: companion objects, one entry per record, in order.
    let bytes_case = under("bytes-keys-headers");
    for (path, data) in data_objects(&bytes_case.iter().map(|o| (*o).clone()).collect::<Vec<_>>()) {
        let stem = path.strip_suffix(".bin").unwrap();
        let keys_object =
            bytes_case.iter().find(|(p, _)| p.starts_with(&format!("{stem}.keys."))).expect("keys object");
        let key_rows = String::from_utf8(keys_object.1.clone()).unwrap();
        let values = rows(path, data);
        assert_eq!(key_rows.lines().count(), values.len(), "{}", keys_object.0);
        for (key, value) in key_rows.lines().zip(&values) {
            assert!(key.contains(&id_of(value)), "key {key} beside value {value}");
        }
        assert!(bytes_case.iter().any(|(p, _)| p.starts_with(&format!("{stem}.headers."))), "no headers beside {path}");
    }
    herder.shutdown().await.unwrap();
}

/// `flush.size`, `rotate.interval.ms` on record time, and
/// `rotate.schedule.interval.ms` on the wall clock, which closes an object
/// while no record arrives at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_rotation_rule_closes_objects_when_it_should() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder(&broker, dir.path()).await;
    let bucket_name = s3.new_bucket("rotation");
    let bucket = s3.bucket(&bucket_name);
    let classic = ("consumer.override.group.protocol", "classic");
    let topics: BTreeMap<&str, String> =
        ["size", "interval", "schedule"].into_iter().map(|rule| (rule, unique(&format!("rotate-{rule}")))).collect();
    let rules: [(&str, Vec<(&str, &str)>); 3] = [
        ("size", vec![classic, ("flush.size", "10")]),
        (
            "interval",
            vec![classic, ("flush.size", "1000"), ("rotate.interval.ms", "1000"), ("timestamp.extractor", "Record")],
        ),
        ("schedule", vec![classic, ("flush.size", "1000"), ("rotate.schedule.interval.ms", "2000")]),
    ];
    let at = |topic: &str, i: usize, ts: Option<i64>| Produce {
        partition: Some(0),
        key: format!("{topic}-{i}"),
        value: json!({"id": format!("{topic}-{i}")}).to_string().into_bytes(),
        timestamp: ts,
    };
    // size: 35 records make three objects of 10; five stay open.
    let size: Vec<Produce> = (0..35).map(|i| at(&topics["size"], i, None)).collect();
    // interval: record times t0..t0+500, t0+1500..t0+1700, t0+2600: the
    // second group closes the first object, the last record the second.
    let t0 = chrono::Utc::now().timestamp_millis() - 60_000;
    let times = [0, 100, 200, 300, 400, 500, 1500, 1600, 1700, 2600];
    let interval: Vec<Produce> =
        times.iter().enumerate().map(|(i, dt)| at(&topics["interval"], i, Some(t0 + dt))).collect();
    // schedule: 20 records, then nothing.
    let schedule: Vec<Produce> = (0..20).map(|i| at(&topics["schedule"], i, None)).collect();
    // Produced first: a classic group starts at the beginning of a topic
    // that exists. No record comes after these.
    for (rule, records) in [("size", &size), ("interval", &interval), ("schedule", &schedule)] {
        produce_records(&broker.bootstrap, &topics[rule], records).await;
    }
    for (rule, extra) in &rules {
        herder.create(rule.to_string(), s3_config(s3, rule, &topics[rule], &bucket_name, extra), None).await.unwrap();
    }
    for (rule, _) in &rules {
        wait_running(&herder, rule, 1).await;
    }
    let started = Instant::now();

    let sizes = |rule: &'static str| {
        let bucket = &bucket;
        async move {
            let all = objects(bucket, rule).await;
            data_objects(&all).iter().map(|(p, b)| rows(p, b).len()).collect::<Vec<_>>()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (s, i, w) = (sizes("size").await, sizes("interval").await, sizes("schedule").await);
        if s.len() >= 3 && i.len() >= 2 && !w.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "objects so far: size {s:?}, interval {i:?}, schedule {w:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let scheduled_after = started.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(sizes("size").await, vec![10, 10, 10], "flush.size=10 over 35 records");
    let mut interval_sizes = sizes("interval").await;
    interval_sizes.sort();
    assert_eq!(interval_sizes, vec![3, 6], "rotate.interval.ms=1000 over record times {times:?}");
    // No record arrived after the 20, and flush.interval.ms is ten minutes:
    // only the wall-clock schedule closed this object.
    assert_eq!(sizes("schedule").await, vec![20], "rotate.schedule.interval.ms=2000");
    println!("the scheduled rotation's object was there {scheduled_after:?} after the connectors started");
    herder.shutdown().await.unwrap();
}

/// An object larger than `s3.part.size` goes up as a multipart upload, and
/// reads back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_object_larger_than_a_part_is_uploaded_in_parts() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder(&broker, dir.path()).await;
    let bucket_name = s3.new_bucket("multipart");
    let bucket = s3.bucket(&bucket_name);
    let topic = unique("multipart");
    let extra = [("consumer.override.group.protocol", "classic"), ("s3.part.size", "5242880"), ("flush.size", "6000")];
    let (keys, records) = padded_records(&topic, 6000);
    // Compressed: the mock broker keeps about 5 MB of a partition's log.
    produce_compressed(&broker.bootstrap, &topic, &records).await;
    herder.create("multipart".into(), s3_config(s3, "multipart", &topic, &bucket_name, &extra), None).await.unwrap();
    let got = wait_for_ids(&bucket, "multipart", &keys, Duration::from_secs(120)).await;
    assert_each_exactly_once(&got, &keys, "one object over 5 MiB");
    let metas: Vec<_> = bucket.list(Some(&ObjectPath::from("multipart"))).try_collect().await.unwrap();
    let data: Vec<_> = metas.iter().filter(|m| !m.location.as_ref().contains("/_")).collect();
    assert_eq!(data.len(), 1, "{metas:?}");
    assert!(data[0].size > 5 * 1024 * 1024, "{:?}", data[0]);
    // S3 gives a multipart object the e-tag `<digest>-<parts>`.
    let e_tag = data[0].e_tag.clone().unwrap_or_default();
    assert!(e_tag.trim_matches('"').ends_with("-2"), "not a two-part upload: e-tag {e_tag}");
    assert!(s3.uploads_in_progress(&bucket_name).is_empty());
    herder.shutdown().await.unwrap();
}

/// Eight tasks share two partitions through one share group: object names
/// never clash (a clash would overwrite, and lose, records), and every
/// record is written exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_tasks_sharing_two_partitions_write_every_record_once() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder(&broker, dir.path()).await;
    let bucket_name = s3.new_bucket("shared");
    let bucket = s3.bucket(&bucket_name);
    let topic = unique("shared");
    // Small fetches, so that every member gets records.
    let extra = [("tasks.max", "8"), ("flush.size", "25"), ("batch.max.records", "20")];
    herder.create("shared".into(), s3_config(s3, "shared", &topic, &bucket_name, &extra), None).await.unwrap();
    wait_running(&herder, "shared", 8).await;
    let mut keys = Vec::new();
    for wave in 0..4 {
        for partition in 0..2 {
            let (k, records) = json_records(&format!("{topic}-w{wave}p{partition}"), 250, Some(partition));
            produce_records(&broker.bootstrap, &topic, &records).await;
            keys.extend(k);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let got = wait_for_ids(&bucket, "shared", &keys, Duration::from_secs(120)).await;
    assert_each_exactly_once(&got, &keys, "8 tasks on 2 partitions");
    let all = objects(&bucket, "shared").await;
    let objects = data_objects(&all);
    let writers: BTreeSet<&str> =
        objects.iter().map(|(p, _)| p.rsplit('+').next().unwrap().split('-').next().unwrap()).collect();
    let polled: Vec<(u32, u64)> = herder
        .task_metrics()
        .await
        .unwrap()
        .iter()
        .map(|m| (m.task, m.metrics.polled.load(std::sync::atomic::Ordering::Relaxed)))
        .collect();
    println!("{} objects from tasks {writers:?}; records polled per task {polled:?}", objects.len());
    // Apache Kafka hands one partition's records to several members; the
    // mock assigns each partition to one member, so only there may a single
    // task write everything.
    if !broker.is_mock() {
        assert!(writers.len() > 2, "records of 2 partitions reached only tasks {writers:?}");
    }
    herder.shutdown().await.unwrap();
}

/// What a share group can do and Confluent's names cannot take: several
/// tasks writing objects that start at the same offset of the same
/// partition (a record redelivered to another task after its lock ran out).
/// Eight instances write the same 100 records: eight objects, none
/// overwritten, each whole.
#[tokio::test]
async fn tasks_writing_the_same_offsets_of_one_partition_never_overwrite_each_other() {
    let s3 = s3_server();
    let bucket_name = s3.new_bucket("clash");
    let runtime = test_runtime();
    let plugin = runtime.load_file(&plugin_dir().join("s3-sink.wasm")).await.unwrap();
    let grant = s3.grant("s3", &bucket_name, "clash");
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let batch: Vec<SinkRecord> = (0..100)
        .map(|i| sink_record(i, 1000 + i as i64, json!({"id": format!("r{i}")}).to_string().as_bytes(), Some(i64::MAX)))
        .collect();
    for task in 0..8 {
        let mut sink = runtime.instantiate(&plugin, "test", &grants, &Limits::default()).await.unwrap();
        let config = [("task.id", task.to_string()), ("flush.size", "100".to_string())];
        sink.start(&config.map(|(k, v)| (k.to_string(), v))).await.unwrap();
        // Each record is accepted once its object is written: at once, or
        // (the write going on in the host) when the flush waits for it.
        let report = sink.put(&batch).await.unwrap();
        let settled = sink.flush(&FlushScope::All).await.unwrap();
        let accepted = report.outcomes.iter().chain(settled.iter().map(|s| &s.outcome));
        assert_eq!(accepted.filter(|o| matches!(o, Outcome::Accept)).count(), 100, "task {task}: {report:?}");
        sink.stop().await.unwrap();
    }
    let all = objects(&s3.bucket(&bucket_name), "clash").await;
    let data = data_objects(&all);
    assert_eq!(data.len(), 8, "{:?}", data.iter().map(|(p, _)| p).collect::<Vec<_>>());
    let expected: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
    for (path, bytes) in data {
        assert!(path.contains("/t+0+0000001000+"), "{path}");
        let ids: Vec<String> = rows(path, bytes).iter().map(id_of).collect();
        assert_each_exactly_once(&ids, &expected, path);
    }
}

/// A task killed with records buffered in an open multipart upload: nothing
/// is lost (the records come again and are written), the reader's rule (one
/// row per topic, partition and offset) leaves exactly the produced set, and
/// the upload the killed task left open is aborted when the task starts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_task_killed_with_records_buffered_loses_none_and_its_upload_is_aborted() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let bucket_name = s3.new_bucket("killed");
    let bucket = s3.bucket(&bucket_name);
    let topic = unique("killed");
    let extra = [
        ("consumer.override.group.protocol", "classic"),
        ("s3.part.size", "5242880"),
        ("flush.size", "100000"),
        ("insert.topic.field", "__topic"),
    ];
    // Not "killed": share_sink's share connector of that name would find a
    // classic group of the same id on the shared Apache Kafka.
    let raw = s3_config(s3, "killed-buffered", &topic, &bucket_name, &extra);
    let runtime = test_runtime();
    let plugin = runtime.load_file(&plugin_dir().join("s3-sink.wasm")).await.unwrap();
    let spawn = |stop: CancellationToken| {
        let config = Arc::new(ConnectorConfig::parse(&raw, &WorkerDefaults::default()).unwrap());
        let metrics = Arc::new(TaskMetrics::default());
        let spec = TaskSpec {
            task_id: 0,
            config,
            plugin: plugin.clone(),
            transforms: Vec::new(),
            bootstrap_servers: broker.bootstrap.clone(),
            metrics: metrics.clone(),
        };
        let runtime = &runtime;
        async move { (tokio::spawn(task::start(runtime, spec).await.unwrap().run(stop)), metrics) }
    };
    let (keys, records) = padded_records(&topic, 7000);
    // Compressed: the mock broker keeps about 5 MB of a partition's log.
    produce_compressed(&broker.bootstrap, &topic, &records).await;
    let (first, _) = spawn(CancellationToken::new()).await;

    // Kill the task once its first part is up: no flush, no stop, no goodbye.
    let deadline = Instant::now() + Duration::from_secs(60);
    while s3.uploads_in_progress(&bucket_name).is_empty() {
        assert!(Instant::now() < deadline, "the task never started an upload");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first.abort();
    let _ = first.await;
    let left_open = s3.uploads_in_progress(&bucket_name);
    assert_eq!(left_open.len(), 1, "the killed task's upload is not open: {left_open:?}");
    assert!(ids_under(&bucket, "killed-buffered").await.is_empty(), "records were written before their object closed");

    // The task starts again: it aborts what it left open, and the records
    // come again (none was acknowledged) and are written on stop.
    let stop = CancellationToken::new();
    let (second, metrics) = spawn(stop.clone()).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while s3.uploads_in_progress(&bucket_name).contains(&left_open[0]) {
        assert!(Instant::now() < deadline, "the killed task's upload of {} was never aborted", left_open[0]);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Every record put, and the put returned: a stop in the middle of a
    // put interrupts it, and an interrupted instance cannot finish its
    // uploads (the next start aborts them), which is not the clean stop
    // this checks.
    while metrics.put.load(std::sync::atomic::Ordering::Relaxed) < keys.len() as u64 {
        assert!(Instant::now() < deadline + Duration::from_secs(60), "the restarted task never put every record");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    stop.cancel();
    assert_eq!(second.await.unwrap(), TaskExit::Stopped);
    assert!(s3.uploads_in_progress(&bucket_name).is_empty(), "an upload was left open after a clean stop");

    // The reader's rule: one row per (topic, partition, offset).
    let all = objects(&bucket, "killed-buffered").await;
    let mut by_coordinates: BTreeMap<(String, i64, i64), String> = BTreeMap::new();
    let mut rows_read = Vec::new();
    for (path, bytes) in data_objects(&all) {
        for row in rows(path, bytes) {
            let coordinates = (
                row["__topic"].as_str().unwrap().to_string(),
                row["__partition"].as_i64().unwrap(),
                row["__offset"].as_i64().unwrap(),
            );
            rows_read.push(id_of(&row));
            by_coordinates.insert(coordinates, id_of(&row));
        }
    }
    let duplicates = assert_none_lost(&rows_read, &keys, "a task killed with an open upload");
    let deduplicated: Vec<String> = by_coordinates.into_values().collect();
    assert_each_exactly_once(&deduplicated, &keys, "after the reader's deduplication");
    println!("duplicates before deduplication: {duplicates}");
}

/// A bucket that does not exist fails the task at start, with a status that
/// says so, instead of a loop of failing writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_bucket_fails_the_task_with_a_clear_status() {
    let (broker, s3) = (Broker::start_or_env(), s3_server());
    let dir = tempfile::tempdir().unwrap();
    let herder = start_herder(&broker, dir.path()).await;
    let topic = unique("nobucket");
    let config = s3_config(s3, "nobucket", &topic, "no-such-bucket-anywhere", &[]);
    herder.create("nobucket".into(), config, None).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let trace = loop {
        let status = herder.status("nobucket".into()).await.unwrap();
        if let Some(task) = status.tasks.iter().find(|t| t.state == State::Failed) {
            break task.trace.clone().unwrap_or_default();
        }
        assert!(Instant::now() < deadline, "the task did not fail: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(trace.contains("object-store grant 's3' (s3://no-such-bucket-anywhere/nobucket at http://"), "{trace}");
    assert!(trace.to_lowercase().contains("not found") || trace.contains("NoSuchBucket"), "{trace}");
    assert!(!trace.contains(&s3.secret_key) || s3.secret_key == "test", "the secret shows: {trace}");
    herder.shutdown().await.unwrap();
}

/// Through the runtime alone: a connector reaches its bucket and prefix and
/// nothing else, whatever paths the plugin names.
#[tokio::test]
async fn a_connector_cannot_reach_outside_its_bucket_and_prefix() {
    let s3 = s3_server();
    let (granted, other) = (s3.new_bucket("granted"), s3.new_bucket("other"));
    // Something to find, were the plugin able to reach it.
    s3.bucket(&other).put(&ObjectPath::from("secret.txt"), b"secret".to_vec().into()).await.unwrap();
    s3.bucket(&granted).put(&ObjectPath::from("beside/x.txt"), b"x".to_vec().into()).await.unwrap();
    let runtime = test_runtime();
    let plugin = runtime.load_file(&plugin_dir().join("object-sink.wasm")).await.unwrap();
    let grant: Vec<(String, String)> = s3.grant("out", &granted, "inside");
    let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
    let record = |offset: i64| sink_record(offset as u64, offset, b"v", None);
    let start = |prefix: &'static str| {
        let (runtime, plugin, grants) = (&runtime, &plugin, &grants);
        async move {
            let mut sink = runtime.instantiate(plugin, "test", grants, &Limits::default()).await.unwrap();
            sink.start(&[("bucket".into(), "out".into()), ("path.prefix".into(), prefix.into())]).await.unwrap();
            sink
        }
    };
    let report = start("").await.put(&[record(0), record(1)]).await.unwrap();
    assert!(report.outcomes.iter().all(|o| matches!(o, Outcome::Accept)), "{report:?}");
    for escape in ["../beside/", "../../", "a/../../"] {
        let result = start(escape).await.put(&[record(0)]).await;
        let err = result.expect_err(escape);
        assert!(
            matches!(&err, PluginError::Task(TaskError::Fatal(m)) if m.contains("not an object path")),
            "{escape}: {err:?}"
        );
    }
    let listed: Vec<_> = s3.bucket(&granted).list(None).try_collect().await.unwrap();
    let mut names: Vec<String> = listed.iter().map(|m| m.location.to_string()).collect();
    names.sort();
    assert_eq!(names, ["beside/x.txt", "inside/t/0/0-1.jsonl"]);
    let other_objects: Vec<_> = s3.bucket(&other).list(None).try_collect().await.unwrap();
    assert_eq!(other_objects.len(), 1);
}

/// Against a server that checks credentials (moto's IAM mode): a wrong
/// secret or an unknown key fails the start with a fatal error that names
/// the grant and where it points, never the secret; the right key works.
#[tokio::test]
async fn wrong_credentials_fail_the_start_clearly_and_the_right_ones_work() {
    let s3 = S3Server::with_credentials_checked();
    let bucket = s3.new_bucket("creds");
    let runtime = test_runtime();
    let plugin = runtime.load_file(&plugin_dir().join("object-sink.wasm")).await.unwrap();
    let start = |access_key: String, secret: String| {
        let (runtime, plugin, s3, bucket) = (&runtime, &plugin, &s3, &bucket);
        async move {
            let mut grant = s3.grant("out", bucket, "p");
            for (key, value) in &mut grant {
                if key.ends_with(".access.key.id") {
                    *value = access_key.clone();
                } else if key.ends_with(".secret.access.key") {
                    *value = secret.clone();
                }
            }
            let grants = Grants::from_config(grant.iter().map(|(k, v)| (k.as_str(), v.as_str()))).unwrap();
            let mut sink = runtime.instantiate(plugin, "test", &grants, &Limits::default()).await.unwrap();
            sink.start(&[("bucket".into(), "out".into())]).await.map(|()| sink)
        }
    };
    for (access_key, secret) in
        [(s3.access_key.clone(), "not-the-secret".to_string()), ("AKIANOBODYKNOWS".to_string(), s3.secret_key.clone())]
    {
        let err = start(access_key.clone(), secret.clone()).await.err().expect("a wrong key was accepted");
        let message = err.to_string();
        assert!(matches!(&err, PluginError::Task(TaskError::Fatal(_))), "{access_key}: {err:?}");
        assert!(
            message.contains(&format!("object-store grant 'out' (s3://{bucket}/p at {})", s3.endpoint)),
            "{message}"
        );
        assert!(!message.contains(&secret), "the secret shows: {message}");
        println!("{access_key}: {message}");
    }
    let mut sink = start(s3.access_key.clone(), s3.secret_key.clone()).await.unwrap();
    let report = sink.put(&[sink_record(0, 7, b"v", None)]).await.unwrap();
    assert!(matches!(report.outcomes[..], [Outcome::Accept]), "{report:?}");
}
