#!/usr/bin/env bash
# Builds the plugins and runs every test. The tests whose subject is Kafka's
# behaviour run on Apache Kafka itself (scripts/kafka.sh: fetched from Maven
# Central, one cluster shared by every test binary, a second one as the
# mirror's target), unless SPILLWAY_TEST_BOOTSTRAP names a cluster already;
# the tests that need what only librdkafka's mock can do start a mock of
# their own (README lists which run where).
#
# The servers and tools the tests use are installed where missing, in the
# background while the host compiles: installing waits on the network, and
# compiling keeps both cores busy.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/packages.sh
mkdir -p target/tmp

# Whether the Python distribution $1 is installed at exactly version $2.
have() {
  python3 -c 'import sys; from importlib.metadata import version; sys.exit(version(sys.argv[1]) != sys.argv[2])' "$1" "$2" 2>/dev/null
}

install_test_services() {
  if ! python3 -c 'import confluent_kafka, sys; sys.exit(confluent_kafka.libversion()[0] < "2.16")' 2>/dev/null; then
    python3 -m pip install -q 'confluent-kafka==2.16.1'
  fi
  # The Avro converter's tests produce with confluent-kafka's AvroSerializer
  # (tests/support/avro-produce.py), which needs the avro and schemaregistry
  # extras (fastavro, authlib, cachetools, attrs, httpx2).
  python3 -c 'import confluent_kafka.schema_registry.avro' 2>/dev/null \
    || python3 -m pip install -q 'confluent-kafka[avro,schemaregistry]==2.16.1'
  # The S3 sink's tests run against moto in server mode (tests/support/s3-server.py)
  # unless SPILLWAY_TEST_S3_ENDPOINT names another S3-compatible server.
  # The exact version: a machine may come with another one (5.2.1, seen
  # here, refuses correctly signed requests in IAM mode).
  have moto 5.2.5 || python3 -m pip install -q 'moto[server]==5.2.5'
  # The mirror's exactly-once tests run between two noida-db Kafka brokers
  # (PyPI; correct transactions, which librdkafka's mock lacks) unless
  # SPILLWAY_TEST_TXN_SOURCE and SPILLWAY_TEST_TXN_TARGET name clusters.
  have noida-db 0.2.3 || python3 -m pip install -q 'noida-db==0.2.3'
  # Apache Kafka's jars, through Maven, into a cache outside the work tree,
  # with Kafka Connect's file connector for the REST differential test
  # (which runs Connect beside Spillway whatever broker the tests use).
  scripts/connect.sh fetch
  # Apicurio Registry, the Confluent-compatible Schema Registry that the Avro
  # converter's tests run against (scripts/registry.sh), into the same cache.
  scripts/registry.sh fetch
  # The REST API's fuzz test runs schemathesis against the OpenAPI document.
  python3 -c 'import schemathesis' 2>/dev/null || python3 -m pip install -q 'schemathesis>=4,<5'
  # The SQL sink's tests run against PostgreSQL and MariaDB from Debian, which
  # tests/support/db-server.sh starts on 127.0.0.1 for each test binary, unless
  # SPILLWAY_TEST_POSTGRES_URL and SPILLWAY_TEST_MYSQL_URL name servers.
  local need=()
  compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
  [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
  if [ ${#need[@]} -gt 0 ] && [ -z "${SPILLWAY_TEST_POSTGRES_URL:-}${SPILLWAY_TEST_MYSQL_URL:-}" ]; then
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    # Waits for dpkg's lock if something else holds it.
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
      --no-install-recommends "${need[@]}" >/dev/null
  fi
}

scripts/host-deps.sh
# Before the installs start: its fallback toolchain comes from apt too.
scripts/build-plugins.sh
install_log=target/tmp/test-services-install.log
install_test_services >"$install_log" 2>&1 &
installing=$!
cargo test --release "${PACKAGES[@]}" --no-run
if ! wait "$installing"; then
  echo "installing the test services failed:" >&2
  cat "$install_log" >&2
  exit 1
fi
# The example sinks in Python and JavaScript (componentize-py from PyPI,
# componentize-js from npm), which the host's tests run end to end, and the
# SDK layers they are written on.
scripts/build-examples.sh
scripts/test-sdks.sh
# The noida-db server binary itself (the `noida-db` script runs it as a child).
export SPILLWAY_NOIDA_DB="${SPILLWAY_NOIDA_DB:-$(python3 -c "from importlib.resources import files; print(files('noida_db').joinpath('noida-db'))")}"
chmod +x "$SPILLWAY_NOIDA_DB"
export SPILLWAY_SCHEMATHESIS="${SPILLWAY_SCHEMATHESIS:-$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/schemathesis}"
# One Apache Kafka for every test binary (unique topics and groups per test),
# with a SCRAM user on a SASL_SSL listener and a TLS listener for the security
# tests, and a second cluster as the mirror's exactly-once target.
if [ -z "${SPILLWAY_TEST_BOOTSTRAP:-}" ]; then
  trap 'scripts/kafka.sh stop --dir target/kafka; scripts/kafka.sh stop --dir target/kafka-target' EXIT
  SPILLWAY_TEST_BOOTSTRAP=$(scripts/kafka.sh start --dir target/kafka --scram spillway:spillway-test-secret --tls | tail -1)
  export SPILLWAY_TEST_BOOTSTRAP SPILLWAY_TEST_KAFKA_ENV="$PWD/target/kafka/cluster.env"
  # shellcheck disable=SC1091
  SPILLWAY_TEST_BROKER_NAME="Apache Kafka $(. target/kafka/cluster.env; echo "$KAFKA_VERSION") (scripts/kafka.sh)"
  export SPILLWAY_TEST_BROKER_NAME
  export SPILLWAY_TEST_TXN_SOURCE="${SPILLWAY_TEST_TXN_SOURCE:-$SPILLWAY_TEST_BOOTSTRAP}"
  if [ -z "${SPILLWAY_TEST_TXN_TARGET:-}" ]; then
    SPILLWAY_TEST_TXN_TARGET=$(scripts/kafka.sh start --dir target/kafka-target | tail -1)
    export SPILLWAY_TEST_TXN_TARGET
  fi
fi
echo "tests run on: ${SPILLWAY_TEST_BOOTSTRAP} (mirror target ${SPILLWAY_TEST_TXN_TARGET:-noida-db})"
cargo test --release "${PACKAGES[@]}"
