#!/usr/bin/env python3
"""Consume a topic with confluent-kafka's ShareConsumer for a bounded time and
print the keys it got.

Usage: share_consume.py BOOTSTRAP GROUP TOPIC MAX_SECONDS IDLE_SECONDS

Prints "READY" once subscribed and polled once, then "KEY <key>" per record
(each record accepted explicitly), and "DONE <n>" after commit and close.
Stops MAX_SECONDS after start, or IDLE_SECONDS after the last record once at
least one arrived.
"""
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

bootstrap, group, topic = sys.argv[1:4]
max_seconds, idle_seconds = float(sys.argv[4]), float(sys.argv[5])

consumer = ShareConsumer(
    {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": "explicit",
    }
)
consumer.subscribe([topic])
start = time.monotonic()
consumer.poll(1.0)
print("READY", flush=True)

keys = []
last = None
while True:
    now = time.monotonic()
    if now - start > max_seconds or (last is not None and now - last > idle_seconds):
        break
    for msg in consumer.poll(0.5):
        if msg.error() is not None:
            print(f"ERROR {msg.error()}", file=sys.stderr, flush=True)
            continue
        consumer.acknowledge(msg, AcknowledgeType.ACCEPT)
        keys.append(msg.key().decode())
        last = time.monotonic()
    if keys:
        failed = {tp: e for tp, e in consumer.commit_sync().items() if e is not None}
        if failed:
            print(f"COMMIT-ERROR {failed}", file=sys.stderr, flush=True)

consumer.close()
for key in keys:
    print(f"KEY {key}")
print(f"DONE {len(keys)}", flush=True)
