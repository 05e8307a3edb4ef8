# What the scripts that start servers on 127.0.0.1 (kafka.sh, connect.sh,
# registry.sh) share. Sourced.

# Stops the process whose pid the file $1 holds: TERM, then KILL after 10 s.
stop_pidfile() {
  local pid
  [ -f "$1" ] || return 0
  pid=$(cat "$1")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$1"
}

# A TCP port free on 127.0.0.1 now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
