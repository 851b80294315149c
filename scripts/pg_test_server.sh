#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests: trust auth, 127.0.0.1 on a free port and a unix
# socket, data in a temporary folder. Nothing of it outlives `stop`.
#
#   dir=$(mktemp -d); scripts/pg_test_server.sh start "$dir"   # prints the DSN
#   scripts/pg_test_server.sh stop "$dir"                      # stops it and removes the folder
#   scripts/pg_test_server.sh restart "$dir"                   # pg_ctl restart (same port, same data)
#
# PG_BIN names the folder of initdb and pg_ctl (default: the newest /usr/lib/postgresql/*/bin).
# As root the server runs as the `postgres` system user (PostgreSQL refuses to run as root).
set -euo pipefail

cmd="${1:-}"
dir="${2:-}"
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop|restart DIR" >&2
  exit 2
fi

if [ -z "${PG_BIN:-}" ]; then
  PG_BIN="$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1 || true)"
fi
if [ -z "$PG_BIN" ] || [ ! -x "$PG_BIN/pg_ctl" ]; then
  if command -v pg_ctl >/dev/null; then
    PG_BIN="$(dirname "$(command -v pg_ctl)")"
  else
    echo "no PostgreSQL server binaries (initdb, pg_ctl) found; install postgresql or set PG_BIN" >&2
    exit 3
  fi
fi

as_pg() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

data="$dir/data"
sock="$dir/sock"
log="$dir/server.log"

case "$cmd" in
  start)
    mkdir -p "$sock"
    if [ "$(id -u)" -eq 0 ]; then
      chown -R postgres: "$dir"
    fi
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    as_pg "$PG_BIN/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --no-locale >/dev/null
    cat >>"$data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$sock'
max_connections = 200
fsync = off
full_page_writes = off
CONF
    echo "$port" >"$dir/port"
    as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 start >/dev/null
    echo "postgresql://postgres@127.0.0.1:$port/postgres"
    ;;
  restart)
    as_pg "$PG_BIN/pg_ctl" -D "$data" -l "$log" -w -t 60 -m fast restart >/dev/null
    ;;
  stop)
    if [ -d "$data" ]; then
      as_pg "$PG_BIN/pg_ctl" -D "$data" -w -t 60 -m immediate stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "unknown command $cmd (start, stop, restart)" >&2
    exit 2
    ;;
esac
