//! The sink end to end on the in-memory store: formats decoded back,
//! partitioners, rotation, nulls, companions, multipart, the memory bound,
//! leftover uploads, and when records are settled.

use super::*;
use crate::compress::decompress;
use crate::storage::MemoryStore;
use base64::Engine;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field as PField;
use serde_json::json;
use spillway_sdk::{Header, TimestampType};
use std::cell::Cell;
use std::rc::Rc;

const T0: i64 = 1_709_942_400_000; // 2024-03-09T00:00:00Z

struct Harness {
    sink: S3Sink,
    store: MemoryStore,
    clock: Rc<Cell<i64>>,
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    let config = Config::from(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>());
    Settings::parse(&config).unwrap_or_else(|e| panic!("{e:?}"))
}

fn harness(pairs: &[(&str, &str)]) -> Harness {
    harness_with(settings(pairs), MemoryStore::default())
}

fn harness_with(settings: Settings, store: MemoryStore) -> Harness {
    let clock = Rc::new(Cell::new(T0));
    let now = clock.clone();
    let sink = S3Sink::with_store(settings, Box::new(store.clone()), Box::new(move || now.get())).unwrap();
    Harness { sink, store, clock }
}

fn record(id: u64, partition: i32, offset: i64, value: Option<&[u8]>) -> SinkRecord {
    SinkRecord {
        id,
        topic: "orders".into(),
        partition,
        offset,
        timestamp: T0 + offset * 1000,
        timestamp_type: TimestampType::CreateTime,
        key: Some(format!("key-{offset}").into_bytes()),
        value: value.map(<[u8]>::to_vec),
        headers: vec![],
        delivery_count: 1,
        lock_deadline: None,
    }
}

/// Records 1..=n of partition 0, ids = offsets, values from `value(i)`.
fn records(n: i64, value: impl Fn(i64) -> String) -> Vec<SinkRecord> {
    (1..=n).map(|i| record(i as u64, 0, i, Some(value(i).as_bytes()))).collect()
}

fn accepted(settlements: &[Settlement]) -> Vec<u64> {
    let mut ids: Vec<u64> = settlements
        .iter()
        .map(|s| {
            assert!(matches!(s.outcome, Outcome::Accept), "{:?}", s.outcome);
            s.id
        })
        .collect();
    ids.sort();
    ids
}

/// Outcomes as text: `accept`, `hold`, `retry: why`, `reject: why`.
fn kinds(outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| match o {
            Outcome::Accept => "accept".to_string(),
            Outcome::Hold => "hold".to_string(),
            Outcome::Retry(why) => format!("retry: {why}"),
            Outcome::Reject(why) => format!("reject: {why}"),
        })
        .collect()
}

fn is_hold(o: &Outcome) -> bool {
    matches!(o, Outcome::Hold)
}

impl Harness {
    fn put(&mut self, batch: Vec<SinkRecord>) -> PutReport {
        self.sink.put(batch).unwrap()
    }

    fn flush_all(&mut self) -> Vec<u64> {
        accepted(&self.sink.flush(FlushScope::All).unwrap())
    }

    /// Objects (no upload markers), by path.
    fn objects(&self) -> Vec<(String, Vec<u8>)> {
        self.store.objects().into_iter().filter(|(p, _)| !p.contains("/_uploads/")).collect()
    }

    fn only_object(&self) -> (String, Vec<u8>) {
        let objects = self.objects();
        assert_eq!(objects.len(), 1, "{:?}", objects.iter().map(|o| &o.0).collect::<Vec<_>>());
        objects.into_iter().next().unwrap()
    }
}

fn text_lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec()).unwrap().lines().map(str::to_string).collect()
}

/// `<dir>/orders+<p>+<offset>+<task>-<16 hex>.<ext>`: checks the shape, returns the dir and ext.
fn split_name(path: &str) -> (String, String, String) {
    let (dir, file) = path.rsplit_once('/').unwrap();
    let (base, ext) = file.split_once('.').unwrap();
    let (head, token) = base.rsplit_once('-').unwrap();
    assert_eq!(token.len(), 16, "{path}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{path}");
    (dir.to_string(), head.to_string(), ext.to_string())
}

