#!/usr/bin/env bash
# Orderly beside procrastinate and awa under the public PostgreSQL queue harness
# (hardbyte/postgresql-job-queue-benchmarking), on this machine, without Docker, as the
# harness's author runs it: one command.
#
#   HARNESS_DIR=/path/to/postgresql-job-queue-benchmarking bash Benchmarks/Scripts/harness.sh \
#     [--quick] [--runs N] [--cells CELL,...] [--systems SYSTEM,...] [--again]
#
# HARNESS_DIR is a checkout of the harness (not part of this repository; the commit used for
# docs/benchmarks.md is named in Benchmarks/Harness/README.md). Without it, the script clones
# HARNESS_SOURCE (the public repository by default) into Benchmarks/.build-harness/src at that
# commit. It then makes a Python virtual environment with the harness's and the peers' packages
# (PyPI), builds Orderly's adapter (release), puts Benchmarks/Harness/bin (a `docker` stand-in
# that runs PostgreSQL with Tools/postgres/cluster.sh, fsync on) first on PATH, runs the matrix
# and writes its tables to Benchmarks/.build-harness/results.md.
#
# The matrix: every cell for every system, each cell --runs times (3 unless given), one cell
# at a time, on a server started fresh for each.
#   cells    throughput-4, throughput-16, throughput-64: the harness's depth-target method (a
#            queue kept about 4,000 deep), warmup 30 s, clean 180 s, one replica
#            latency-16: 16 workers, offered 200 jobs/s (a rate every system sustains),
#            warmup 30 s, clean 180 s
#            chaos_crash_recovery, chaos_repeated_kills, chaos_pg_backend_kill,
#            chaos_postgres_restart, chaos_pool_exhaustion: the harness's own scenarios (its
#            phase lengths: 60 s phases, repeated kills 120 s, one every 20 s), 2 replicas of
#            16 workers, each replica offered 600 jobs/s
#   systems  orderly-b1 (one message per delivery), orderly-b16 (ordered batches of up to 16),
#            procrastinate and awa-python (unordered), procrastinate-ordered (`lock` by key)
#            and awa-python-ordered (`ordering_key`): Benchmarks/Harness/run.py says how
# Every system spreads its jobs over the same 1,000 keys (BENCH_KEYS), round robin; handlers
# sleep 1 ms per job; producers insert in batches of up to 128 (every 25 ms).
#
# The runs are kept: each finished one is a line of Benchmarks/Harness/results/matrix.jsonl
# (the figures the tables use, with the run's date and commits), and a run already there is not
# run again (--again runs it anyway), so an interrupted matrix goes on where it stopped. An
# Orderly run is of the build it was made with (below); a cell with no run on the current build
# is shown from the build that ran it, named in its row. A session's runs are committed once,
# together, not one commit per cell. The
# harness's own folders (raw samples, plots) stay under its results/, listed in
# Benchmarks/.build-harness/runs.txt.
#
# --quick: one run of latency-16 and chaos_crash_recovery for orderly-b16, for a check (kept
# apart, in Benchmarks/.build-harness/quick.jsonl).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
root=$(pwd)
state=$root/Benchmarks/.build-harness
pinned=93677ca
all_cells="throughput-4,throughput-16,throughput-64,latency-16,chaos_crash_recovery,chaos_repeated_kills,chaos_pg_backend_kill,chaos_postgres_restart,chaos_pool_exhaustion"
all_systems="orderly-b1,orderly-b16,procrastinate,procrastinate-ordered,awa-python,awa-python-ordered"
cells=$all_cells
systems=$all_systems
runs=3
again=false
ledger=$root/Benchmarks/Harness/results/matrix.jsonl
usage() {
  echo "usage: bash Benchmarks/Scripts/harness.sh [--quick] [--runs N] [--cells CELL,...] [--systems SYSTEM,...] [--again]" >&2
  echo "  cells: $all_cells" >&2
  echo "  systems: $all_systems" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --quick)
      cells=latency-16,chaos_crash_recovery
      systems=orderly-b16
      runs=1
      again=true
      ledger=$state/quick.jsonl
      ;;
    --runs)
      [ $# -ge 2 ] && [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "harness.sh: --runs needs a whole number, 1 or more" >&2; usage; }
      runs=$2
      shift
      ;;
    --cells)
      [ $# -ge 2 ] || usage
      cells=$2
      shift
      ;;
    --systems)
      [ $# -ge 2 ] || usage
      systems=$2
      shift
      ;;
    --again) again=true ;;
    *)
      echo "harness.sh: unknown argument $1" >&2
      usage
      ;;
  esac
  shift
