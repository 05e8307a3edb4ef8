#!/usr/bin/env bash
# Apache Kafka on 127.0.0.1 for tests and benchmarks, fetched from Maven
# Central into a cache outside the work tree.
#
#   scripts/kafka.sh start [--dir DIR] [--brokers N] [--scram USER:PASSWORD] [--tls] [--authorizer]
#   scripts/kafka.sh stop  [--dir DIR]
#   scripts/kafka.sh kill|restart [--dir DIR] [--node K]
#       (SIGKILL every node, or node K | start what is down again, same ports and data)
#   scripts/kafka.sh fetch                 (only the jars, into the cache)
#   scripts/kafka.sh run-class CLASS [ARG...]  (one of Kafka's tools, log on stderr)
#
# `start` formats KRaft storage and starts N brokers (1 by default): node 1 is
# broker and the single controller, the others brokers only. Share groups are
# on (the feature's default from 4.2), internal topics are replicated
# min(N, 3) times. Every node listens in PLAINTEXT; --scram adds a SASL
# listener (SCRAM-SHA-256 and -512, the user created at format time), --tls
# an SSL listener that requires a client certificate (PEM files made here by
# openssl), and both together make the SASL listener SASL_SSL. --authorizer
# turns on KRaft's StandardAuthorizer: the SCRAM user is then refused whatever
# no ACL allows (PLAINTEXT connections stay super users, for the tests' setup).
#
# It prints the plaintext bootstrap on its last line once the cluster answers
# metadata, and writes DIR/cluster.env (BOOTSTRAP, SASL_BOOTSTRAP,
# TLS_BOOTSTRAP, CA, CLIENT_CERT, CLIENT_KEY, SCRAM_USER, SCRAM_PASSWORD,
# KAFKA_VERSION, JAVA) for scripts to source. `stop` ends what `start` started
# in DIR. DIR defaults to target/kafka.
#
# KAFKA_VERSION (default 4.4.0, which runs on Java 17) picks the release;
# JAVA_HOME the Java; KAFKA_HEAP the heap options of each broker;
# SPILLWAY_KAFKA_CACHE the jar cache (default ~/.cache/spillway).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/processes.sh

KAFKA_VERSION="${KAFKA_VERSION:-4.4.0}"
KAFKA_HEAP="${KAFKA_HEAP:--Xms256m -Xmx768m}"
CACHE="${SPILLWAY_KAFKA_CACHE:-$HOME/.cache/spillway}/kafka-$KAFKA_VERSION"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"

die() { echo "kafka.sh: $*" >&2; exit 1; }

command_name="${1:-}"; shift || true
dir=target/kafka brokers=1 scram="" tls=false authorizer=false node=""
# run-class passes its arguments on to the class; every other command takes options.
[ "$command_name" = run-class ] || while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --brokers) brokers="$2"; shift 2 ;;
    --scram) scram="$2"; shift 2 ;;
    --tls) tls=true; shift ;;
    --authorizer) authorizer=true; shift ;;
    --node) node="$2"; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done
case "$brokers" in ''|*[!0-9]*|0) die "--brokers takes a positive number, not '$brokers'" ;; esac
if [ -n "$scram" ] && [[ "$scram" != ?*:?* ]]; then die "--scram takes USER:PASSWORD"; fi
case "$node" in ''|[1-9]|[1-9][0-9]) ;; *) die "--node takes a node id (1, 2, ...), not '$node'" ;; esac
if [ -n "$node" ] && [ ! -d "$dir/node-$node" ]; then die "no node $node in $dir"; fi
if $authorizer && [ -z "$scram" ]; then die "--authorizer needs --scram: it authorizes the SCRAM user"; fi

stop() {
  for pidfile in "$dir"/node-*/pid; do
    stop_pidfile "$pidfile"
  done
}

# Kafka's jars and their dependencies, through Maven, once per version.
fetch_jars() {
  [ -f "$CACHE/complete" ] && return 0
  command -v mvn >/dev/null || die "Maven (mvn) is missing: it fetches Apache Kafka from Maven Central (apt-get install maven)"
  mkdir -p "$CACHE"
  cat >"$CACHE/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>spillway.test</groupId><artifactId>kafka-broker</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.25.5</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$CACHE/libs"
  mvn -q -B -Dstyle.color=never -f "$CACHE/pom.xml" dependency:copy-dependencies -DoutputDirectory="$CACHE/libs" >&2 \
    || die "Maven could not fetch Apache Kafka $KAFKA_VERSION"
  touch "$CACHE/complete"
}

# A CA, a broker certificate for 127.0.0.1 and localhost, a client certificate.
make_pki() {
  local pki="$1"
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 -subj "/CN=spillway test CA" 2>/dev/null
    for who in broker client; do
      openssl req -newkey rsa:2048 -nodes -keyout "$who.rsa" -out "$who.csr" -subj "/CN=spillway-$who" 2>/dev/null
      printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$who.ext"
      openssl x509 -req -in "$who.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 -extfile "$who.ext" -out "$who.pem" 2>/dev/null
      # Kafka's PEM keystore wants a PKCS#8 key.
      openssl pkcs8 -topk8 -nocrypt -in "$who.rsa" -out "$who.key"
    done
    cat broker.key broker.pem >broker-keystore.pem
  )
}