#[test]
fn json_lines_in_every_compression() {
    for (compression, ext) in [("none", "json"), ("gzip", "json.gz"), ("snappy", "json.snappy"), ("zstd", "json.zst")] {
        let mut h = harness(&[("compression.type", compression), ("task.id", "3")]);
        let values = [
            r#"{"id": 1, "name": "a"}"#.to_string(),
            json!({"schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}, "payload": {"id": 2}})
                .to_string(),
            r#""just text""#.to_string(),
            "[1, \"mixed\"]".to_string(),
        ];
        let batch = records(4, |i| values[i as usize - 1].clone());
        let report = h.put(batch);
        assert!(report.outcomes.iter().all(is_hold), "{:?}", report.outcomes);
        assert!(h.objects().is_empty(), "nothing is written before a flush");
        assert_eq!(h.flush_all(), [1, 2, 3, 4]);
        let (path, bytes) = h.only_object();
        let (dir, head, found_ext) = split_name(&path);
        assert_eq!(
            (dir.as_str(), head.as_str(), found_ext.as_str()),
            ("topics/orders/partition=0", "orders+0+0000000001+3", ext)
        );
        let lines = text_lines(&decompress(settings(&[("compression.type", compression)]).compression, &bytes));
        // An envelope is written as its payload, as JsonConverter without
        // schemas writes it; other values as they came.
        assert_eq!(
            lines,
            [r#"{"id": 1, "name": "a"}"#, r#"{"id":2}"#, r#""just text""#, r#"[1, "mixed"]"#],
            "{compression}"
        );
    }
}

#[test]
fn a_value_that_is_not_json_is_rejected_not_dropped() {
    for format in ["json", "csv", "parquet"] {
        let mut h = harness(&[("format.class", format)]);
        let report = h.put(vec![record(1, 0, 1, Some(b"{\"a\": 1}")), record(2, 0, 2, Some(b"not json"))]);
        assert!(is_hold(&report.outcomes[0]));
        let Outcome::Reject(reason) = &report.outcomes[1] else { panic!("{format}: {:?}", report.outcomes) };
        assert!(reason.starts_with("the value is not JSON"), "{reason}");
        assert_eq!(h.flush_all(), [1]);
    }
}

#[test]
fn raw_bytes_with_a_separator_in_every_compression() {
    for (compression, ext) in [("none", "bin"), ("gzip", "bin.gz"), ("snappy", "bin.snappy"), ("zstd", "bin.zst")] {
        let mut h = harness(&[
            ("format.class", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat"),
            ("compression.type", compression),
            ("format.bytearray.separator", "\\u0000"),
        ]);
        let values: [&[u8]; 3] = [b"plain", &[0xff, 0xfe, 0x01], b"not json at all"];
        h.put(values.iter().enumerate().map(|(i, v)| record(i as u64 + 1, 0, i as i64 + 1, Some(v))).collect());
        assert_eq!(h.flush_all(), [1, 2, 3]);
        let (path, bytes) = h.only_object();
        assert!(path.ends_with(&format!(".{ext}")), "{path}");
        let plain = decompress(settings(&[("compression.type", compression)]).compression, &bytes);
        assert_eq!(plain, b"plain\0\xff\xfe\x01\0not json at all\0");
    }
}

#[test]
fn csv_with_an_inferred_schema_that_widens_in_every_compression() {
    for compression in ["none", "gzip", "snappy", "zstd"] {
        let mut h = harness(&[("format.class", "csv"), ("compression.type", compression)]);
        let values = [
            r#"{"id": 1, "name": "a, \"quoted\""}"#,
            r#"{"id": 2, "name": "", "extra": 1.5}"#,
            r#"{"id": 3.25, "nested": {"x": [1, 2]}}"#,
            r#"{"id": "three"}"#,
            r#"42"#,
        ];
        let report = h.put(records(5, |i| values[i as usize - 1].to_string()));
        assert!(report.outcomes[..3].iter().all(is_hold), "{:?}", report.outcomes);
        let Outcome::Reject(reason) = &report.outcomes[3] else { panic!("{:?}", report.outcomes) };
        assert!(reason.contains("id: cannot widen float64 to fit string"), "{reason}");
        let Outcome::Reject(reason) = &report.outcomes[4] else { panic!("{:?}", report.outcomes) };
        assert_eq!(reason, "csv needs object or struct values, not int64");
        assert_eq!(h.flush_all(), [1, 2, 3]);
        let (path, bytes) = h.only_object();
        assert!(
            path.ends_with(&format!(".csv{}", settings(&[("compression.type", compression)]).compression.extension()))
        );
        let lines = text_lines(&decompress(settings(&[("compression.type", compression)]).compression, &bytes));
        // Null is an empty cell, an empty string a quoted one; the header has every field seen.
        assert_eq!(
            lines,
            ["id,name,extra,nested", r#"1,"a, ""quoted""",,"#, r#"2,"",1.5,"#, r#"3.25,,,"{""x"":[1,2]}""#],
            "{compression}"
        );
    }
}

fn typed_envelope(id: i32, day: i32, cents: i64) -> String {
    let decimal = spillway_sdk::data::Decimal { unscaled: cents as i128, scale: 2 };
    json!({
        "schema": {"type": "struct", "name": "shop.Order", "fields": [
            {"field": "id", "type": "int32"},
            {"field": "small", "type": "int8"},
            {"field": "day", "type": "int32", "name": "org.apache.kafka.connect.data.Date"},
            {"field": "at", "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"},
            {"field": "time", "type": "int32", "name": "org.apache.kafka.connect.data.Time", "optional": true},
            {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "12"}},
            {"field": "ratio", "type": "float", "optional": true},
            {"field": "blob", "type": "bytes", "optional": true},
            {"field": "tags", "type": "array", "items": {"type": "string", "optional": true}},
            {"field": "counts", "type": "map", "keys": {"type": "string"}, "values": {"type": "int64"}, "optional": true},
            {"field": "address", "type": "struct", "optional": true, "fields": [
                {"field": "city", "type": "string"},
                {"field": "zip", "type": "string", "optional": true}]},
        ]},
        "payload": {
            "id": id, "small": -3, "day": day, "at": T0 + id as i64, "time": 3_600_000, "ratio": 0.5,
            "price": base64::engine::general_purpose::STANDARD.encode(decimal.to_minimal_be_bytes()),
            "blob": if id == 1 { json!("AAE=") } else { json!(null) },
            "tags": if id == 1 { json!(["a", null, "b"]) } else { json!([]) },
            "counts": if id == 1 { json!({"x": 1, "y": 2}) } else { json!(null) },
            "address": if id == 1 { json!({"city": "Lyon", "zip": null}) } else { json!(null) },
        }
    })
    .to_string()
}

#[test]
fn csv_with_a_declared_schema_and_logical_types() {
    let mut h = harness(&[("format.class", "csv")]);
    h.put(vec![
        record(1, 0, 1, Some(typed_envelope(1, 19791, -12345).as_bytes())),
        record(2, 0, 2, Some(typed_envelope(2, 0, 5).as_bytes())),
    ]);
    assert_eq!(h.flush_all(), [1, 2]);
    let lines = text_lines(&h.only_object().1);
    assert_eq!(lines[0], "id,small,day,at,time,price,ratio,blob,tags,counts,address");
    assert_eq!(
        lines[1],
        r#"1,-3,2024-03-09,2024-03-09T00:00:00.001Z,01:00:00.000,-123.45,0.5,AAE=,"[""a"",null,""b""]","{""x"":1,""y"":2}","{""city"":""Lyon"",""zip"":null}""#
    );
    assert_eq!(lines[2], "2,-3,1970-01-01,2024-03-09T00:00:00.002Z,01:00:00.000,0.05,0.5,,[],,");
}

/// A Parquet value as JSON, logical types tagged.
fn field_json(field: &PField) -> Json {
    match field {
        PField::Null => Json::Null,
        PField::Bool(b) => json!(b),
        PField::Byte(v) => json!({"int8": v}),
        PField::Short(v) => json!({"int16": v}),
        PField::Int(v) => json!(v),
        PField::Long(v) => json!(v),
        PField::Float(v) => json!({"float": v}),
        PField::Double(v) => json!(v),
        PField::Str(s) => json!(s),
        PField::Bytes(b) => json!({"bytes": b.data()}),
        PField::Date(d) => json!({"date": d}),
        PField::TimeMillis(t) => json!({"time": t}),
        PField::TimestampMillis(t) => json!({"timestamp": t}),
        PField::Decimal(d) => {
            json!({"decimal": spillway_sdk::data::Decimal::from_be_bytes(d.data(), d.scale()).unwrap().to_string(), "precision": d.precision()})
        }
        PField::Group(row) => Json::Object(row.get_column_iter().map(|(k, v)| (k.clone(), field_json(v))).collect()),
        PField::ListInternal(list) => Json::Array(list.elements().iter().map(field_json).collect()),
        PField::MapInternal(map) => {
            Json::Array(map.entries().iter().map(|(k, v)| json!([field_json(k), field_json(v)])).collect())
        }
        other => json!(format!("unexpected {other:?}")),
    }
}

fn parquet_rows(bytes: &[u8]) -> Vec<Json> {
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.to_vec())).unwrap();
    reader
        .get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            Json::Object(row.get_column_iter().map(|(k, v)| (k.clone(), field_json(v))).collect())
        })
        .collect()
}

