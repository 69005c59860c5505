#!/usr/bin/env bash
# Runs Orderly's checks the way CI and users meet them: on a machine that is busier than it has
# cores. CPU burner processes (one more than the cores, by default) run beside every check.
#
#   bash Tools/load-check/run.sh examples [ROUNDS]   every example ROUNDS times (12): each run's
#                                                     output must equal the first's (an example
#                                                     whose front matter says `output: varies`:
#                                                     equal with its numbers masked)
#   bash Tools/load-check/run.sh tests [ROUNDS]       `swift test` ROUNDS times in a row (5), then
#                                                     both of .ci/run's ThreadSanitizer runs (the
#                                                     concurrency suites; again with the Apple
#                                                     systems' locks) ROUNDS times each
#   bash Tools/load-check/run.sh postgres [ROUNDS]    .ci/run's PostgreSQL groups from its
#                                                     warnings-as-errors build, against a throwaway
#                                                     cluster, ROUNDS times (1: the fleet group
#                                                     takes minutes)
#   bash Tools/load-check/run.sh all                  all three
#
# The groups, filters and builds are .ci/run's own (.ci/suites.sh names them for both), so what
# fails CI fails here first. BURNERS=N sets the number of burner processes. It exits 1 at the
# first failure, naming it, and leaves the failing output in .build-load-check/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="/opt/swift/usr/bin:$PATH"
fi

mode=${1:-all}
rounds=${2:-}
burners=${BURNERS:-$(($(nproc) + 1))}
out=.build-load-check
mkdir -p "$out"

# Runs a build quietly; on failure, shows its last lines and stops.
build() {
  local log="$out/build.log"
  if ! "$@" >"$log" 2>&1; then
    echo "FAIL build: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}

burner_pids=()
start_burners() {
  for _ in $(seq "$burners"); do
    (while :; do :; done) &
    burner_pids+=($!)
  done
  echo "load-check: $burners CPU burners on $(nproc) cores"
}
stop_burners() {
  for pid in "${burner_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  burner_pids=()
}
trap stop_burners EXIT

# The sanitizer suites and the PostgreSQL groups, as .ci/run runs them.
source .ci/suites.sh
werror=(--scratch-path .build-werror --traits SQLite,Server,Postgres -Xswiftc -warnings-as-errors)
tsan=(--scratch-path .build-tsan --sanitize=thread --traits SQLite,Server)
portable=(--scratch-path .build-portable-tsan --sanitize=thread -Xswiftc -DORDERLY_PORTABLE_LOCKS
  -Xswiftc -warnings-as-errors)

examples() {
  local n=${rounds:-12}
  build swift build
  build swift build --package-path Examples/notes-sync --product notes-sync
  local bin
  bin=$(swift build --show-bin-path)
  start_burners
  local failed=0
  for dir in Examples/*/; do
    local name
    name=$(basename "$dir")
    local exe="$bin/$name"
    [ -f "$dir/Package.swift" ] && exe="$dir.build/debug/$name"
    local varies=0
    grep -q '^output: varies' "$dir/README.md" && varies=1
    local first="$out/$name.1.txt"
    for i in $(seq "$n"); do
      local this="$out/$name.$i.txt"
      "$exe" </dev/null >"$this" 2>&1 || {
        echo "FAIL $name: run $i exited $? (output: $this)"
        failed=1
        continue 2
      }
      [ "$i" = 1 ] && continue
      if [ "$varies" = 1 ]; then
        if ! diff -q <(sed -E 's/[0-9]+/#/g' "$first") <(sed -E 's/[0-9]+/#/g' "$this") >/dev/null; then
          echo "FAIL $name: run $i differs from run 1 beyond its numbers:"
          diff "$first" "$this" | head -n 20
          failed=1
          continue 2
        fi
      elif ! cmp -s "$first" "$this"; then
        echo "FAIL $name: run $i differs from run 1:"
        diff "$first" "$this" | head -n 20
        failed=1
        continue 2
      fi
    done
    echo "ok   $name: $n runs alike$([ "$varies" = 1 ] && echo ' (numbers masked: output varies)')"
  done
  stop_burners
  return "$failed"
}

# sanitizer_round NAME TARGETS ARGUMENTS...: one ThreadSanitizer run of .ci/run.
sanitizer_round() {
  local name=$1 targets=$2 i=$3
  shift 3
  echo "load-check: $name, round $i of ${rounds:-5}"
  # The suppressions .ci/run uses (each explained there).
  ORDERLY_TEST_TARGETS=$targets TSAN_OPTIONS="suppressions=$PWD/.ci/tsan-suppressions.txt" \
    swift test "$@" --filter "${targets//,/|}" >"$out/$name.$i.log" 2>&1 || {
    echo "FAIL $name, round $i: see $out/$name.$i.log"
    grep -E '✘|error:|failed|WARNING: ThreadSanitizer' "$out/$name.$i.log" | head -n 30
    return 1
  }
  tail -n 2 "$out/$name.$i.log"
}

tests() {
  local n=${rounds:-5}
  build swift build --build-tests
  ORDERLY_TEST_TARGETS=$tsan_targets build swift build --build-tests "${tsan[@]}"
  ORDERLY_TEST_TARGETS=$portable_tsan_targets build swift build --build-tests "${portable[@]}"
  start_burners
  for i in $(seq "$n"); do
    echo "load-check: swift test, round $i of $n"
    swift test >"$out/swift-test.$i.log" 2>&1 || {
      echo "FAIL swift test, round $i: see $out/swift-test.$i.log"
      grep -E '✘|error:|failed' "$out/swift-test.$i.log" | head -n 30
      return 1
    }
    tail -n 2 "$out/swift-test.$i.log"
  done
  for i in $(seq "$n"); do
    sanitizer_round tsan "$tsan_targets" "$i" "${tsan[@]}" || return 1
    sanitizer_round portable-tsan "$portable_tsan_targets" "$i" "${portable[@]}" || return 1
  done
  stop_burners
}

postgres() {
  local n=${rounds:-1}
  build swift build --build-tests "${werror[@]}"
  bash Tools/postgres/cluster.sh stop >/dev/null 2>&1 || true
  ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start --install)
  export ORDERLY_POSTGRES_URL
  trap 'stop_burners; bash Tools/postgres/cluster.sh stop >/dev/null 2>&1 || true' EXIT
  start_burners
  local i group limit filter skip skipping log
  for i in $(seq "$n"); do
    for group in "${postgres_groups[@]}"; do
      IFS=';' read -r limit filter skip <<<"$group"
      skipping=()
      [ -n "$skip" ] && skipping=(--skip "$skip")
      log="$out/postgres.$i.$(echo "$filter" | tr -c 'A-Za-z0-9\n' _ | cut -c1-60).log"
      echo "load-check: PostgreSQL tests $filter, round $i of $n (limit $limit)"
      CI=true timeout --kill-after=15s "$limit" swift test --skip-build "${werror[@]}" \
        --filter "$filter" "${skipping[@]}" >"$log" 2>&1 || {
        echo "FAIL PostgreSQL tests $filter, round $i (a time limit ends with 124): see $log"
        grep -E '✘|error:|failed' "$log" | head -n 30
        return 1
      }
      tail -n 2 "$log"
    done
  done
  stop_burners
}

case "$mode" in
  examples) examples ;;
  tests) tests ;;
  postgres) postgres ;;
  all) examples && tests && postgres ;;
  *) echo "usage: bash Tools/load-check/run.sh examples|tests|postgres|all [ROUNDS]" >&2; exit 2 ;;
esac
echo "load-check: passed"
