#!/usr/bin/env bash
# Every benchmark, each printing its ratio against a baseline measured in the
# same run. The ones that need Kafka run on Apache Kafka (scripts/kafka.sh),
# unless SPILLWAY_TEST_BOOTSTRAP names a cluster.
#
#   scripts/bench.sh [--smoke] [BENCH...]
#
# --smoke runs one short round of each (as .ci/run does): a check that every
# benchmark still runs end to end, not a measurement. A benchmark that cannot
# finish is reported and does not stop the others; the exit code counts them.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/packages.sh
all=(put_throughput share_loop s3_sink sql_sink mirror languages transforms hot_swap distributed)
if [ "${1:-}" = --smoke ]; then
  export SPILLWAY_BENCH_SMOKE=1
  shift
fi
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=("${all[@]}")

scripts/host-deps.sh
scripts/build-plugins.sh
cargo bench "${PACKAGES[@]}" --no-run
if [ -z "${SPILLWAY_TEST_BOOTSTRAP:-}" ]; then
  trap 'scripts/kafka.sh stop --dir target/kafka-bench; scripts/kafka.sh stop --dir target/kafka-bench-target' EXIT
  SPILLWAY_TEST_BOOTSTRAP=$(scripts/kafka.sh start --dir target/kafka-bench | tail -1)
  SPILLWAY_TEST_TXN_SOURCE="$SPILLWAY_TEST_BOOTSTRAP"
  SPILLWAY_TEST_TXN_TARGET=$(scripts/kafka.sh start --dir target/kafka-bench-target | tail -1)
  SPILLWAY_TEST_BROKER_NAME="Apache Kafka $(. target/kafka-bench/cluster.env; echo "$KAFKA_VERSION") (scripts/kafka.sh)"
  export SPILLWAY_TEST_BOOTSTRAP SPILLWAY_TEST_TXN_SOURCE SPILLWAY_TEST_TXN_TARGET SPILLWAY_TEST_BROKER_NAME
fi
failed=0
for bench in "${benches[@]}"; do
  echo "== $bench"
  cargo bench -q "${PACKAGES[@]}" --bench "$bench" || { echo "benchmark $bench did not finish (exit $?)"; failed=$((failed + 1)); }
done
exit "$failed"