log4j_config() {
  cat <<'EOF'
<Configuration status="warn">
  <Appenders>
    <File name="file" fileName="${sys:kafka.logs.dir}/server.log">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka.server.KafkaRaftServer" level="info"/>
    <Logger name="kafka.server.BrokerServer" level="info"/>
    <Root level="warn"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
EOF
}

# The nodes --node picks: that one, or all.
nodes() {
  if [ -n "$node" ]; then echo "$dir/node-$node"; else echo "$dir"/node-*; fi
}

# Starts each picked node of $dir that is not running (again, after `kill`:
# same ports, same data; a node killed alone comes back beside the others).
start_nodes() {
  local nd
  for nd in $(nodes); do
    if [ -f "$nd/pid" ] && kill -0 "$(cat "$nd/pid")" 2>/dev/null; then continue; fi
    # shellcheck disable=SC2086
    nohup "$JAVA" $KAFKA_HEAP -XX:+UseG1GC -Djava.awt.headless=true \
      -Dkafka.logs.dir="$nd" -Dlog4j2.configurationFile="$dir/log4j2.xml" \
      -cp "$CACHE/libs/*" kafka.Kafka "$nd/server.properties" >>"$nd/stdout.log" 2>&1 &
    echo $! >"$nd/pid"
  done
}

# Waits until every node of $dir is registered and unfenced at bootstrap $1.
wait_ready() {
  local bootstrap="$1" nodes deadline=$((SECONDS + 120))
  nodes=$(find "$dir" -maxdepth 1 -name 'node-*' | wc -l)
  until "$JAVA" -cp "$CACHE/libs/*" org.apache.kafka.tools.ClusterTool list-endpoints --bootstrap-server "$bootstrap" \
      >"$dir/endpoints" 2>/dev/null && [ "$(grep -c -E '^[0-9]+ .* unfenced ' "$dir/endpoints")" -ge "$nodes" ]; do
    for nd in "$dir"/node-*; do
      kill -0 "$(cat "$nd/pid")" 2>/dev/null || {
        tail -30 "$nd/stdout.log" "$nd/server.log" >&2 2>/dev/null
        die "broker $nd exited while starting"
      }
    done
    [ $SECONDS -lt $deadline ] || { stop; die "the cluster did not answer within 120 s"; }
    sleep 1
  done
}