done
for cell in ${cells//,/ }; do
  [[ ",$all_cells," == *",$cell,"* ]] || { echo "harness.sh: unknown cell $cell" >&2; usage; }
done
for system in ${systems//,/ }; do
  [[ ",$all_systems," == *",$system,"* ]] || { echo "harness.sh: unknown system $system" >&2; usage; }
done
mkdir -p "$state" "$(dirname "$ledger")"

if [ -z "${HARNESS_DIR:-}" ]; then
  HARNESS_DIR=$state/src
  if [ ! -d "$HARNESS_DIR/bench_harness" ]; then
    source=${HARNESS_SOURCE:-https://github.com/hardbyte/postgresql-job-queue-benchmarking}
    echo "harness.sh: cloning $source at $pinned into $HARNESS_DIR" >&2
    git clone -q --no-checkout "$source" "$HARNESS_DIR" ||
      { echo "harness.sh: could not clone $source; set HARNESS_DIR to a checkout" >&2; exit 1; }
    # The harness keeps its published results in the repository; they are not needed here.
    git -C "$HARNESS_DIR" sparse-checkout set --no-cone '/*' '!/results/'
    git -C "$HARNESS_DIR" checkout -q "$pinned"
  fi
fi
[ -d "$HARNESS_DIR/bench_harness" ] ||
  { echo "harness.sh: $HARNESS_DIR is not the harness (no bench_harness folder)" >&2; exit 1; }
mkdir -p "$HARNESS_DIR/results"
export HARNESS_DIR
harness_commit=$(git -C "$HARNESS_DIR" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "harness.sh: harness at $HARNESS_DIR, commit $harness_commit" >&2

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
# A production server's durability: every commit waits for the disk.
export ORDERLY_POSTGRES_FSYNC=on
export BENCH_KEYS=${BENCH_KEYS:-1000}
# Every delivery attempt of Orderly goes to its audit trail, checked after each cell.
export ORDERLY_AUDIT=${ORDERLY_AUDIT:-1}
# Every adapter's bulk insert path, as in the harness's own sweeps (procrastinate's adapter
# inserts one row per call without it).
export PRODUCER_BATCH_MAX=${PRODUCER_BATCH_MAX:-128} PRODUCER_BATCH_MS=${PRODUCER_BATCH_MS:-25}
orderly_commit=$(git -C "$root" rev-parse --short HEAD)
# The build, named by the last commit that changed the code a harness cell can move: the
# PostgreSQL store (the worker's statements), the delivery engine (the line loop) and the
# adapter. A cell is run again only on a new such build, and only the cells the change can move
# (--cells, --systems); every other change to Modules/ keeps the runs, and the tables name the
# build each figure is of (CONTRIBUTING.md, "Benchmarks").
orderly_build=$(git -C "$root" log -1 --format=%h -- Modules/OrderlyPostgres Modules/OrderlyOutboxCore \
  ':(exclude)Modules/*.docc/*' Benchmarks/Package.swift Benchmarks/Sources/harness-adapter)
$again || touch "$ledger"

cell_arguments() {
  case "$1" in
    throughput-*)
      echo "--worker-count ${1#throughput-} --producer-mode depth-target --target-depth 4000"
      echo "--producer-rate 50000 --phase warmup=warmup:30s --phase clean_1=clean:180s"
      ;;
    latency-16)
      echo "--worker-count 16 --producer-rate 200 --phase warmup=warmup:30s --phase clean_1=clean:180s"
      ;;
    chaos_*) echo "--scenario $1 --replicas 2 --worker-count 16 --producer-rate 600" ;;
  esac
}

done_already() {
  "$state/venv/bin/python" - "$ledger" "$1" "$2" "$3" "$orderly_build" <<'EOF'
import json, sys
path, cell, system, run, build = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    lines = []
found = any(
    (r := json.loads(line)) and r["cell"] == cell and r["system"] == system and r["run"] == run
    and (not system.startswith("orderly") or r.get("orderly_build") == build)
    for line in lines if line.strip()
)
sys.exit(0 if found else 1)
EOF
}

for run in $(seq 1 "$runs"); do
  for cell in ${cells//,/ }; do
    for system in ${systems//,/ }; do
      if ! $again && done_already "$cell" "$system" "$run"; then
        echo "harness.sh: $cell $system run $run is in $ledger already" >&2
        continue
      fi
      echo "harness.sh: $(date -u +%H:%M:%S) $cell, $system, run $run of $runs" >&2
      # shellcheck disable=SC2046 # the cell's arguments are words
      "$state/venv/bin/python" "$root/Benchmarks/Harness/run.py" run --skip-build \
        --sample-every 5 --no-wait-events --systems "$system" $(cell_arguments "$cell") \
        2>"$state/last.log" || {
        tail -n 40 "$state/last.log" >&2
        echo "harness.sh: $cell $system failed; the whole log is $state/last.log" >&2
        exit 1
      }
      folder=$(sed -n 's/.*results at: //p' "$state/last.log" | tail -n 1)
      printf '%s %s %s\t%s\n' "$cell" "$system" "$run" "$folder" >>"$state/runs.txt"
      "$state/venv/bin/python" "$root/Benchmarks/Harness/record.py" "$folder" "$cell" "$system" \
        "$run" "$orderly_commit" "$harness_commit" "$orderly_build" >>"$ledger"
      # The delivery logs of the order check are read; the figures are in the ledger.
      rm -rf "$folder"/order-log-*
    done
  done
done
"$state/venv/bin/python" "$root/Benchmarks/Harness/summarize.py" "$ledger" "$orderly_build" \
  >"$state/results.md"
cat "$state/results.md"
