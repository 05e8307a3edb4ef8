#!/usr/bin/env bash
# Spillway's main job on the embedded default: builds the plugins and the host,
# starts an in-process Kafka-protocol broker, feeds it sample records and runs
# the file-sink connector until every record is acknowledged.
# Extra arguments go to `spillway run` (try --records 50000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build-plugins.sh
cargo run --release -q -p spillway -- run "$@"