fn parquet_logical_types(bytes: &[u8]) -> Vec<String> {
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.to_vec())).unwrap();
    let schema = reader.metadata().file_metadata().schema_descr();
    (0..schema.num_columns())
        .map(|i| {
            let column = schema.column(i);
            format!("{} {:?} {:?}", column.path(), column.physical_type(), column.logical_type_ref())
        })
        .collect()
}

#[test]
fn parquet_with_a_declared_schema_in_every_codec() {
    for (codec, ext) in [("none", "parquet"), ("snappy", "snappy.parquet"), ("gzip", "gz.parquet")] {
        let mut h = harness(&[("format.class", "parquet"), ("parquet.codec", codec)]);
        h.put(vec![
            record(1, 0, 1, Some(typed_envelope(1, 19791, -12345).as_bytes())),
            record(2, 0, 2, Some(typed_envelope(2, 0, 5).as_bytes())),
        ]);
        assert_eq!(h.flush_all(), [1, 2]);
        let (path, bytes) = h.only_object();
        assert_eq!(split_name(&path).2, ext);
        let rows = parquet_rows(&bytes);
        assert_eq!(
            rows[0],
            json!({"id": 1, "small": {"int8": -3}, "day": {"date": 19791}, "at": {"timestamp": T0 + 1},
                "time": {"time": 3_600_000}, "price": {"decimal": "-123.45", "precision": 12}, "ratio": {"float": 0.5},
                "blob": {"bytes": [0, 1]}, "tags": ["a", null, "b"], "counts": [["x", 1], ["y", 2]],
                "address": {"city": "Lyon", "zip": null}}),
            "{codec}"
        );
        assert_eq!(
            rows[1],
            json!({"id": 2, "small": {"int8": -3}, "day": {"date": 0}, "at": {"timestamp": T0 + 2},
                "time": {"time": 3_600_000}, "price": {"decimal": "0.05", "precision": 12}, "ratio": {"float": 0.5},
                "blob": null, "tags": [], "counts": null, "address": null}),
            "{codec}"
        );
        let types = parquet_logical_types(&bytes);
        assert!(types[1].contains("INT32 Some(Integer(IntType { bit_width: 8, is_signed: true }))"), "{types:?}");
        assert!(types[2].contains("INT32 Some(Date)"), "{types:?}");
        assert!(
            types[3].contains("INT64 Some(Timestamp(TimestampType { is_adjusted_to_u_t_c: true, unit: MILLIS"),
            "{types:?}"
        );
        assert!(
            types[5].contains("FIXED_LEN_BYTE_ARRAY Some(Decimal(DecimalType { scale: 2, precision: 12 }))"),
            "{types:?}"
        );
    }
}

