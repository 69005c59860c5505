#!/usr/bin/env bash
# Runs Orderly's checks the way CI and users meet them: on a machine that is busier than it has
# cores. CPU burner processes (one more than the cores, by default) run beside every check.
#
#   bash Tools/load-check/run.sh examples [ROUNDS]   every example ROUNDS times (12): each run's
#                                                     output must equal the first's (an example
#                                                     whose front matter says `output: varies`:
#                                                     equal with its numbers masked)
#   bash Tools/load-check/run.sh tests [ROUNDS]       `swift test` ROUNDS times in a row (5), then
#                                                     the concurrency suites under ThreadSanitizer
#                                                     ROUNDS times
#   bash Tools/load-check/run.sh all                  both
#
# BURNERS=N sets the number of burner processes. It exits 1 at the first failure, naming it, and
# leaves the failing output in .build-load-check/.
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

# The concurrency suites, as .ci/run names them.
tsan_filter='OrderlyCoreTests|OrderlyTestSupportTests|OrderlyRepositoryTests|OrderlySQLiteTests|OrderlyOutboxTests|OrderlyLaunchTests|OrderlyTaskStoreTests'

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

tests() {
  local n=${rounds:-5}
  build swift build --build-tests
  build swift build --build-tests --scratch-path .build-tsan --sanitize=thread
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
    echo "load-check: ThreadSanitizer suites, round $i of $n"
    # The suppressions .ci/run uses (each explained there).
    TSAN_OPTIONS="suppressions=$PWD/.ci/tsan-suppressions.txt" \
      swift test --scratch-path .build-tsan --sanitize=thread --filter "$tsan_filter" \
      >"$out/tsan.$i.log" 2>&1 || {
      echo "FAIL ThreadSanitizer suites, round $i: see $out/tsan.$i.log"
      grep -E '✘|error:|failed|WARNING: ThreadSanitizer' "$out/tsan.$i.log" | head -n 30
      return 1
    }
    tail -n 2 "$out/tsan.$i.log"
  done
  stop_burners
}

case "$mode" in
  examples) examples ;;
  tests) tests ;;
  all) examples && tests ;;
  *) echo "usage: bash Tools/load-check/run.sh examples|tests|all [ROUNDS]" >&2; exit 2 ;;
esac
echo "load-check: passed"
