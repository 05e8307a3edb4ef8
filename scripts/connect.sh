#!/usr/bin/env bash
# Apache Kafka Connect on 127.0.0.1, beside Spillway, for the differential
# test of the REST API (host/tests/connect_compat): the same jars as
# scripts/kafka.sh's broker (connect-runtime and connect-json come with them),
# plus connect-file for FileStreamSinkConnector.
#
#   scripts/connect.sh start --dir DIR --bootstrap SERVERS [--distributed GROUP]
#   scripts/connect.sh stop  --dir DIR
#   scripts/connect.sh fetch
#
# `start` runs a standalone worker (offsets in DIR), or with --distributed a
# member of GROUP (its config, offset and status topics named after it), and
# prints the worker's REST URL on its last line once it answers.
#
# CONNECT_FILE_VERSION: Maven Central here serves connect-file only for some
# releases (4.2.0 yes, 4.3.x and 4.4.0 not, seen 2026-12-03). Its connector
# asks AppInfoParser for its version, a class that 4.3 moved to
# `common.utils.internals`; a one-method shim compiled here answers for it,
# so Connect's own FileStreamSinkConnector runs in the 4.4 runtime.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/processes.sh

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
CONNECT_FILE_VERSION="${CONNECT_FILE_VERSION:-4.2.0}"
CACHE="${SPILLWAY_KAFKA_CACHE:-$HOME/.cache/spillway}"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

die() { echo "connect.sh: $*" >&2; exit 1; }

command_name="${1:-}"; shift || true
dir="" bootstrap="" group=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --bootstrap) bootstrap="$2"; shift 2 ;;
    --distributed) group="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

libs="$CACHE/kafka-$KAFKA_VERSION/libs"
plugins="$CACHE/connect-file-$CONNECT_FILE_VERSION"

fetch() {
  scripts/kafka.sh fetch
  [ -f "$plugins/complete" ] && return 0
  command -v javac >/dev/null || die "javac is missing: it compiles the AppInfoParser shim (a JDK, not a JRE)"
  rm -rf "$plugins"
  mkdir -p "$plugins/shim/org/apache/kafka/common/utils"
  mvn -q -B -Dstyle.color=never dependency:copy \
    -Dartifact="org.apache.kafka:connect-file:$CONNECT_FILE_VERSION" -DoutputDirectory="$plugins" >&2 \
    || die "Maven could not fetch connect-file $CONNECT_FILE_VERSION"
  cat >"$plugins/shim/org/apache/kafka/common/utils/AppInfoParser.java" <<'JAVA'
package org.apache.kafka.common.utils;

/** Where connect-file 4.2 looks for the version; 4.3 moved the class. */
public final class AppInfoParser {
    public static String getVersion() {
        return org.apache.kafka.common.utils.internals.AppInfoParser.getVersion();
    }
}
JAVA
  javac -cp "$libs/*" -d "$plugins/shim" "$plugins/shim/org/apache/kafka/common/utils/AppInfoParser.java"
  touch "$plugins/complete"
}

stop() {
  stop_pidfile "$dir/pid"
}

start() {
  [ -n "$dir" ] || die "start needs --dir"
  [ -n "$bootstrap" ] || die "start needs --bootstrap"
  command -v "$JAVA" >/dev/null || die "Java is missing ($JAVA)"
  fetch
  stop
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local port main
  port=$(free_port)
  {
    echo "bootstrap.servers=$bootstrap"
    echo "listeners=http://127.0.0.1:$port"
    echo "rest.advertised.host.name=127.0.0.1"
    echo "key.converter=org.apache.kafka.connect.storage.StringConverter"
    echo "value.converter=org.apache.kafka.connect.storage.StringConverter"
    # Sink offsets are committed this often: the test waits for them.
    echo "offset.flush.interval.ms=1000"
    if [ -n "$group" ]; then
      echo "group.id=$group"
      echo "config.storage.topic=$group-configs"
      echo "offset.storage.topic=$group-offsets"
      echo "status.storage.topic=$group-status"
      echo "config.storage.replication.factor=1"
      echo "offset.storage.replication.factor=1"
      echo "status.storage.replication.factor=1"
      echo "scheduled.rebalance.max.delay.ms=0"
    else
      echo "offset.storage.file.filename=$dir/offsets"
    fi
  } >"$dir/worker.properties"
  cat >"$dir/log4j2.xml" <<EOF
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="$dir/connect.log"><PatternLayout pattern="[%d] %p %m (%c)%n"/></File>
  </Appenders>
  <Loggers><Root level="info"><AppenderRef ref="file"/></Root></Loggers>
</Configuration>
EOF
  main=org.apache.kafka.connect.cli.ConnectStandalone
  [ -z "$group" ] || main=org.apache.kafka.connect.cli.ConnectDistributed
  # shellcheck disable=SC2086
  nohup "$JAVA" -Xms128m -Xmx512m -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$dir/log4j2.xml" \
    -cp "$libs/*:$plugins/*:$plugins/shim" \
    "$main" "$dir/worker.properties" >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/pid"
  local deadline=$((SECONDS + 120))
  # Up once the herder has started: `/connectors` answers 200 only then.
  until python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
      "http://127.0.0.1:$port/connectors" 2>/dev/null; do
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || { tail -30 "$dir/stdout.log" "$dir/connect.log" >&2; die "Connect exited while starting"; }
    [ $SECONDS -lt $deadline ] || { stop; die "Connect did not answer within 120 s"; }
    sleep 0.5
  done
  echo "Kafka Connect $KAFKA_VERSION ($([ -n "$group" ] && echo "distributed, group $group" || echo standalone)) at http://127.0.0.1:$port; state in $dir" >&2
  echo "http://127.0.0.1:$port"
}

case "$command_name" in
  fetch) fetch ;;
  start) start ;;
  stop) [ -n "$dir" ] || die "stop needs --dir"; stop ;;
  *) die "usage: connect.sh start --dir DIR --bootstrap SERVERS [--distributed GROUP] | stop --dir DIR | fetch" ;;
esac