#[test]
fn parquet_with_an_inferred_schema_widening_until_rows_are_encoded() {
    let mut h = harness(&[("format.class", "parquet"), ("insert.offset.field", "kafka_offset")]);
    let values = [r#"{"a": null}"#, r#"{"a": 1, "b": "x"}"#, r#"{"a": 2.5, "c": [true]}"#, r#"{"a": {"no": 1}}"#];
    let report = h.put(records(4, |i| values[i as usize - 1].to_string()));
    let Outcome::Reject(reason) = &report.outcomes[3] else { panic!("{:?}", report.outcomes) };
    assert!(reason.contains("a: cannot widen float64 to fit struct"), "{reason}");
    assert_eq!(h.flush_all(), [1, 2, 3]);
    let rows = parquet_rows(&h.only_object().1);
    assert_eq!(
        rows,
        [
            json!({"a": null, "kafka_offset": 1, "b": null, "c": null}),
            json!({"a": 1.0, "kafka_offset": 2, "b": "x", "c": null}),
            json!({"a": 2.5, "kafka_offset": 3, "b": null, "c": [true]}),
        ]
    );
}

#[test]
fn a_schema_that_must_widen_after_rows_were_encoded_starts_a_new_object() {
    for format in ["csv", "parquet"] {
        // Rows are encoded once 1000 bytes of them wait: 6 values of about 170 bytes.
        let mut h = harness_with(
            small_parts(&[("format.class", format), ("flush.size", "100000")], 1000),
            MemoryStore::default(),
        );
        let report = h.put(records(8, |i| if i < 8 { line(i) } else { format!("{{\"n\": {i}, \"new\": true}}") }));
        // The first object (records 1-7) was written when record 8 needed a new column.
        assert!(report.outcomes[..7].iter().all(|o| matches!(o, Outcome::Accept)), "{format}: {:?}", report.outcomes);
        assert!(is_hold(&report.outcomes[7]));
        assert_eq!(h.flush_all(), [8]);
        let objects = h.objects();
        assert_eq!(objects.len(), 2, "{format}");
        let contents: Vec<(String, usize)> = objects
            .iter()
            .map(|(_, b)| match format {
                "csv" => (text_lines(b)[0].clone(), text_lines(b).len() - 1),
                _ => (
                    parquet_rows(b)[0].as_object().unwrap().keys().cloned().collect::<Vec<_>>().join(","),
                    parquet_rows(b).len(),
                ),
            })
            .zip(objects.iter().map(|(p, _)| split_name(p).1))
            .map(|((header, rows), name)| (format!("{name} {header}"), rows))
            .collect();
        let expected_headers = ["orders+0+0000000001+0 n,pad", "orders+0+0000000008+0 n,new"];
        assert_eq!(contents, [(expected_headers[0].to_string(), 7), (expected_headers[1].to_string(), 1)], "{format}");
    }
}

#[test]
fn a_changed_declared_schema_starts_a_new_object() {
    let mut h = harness(&[("format.class", "parquet")]);
    let v1 = json!({"schema": {"type": "struct", "fields": [{"field": "a", "type": "int32"}]}, "payload": {"a": 1}});
    let v2 = json!({"schema": {"type": "struct", "version": 2, "fields": [{"field": "a", "type": "int32"}, {"field": "b", "type": "string", "optional": true}]}, "payload": {"a": 2, "b": "x"}});
    let report = h.put(vec![
        record(1, 0, 1, Some(v1.to_string().as_bytes())),
        record(2, 0, 2, Some(v2.to_string().as_bytes())),
        record(3, 0, 3, Some(v2.to_string().as_bytes())),
    ]);
    // The first object closed when the schema changed, and was written then.
    assert_eq!(kinds(&report.outcomes), ["accept", "hold", "hold"]);
    assert_eq!(h.flush_all(), [2, 3]);
    let objects = h.objects();
    assert_eq!(objects.len(), 2);
    let mut all: Vec<Vec<Json>> = objects.iter().map(|(_, b)| parquet_rows(b)).collect();
    all.sort_by_key(|rows| rows.len());
    assert_eq!(all, [vec![json!({"a": 1})], vec![json!({"a": 2, "b": "x"}), json!({"a": 2, "b": "x"})]]);
}

#[test]
fn inserted_fields_let_readers_deduplicate() {
    let inserts = [
        ("insert.topic.field", "_topic"),
        ("insert.partition.field", "_partition"),
        ("insert.offset.field", "_offset"),
    ];
    // JSON: added to objects, replacing a field of the same name.
    let mut h = harness(&inserts);
    h.put(vec![record(1, 0, 7, Some(br#"{"v": 1, "_offset": "mine"}"#)), record(2, 0, 8, Some(b"[1]"))]);
    h.flush_all();
    assert_eq!(text_lines(&h.only_object().1), [r#"{"_offset":7,"_partition":0,"_topic":"orders","v":1}"#, "[1]"]);
    // CSV and Parquet: columns at the end.
    let mut h = harness(&[inserts[0], inserts[1], inserts[2], ("format.class", "csv")]);
    h.put(vec![record(1, 2, 7, Some(br#"{"v": 1}"#))]);
    h.flush_all();
    assert_eq!(text_lines(&h.only_object().1), ["v,_topic,_partition,_offset", "1,orders,2,7"]);
    let mut h = harness(&[inserts[0], inserts[1], inserts[2], ("format.class", "parquet")]);
    h.put(vec![record(1, 2, 7, Some(typed_envelope(1, 1, 1).as_bytes()))]);
    h.flush_all();
    let row = &parquet_rows(&h.only_object().1)[0];
    assert_eq!((&row["_topic"], &row["_partition"], &row["_offset"]), (&json!("orders"), &json!(2), &json!(7)));
}

#[test]
fn field_partitioner_paths() {
    let mut h = harness(&[
        ("partitioner.class", "io.confluent.connect.storage.partitioner.FieldPartitioner"),
        ("partition.field.name", "region,shop.id"),
    ]);
    let report = h.put(vec![
        record(1, 0, 1, Some(br#"{"region": "eu", "shop": {"id": 4}}"#)),
        record(2, 0, 2, Some(br#"{"region": "us", "shop": {"id": 4}}"#)),
        record(3, 0, 3, Some(br#"{"region": "eu", "shop": {"id": 4}}"#)),
        record(4, 0, 4, Some(br#"{"shop": {"id": 4}}"#)),
    ]);
    assert_eq!(
        kinds(std::slice::from_ref(&report.outcomes[3])),
        [format!("reject: {}", "the value has no partition field 'region'")]
    );
    assert_eq!(h.flush_all(), [1, 2, 3]);
    let dirs: Vec<(String, usize)> = h.objects().iter().map(|(p, b)| (split_name(p).0, text_lines(b).len())).collect();
    assert_eq!(
        dirs,
        [("topics/orders/region=eu/shop.id=4".to_string(), 2), ("topics/orders/region=us/shop.id=4".to_string(), 1)]
    );
}

#[test]
fn time_partitioner_paths_in_a_time_zone_and_locale() {
    let mut h = harness(&[
        ("partitioner.class", "time"),
        ("partition.duration.ms", "3600000"),
        ("path.format", "'year'=YYYY/'month'=MMMM/'day'=dd/'hour'=HH"),
        ("timezone", "Europe/Paris"),
        ("locale", "fr"),
        ("timestamp.extractor", "Record"),
        ("topics.dir", "raw/data"),
    ]);
    let mut late = record(1, 0, 1, Some(b"{}"));
    late.timestamp = 1_722_466_799_000; // 2024-07-31T22:59:59Z: 00:59 on August 1st in Paris
    let mut early = record(2, 0, 2, Some(b"{}"));
    early.timestamp = 1_722_463_200_000; // 2024-07-31T22:00:00Z: 00:00 on August 1st in Paris
    let mut none = record(3, 0, 3, Some(b"{}"));
    none.timestamp = -1;
    let report = h.put(vec![late, early, none]);
    assert_eq!(
        kinds(std::slice::from_ref(&report.outcomes[2])),
        [format!("reject: {}", "the record has no timestamp (timestamp.extractor=Record)")]
    );
    h.flush_all();
    let (path, bytes) = h.only_object();
    assert_eq!(split_name(&path).0, "raw/data/orders/year=2024/month=août/day=01/hour=00");
    assert_eq!(text_lines(&bytes).len(), 2);
    // The daily shortcut, on the wall clock.
    let mut h = harness(&[("partitioner.class", "daily")]);
    h.put(vec![record(1, 0, 1, Some(b"{}"))]);
    h.flush_all();
    assert_eq!(split_name(&h.only_object().0).0, "topics/orders/year=2024/month=03/day=09");
}

#[test]
fn flush_size_closes_objects_and_accepts_their_records_at_once() {
    let mut h = harness(&[("flush.size", "2")]);
    let report = h.put(records(5, |i| format!("{{\"n\": {i}}}")));
    // Records 1-4 filled two objects, written within this put.
    assert_eq!(kinds(&report.outcomes), ["accept", "accept", "accept", "accept", "hold"]);
    assert_eq!(h.objects().len(), 2);
    let report = h.put(records(6, |i| format!("{{\"n\": {i}}}")).split_off(5));
    // Record 5 is settled by this later put, with record 6.
    assert_eq!(kinds(&report.outcomes), ["accept"]);
    assert_eq!(accepted(&report.settled), [5]);
    let names: Vec<String> = h.objects().iter().map(|(p, _)| split_name(p).1).collect();
    assert_eq!(names, ["orders+0+0000000001+0", "orders+0+0000000003+0", "orders+0+0000000005+0"]);
}

#[test]
fn record_time_rotation() {
    let mut h = harness(&[("rotate.interval.ms", "10000"), ("timestamp.extractor", "Record")]);
    // Timestamps T0 + offset seconds: offsets 1..=10 fit the first object; 11 is 10 s after 1.
    let report = h.put(records(12, |i| format!("{i}")));
    assert!(report.outcomes[..10].iter().all(|o| matches!(o, Outcome::Accept)), "{:?}", report.outcomes);
    assert!(report.outcomes[10..].iter().all(is_hold));
    let (path, bytes) = h.only_object();
    assert_eq!(split_name(&path).1, "orders+0+0000000001+0");
    assert_eq!(text_lines(&bytes).len(), 10);
}

#[test]
fn scheduled_rotation_fires_on_an_empty_put() {
    let mut h = harness(&[("rotate.schedule.interval.ms", "60000")]);
    h.clock.set(T0 + 30_000);
    let report = h.put(records(2, |i| format!("{i}")));
    assert!(report.outcomes.iter().all(is_hold));
    h.clock.set(T0 + 59_999);
    assert!(h.put(vec![]).settled.is_empty());
    assert!(h.objects().is_empty());
    // The minute ends: the host's empty put (a poll that brought nothing) writes the object.
    h.clock.set(T0 + 60_000);
    let report = h.put(vec![]);
    assert_eq!(accepted(&report.settled), [1, 2]);
    assert_eq!(text_lines(&h.only_object().1), ["1", "2"]);
}

#[test]
fn scoped_flush_closes_only_the_objects_holding_the_records() {
    let mut h = harness(&[]);
    h.put(vec![record(1, 0, 1, Some(b"1")), record(2, 1, 1, Some(b"2")), record(3, 0, 2, Some(b"3"))]);
    let settled = h.sink.flush(FlushScope::Records(vec![3])).unwrap();
    assert_eq!(accepted(&settled), [1, 3]);
    assert_eq!(split_name(&h.only_object().0).0, "topics/orders/partition=0");
    assert_eq!(h.flush_all(), [2]);
}

#[test]
fn null_values_ignore_fail_and_write() {
    let tombstone = |id, offset| record(id, 0, offset, None);
    let mut h = harness(&[("behavior.on.null.values", "ignore")]);
    let report = h.put(vec![tombstone(1, 1), record(2, 0, 2, Some(b"1"))]);
    assert_eq!(kinds(&report.outcomes), ["accept", "hold"]);
    h.flush_all();
    assert_eq!(text_lines(&h.only_object().1), ["1"]);

    let mut h = harness(&[]);
    let Err(TaskError::Fatal(message)) = h.sink.put(vec![tombstone(1, 41)]) else { panic!("fail is the default") };
    assert_eq!(message, "a null value at topic orders partition 0 offset 41 (behavior.on.null.values=fail)");

    let write = |format: &str| {
        let mut h =
            harness(&[("behavior.on.null.values", "write"), ("format.class", format), ("insert.offset.field", "off")]);
        let report = h.put(vec![tombstone(1, 1), record(2, 0, 2, Some(br#"{"a": "x"}"#)), tombstone(3, 3)]);
        assert!(report.outcomes.iter().all(is_hold));
        assert_eq!(h.flush_all(), [1, 2, 3]);
        h.only_object().1
    };
    assert_eq!(text_lines(&write("json")), ["null", r#"{"a":"x","off":2}"#, "null"]);
    assert_eq!(write("bytes"), b"\n{\"a\": \"x\"}\n\n");
    assert_eq!(text_lines(&write("csv")), ["a,off", ",1", "x,2", ",3"]);
    assert_eq!(
        parquet_rows(&write("parquet")),
        [json!({"a": null, "off": 1}), json!({"a": "x", "off": 2}), json!({"a": null, "off": 3})]
    );
}

#[test]
fn keys_and_headers_companions_share_the_name_and_order() {
    let header = |k: &str, v: Option<&[u8]>| Header { key: k.into(), value: v.map(<[u8]>::to_vec) };
    let batch = || {
        let mut a = record(1, 0, 1, Some(br#"{"n": 1}"#));
        a.key = Some(br#"{"schema": {"type": "string"}, "payload": "k1"}"#.to_vec());
        a.headers = vec![header("trace", Some(b"abc")), header("empty", None)];
        let mut b = record(2, 0, 2, Some(br#"{"n": 2}"#));
        b.key = None;
        let mut c = record(3, 0, 3, Some(br#"{"n": 3}"#));
        c.key = Some(vec![0xff, 0x00]);
        c.headers = vec![header("bin", Some(&[0xff]))];
        vec![a, b, c]
    };
    let run = |format: &str| {
        let mut h = harness(&[("format.class", format), ("store.kafka.keys", "true"), ("store.kafka.headers", "true")]);
        h.put(batch());
        assert_eq!(h.flush_all(), [1, 2, 3]);
        let objects = h.objects();
        assert_eq!(objects.len(), 3);
        let ext = settings(&[("format.class", format)]).extension();
        let values = objects.iter().find(|(p, _)| !p.contains(".keys.") && !p.contains(".headers.")).unwrap();
        assert!(values.0.ends_with(&format!(".{ext}")), "{}", values.0);
        let base = values.0.strip_suffix(&format!(".{ext}")).unwrap().to_string();
        let get = |suffix: &str| objects.iter().find(|(p, _)| *p == format!("{base}{suffix}")).unwrap().1.clone();
        (get(&format!(".keys.{ext}")), get(&format!(".headers.{ext}")))
    };
    let (keys, headers) = run("json");
    assert_eq!(text_lines(&keys), [r#""k1""#, "null", r#""/wA=""#]);
    assert_eq!(
        text_lines(&headers),
        [r#"[{"key":"trace","value":"abc"},{"key":"empty","value":null}]"#, "[]", r#"[{"key":"bin","value":"/w=="}]"#]
    );
    let (keys, headers) = run("bytes");
    assert_eq!(keys, b"{\"schema\": {\"type\": \"string\"}, \"payload\": \"k1\"}\n\n\xff\x00\n");
    assert_eq!(text_lines(&headers).len(), 3);
    let (keys, headers) = run("csv");
    assert_eq!(
        text_lines(&keys),
        ["key", r#""{""schema"": {""type"": ""string""}, ""payload"": ""k1""}""#, "", "/wA="]
    );
    assert_eq!(text_lines(&headers)[3], r#""[{""key"":""bin"",""value"":""/w==""}]""#);
    let (keys, headers) = run("parquet");
    assert_eq!(
        parquet_rows(&keys),
        [
            json!({"key": {"bytes": br#"{"schema": {"type": "string"}, "payload": "k1"}"#.to_vec()}}),
            json!({"key": null}),
            json!({"key": {"bytes": [255, 0]}})
        ]
    );
    assert_eq!(
        parquet_rows(&headers),
        [
            json!({"headers": [{"key": "trace", "value": {"bytes": b"abc".to_vec()}}, {"key": "empty", "value": null}]}),
            json!({"headers": []}),
            json!({"headers": [{"key": "bin", "value": {"bytes": [255]}}]})
        ]
    );
}

/// Settings with a part size below S3's minimum, which validation refuses.
fn small_parts(pairs: &[(&str, &str)], part_size: usize) -> Settings {
    let mut s = settings(pairs);
    s.part_size = part_size;
    s.memory_budget = part_size * s.max_open;
    s
}

/// A compact JSON line: written as it comes, so its size is the object's.
fn line(i: i64) -> String {
    format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(90))
}

#[test]
fn an_object_past_the_part_size_streams_through_a_multipart_upload() {
    let store = MemoryStore::default();
    store.inspect(|m| m.min_part = 1000);
    let mut h = harness_with(small_parts(&[("flush.size", "100000")], 1000), store);
    // About 100-byte lines: a part every 10 records.
    let report = h.put(records(35, line));
    assert!(report.outcomes.iter().all(is_hold));
    let (uploads, markers) = h.store.inspect(|m| {
        let markers: Vec<(String, Vec<u8>)> =
            m.objects.iter().filter(|(p, _)| p.contains("/_uploads/")).map(|(p, b)| (p.clone(), b.clone())).collect();
        (m.uploads.values().map(|(p, parts)| (p.clone(), parts.len())).collect::<Vec<_>>(), markers)
    });
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].1, 3, "three full parts sent while the object is open");
    // The marker names the upload, for a restarted task to abort it.
    assert_eq!(markers.len(), 1);
    assert!(markers[0].0.starts_with("topics/_uploads/task-0/orders+0+0000000001+0-"), "{}", markers[0].0);
    let id = h.store.inspect(|m| m.uploads.keys().next().unwrap().clone());
    assert_eq!(String::from_utf8(markers[0].1.clone()).unwrap(), format!("{}\n{id}", uploads[0].0));
    assert!(h.objects().is_empty(), "nothing visible before complete");
    assert_eq!(h.flush_all(), (1..=35).collect::<Vec<u64>>());
    let (path, bytes) = h.only_object();
    assert_eq!(
        text_lines(&bytes),
        (1..=35).map(line).map(|l| serde_json::from_str::<Json>(&l).unwrap().to_string()).collect::<Vec<_>>()
    );
    let completed = h.store.inspect(|m| m.completed.clone());
    // Compact lines: 107 bytes for records 1-9, 108 from 10 on; a part goes once 1000 bytes wait.
    assert_eq!(completed, [(path, vec![9 * 107 + 108, 10 * 108, 10 * 108, 5 * 108])]);
    assert!(h.store.objects().keys().all(|p| !p.contains("/_uploads/")), "the marker is deleted after complete");
}

#[test]
fn parquet_streams_row_groups_through_parts() {
    let store = MemoryStore::default();
    let mut h = harness_with(small_parts(&[("flush.size", "100000"), ("format.class", "parquet")], 4000), store);
    // Values that do not compress away, so that the file outgrows a part.
    h.put(records(200, |i| {
        format!("{{\"n\": {i}, \"pad\": \"{:0>90}\"}}", (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }));
    let sent = h.store.inspect(|m| m.uploads.values().map(|(_, parts)| parts.len()).sum::<usize>());
    assert!(sent >= 1, "row groups went up as parts");
    h.flush_all();
    let (_, bytes) = h.only_object();
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes.clone())).unwrap();
    assert!(reader.metadata().num_row_groups() > 1);
    let rows = parquet_rows(&bytes);
    assert_eq!(rows.len(), 200);
    assert_eq!(rows[199]["n"], 200);
}

#[test]
fn the_memory_bound_writes_the_largest_objects_early() {
    // At most two open objects: a third partition closes the largest.
    let mut h = harness(&[("max.open.objects", "2")]);
    let mut batch = vec![record(1, 0, 1, Some(line(1).as_bytes())), record(2, 0, 2, Some(line(2).as_bytes()))];
    batch.push(record(3, 1, 1, Some(b"1")));
    batch.push(record(4, 2, 1, Some(b"1")));
    let report = h.put(batch);
    assert_eq!(kinds(&report.outcomes), ["accept", "accept", "hold", "hold"]);
    assert_eq!(split_name(&h.only_object().0).0, "topics/orders/partition=0");

    // Bytes: two objects of 1000-byte parts may buffer 2000 bytes in all. A csv
    // object holds up to a part of rows waiting plus the encoded rows not yet
    // a part, so two of them can pass that.
    let mut h = harness_with(
        small_parts(&[("max.open.objects", "2"), ("flush.size", "100000"), ("format.class", "csv")], 1000),
        MemoryStore::default(),
    );
    let mut batch: Vec<SinkRecord> =
        (1..=11).map(|i| record(i, 0, i as i64, Some(line(i as i64).as_bytes()))).collect();
    batch.extend((12..=20).map(|i| record(i, 1, i as i64, Some(line(i as i64).as_bytes()))));
    let report = h.put(batch);
    assert!(report.outcomes[..11].iter().all(|o| matches!(o, Outcome::Accept)), "{:?}", report.outcomes);
    assert!(report.outcomes[11..].iter().all(is_hold), "{:?}", report.outcomes);
    let (path, bytes) = h.only_object();
    assert_eq!(split_name(&path).0, "topics/orders/partition=0");
    assert_eq!(text_lines(&bytes).len(), 12);
    assert!(h.sink.buffered() <= 2000);
}

#[test]
fn uploads_left_by_a_killed_task_are_aborted_at_start() {
    let store = MemoryStore::default();
    store.inspect(|m| {
        m.objects.insert(
            "topics/_uploads/task-4/orders+0+0000000001+4-aaaa.json".into(),
            b"topics/orders/partition=0/orders+0+0000000001+4-aaaa.json\nupload-77".to_vec(),
        );
        // Another task's marker is not this task's to touch.
        m.objects.insert("topics/_uploads/task-5/x.json".into(), b"topics/x.json\nupload-78".to_vec());
    });
    let h = harness_with(settings(&[("task.id", "4")]), store);
    let (aborted, objects) = h.store.inspect(|m| (m.aborted.clone(), m.objects.keys().cloned().collect::<Vec<_>>()));
    assert_eq!(
        aborted,
        [("topics/orders/partition=0/orders+0+0000000001+4-aaaa.json".to_string(), "upload-77".to_string())]
    );
    assert_eq!(objects, ["topics/_uploads/task-5/x.json"]);
}

#[test]
fn stop_aborts_uploads_in_progress() {
    let mut h = harness_with(small_parts(&[("flush.size", "100000")], 1000), MemoryStore::default());
    h.put(records(15, line));
    h.sink.stop();
    let (aborted, uploads, objects) = h.store.inspect(|m| (m.aborted.len(), m.uploads.len(), m.objects.len()));
    assert_eq!((aborted, uploads, objects), (1, 0, 0));
}

/// A `create` goes on in the host while the sink encodes on: the records of
/// an object are held until its write ended, at most two writes run ahead,
/// and a flush waits for the writes holding what it names.
#[test]
fn writes_go_on_while_the_sink_encodes_and_settle_only_once_ended() {
    let mut h = harness(&[("flush.size", "2")]);
    h.store.inspect(|m| m.defer_writes = true);
    let report = h.put(records(5, |i| format!("{i}")));
    // Objects [1,2] and [3,4] closed; their writes go on; 5 is open.
    assert!(report.outcomes.iter().all(is_hold), "{:?}", report.outcomes);
    assert!(report.settled.is_empty() && h.objects().is_empty(), "settled before the write ended");
    // A third object to write waits for the oldest of the two ahead.
    let report = h.put(records(7, |i| format!("{i}")).split_off(5));
    assert_eq!(kinds(&report.outcomes), ["hold", "hold"]);
    assert_eq!(h.objects().len(), 1, "the oldest write was waited for");
    assert_eq!(accepted(&report.settled), [1, 2]);
    // A scoped flush waits for the write holding record 3, not the others.
    let settled = accepted(&h.sink.flush(FlushScope::Records(vec![3])).unwrap());
    assert_eq!(settled, [3, 4]);
    assert_eq!(h.flush_all(), [5, 6, 7]);
    assert_eq!(h.objects().len(), 4, "[1,2] [3,4] [5,6] [7]");
}

/// A write that failed in the host is retried, and an object its own lost
/// answer landed is recognised rather than written twice.
#[test]
fn a_write_that_failed_in_the_host_is_retried_without_a_second_object() {
    let mut h = harness(&[("flush.size", "2")]);
    h.store.inspect(|m| {
        m.defer_writes = true;
        m.fail_writes = Some(TaskError::Retriable("connection reset".into()));
    });
    let report = h.put(records(2, |i| format!("{i}")));
    assert!(report.outcomes.iter().all(is_hold));
    let Err(TaskError::Retriable(message)) = h.sink.flush(FlushScope::All) else { panic!("settled a failed write") };
    assert!(message.contains("connection reset"), "{message}");
    h.store.inspect(|m| m.fail_writes = None);
    assert_eq!(h.flush_all(), [1, 2]);
    assert_eq!(h.objects().len(), 1);
}

#[test]
fn a_retriable_write_failure_keeps_records_held_until_a_write_succeeds() {
    let mut h = harness(&[("flush.size", "2")]);
    h.store.inspect(|m| m.fail_writes = Some(TaskError::Retriable("503 Slow Down".into())));
    let report = h.put(records(3, |i| format!("{i}")));
    // The object of records 1 and 2 closed but could not be written: they stay held.
    assert!(report.outcomes.iter().all(is_hold), "{:?}", report.outcomes);
    assert!(report.settled.is_empty());
    let Err(TaskError::Retriable(message)) = h.sink.flush(FlushScope::Records(vec![1])) else { panic!() };
    assert!(message.contains("503 Slow Down"), "{message}");
    assert!(h.objects().is_empty());
    // Still down: an empty put tick settles nothing.
    assert!(h.put(vec![]).settled.is_empty());
    h.store.inspect(|m| m.fail_writes = None);
    let report = h.put(vec![]);
    assert_eq!(accepted(&report.settled), [1, 2]);
    assert_eq!(h.flush_all(), [3]);
    assert_eq!(h.objects().len(), 2);
}

#[test]
fn while_writes_fail_the_memory_bound_turns_new_records_away_for_a_retry() {
    let mut h =
        harness_with(small_parts(&[("max.open.objects", "1"), ("flush.size", "100000")], 1000), MemoryStore::default());
    h.store.inspect(|m| m.fail_writes = Some(TaskError::Retriable("timeout".into())));
    let report = h.put(records(30, line));
    let retried = report.outcomes.iter().filter(|o| matches!(o, Outcome::Retry(_))).count();
    assert!(retried > 0 && is_hold(&report.outcomes[0]), "{:?}", report.outcomes);
    h.store.inspect(|m| m.fail_writes = None);
    let held = report.outcomes.iter().filter(|o| is_hold(o)).count() as u64;
    let mut settled = accepted(&h.put(vec![]).settled);
    settled.extend(h.flush_all());
    settled.sort();
    assert_eq!(settled, (1..=held).collect::<Vec<_>>());
}

#[test]
fn a_name_taken_by_another_object_gets_a_new_token() {
    let mut h = harness(&[]);
    h.put(vec![record(1, 0, 1, Some(b"1"))]);
    // Someone else's object appears at this object's name before it is written.
    let name = h.sink.open.values().next().unwrap().name();
    h.store.inspect(|m| m.objects.insert(name.clone(), b"theirs".to_vec()));
    assert_eq!(h.flush_all(), [1]);
    let objects = h.objects();
    assert_eq!(objects.len(), 2);
    assert_eq!(h.store.get(&name).unwrap().unwrap(), b"theirs");
    assert!(objects.iter().any(|(p, b)| *p != name && b == b"1\n"));
}

#[test]
fn a_write_that_landed_before_its_answer_was_lost_is_not_written_twice() {
    struct LoseFirstAnswer(MemoryStore, Cell<bool>);
    impl Store for LoseFirstAnswer {
        fn create(&self, path: &str, data: &[u8]) -> Result<bool, TaskError> {
            let created = self.0.create(path, data)?;
            if !path.contains("_uploads") && !self.1.replace(true) {
                return Err(TaskError::Retriable("timeout".into()));
            }
            Ok(created)
        }
        fn begin_create(&self, path: &str, data: &[u8]) -> Result<Box<dyn storage::PendingWrite>, TaskError> {
            Ok(Box::new(storage::Ended(self.create(path, data))))
        }
        fn get(&self, path: &str) -> Result<Option<Vec<u8>>, TaskError> {
            self.0.get(path)
        }
        fn delete(&self, path: &str) -> Result<(), TaskError> {
            self.0.delete(path)
        }
        fn list(&self, prefix: &str) -> Result<Vec<String>, TaskError> {
            self.0.list(prefix)
        }
        fn start_upload(&self, path: &str) -> Result<Box<dyn storage::MultipartUpload>, TaskError> {
            self.0.start_upload(path)
        }
        fn abort_upload(&self, path: &str, id: &str) -> Result<(), TaskError> {
            self.0.abort_upload(path, id)
        }
    }
    let store = MemoryStore::default();
    let mut sink =
        S3Sink::with_store(settings(&[]), Box::new(LoseFirstAnswer(store.clone(), Cell::new(false))), Box::new(|| T0))
            .unwrap();
    sink.put(vec![record(1, 0, 1, Some(b"1"))]).unwrap();
    assert!(sink.flush(FlushScope::All).is_err());
    assert_eq!(accepted(&sink.flush(FlushScope::All).unwrap()), [1]);
    assert_eq!(store.objects().len(), 1);
}

#[test]
fn validation_names_the_keys() {
    let config = Config::from(vec![
        ("s3.part.size".to_string(), "1024".to_string()),
        ("format.class".to_string(), "xml".to_string()),
    ]);
    let errors: Vec<String> = S3Sink::validate(&config).into_iter().map(|e| e.key).collect();
    assert_eq!(errors, ["format.class", "s3.part.size"]);
    assert!(S3Sink::validate(&Config::default()).is_empty());
}

#[test]
fn readme_lists_every_config_key_as_metadata_declares_it() {
    let table =
        spillway_sdk::readme_key_table(include_str!("../README.md")).expect("README has the config-keys markers");
    let expected = spillway_sdk::markdown_key_table(&S3Sink::metadata().config);
    assert!(
        table == expected,
        "plugins/s3-sink/README.md's key table differs from S3Sink::metadata(); put this between the markers:\n\n{expected}"
    );
}
