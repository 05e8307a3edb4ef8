#!/usr/bin/env bash
# A Confluent-compatible Schema Registry on 127.0.0.1 for the Avro
# converter's tests: Apicurio Registry (its `ccompat/v7` API), fetched from
# Maven Central into a cache outside the work tree.
#
#   scripts/registry.sh start --dir DIR
#   scripts/registry.sh stop  --dir DIR
#   scripts/registry.sh fetch              (only the distribution, into the cache)
#
# `start` runs the registry with in-memory storage (H2, Apicurio's default:
# every start is empty, schema ids count from 1), its log in DIR/registry.log
# and its pid in DIR/pid, and prints the Confluent-compatible base URL
# (http://127.0.0.1:PORT/apis/ccompat/v7, a client's `schema.registry.url`)
# on its last line once the API answers. `stop` ends it; it is idempotent.
#
# Why Apicurio: Confluent's own registry is not on Maven Central, and
# Karapace is not on the PyPI served here. 2.6.13.Final runs on Java 17
# (3.x needs Java 21). Its `all` tar.gz is 142 MB (146 MB unpacked; mvn keeps
# another copy of the tar.gz in ~/.m2).
#
# APICURIO_VERSION picks the release; JAVA_HOME the Java;
# SPILLWAY_KAFKA_CACHE the cache (default ~/.cache/spillway).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/processes.sh

APICURIO_VERSION="${APICURIO_VERSION:-2.6.13.Final}"
CACHE="${SPILLWAY_KAFKA_CACHE:-$HOME/.cache/spillway}/apicurio-registry-$APICURIO_VERSION"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

die() { echo "registry.sh: $*" >&2; exit 1; }

command_name="${1:-}"; shift || true
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

# The runnable Quarkus app (runner jar + lib/), once per version.
fetch() {
  [ -f "$CACHE/complete" ] && return 0
  command -v mvn >/dev/null || die "Maven (mvn) is missing: it fetches Apicurio Registry from Maven Central (apt-get install maven)"
  rm -rf "$CACHE"
  mkdir -p "$CACHE"
  # The `all` classifier is the distribution; the plain jar is only the
  # module's classes and does not run on its own.
  mvn -q -B -Dstyle.color=never dependency:copy \
    -Dartifact="io.apicurio:apicurio-registry-app:$APICURIO_VERSION:tar.gz:all" -DoutputDirectory="$CACHE" >&2 \
    || die "Maven could not fetch Apicurio Registry $APICURIO_VERSION"
  tar xzf "$CACHE/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz" -C "$CACHE"
  rm -f "$CACHE/apicurio-registry-app-$APICURIO_VERSION-all.tar.gz"
  [ -f "$CACHE/apicurio-registry-app-$APICURIO_VERSION-runner.jar" ] || die "no runner jar in the $APICURIO_VERSION distribution"
  touch "$CACHE/complete"
}

stop() {
  stop_pidfile "$dir/pid"
}

start() {
  [ -n "$dir" ] || die "start needs --dir"
  command -v "$JAVA" >/dev/null || die "Java is missing ($JAVA): Apicurio Registry $APICURIO_VERSION needs Java 17 or newer"
  fetch
  stop
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local port base
  port=$(free_port)
  base="http://127.0.0.1:$port/apis/ccompat/v7"
  # A small heap and the C1 compiler only: it starts in about 4 s on two
  # busy cores instead of 6. Storage is H2 in memory unless told otherwise.
  nohup "$JAVA" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Djava.awt.headless=true \
    -Dquarkus.http.host=127.0.0.1 -Dquarkus.http.port="$port" \
    -jar "$CACHE/apicurio-registry-app-$APICURIO_VERSION-runner.jar" </dev/null >"$dir/registry.log" 2>&1 &
  echo $! >"$dir/pid"
  local deadline=$((SECONDS + 120))
  until python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "$base/subjects" 2>/dev/null; do
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || { tail -30 "$dir/registry.log" >&2; rm -f "$dir/pid"; die "the registry exited while starting"; }
    [ $SECONDS -lt $deadline ] || { tail -30 "$dir/registry.log" >&2; stop; die "the registry did not answer within 120 s"; }
    sleep 0.3
  done
  # Loopback only (Apicurio 3.x, for one, binds a management port on
  # 0.0.0.0 unless told not to).
  if command -v ss >/dev/null && ss -Hltnp | grep "pid=$(cat "$dir/pid")," | grep -vqE ' (127\.0\.0\.1|\[::ffff:127\.0\.0\.1\]):[0-9]+ '; then
    ss -Hltnp | grep "pid=$(cat "$dir/pid")," >&2
    stop
    die "the registry listens beyond 127.0.0.1"
  fi
  echo "Apicurio Registry $APICURIO_VERSION (in memory) at $base; state in $dir" >&2
  echo "$base"
}

case "$command_name" in
  fetch) fetch ;;
  start) start ;;
  stop) [ -n "$dir" ] || die "stop needs --dir"; stop ;;
  *) die "usage: registry.sh start --dir DIR | stop --dir DIR | fetch" ;;
esac
