#!/usr/bin/env bash
# A throwaway PostgreSQL server for Orderly's PostgreSQL tests, on this machine only.
#
#   bash Tools/postgres/cluster.sh start    # installs Debian's postgresql if missing (asks
#                                           # apt-get only when CI=true or --install is given),
#                                           # starts a fresh cluster, prints its URL
#   bash Tools/postgres/cluster.sh url      # prints the URL of the running cluster
#   bash Tools/postgres/cluster.sh stop     # stops it and deletes its data
#   bash Tools/postgres/cluster.sh down     # stops the server and keeps its data (as a crash
#                                           # or a maintenance stop would): clients lose their
#                                           # connections, new ones are refused
#   bash Tools/postgres/cluster.sh up       # starts a stopped server again, same port and data
#   bash Tools/postgres/cluster.sh psql ... # runs psql on the cluster's database, as its owner
#
# The server does not wait for its writes to reach the disk (fsync=off): a crash of the machine
# would lose the cluster, which tests throw away anyway. ORDERLY_POSTGRES_FSYNC=on makes it
# wait, as a production server does (the harness benchmarks set it).
#
# ORDERLY_POSTGRES_STATE names the folder that remembers the running cluster (default
# .build-postgres in the repository): a test or a benchmark that stops and starts a server of its
# own gives it another folder, so the server every other test uses is never touched.
#
# The cluster has its own data folder (a new temporary folder), listens on 127.0.0.1 only, on a
# free port (or ORDERLY_POSTGRES_PORT), with one database `orderly` owned by the role `orderly`,
# trusted without a password: it is for tests and is deleted by `stop`. It takes 400 connections,
# not the default 100: the PostgreSQL tests run side by side, each with clients of their own, and
# on a busy machine their connections overlap longer. The server refuses to
# run as root, so when this script runs as root the server runs as the `postgres` user that
# Debian's package creates. Tests find the server through ORDERLY_POSTGRES_URL:
#
#   export ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start)
#   swift test
#   bash Tools/postgres/cluster.sh stop
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

state=${ORDERLY_POSTGRES_STATE:-$(pwd)/.build-postgres}
command=${1:-}
fsync=${ORDERLY_POSTGRES_FSYNC:-off}
case "$fsync" in
  on | off) ;;
  *)
    echo "cluster.sh: ORDERLY_POSTGRES_FSYNC must be on or off (got \"$fsync\")" >&2
    exit 2
    ;;
esac
install=false
[ "${2:-}" = "--install" ] && install=true
[ "${CI:-}" = "true" ] && install=true

fail() {
  echo "cluster.sh: $*" >&2
  exit 1
}

# The newest installed server's bin folder, or nothing.
server_bin() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
  return 0
}

ensure_installed() {
  if [ -n "$(server_bin)" ]; then return; fi
  if ! $install; then
    fail "PostgreSQL is not installed. Install it (apt-get install postgresql) or run: bash Tools/postgres/cluster.sh start --install"
  fi
  [ "$(id -u)" = 0 ] || fail "installing postgresql needs root (apt-get); install it and run again"
  echo "cluster.sh: installing postgresql with apt-get" >&2
  apt-get update >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >/dev/null
  [ -n "$(server_bin)" ] || fail "apt-get installed postgresql, but no initdb was found under /usr/lib/postgresql"
}

# Runs a command as the user that owns the cluster.
as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# Runs a command with every file descriptor above standard error closed: the server it starts
# outlives this script, and must not keep open a pipe its caller waits to see closed (a
# program that reads this script's output to the end would otherwise wait for ever).
without_inherited_fds() {
  (
    for fd in $(ls /proc/$BASHPID/fd 2>/dev/null || ls /dev/fd 2>/dev/null); do
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null
    done
    "$@"
  )
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  if [ -f "$state/url" ]; then
    fail "a cluster is already running ($(cat "$state/url")); stop it first: bash Tools/postgres/cluster.sh stop"
  fi
  ensure_installed
  local bin data port
  bin=$(server_bin)
  if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    fail "running as root, but there is no 'postgres' user to run the server as (Debian's postgresql package creates it)"
  fi
  data=$(mktemp -d /tmp/orderly-postgres.XXXXXX)
  chmod 700 "$data"
  [ "$(id -u)" = 0 ] && chown postgres: "$data"
  port=${ORDERLY_POSTGRES_PORT:-$(free_port)}
  mkdir -p "$state"
  echo "$data" >"$state/data"
  as_owner "$bin/initdb" -D "$data/cluster" -U orderly --auth=trust --encoding=UTF8 \
    --no-instructions >"$state/initdb.log" 2>&1 ||
    fail "initdb failed; see $state/initdb.log"
  without_inherited_fds as_owner "$bin/pg_ctl" -D "$data/cluster" -l "$data/server.log" -w -t 60 \
    -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=$fsync -c max_connections=400" start >/dev/null ||
    {
      cp "$data/server.log" "$state/server.log" 2>/dev/null || true
      fail "the server did not start; see $state/server.log"
    }
  as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U orderly orderly ||
    fail "could not create the database 'orderly'"
  echo "$port" >"$state/port"
  echo "postgres://orderly@127.0.0.1:$port/orderly" >"$state/url"
  cat "$state/url"
}

running_cluster() {
  [ -f "$state/data" ] && [ -f "$state/port" ] ||
    fail "no cluster is running; start one: bash Tools/postgres/cluster.sh start"
}

# Stops the server, keeping the cluster's data: a restart, not a new cluster.
down() {
  running_cluster
  local data bin
  data=$(cat "$state/data")
  bin=$(server_bin)
  as_owner "$bin/pg_ctl" -D "$data/cluster" -m fast -w -t 60 stop >/dev/null ||
    fail "the server did not stop; see $data/server.log"
}

# Starts the stopped server again, on its port, with its data.
up() {
  running_cluster
  local data bin port
  data=$(cat "$state/data")
  bin=$(server_bin)
  port=$(cat "$state/port")
  if as_owner "$bin/pg_ctl" -D "$data/cluster" status >/dev/null 2>&1; then
    return 0
  fi
  without_inherited_fds as_owner "$bin/pg_ctl" -D "$data/cluster" -l "$data/server.log" -w -t 60 \
    -o "-p $port -k $data -c listen_addresses=127.0.0.1 -c fsync=$fsync -c max_connections=400" start >/dev/null ||
    fail "the server did not start again; see $data/server.log"
}

run_psql() {
  running_cluster
  local bin port
  bin=$(server_bin)
  port=$(cat "$state/port")
  "$bin/psql" -h 127.0.0.1 -p "$port" -U orderly -d orderly -v ON_ERROR_STOP=1 "$@"
}

stop() {
  [ -f "$state/data" ] || {
    echo "cluster.sh: no cluster is running" >&2
    return 0
  }
  local data bin
  data=$(cat "$state/data")
  bin=$(server_bin)
  if [ -n "$bin" ] && [ -d "$data/cluster" ]; then
    as_owner "$bin/pg_ctl" -D "$data/cluster" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$data"
  rm -f "$state/url" "$state/data" "$state/port"
}

case "$command" in
  start) start ;;
  stop) stop ;;
  down) down ;;
  up) up ;;
  psql)
    shift
    run_psql "$@"
    ;;
  url)
    [ -f "$state/url" ] || fail "no cluster is running; start one: bash Tools/postgres/cluster.sh start"
    cat "$state/url"
    ;;
  *) fail "usage: cluster.sh start [--install] | url | down | up | psql [ARGS] | stop" ;;
esac
