#!/usr/bin/env bash
# Spillway's main job in one command, with no outside service: builds the
# plugins and the host, starts a Kafka-protocol test broker with share groups
# on 127.0.0.1 (librdkafka's mock cluster from PyPI's confluent-kafka, as the
# tests use), produces sample records and runs the file-sink connector in a
# share group until every record is acknowledged, then stops the broker.
#
# Where Python cannot install confluent-kafka, it falls back to the embedded
# broker inside the host (classic consumer group: that broker has no share
# groups) and says so. Extra arguments go to `spillway run` (try --records 50000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/host-deps.sh
scripts/build-plugins.sh
cargo build --release -q -p spillway

have_mock() {
  python3 -c 'import confluent_kafka, sys; sys.exit(confluent_kafka.libversion()[0] < "2.16")' 2>/dev/null
}
if ! have_mock; then
  python3 -m pip install -q 'confluent-kafka==2.16.1' >&2 || true
fi
if ! have_mock; then
  echo "confluent-kafka 2.16 is not installable here: running on the embedded broker (classic group)" >&2
  exec target/release/spillway run "$@"
fi

dir=$(mktemp -d)
python3 tests/support/kafka-mock.py 1 "$dir/bootstrap" >/dev/null &
mock=$!
trap 'kill $mock 2>/dev/null; wait $mock 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 300); do
  [ -s "$dir/bootstrap" ] && break
  kill -0 $mock 2>/dev/null || { echo "the test broker did not start" >&2; exit 1; }
  sleep 0.1
done
bootstrap=$(cat "$dir/bootstrap")
target/release/spillway run --demo --bootstrap-servers "$bootstrap" \
  --broker-name "librdkafka 2.16 mock cluster (tests/support/kafka-mock.py, share groups)" "$@"