start() {
  command -v "$JAVA" >/dev/null || die "Java is missing ($JAVA): Apache Kafka $KAFKA_VERSION needs Java 17 or newer"
  command -v openssl >/dev/null || ! $tls || die "openssl is missing: --tls makes its certificates with it"
  stop
  rm -rf "$dir"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  fetch_jars
  local cp="$CACHE/libs/*" cluster_id controller_port replicas min_isr
  # A base64 UUID, as kafka-storage random-uuid makes; not one starting
  # with '-', which the tool's argument parser takes for an option.
  cluster_id=$(python3 -c '
import uuid, base64
while True:
    id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not id.startswith("-"):
        print(id)
        break')
  controller_port=$(free_port)
  replicas=$(( brokers < 3 ? brokers : 3 ))
  min_isr=$(( replicas < 2 ? 1 : 2 ))
  local user="${scram%%:*}" password="${scram#*:}"
  local sasl_protocol=SASL_PLAINTEXT
  $tls && sasl_protocol=SASL_SSL
  $tls && make_pki "$dir/pki"
  log4j_config >"$dir/log4j2.xml"

  local plain=() sasl=() ssl=()
  local id
  # Not `node`: that is the --node option, which start_nodes reads.
  for id in $(seq 1 "$brokers"); do
    local nd="$dir/node-$id" p s="" t=""
    mkdir -p "$nd"
    p=$(free_port); plain+=("127.0.0.1:$p")
    local listeners="PLAINTEXT://127.0.0.1:$p" protocols="PLAINTEXT:PLAINTEXT"
    if [ -n "$scram" ]; then
      s=$(free_port); sasl+=("127.0.0.1:$s")
      listeners+=",SASL://127.0.0.1:$s"; protocols+=",SASL:$sasl_protocol"
    fi
    if $tls; then
      t=$(free_port); ssl+=("127.0.0.1:$t")
      listeners+=",SSL://127.0.0.1:$t"; protocols+=",SSL:SSL"
    fi
    local advertised="$listeners" roles=broker
    if [ "$id" = 1 ]; then
      roles=broker,controller
      listeners+=",CONTROLLER://127.0.0.1:$controller_port"
    fi
    protocols+=",CONTROLLER:PLAINTEXT"
    {
      echo "process.roles=$roles"
      echo "node.id=$id"
      echo "controller.quorum.bootstrap.servers=127.0.0.1:$controller_port"
      echo "controller.listener.names=CONTROLLER"
      echo "listeners=$listeners"
      echo "advertised.listeners=$advertised"
      echo "listener.security.protocol.map=$protocols"
      echo "inter.broker.listener.name=PLAINTEXT"
      echo "log.dirs=$nd/data"
      # What the librdkafka mock did, so that tests see the same topics.
      echo "num.partitions=4"
      echo "default.replication.factor=$replicas"
      echo "offsets.topic.replication.factor=$replicas"
      echo "offsets.topic.num.partitions=8"
      echo "transaction.state.log.replication.factor=$replicas"
      echo "transaction.state.log.min.isr=$min_isr"
      echo "transaction.state.log.num.partitions=8"
      echo "share.coordinator.state.topic.replication.factor=$replicas"
      echo "share.coordinator.state.topic.min.isr=$min_isr"
      echo "share.coordinator.state.topic.num.partitions=8"
      echo "group.initial.rebalance.delay.ms=0"
      if [ -n "$scram" ]; then
        echo "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512"
        echo "listener.name.sasl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
        echo "listener.name.sasl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
      fi
      if $tls; then
        echo "ssl.keystore.type=PEM"
        echo "ssl.keystore.location=$dir/pki/broker-keystore.pem"
        echo "ssl.truststore.type=PEM"
        echo "ssl.truststore.location=$dir/pki/ca.pem"
        echo "listener.name.ssl.ssl.client.auth=required"
      fi
      if $authorizer; then
        echo "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer"
        echo "super.users=User:ANONYMOUS"
        echo "allow.everyone.if.no.acl.found=false"
      fi
    } >"$nd/server.properties"
    local format=(--standalone)
    [ "$id" = 1 ] || format=(--no-initial-controllers)
    local scram_args=()
    if [ -n "$scram" ]; then
      scram_args=(--add-scram "SCRAM-SHA-256=[name=$user,password=$password]"
                  --add-scram "SCRAM-SHA-512=[name=$user,password=$password]")
    fi
    "$JAVA" -cp "$cp" kafka.tools.StorageTool format -t "$cluster_id" -c "$nd/server.properties" \
      "${format[@]}" "${scram_args[@]}" >"$nd/format.log" 2>&1 \
      || { cat "$nd/format.log" >&2; die "formatting node $id failed"; }
  done

  start_nodes
  wait_ready "$(IFS=,; echo "${plain[*]}")"
  local bootstrap
  bootstrap=$(IFS=,; echo "${plain[*]}")
  {
    echo "KAFKA_VERSION=$KAFKA_VERSION"
    echo "JAVA='$("$JAVA" -version 2>&1 | head -1)'"
    echo "BOOTSTRAP=$bootstrap"
    echo "SASL_BOOTSTRAP=$(IFS=,; echo "${sasl[*]}")"
    echo "SASL_PROTOCOL=$([ -n "$scram" ] && echo "$sasl_protocol")"
    echo "TLS_BOOTSTRAP=$(IFS=,; echo "${ssl[*]}")"
    echo "SCRAM_USER=$user"
    echo "SCRAM_PASSWORD=$([ -n "$scram" ] && echo "$password")"
    if $tls; then
      echo "CA=$dir/pki/ca.pem"
      echo "CLIENT_CERT=$dir/pki/client.pem"
      echo "CLIENT_KEY=$dir/pki/client.key"
    fi
  } >"$dir/cluster.env"
  echo "Apache Kafka $KAFKA_VERSION, $brokers broker(s), on $("$JAVA" -version 2>&1 | head -1); state in $dir" >&2
  echo "$bootstrap"
}

case "$command_name" in
  fetch) fetch_jars ;;
  start) start ;;
  kill)
    # Every node at once (or node K), as a crash would: SIGKILL, the data stays.
    for nd in $(nodes); do
      [ -f "$nd/pid" ] || continue
      kill -9 "$(cat "$nd/pid")" 2>/dev/null || true
      rm -f "$nd/pid"
    done ;;
  restart)
    [ -f "$dir/cluster.env" ] || die "no cluster in $dir to restart"
    # shellcheck disable=SC1091
    bootstrap=$(. "$dir/cluster.env"; echo "$BOOTSTRAP")
    start_nodes
    wait_ready "$bootstrap"
    echo "$bootstrap" ;;
  stop) stop ;;
  run-class)
    # One of Kafka's own tools or clients (say the console share consumer),
    # from the same jars, logging to stderr so that stdout is its output.
    fetch_jars
    [ -f "$CACHE/log4j2-stderr.xml" ] || cat >"$CACHE/log4j2-stderr.xml" <<'EOF'
<Configuration status="warn">
  <Appenders><Console name="stderr" target="SYSTEM_ERR"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console></Appenders>
  <Loggers><Root level="warn"><AppenderRef ref="stderr"/></Root></Loggers>
</Configuration>
EOF
    exec "$JAVA" -Dlog4j2.configurationFile="$CACHE/log4j2-stderr.xml" -cp "$CACHE/libs/*" "$@" ;;
  *) die "usage: kafka.sh start [--dir DIR] [--brokers N] [--scram USER:PASSWORD] [--tls] [--authorizer] | stop [--dir DIR] | kill|restart [--dir DIR] [--node K] | run-class CLASS [ARG...] | fetch" ;;
esac
