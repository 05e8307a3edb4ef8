#!/usr/bin/env python3
"""Produce Avro records in Confluent's wire format, as Confluent's own
serializer writes them, for the Avro converter's tests.

Usage: avro-produce.py BOOTSTRAP REGISTRY_URL TOPIC COUNT [--schema v1|v2]
                       [--first F] [--key-prefix P] [--raw-unknown-id N]

Writes COUNT records, i from F (0 unless given) on, with confluent-kafka's SerializingProducer and
AvroSerializer, which registers the schema under TOPIC-value (REGISTRY_URL is
the Confluent-compatible base URL, e.g. scripts/registry.sh's). Record i has
the string key P-<i> (P defaults to TOPIC) and this value of the record
schema spillway.test.Order:

  id       long                          i
  name     string                        "name-<i>"
  note     ["null","string"] = null      null for even i, "note-<i>" for odd
  amount   bytes, decimal(10, 2)         Decimal(i*100+5)/100: 0.05, 1.05, ...
  day      int, date                     2024-01-01 + i days
  at       long, timestamp-millis        2024-01-01T00:00:00Z + i seconds
  at_time  int, time-millis              00:00:00 + i seconds
  ok       boolean                       i % 2 == 0
  ratio    double                        i / 4
  tags     array of string               ["t<i>"]

--schema v2 adds `extra` ["null","string"] = null, set to "x<i>": a backward
compatible evolution of v1, registered as the subject's next version.

--raw-unknown-id N writes N records instead (COUNT is ignored) with a plain
Producer: each value is the wire format's header for schema id 999999, which
the registry does not know (magic byte 0, the id as 4 big-endian bytes),
then a few junk bytes.

Prints each key on its own line once every record is delivered, and nothing
else on stdout; exits nonzero if any delivery fails.
Needs confluent-kafka[avro,schemaregistry] (scripts/test.sh installs it).
"""
import argparse
import datetime
import json
import struct
import sys
from decimal import Decimal

from confluent_kafka import Producer, SerializingProducer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import StringSerializer

UNKNOWN_SCHEMA_ID = 999999

FIELDS = [
    {"name": "id", "type": "long"},
    {"name": "name", "type": "string"},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "at_time", "type": {"type": "int", "logicalType": "time-millis"}},
    {"name": "ok", "type": "boolean"},
    {"name": "ratio", "type": "double"},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
]
EXTRA = {"name": "extra", "type": ["null", "string"], "default": None}


def schema(version):
    fields = FIELDS + ([EXTRA] if version == "v2" else [])
    return json.dumps({"type": "record", "name": "Order", "namespace": "spillway.test", "fields": fields})


def value(i, version):
    start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    v = {
        "id": i,
        "name": f"name-{i}",
        "note": None if i % 2 == 0 else f"note-{i}",
        "amount": Decimal(i * 100 + 5) / 100,
        "day": datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
        "at": start + datetime.timedelta(seconds=i),
        "at_time": (start + datetime.timedelta(seconds=i)).time(),
        "ok": i % 2 == 0,
        "ratio": i / 4,
        "tags": [f"t{i}"],
    }
    if version == "v2":
        v["extra"] = f"x{i}"
    return v


def main():
    parser = argparse.ArgumentParser(description="Produce Avro records through a schema registry.")
    parser.add_argument("bootstrap")
    parser.add_argument("registry_url")
    parser.add_argument("topic")
    parser.add_argument("count", type=int)
    parser.add_argument("--schema", choices=["v1", "v2"], default="v1")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--key-prefix")
    parser.add_argument("--raw-unknown-id", type=int, metavar="N")
    args = parser.parse_args()
    prefix = args.key_prefix if args.key_prefix is not None else args.topic

    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(f"{msg.key()!r}: {err}")

    keys = []
    if args.raw_unknown_id is not None:
        producer = Producer({"bootstrap.servers": args.bootstrap})
        header = struct.pack(">bI", 0, UNKNOWN_SCHEMA_ID)
        for i in range(args.raw_unknown_id):
            key = f"{prefix}-{i}"
            producer.produce(args.topic, key=key, value=header + b"\x06junk", on_delivery=delivered)
            producer.poll(0)
            keys.append(key)
    else:
        registry = SchemaRegistryClient({"url": args.registry_url})
        producer = SerializingProducer(
            {
                "bootstrap.servers": args.bootstrap,
                "key.serializer": StringSerializer("utf_8"),
                # Registers the schema under TOPIC-value (the default subject
                # name strategy) on first use.
                "value.serializer": AvroSerializer(registry, schema(args.schema), conf={"auto.register.schemas": True}),
            }
        )
        for i in range(args.first, args.first + args.count):
            key = f"{prefix}-{i}"
            producer.produce(args.topic, key=key, value=value(i, args.schema), on_delivery=delivered)
            producer.poll(0)
            keys.append(key)

    left = producer.flush(60)
    if left:
        errors.append(f"{left} record(s) not delivered within 60 s")
    if errors:
        for e in errors:
            print(f"avro-produce.py: {e}", file=sys.stderr)
        sys.exit(1)
    for key in keys:
        print(key)


if __name__ == "__main__":
    main()
