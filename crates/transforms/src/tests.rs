//! Each transform against the examples Connect's and Debezium's docs give,
//! and the grammar's refusals in Connect's words.

use super::*;
use bytes::Bytes;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const K: &str = "org.apache.kafka.connect.transforms.";
const P: &str = "org.apache.kafka.connect.transforms.predicates.";

fn chain(keys: &[(&str, &str)]) -> Chain {
    Chain::parse(&config(keys), &|_| false).unwrap_or_else(|p| panic!("{p:?}"))
}

fn problems(keys: &[(&str, &str)]) -> Vec<(String, String)> {
    Chain::parse(&config(keys), &|_| false).expect_err("refused").into_iter().map(|p| (p.key, p.message)).collect()
}

fn config(keys: &[(&str, &str)]) -> BTreeMap<String, String> {
    keys.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn record(key: Option<Value>, value: Option<Value>) -> Record {
    let bytes = |v: Option<Value>| v.map(|v| Bytes::from(v.to_string()));
    Record {
        topic: "orders".into(),
        partition: 2,
        offset: 41,
        timestamp: 1_700_000_000_000,
        key: bytes(key),
        value: bytes(value),
        headers: Vec::new(),
    }
}

fn json_of(bytes: &Option<Bytes>) -> Option<Value> {
    bytes.as_ref().map(|b| serde_json::from_slice(b).unwrap())
}

fn struct_of(fields: &[(&str, &str)]) -> Value {
    let fields: Vec<Value> = fields.iter().map(|(f, t)| json!({"field": f, "type": t, "optional": false})).collect();
    json!({"type": "struct", "fields": fields, "optional": false})
}

#[test]
fn hoist_then_insert_as_kafkas_documentation_shows() {
    let chain = chain(&[
        ("transforms", "MakeMap, InsertSource"),
        ("transforms.MakeMap.type", &format!("{K}HoistField$Value")),
        ("transforms.MakeMap.field", "line"),
        ("transforms.InsertSource.type", &format!("{K}InsertField$Value")),
        ("transforms.InsertSource.static.field", "data_source"),
        ("transforms.InsertSource.static.value", "test-file-source"),
    ]);
    let out = chain.apply(record(None, Some(json!("hello world")))).unwrap().unwrap();
    assert_eq!(json_of(&out.value), Some(json!({"line": "hello world", "data_source": "test-file-source"})));
}

#[test]
fn insert_field_adds_the_records_coordinates_to_a_struct_and_its_schema() {
    let chain = chain(&[
        ("transforms", "meta"),
        ("transforms.meta.type", &format!("{K}InsertField$Value")),
        ("transforms.meta.topic.field", "t!"),
        ("transforms.meta.partition.field", "p"),
        ("transforms.meta.offset.field", "o"),
        ("transforms.meta.timestamp.field", "ts"),
    ]);
    let value = json!({"schema": struct_of(&[("id", "int32")]), "payload": {"id": 7}});
    let out = chain.apply(record(None, Some(value))).unwrap().unwrap();
    let out = json_of(&out.value).unwrap();
    assert_eq!(out["payload"], json!({"id": 7, "t": "orders", "p": 2, "o": 41, "ts": 1_700_000_000_000i64}));
    let fields = out["schema"]["fields"].as_array().unwrap();
    let field = |name: &str| fields.iter().find(|f| f["field"] == name).unwrap().clone();
    assert_eq!((field("t")["type"].clone(), field("t")["optional"].clone()), (json!("string"), json!(false)));
    assert_eq!((field("p")["type"].clone(), field("p")["optional"].clone()), (json!("int32"), json!(true)));
    assert_eq!(field("ts")["name"], "org.apache.kafka.connect.data.Timestamp");
    let tombstone = chain.apply(record(None, None)).unwrap().unwrap();
    assert_eq!(tombstone.value, None, "a null value passes as it is");
    let refused = chain.apply(record(None, Some(json!(5)))).unwrap_err();
    assert_eq!(refused.class, "org.apache.kafka.connect.transforms.InsertField$Value");
    assert_eq!(refused.message, "Only Map objects supported in absence of schema for [field insertion], found: number");
}

#[test]
fn replace_field_excludes_before_including_and_renames_in_the_schema_too() {
    let chain = chain(&[
        ("transforms", "r"),
        ("transforms.r.type", &format!("{K}ReplaceField$Value")),
        ("transforms.r.include", "id,name,secret"),
        ("transforms.r.exclude", "secret"),
        ("transforms.r.renames", "name:full_name"),
    ]);
    let schema = struct_of(&[("id", "int32"), ("name", "string"), ("secret", "string"), ("extra", "string")]);
    let value = json!({"schema": schema, "payload": {"id": 1, "name": "a", "secret": "s", "extra": "x"}});
    let out = json_of(&chain.apply(record(None, Some(value))).unwrap().unwrap().value).unwrap();
    assert_eq!(out["payload"], json!({"id": 1, "full_name": "a"}));
    let names: Vec<&str> =
        out["schema"]["fields"].as_array().unwrap().iter().map(|f| f["field"].as_str().unwrap()).collect();
    assert_eq!(names, ["id", "full_name"]);
}

#[test]
fn extract_field_value_to_key_and_mask_field() {
    let schema = struct_of(&[("id", "int64"), ("email", "string"), ("score", "float64")]);
    let value = json!({"schema": schema, "payload": {"id": 9, "email": "a@b.c", "score": 2.5}});
    let chain = chain(&[
        ("transforms", "key,mask"),
        ("transforms.key.type", &format!("{K}ValueToKey")),
        ("transforms.key.fields", "id"),
        ("transforms.mask.type", &format!("{K}MaskField$Value")),
        ("transforms.mask.fields", "email,score"),
    ]);
    let out = chain.apply(record(None, Some(value.clone()))).unwrap().unwrap();
    let key = json_of(&out.key).unwrap();
    assert_eq!(key["payload"], json!({"id": 9}));
    assert_eq!(key["schema"]["fields"][0]["type"], "int64");
    assert_eq!(json_of(&out.value).unwrap()["payload"], json!({"id": 9, "email": "", "score": 0.0}));
    let extract = self::chain(&[
        ("transforms", "x"),
        ("transforms.x.type", &format!("{K}ExtractField$Key")),
        ("transforms.x.field", "id"),
    ]);
    let out = extract.apply(out).unwrap().unwrap();
    assert_eq!(json_of(&out.key), Some(json!({"schema": {"type": "int64", "optional": false}, "payload": 9})));
    let missing = self::chain(&[
        ("transforms", "x"),
        ("transforms.x.type", &format!("{K}ExtractField$Value")),
        ("transforms.x.field", "nope"),
    ]);
    assert_eq!(missing.apply(record(None, Some(value))).unwrap_err().message, "Unknown field: nope");
}

#[test]
fn routers_rename_topics_as_connect_does() {
    let regex = chain(&[
        ("transforms", "r"),
        ("transforms.r.type", &format!("{K}RegexRouter")),
        ("transforms.r.regex", "(.*)Stream_(.*)"),
        ("transforms.r.replacement", "$1$2"),
    ]);
    let mut r = record(None, None);
    r.topic = "Order_Stream_Data".into();
    assert_eq!(regex.apply(r.clone()).unwrap().unwrap().topic, "Order_Data");
    r.topic = "unmatched".into();
    assert_eq!(regex.apply(r).unwrap().unwrap().topic, "unmatched", "the whole name must match");
    let daily = chain(&[
        ("transforms", "t"),
        ("transforms.t.type", &format!("{K}TimestampRouter")),
        ("transforms.t.timestamp.format", "yyyy.MM.dd'T'HH"),
    ]);
    assert_eq!(daily.apply(record(None, None)).unwrap().unwrap().topic, "orders-2023.11.14T22");
    let mut untimed = record(None, None);
    untimed.timestamp = -1;
    assert!(daily.apply(untimed).unwrap_err().message.starts_with("Timestamp missing on record"));
}

#[test]
fn a_predicate_decides_where_a_transform_runs_and_negate_turns_it_round() {
    let keys = |negate: &str| {
        chain(&[
            ("transforms", "drop"),
            ("transforms.drop.type", &format!("{K}Filter")),
            ("transforms.drop.predicate", "isAudit"),
            ("transforms.drop.negate", negate),
            ("predicates", "isAudit"),
            ("predicates.isAudit.type", &format!("{P}TopicNameMatches")),
            ("predicates.isAudit.pattern", "audit-.*"),
        ])
    };
    let mut audit = record(None, Some(json!(1)));
    audit.topic = "audit-eu".into();
    assert_eq!(keys("false").apply(audit.clone()).unwrap(), None, "dropped where the predicate holds");
    assert!(keys("false").apply(record(None, Some(json!(1)))).unwrap().is_some());
    assert!(keys("true").apply(audit).unwrap().is_some(), "negated: kept where it holds");
    let tombstones = chain(&[
        ("transforms", "drop"),
        ("transforms.drop.type", &format!("{K}Filter")),
        ("transforms.drop.predicate", "t"),
        ("predicates", "t"),
        ("predicates.t.type", &format!("{P}RecordIsTombstone")),
    ]);
    assert_eq!(tombstones.apply(record(None, None)).unwrap(), None);
}

#[test]
fn headers_are_inserted_moved_and_dropped() {
    let chain = chain(&[
        ("transforms", "from,insert,drop"),
        ("transforms.from.type", &format!("{K}HeaderFrom$Value")),
        ("transforms.from.fields", "region,id"),
        ("transforms.from.headers", "region,row"),
        ("transforms.from.operation", "move"),
        ("transforms.insert.type", &format!("{K}InsertHeader")),
        ("transforms.insert.header", "source"),
        ("transforms.insert.value.literal", "spillway"),
        ("transforms.drop.type", &format!("{K}DropHeaders")),
        ("transforms.drop.headers", "trace"),
    ]);
    let mut r = record(None, Some(json!({"id": 3, "region": "eu", "v": 1})));
    r.headers.push(("trace".into(), Some(Bytes::from_static(b"x"))));
    let out = chain.apply(r).unwrap().unwrap();
    assert_eq!(json_of(&out.value), Some(json!({"v": 1})));
    let headers: Vec<(&str, &[u8])> = out.headers.iter().map(|(k, v)| (k.as_str(), v.as_deref().unwrap())).collect();
    assert_eq!(headers, [("region", &b"eu"[..]), ("row", b"3"), ("source", b"spillway")]);
}

/// A Debezium change event for table `inventory.customers`, as
/// JsonConverter (schemas.enable) writes it.
fn change(op: &str, before: Option<Value>, after: Option<Value>) -> Value {
    let row = json!({"type": "struct", "optional": true, "name": "dbserver1.inventory.customers.Value",
        "fields": [{"field": "id", "type": "int32", "optional": false}, {"field": "email", "type": "string", "optional": true}]});
    let source = json!({"type": "struct", "optional": false, "name": "io.debezium.connector.postgresql.Source",
        "fields": [{"field": "table", "type": "string", "optional": true}, {"field": "lsn", "type": "int64", "optional": true}]});
    let field = |name: &str, schema: &Value| {
        let mut f = schema.clone();
        f["field"] = json!(name);
        f
    };
    json!({
        "schema": {"type": "struct", "optional": false, "name": "dbserver1.inventory.customers.Envelope",
            "fields": [field("before", &row), field("after", &row), field("source", &source),
                {"field": "op", "type": "string", "optional": false}, {"field": "ts_ms", "type": "int64", "optional": true}]},
        "payload": {"before": before, "after": after, "source": {"table": "customers", "lsn": 33}, "op": op, "ts_ms": 5}
    })
}

fn unwrap(mode: &str) -> Chain {
    chain(&[
        ("transforms", "unwrap"),
        ("transforms.unwrap.type", "io.debezium.transforms.ExtractNewRecordState"),
        ("transforms.unwrap.delete.tombstone.handling.mode", mode),
        ("transforms.unwrap.add.fields", "op,table,source.lsn:position"),
    ])
}

#[test]
fn extract_new_record_state_unwraps_changes_and_handles_deletes_by_mode() {
    let key = Some(json!({"id": 1}));
    let row = json!({"id": 1, "email": "a@x"});
    let create = record(key.clone(), Some(change("c", None, Some(row.clone()))));
    let delete = record(key.clone(), Some(change("d", Some(row.clone()), None)));
    let tombstone = record(key.clone(), None);

    let out = unwrap("tombstone").apply(create.clone()).unwrap().unwrap();
    let value = json_of(&out.value).unwrap();
    assert_eq!(
        value["payload"],
        json!({"id": 1, "email": "a@x", "__op": "c", "__table": "customers", "__position": 33})
    );
    assert_eq!(value["schema"]["name"], "dbserver1.inventory.customers.Value");
    assert_eq!(value["schema"]["fields"][2], json!({"field": "__op", "type": "string", "optional": true}));
    assert_eq!(out.key, create.key, "the key is not changed");

    let deleted = unwrap("tombstone").apply(delete.clone()).unwrap().unwrap();
    assert_eq!((deleted.value, deleted.key), (None, create.key.clone()), "a delete becomes a null value");
    assert_eq!(unwrap("tombstone").apply(tombstone.clone()).unwrap(), None, "its tombstone is dropped");

    let rewritten = unwrap("rewrite").apply(delete.clone()).unwrap().unwrap();
    let payload = json_of(&rewritten.value).unwrap()["payload"].clone();
    assert_eq!((payload["__deleted"].clone(), payload["id"].clone()), (json!("true"), json!(1)));
    let created = unwrap("rewrite").apply(create).unwrap().unwrap();
    assert_eq!(json_of(&created.value).unwrap()["payload"]["__deleted"], "false");
    assert_eq!(unwrap("rewrite").apply(tombstone.clone()).unwrap(), None);
    assert_eq!(unwrap("rewrite-with-tombstone").apply(tombstone.clone()).unwrap(), Some(tombstone.clone()));
    assert_eq!(unwrap("drop").apply(delete).unwrap(), None);
    let not_a_change = record(None, Some(json!({"id": 1})));
    assert_eq!(unwrap("drop").apply(not_a_change.clone()).unwrap(), Some(not_a_change), "passed on as it is");
}

#[test]
fn the_grammar_is_refused_in_connects_words_and_no_key_is_passed_over() {
    let refused = problems(&[
        ("transforms", "a,b,a"),
        ("transforms.a.type", &format!("{K}InsertField")),
        ("transforms.b.type", &format!("{K}ReplaceField$Value")),
        ("transforms.b.exclud", "x"),
        ("transforms.b.negate", "true"),
        ("transforms.c.type", &format!("{K}Filter")),
        ("predicates", "p"),
    ]);
    let expected = [
        ("transforms", "Invalid value a,b,a for configuration transforms: Duplicate alias provided."),
        ("predicates.p.type", "Missing required configuration \"predicates.p.type\" which has no default value."),
        (
            "transforms.a.type",
            "Invalid value org.apache.kafka.connect.transforms.InsertField for configuration transforms.a.type: This \
             class is abstract and cannot be created. Did you mean org.apache.kafka.connect.transforms.InsertField$Key, \
             org.apache.kafka.connect.transforms.InsertField$Value?",
        ),
        (
            "transforms.b.negate",
            "Config 'transforms.b.negate' was provided but there is no config 'transforms.b.predicate' defining a \
             predicate to be negated.",
        ),
        (
            "transforms.b.exclud",
            "org.apache.kafka.connect.transforms.ReplaceField$Value has no key exclud, so it would change nothing (its \
             keys: exclude, include, renames, blacklist, whitelist)",
        ),
        ("transforms.c.type", "names no alias listed in transforms (a,b), so it would change nothing"),
    ];
    let expected: Vec<(String, String)> = expected.iter().map(|(k, m)| (k.to_string(), m.to_string())).collect();
    assert_eq!(refused, expected);
    let unknown = problems(&[("transforms", "x"), ("transforms.x.type", "com.example.Nope")]);
    assert!(unknown[0].1.starts_with(
        "Invalid value com.example.Nope for configuration transforms.x.type: Class com.example.Nope could not be found."
    ));
    let insert_nothing = problems(&[("transforms", "x"), ("transforms.x.type", &format!("{K}InsertField$Value"))]);
    assert_eq!(insert_nothing, [("transforms.x.type".to_string(), "No field insertion configured".to_string())]);
    assert!(Chain::parse(&config(&[("transforms", " ")]), &|_| false).unwrap().is_empty());
}

#[test]
fn flatten_brings_nested_fields_up_and_cast_converts_types() {
    let flatten = chain(&[
        ("transforms", "f"),
        ("transforms.f.type", &format!("{K}Flatten$Value")),
        ("transforms.f.delimiter", "_"),
    ]);
    let out =
        flatten.apply(record(None, Some(json!({"id": 1, "address": {"city": "Oslo", "geo": {"lat": 59.9}}})))).unwrap();
    assert_eq!(json_of(&out.unwrap().value), Some(json!({"id": 1, "address_city": "Oslo", "address_geo_lat": 59.9})));
    let address = json!({"field": "address", "type": "struct", "optional": true,
        "fields": [{"field": "city", "type": "string", "optional": false}]});
    let schema = json!({"type": "struct", "optional": false, "fields": [{"field": "id", "type": "int32", "optional": false}, address]});
    let out =
        flatten.apply(record(None, Some(json!({"schema": schema, "payload": {"id": 1, "address": null}})))).unwrap();
    let out = json_of(&out.unwrap().value).unwrap();
    assert_eq!(out["payload"], json!({"id": 1, "address_city": null}));
    assert_eq!(
        out["schema"]["fields"][1],
        json!({"field": "address_city", "type": "string", "optional": true}),
        "optional as its parent"
    );

    let cast = chain(&[
        ("transforms", "c"),
        ("transforms.c.type", &format!("{K}Cast$Value")),
        ("transforms.c.spec", "qty:int16,price:string,ok:boolean"),
    ]);
    let schema = struct_of(&[("qty", "string"), ("price", "float64"), ("ok", "int32")]);
    let value = json!({"schema": schema, "payload": {"qty": "42", "price": 9.5, "ok": 0}});
    let out = json_of(&cast.apply(record(None, Some(value))).unwrap().unwrap().value).unwrap();
    assert_eq!(out["payload"], json!({"qty": 42, "price": "9.5", "ok": false}));
    let types: Vec<&str> =
        out["schema"]["fields"].as_array().unwrap().iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["int16", "string", "boolean"]);
    let too_big = cast.apply(record(None, Some(json!({"qty": 70000})))).unwrap_err();
    assert_eq!(too_big.message, "Value (70000) was out of range for requested data type int16");
    let whole = self::chain(&[
        ("transforms", "c"),
        ("transforms.c.type", &format!("{K}Cast$Key")),
        ("transforms.c.spec", "int64"),
    ]);
    let out = whole.apply(record(Some(json!("17")), None)).unwrap().unwrap();
    assert_eq!(json_of(&out.key), Some(json!(17)));
    let refused = problems(&[
        ("transforms", "c"),
        ("transforms.c.type", &format!("{K}Cast$Value")),
        ("transforms.c.spec", "a:int8,int8"),
    ]);
    assert!(refused[0].1.ends_with("may only specify a single cast in their spec"), "{refused:?}");
}

