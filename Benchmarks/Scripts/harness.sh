#!/usr/bin/env bash
# Orderly beside procrastinate and awa under the public PostgreSQL queue harness
# (hardbyte/postgresql-job-queue-benchmarking), on this machine, without Docker: one command.
#
#   HARNESS_DIR=/path/to/postgresql-job-queue-benchmarking bash Benchmarks/Scripts/harness.sh [--quick]
#
# HARNESS_DIR is a checkout of the harness (not part of this repository; the commit used for
# docs/benchmarks.md is named in Benchmarks/Harness/README.md). Without it, the script clones
# HARNESS_SOURCE (the public repository by default) into Benchmarks/.build-harness/src at that
# commit. It then makes a Python virtual environment with the harness's and the peers' packages
# (PyPI), builds Orderly's adapter (release), puts Benchmarks/Harness/bin (a `docker` stand-in
# that runs PostgreSQL with Tools/postgres/cluster.sh) first on PATH, runs the matrix and
# writes the tables to Benchmarks/.build-harness/results.md.
#
# The matrix, per system (orderly, procrastinate, awa-python), phases shortened for 2 cores:
#   - throughput: 4, 16 and 64 workers, one replica, offered 3,000 jobs/s (more than this
#     machine carries): warmup 10 s, clean 40 s
#   - claim latency: 16 workers, offered 800 jobs/s: warmup 10 s, clean 40 s
#   - the five chaos scenarios, 2 replicas of 16 workers, 800 jobs/s: the harness's phase
#     sequences with each phase 20 s (repeated kills: 60 s, one every 15 s)
# Orderly: 1,000 keys (BENCH_KEYS), ordered batches of up to 16 (ORDERLY_BATCH).
# --quick runs Orderly's latency row and one chaos scenario only, for a check.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
state=$root/Benchmarks/.build-harness
pinned=93677ca
quick=false
[ "${1:-}" = --quick ] && quick=true
mkdir -p "$state"

if [ -z "${HARNESS_DIR:-}" ]; then
  HARNESS_DIR=$state/src
  if [ ! -d "$HARNESS_DIR/bench_harness" ]; then
    source=${HARNESS_SOURCE:-https://github.com/hardbyte/postgresql-job-queue-benchmarking}
    echo "harness.sh: cloning $source at $pinned into $HARNESS_DIR" >&2
    git clone -q "$source" "$HARNESS_DIR" ||
      { echo "harness.sh: could not clone $source; set HARNESS_DIR to a checkout" >&2; exit 1; }
    git -C "$HARNESS_DIR" checkout -q "$pinned"
  fi
fi
[ -d "$HARNESS_DIR/bench_harness" ] ||
  { echo "harness.sh: $HARNESS_DIR is not the harness (no bench_harness folder)" >&2; exit 1; }
export HARNESS_DIR
echo "harness.sh: harness at $HARNESS_DIR, commit $(git -C "$HARNESS_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)" >&2

# Python 3.12 or newer (the harness's floor).
python=""
for candidate in python3.13 python3.12 python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
for found in /root/.pyenv/versions/3.1[23]*/bin/python3; do
  [ -z "$python" ] && [ -x "$found" ] && python=$found
done
[ -n "$python" ] || { echo "harness.sh: the harness needs Python 3.12 or newer" >&2; exit 1; }
if [ ! -x "$state/venv/bin/python" ]; then
  "$python" -m venv "$state/venv"
fi
"$state/venv/bin/pip" install -q "psycopg[binary]==3.3.3" "matplotlib>=3.9" "pandas>=2.2" \
  "numpy>=2.0" "pydantic>=2" "procrastinate==3.8.1" "awa-pg==0.6.9"

swift build -c release --package-path Benchmarks --product harness-adapter >&2
ORDERLY_ADAPTER=$(swift build -c release --package-path Benchmarks --show-bin-path)/harness-adapter
export ORDERLY_ADAPTER
export PATH=$root/Benchmarks/Harness/bin:$PATH
export ORDERLY_HARNESS_STATE=$state
export BENCH_KEYS=${BENCH_KEYS:-1000}
# Orderly delivers in ordered batches of up to 16 consecutive messages of a key (1: one at a
# time, as the run before ordered batches existed).
export ORDERLY_BATCH=${ORDERLY_BATCH:-16}
# Every adapter's bulk insert path, as in the harness's own sweeps (procrastinate's adapter
# inserts one row per call without it).
export PRODUCER_BATCH_MAX=${PRODUCER_BATCH_MAX:-128} PRODUCER_BATCH_MS=${PRODUCER_BATCH_MS:-25}
# The harness writes its results under its own folder; each run's folder is listed here.
runs=$state/runs.txt
: >"$runs"

bench() {
  local label=$1
  shift
  echo "harness.sh: $label" >&2
  "$state/venv/bin/python" "$root/Benchmarks/Harness/run.py" run --skip-build --sample-every 5 \
    --no-wait-events "$@" 2>"$state/last.log" || {
    tail -n 40 "$state/last.log" >&2
    echo "harness.sh: $label failed; the whole log is $state/last.log" >&2
    exit 1
  }
  local dir
  dir=$(sed -n 's/.*results at: //p' "$state/last.log" | tail -n 1)
  echo "$label	$dir" >>"$runs"
}

systems=${SYSTEMS:-orderly,procrastinate,awa-python}
short=20s
chaos() {
  local name=$1
  shift
  bench "chaos $name" --systems "$systems" --replicas 2 --worker-count 16 --producer-rate 800 \
    --phase warmup=warmup:10s --phase baseline=clean:$short "$@" --phase recovery=clean:$short
}

if $quick; then
  systems=${SYSTEMS:-orderly}
  bench "latency 16" --systems "$systems" --worker-count 16 --producer-rate 800 \
    --phase warmup=warmup:10s --phase clean_1=clean:20s
  chaos crash_recovery --phase "kill=kill-worker(instance=0):$short" \
    --phase "restart=start-worker(instance=0):$short"
else
  for workers in 4 16 64; do
    bench "throughput $workers" --systems "$systems" --worker-count "$workers" \
      --producer-rate 3000 --phase warmup=warmup:10s --phase clean_1=clean:40s
  done
  bench "latency 16" --systems "$systems" --worker-count 16 --producer-rate 800 \
    --phase warmup=warmup:10s --phase clean_1=clean:40s
  chaos crash_recovery --phase "kill=kill-worker(instance=0):$short" \
    --phase "restart=start-worker(instance=0):$short"
  chaos repeated_kills --phase "repeated=repeated-kill(instance=0,period=15s):60s"
  chaos pg_backend_kill --phase "kills=pg-backend-kill(rate=2):$short"
  chaos postgres_restart --phase "restart=postgres-restart:$short"
  chaos pool_exhaustion --phase "exhaustion=pool-exhaustion(idle_conns=300):$short"
fi
"$state/venv/bin/python" "$root/Benchmarks/Harness/summarize.py" "$runs" >"$state/results.md"
cat "$state/results.md"
