#!/usr/bin/env bash
# Runs the ratios harness and writes docs/benchmarks.md from its output (never edit the table
# by hand). Arguments go to ratios, e.g. --quick.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

output=$(swift run -c release --package-path Benchmarks ratios "$@" 2>/dev/null)
status=$?
if [ -z "$output" ]; then
  echo "update-docs: ratios printed nothing (exit $status); run it by hand to see why" >&2
  exit 1
fi

{
  cat <<'HEADER'
# Benchmarks

Orderly against the baselines it replaces, measured by `Benchmarks/`, a package of its own so
that neither the root build nor CI compiles benchmark dependencies.

## How to run

```
# Orderly and each baseline alternately (A B A B ...) in one process; exits 1 on a missed target
swift run -c release --package-path Benchmarks ratios           # full, several minutes
swift run -c release --package-path Benchmarks ratios --quick   # under a minute

# package-benchmark suites: distributions and malloc counts
swift package --package-path Benchmarks benchmark

# refresh the table below from a ratios run
bash Benchmarks/Scripts/update-docs.sh [--quick]
```

Ratios within one run are what count: machines are shared and absolute times drift. Memory
is malloc's bytes in use (`mallinfo2`) before and after the jobs are pending.

## What the profile says

`perf record` works on these machines (valgrind 3.19 does not: it rejects Swift 6.3's DWARF).
`perf record -g .build/release/ratios --quick --only "enqueueDetached fire-and-forget"` showed
`swift_getGenericMetadata` and its caches at about 40% of a job's time: the queues' generic
entry points and `DetachedJob<Success>` ran unspecialized across the module boundary and looked
up `Mutex<State>`, `Result<Success, Error>` and friends for every job. The entry points are now
pre-specialized for `Void` (`@_specialize`) and a detached job keeps its state with the result
type erased, which took `enqueueDetached` from about 2,300 to about 1,400 ns per job and a job
returning `Int` from about 2,550 to about 1,850 (the `returning Int` row: allocating a generic
job object still costs a lookup). The erased result is wider than `Result<Void, _>`, which is
why a pending detached job now takes about 195 bytes instead of 161. What
remains is mostly malloc/free (a job object and a reentrancy frame per job), retain/release,
and futex waits on the queue's single lock, which is what keeps 8 producers far from Dispatch's
lock-free enqueue. `enqueue` jobs each suspend until their turn and are resumed by the previous
job: a scheduling hop a bare `Task {}` does not pay.

## Latest run

HEADER
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(uname -srm), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- toolchain: $(swift --version 2>/dev/null | head -n 1)"
  echo "- command: ratios $*"
  echo "- exit status: $status"
  echo
  echo '```'
  echo "$output"
  echo '```'
} > docs/benchmarks.md
echo "wrote docs/benchmarks.md (ratios exit status $status)"
