#!/usr/bin/env bash
# Starts a database server for the tests on 127.0.0.1, writes its URL to FILE,
# and stops it (and removes its data) when stdin closes, so that it ends with
# the test binary that started it.
#
#   db-server.sh postgres FILE   PostgreSQL from Debian (/usr/lib/postgresql/*/bin)
#   db-server.sh mariadb FILE    MariaDB from Debian (apt-get install mariadb-server)
#
# Each server has a user `spillway` (password `spillway`) that owns a
# database `spillway` and nothing else: no superuser, no FILE privilege.
set -euo pipefail
kind=$1 file=$2
dir=$(mktemp -d /tmp/spillway-db.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u "$owner" -- "$@"; else "$@"; fi; }

case "$kind" in
postgres)
  owner=postgres
  bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
  [ "$(id -u)" = 0 ] && chown "$owner" "$dir"
  as_owner "$bin/initdb" -D "$dir/data" -U postgres --auth-local=trust --auth-host=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log"
  as_owner "$bin/postgres" -D "$dir/data" -c listen_addresses=127.0.0.1 -p "$port" -k "$dir" \
    -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 >"$dir/log" 2>&1 &
  server=$!
  for _ in $(seq 300); do as_owner "$bin/pg_isready" -q -h "$dir" -p "$port" && break; sleep 0.1; done
  as_owner "$bin/psql" -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1 <<SQL
CREATE ROLE spillway LOGIN PASSWORD 'spillway';
CREATE DATABASE spillway OWNER spillway;
SQL
  url="postgres://spillway@127.0.0.1:$port/spillway"
  stop() { as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true; wait "$server" 2>/dev/null || true; }
  ;;
mariadb)
  owner=mysql
  [ "$(id -u)" = 0 ] && chown "$owner" "$dir"
  user_flag=(); [ "$(id -u)" = 0 ] && user_flag=(--user=mysql)
  mariadb-install-db --no-defaults "${user_flag[@]}" --datadir="$dir/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$dir/install.log" 2>&1
  /usr/sbin/mariadbd --no-defaults "${user_flag[@]}" --datadir="$dir/data" --bind-address=127.0.0.1 \
    --port="$port" --socket="$dir/sock" --pid-file="$dir/pid" --log-error="$dir/err" --skip-log-bin \
    --innodb-flush-log-at-trx-commit=0 --max-connections=200 2>"$dir/stderr" &
  server=$!
  for _ in $(seq 300); do mariadb-admin --no-defaults --socket="$dir/sock" -u root ping >/dev/null 2>&1 && break; sleep 0.1; done
  mariadb --no-defaults --socket="$dir/sock" -u root <<SQL
CREATE DATABASE spillway;
CREATE USER 'spillway'@'%' IDENTIFIED BY 'spillway';
GRANT ALL ON spillway.* TO 'spillway'@'%';
SQL
  url="mysql://spillway@127.0.0.1:$port/spillway"
  stop() { mariadb-admin --no-defaults --socket="$dir/sock" -u root shutdown >/dev/null 2>&1 || kill "$server"; wait "$server" 2>/dev/null || true; }
  ;;
*) echo "usage: $0 postgres|mariadb FILE" >&2; exit 2 ;;
esac

echo "$url" >"$file.tmp" && mv "$file.tmp" "$file"
cat >/dev/null || true
stop
rm -rf "$dir"