#[test]
fn timestamp_converter_turns_unix_times_strings_and_connects_types_into_one_another() {
    let convert = |field: &str, target: &str, format: &str| {
        chain(&[
            ("transforms", "t"),
            ("transforms.t.type", &format!("{K}TimestampConverter$Value")),
            ("transforms.t.field", field),
            ("transforms.t.target.type", target),
            ("transforms.t.format", format),
        ])
    };
    let value = json!({"schema": struct_of(&[("id", "int32"), ("at", "int64")]), "payload": {"id": 1, "at": 1_700_000_000_123i64}});
    let out = convert("at", "string", "yyyy-MM-dd HH:mm:ss.SSS").apply(record(None, Some(value))).unwrap().unwrap();
    let out = json_of(&out.value).unwrap();
    assert_eq!(out["payload"]["at"], "2023-11-14 22:13:20.123");
    assert_eq!(out["schema"]["fields"][1], json!({"field": "at", "type": "string", "optional": false}), "in place");
    let back = convert("at", "Timestamp", "yyyy-MM-dd HH:mm:ss.SSS").apply(record(None, Some(out))).unwrap().unwrap();
    let back = json_of(&back.value).unwrap();
    assert_eq!(back["payload"]["at"], 1_700_000_000_123i64);
    assert_eq!(back["schema"]["fields"][1]["name"], "org.apache.kafka.connect.data.Timestamp");
    let date = convert("", "Date", "").apply(record(None, Some(json!(1_700_000_000_123i64)))).unwrap().unwrap();
    assert_eq!(json_of(&date.value), Some(json!(19675)), "days since the epoch");
    let refused = convert("at", "string", "yyyy").apply(record(None, Some(json!({"at": "soon"})))).unwrap_err();
    assert_eq!(refused.message, "Could not parse timestamp: value (soon) does not match pattern (yyyy)");
    let no_format = problems(&[
        ("transforms", "t"),
        ("transforms.t.type", &format!("{K}TimestampConverter$Value")),
        ("transforms.t.target.type", "string"),
    ]);
    assert_eq!(
        no_format[0].1,
        "TimestampConverter requires format option to be specified when using string timestamps"
    );
}

