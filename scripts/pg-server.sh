#!/usr/bin/env bash
# Starts a real, throw-away PostgreSQL on 127.0.0.1 for the store tests
# (tests/store/store.rs, tests/store/store_race.rs), installing it from Debian's packages
# when the machine has none. Each start makes a fresh cluster: the tests need
# no data from an earlier run, and a fresh cluster cannot be half-broken.
#
# Usage: scripts/pg-server.sh start   -> prints APTIX_TEST_PG_URL's value
#        scripts/pg-server.sh stop
#        scripts/pg-server.sh env     -> prints `export APTIX_TEST_PG_URL=...`
#                                        (eval "$(scripts/pg-server.sh env)")
# Environment: APTIX_PG_PORT (default 15432); APTIX_PG_DIR, the cluster's
#              folder (default: ${XDG_CACHE_HOME:-$HOME/.cache}/aptix/pg, or
#              ${TMPDIR:-/tmp}/aptix-pg-PORT when run as root).
set -euo pipefail
# The cluster's folder. As root the server runs as `postgres`, which cannot
# enter root's home: then the folder is in the temp folder instead.
if [ -n "${APTIX_PG_DIR:-}" ]; then
  BASE="$APTIX_PG_DIR"
elif [ "$(id -u)" = 0 ]; then
  BASE="${TMPDIR:-/tmp}/aptix-pg-${APTIX_PG_PORT:-15432}"
else
  BASE="${APTIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aptix}/pg"
fi
DATA="$BASE/data"
LOG="$BASE/postgres.log"
PORT="${APTIX_PG_PORT:-15432}"
DB=aptix_test
URL="postgres://postgres@127.0.0.1:$PORT/$DB"

# PostgreSQL refuses to run as root: as root, every server command runs as
# the `postgres` OS user (the Debian package creates it); otherwise as us.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# The directory of initdb, pg_ctl and postgres. Debian keeps them off PATH
# in /usr/lib/postgresql/<major>/bin; take the newest major there.
find_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ]; then
    echo "$dir"
    return
  fi
  if command -v initdb >/dev/null 2>&1 && command -v postgres >/dev/null 2>&1; then
    dirname "$(command -v postgres)"
  fi
}

install() {
  BIN=$(find_bin)
  if [ -n "$BIN" ]; then
    return
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL is not installed and we are not root: install the postgresql package" >&2
    exit 1
  fi
  echo "installing PostgreSQL (apt-get install postgresql)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
  BIN=$(find_bin)
  if [ -z "$BIN" ]; then
    echo "PostgreSQL was installed but initdb/postgres were not found" >&2
    exit 1
  fi
}

stop() {
  local bin
  bin=$(find_bin)
  if [ -n "$bin" ] && [ -f "$DATA/postmaster.pid" ]; then
    as_owner "$bin/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

start() {
  install
  stop
  rm -rf "$BASE"
  mkdir -p "$BASE"
  # As root the server's user is `postgres`, and the cluster must be its.
  if [ "$(id -u)" = 0 ]; then
    chown postgres: "$BASE"
  fi
  as_owner "$BIN/initdb" -D "$DATA" -U postgres --auth=trust --encoding=UTF8 \
    --locale=C.UTF-8 >"$BASE/initdb.log" 2>&1 || {
    echo "initdb failed; its log:" >&2
    tail -n 40 "$BASE/initdb.log" >&2
    exit 1
  }
  # Trust on loopback only; a socket in the cluster folder so that nothing
  # needs /var/run/postgresql. Enough connections for the race tests (four
  # processes, each with a pool, next to the tests' own pools). fsync is off:
  # a test cluster is thrown away, and fsync makes every commit slow.
  as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start -o \
    "-c listen_addresses=127.0.0.1 -p $PORT -k $DATA -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    >/dev/null || {
    echo "PostgreSQL did not start; its log:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  }
  for _ in $(seq 1 120); do
    if "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
      break
    fi
    sleep 0.5
  done
  if ! "$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT"; then
    echo "PostgreSQL does not answer on 127.0.0.1:$PORT; its log:" >&2
    tail -n 40 "$LOG" >&2
    exit 1
  fi
  "$BIN/psql" -q -h 127.0.0.1 -p "$PORT" -U postgres -d postgres \
    -c "CREATE DATABASE $DB" >/dev/null
  echo "$URL"
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  env) echo "export APTIX_TEST_PG_URL=$URL" ;;
  install) install ;;
  *) echo "usage: $0 start|stop|env|install" >&2; exit 2 ;;
esac
