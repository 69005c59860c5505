#!/usr/bin/env bash
# Measures fair shares across a fleet: WORKERS worker processes (outbox-postgres-probe) of LIMIT
# slots each deliver a backlog of BIG keys (`big:`) beside SMALL keys (`small:`), with the groups
# `big:` and `small:` weighted BIG_WEIGHT and SMALL_WEIGHT, for SECONDS; then prints each group's
# deliveries over the whole seconds, its share against what its weight gives, and the deviation.
#
#   bash Tools/fair-check/run.sh [WORKERS] [LIMIT] [SECONDS] [BIG] [SMALL] [BIG_WEIGHT] [SMALL_WEIGHT]
#     (defaults 4 4 60 1000 10 1 1)
#
# With UNFAIR=1 the workers run with no groups: what the same backlog gets without them. Each
# group's backlog is PER_GROUP messages (30000 by default), spread over its keys, so neither
# runs dry during the run; the run says so if one did (its share is then not a measure).
#
# Needs the throwaway server (bash Tools/postgres/cluster.sh start --install) and the probe
# built with the Postgres trait: swift build --traits SQLite,Server,Postgres --product
# outbox-postgres-probe (SCRATCH names its scratch path; .build by default). Creates a schema of
# its own and drops it at the end (KEEP=1 keeps it).
set -euo pipefail
cd "$(dirname "$0")/../.."
workers=${1:-4}
limit=${2:-4}
seconds=${3:-60}
big=${4:-1000}
small=${5:-10}
big_weight=${6:-1}
small_weight=${7:-1}
per_group=${PER_GROUP:-30000}
scratch=${SCRATCH:-.build}
probe=$(find "$scratch" -path '*/debug/outbox-postgres-probe' -type f | head -1)
[ -x "$probe" ] || { echo "fair-check: build the probe first (see the header)" >&2; exit 2; }
url=$(bash Tools/postgres/cluster.sh url)
schema="fair_check_$$"
psql() { bash Tools/postgres/cluster.sh psql -v ON_ERROR_STOP=1 -qAt "$@"; }
psql -c "CREATE SCHEMA $schema"
[ -n "${KEEP:-}" ] || trap 'psql -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
psql -c "SET search_path TO $schema; CREATE TABLE fleet_delivery (
  worker text NOT NULL, key text NOT NULL, n integer NOT NULL, id uuid NOT NULL,
  fence bigint NOT NULL, attempt integer NOT NULL,
  started_at timestamptz NOT NULL, ended_at timestamptz NOT NULL)"
"$probe" fill "$url" "$schema" "$big" "$(( per_group / big + 1 ))" "big:" > /dev/null
"$probe" fill "$url" "$schema" "$small" "$(( per_group / small + 1 ))" "small:" > /dev/null
shares="big:=$big_weight,small:=$small_weight"
[ "${UNFAIR:-}" = 1 ] && shares=""
pids=()
for _ in $(seq "$workers"); do
  ORDERLY_PROBE_FAIR_SHARES="$shares" "$probe" work "$url" "$schema" "$limit" 5000 100 stop \
    > /dev/null &
  pids+=($!)
done
sleep "$((seconds + 2))"
kill -TERM "${pids[@]}"
wait "${pids[@]}" || true
psql -F ' ' -c "SET search_path TO $schema;
  WITH bounds AS (
    SELECT date_trunc('second', min(started_at)) + interval '1 second' AS from_,
      date_trunc('second', max(started_at)) AS to_
    FROM fleet_delivery
  ), whole AS (
    SELECT split_part(key, ':', 1) AS grp FROM fleet_delivery, bounds
    WHERE started_at >= from_ AND started_at < to_
  ), counted AS (
    SELECT grp, count(*) AS n FROM whole GROUP BY grp
  ), left_ AS (
    SELECT split_part(partition, ':', 1) AS grp, count(*) AS pending
    FROM orderly_outbox_message GROUP BY 1
  )
  SELECT c.grp, 'delivered', c.n,
    'share_pct', round(100.0 * c.n / sum(c.n) OVER (), 2),
    'weight_pct', round(100.0 * (CASE c.grp WHEN 'big' THEN $big_weight ELSE $small_weight END)
      / ($big_weight + $small_weight), 2),
    'deviation_pct', round(100.0 * ((1.0 * c.n / sum(c.n) OVER ())
      / ((CASE c.grp WHEN 'big' THEN $big_weight ELSE $small_weight END)
        / ($big_weight + $small_weight)::numeric) - 1), 2),
    'pending_after', coalesce(l.pending, 0),
    'seconds', (SELECT extract(epoch FROM to_ - from_)::int FROM bounds),
    'workers', (SELECT count(DISTINCT worker) FROM fleet_delivery)
  FROM counted c LEFT JOIN left_ l USING (grp) ORDER BY c.grp"