#[test]
fn a_type_no_builtin_has_names_a_transform_plugin_with_its_own_keys() {
    let raw = config(&[
        ("transforms", "up,route"),
        ("transforms.up.type", "upper-case"),
        ("transforms.up.version", "^0.2"),
        ("transforms.up.field", "name"),
        ("transforms.up.predicate", "isT"),
        ("transforms.route.type", &format!("{K}RegexRouter")),
        ("transforms.route.regex", "t"),
        ("transforms.route.replacement", "u"),
        ("predicates", "isT"),
        ("predicates.isT.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
        ("predicates.isT.pattern", "ord.*"),
    ]);
    let chain = Chain::parse(&raw, &|name| name == "upper-case").unwrap_or_else(|p| panic!("{p:?}"));
    let plugins: Vec<_> = chain.plugins().collect();
    let expected = PluginStep {
        name: "upper-case".into(),
        version: Some("^0.2".into()),
        settings: vec![("field".into(), "name".into())],
    };
    assert_eq!(plugins, vec![("up", &expected)]);
    let stage = &chain.stages()[0];
    assert!(stage.applies_to(&record(None, None)), "the predicate holds for topic orders");
    assert!(!stage.applies_to(&Record { topic: "other".into(), ..record(None, None) }));
    // Not installed: the class is refused as Connect refuses one.
    let refused = Chain::parse(&raw, &|_| false).expect_err("refused");
    assert_eq!(refused[0].key, "transforms.up.type");
    assert!(
        refused[0].message.starts_with(
            "Invalid value upper-case for configuration transforms.up.type: Class upper-case could not be found."
        ),
        "{}",
        refused[0].message
    );
}

#[test]
fn the_builtins_are_listed_once_each_with_both_sides() {
    let all: Vec<Builtin> = builtins().collect();
    let count = |kind: &str| all.iter().filter(|b| b.kind == kind).count();
    assert_eq!((count("transformation"), count("predicate")), (25, 3));
    let mut classes: Vec<&str> = all.iter().map(|b| b.class).collect();
    classes.sort();
    classes.dedup();
    assert_eq!(classes.len(), all.len(), "each class once");
    for key_side in classes.iter().filter_map(|c| c.strip_suffix("$Key")) {
        assert!(classes.contains(&format!("{key_side}$Value").as_str()), "{key_side}$Value");
    }
    let router = all.iter().find(|b| b.class == format!("{K}RegexRouter")).unwrap();
    let keys: Vec<&str> = router.def.keys().iter().map(|k| k.name()).collect();
    assert_eq!(keys, ["regex", "replacement"]);
}
