#!/usr/bin/env bash
# Measures a rate limit across a fleet: WORKERS worker processes (outbox-postgres-probe) deliver
# a backlog of KEYS keys under one limit for their prefix together (COUNT per second), for
# SECONDS; then prints the deliveries begun in each second (by the workers' clock, the server's
# machine here), the mean rate over the whole seconds and the busiest second, against the limit.
#
#   bash Tools/rate-check/run.sh [WORKERS] [COUNT] [SECONDS] [KEYS]    (defaults 4 50 60 200)
#
# With UNLIMITED=1 the workers run with no limit (COUNT then only sizes the backlog): the same
# run's cost without limits, for a limit configured but not binding (a COUNT above what the
# workers reach). BACKLOG=N appends N messages (COUNT x SECONDS x 1.5 by default). KEEP=1 keeps
# the schema.
#
# Needs the throwaway server (bash Tools/postgres/cluster.sh start --install) and the probe
# built with the Postgres trait: swift build --traits SQLite,Server,Postgres --product
# outbox-postgres-probe (SCRATCH names its scratch path; .build by default). Creates a schema of
# its own and drops it at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
workers=${1:-4}
count=${2:-50}
seconds=${3:-60}
keys=${4:-200}
scratch=${SCRATCH:-.build}
probe=$(find "$scratch" -path '*/debug/outbox-postgres-probe' -type f | head -1)
[ -x "$probe" ] || { echo "rate-check: build the probe first (see the header)" >&2; exit 2; }
url=$(bash Tools/postgres/cluster.sh url)
schema="rate_check_$$"
psql() { bash Tools/postgres/cluster.sh psql -v ON_ERROR_STOP=1 -qAt "$@"; }
psql -c "CREATE SCHEMA $schema"
[ -n "${KEEP:-}" ] || trap 'psql -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
psql -c "SET search_path TO $schema; CREATE TABLE fleet_delivery (
  worker text NOT NULL, key text NOT NULL, n integer NOT NULL, id uuid NOT NULL,
  fence bigint NOT NULL, attempt integer NOT NULL,
  started_at timestamptz NOT NULL, ended_at timestamptz NOT NULL)"
# Enough for the whole run at the limit, and more: the limit, not the backlog, is what binds.
per_key=$(( ${BACKLOG:-$((count * seconds * 3 / 2))} / keys + 1 ))
"$probe" fill "$url" "$schema" "$keys" "$per_key" "t:"
pids=()
for _ in $(seq "$workers"); do
  if [ "${UNLIMITED:-}" = 1 ]; then
    "$probe" work "$url" "$schema" 16 5000 100 stop > /dev/null &
  else
    ORDERLY_PROBE_RATE_LIMIT="$count/1000/t:" "$probe" work "$url" "$schema" 16 5000 100 stop \
      > /dev/null &
  fi
  pids+=($!)
done
sleep "$((seconds + 2))"
kill -TERM "${pids[@]}"
wait "${pids[@]}" || true
psql -F ' ' -c "SET search_path TO $schema;
  WITH per_second AS (
    SELECT date_trunc('second', started_at) AS second, count(*) AS begun
    FROM fleet_delivery GROUP BY 1
  ), whole AS (
    SELECT * FROM per_second
    WHERE second > (SELECT min(second) FROM per_second)
      AND second < (SELECT max(second) FROM per_second)
  )
  SELECT 'seconds', count(*), 'mean', round(avg(begun), 2), 'max', max(begun), 'min', min(begun),
    'limit', $count, 'deviation_pct', round(100 * (avg(begun) - $count) / $count, 2),
    'seconds_above', count(*) FILTER (WHERE begun > $count),
    'workers', (SELECT count(DISTINCT worker) FROM fleet_delivery)
  FROM whole"
