#!/usr/bin/env bash
# Counts the instructions one `ratios` row executes per job, for one side, by single-stepping
# its measured body (Scripts/count-instructions.c): a measure that does not move with the load
# of the machine, as times do.
#
#   bash Benchmarks/Scripts/instructions-per-job.sh "runner side, synchronous" orderly [JOBS] [REPEATS]
#
# The row runs with JOBS and with 2 x JOBS jobs (default 200), REPEATS times each (default 3);
# the difference of the median counts divided by JOBS is the cost of one job, with the fixed
# cost of the body (starting the runner, waiting for idle) left out. Counts are those of the
# busiest thread (the one that ran the jobs): idle threads that wake up and look for work add
# instructions that depend on the machine's load. Single-stepping costs tens
# of microseconds an instruction: a run of 200 jobs takes about 20 s.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

row=${1:?usage: instructions-per-job.sh ROW orderly|baseline [JOBS] [REPEATS]}
side=${2:?usage: instructions-per-job.sh ROW orderly|baseline [JOBS] [REPEATS]}
jobs=${3:-200}
repeats=${4:-3}
case "$side" in
  orderly | baseline) ;;
  *) echo "instructions-per-job: the side is orderly or baseline, not '$side'" >&2; exit 2 ;;
esac

mkdir -p .build
counter=.build/count-instructions
if [ ! -x "$counter" ] || [ Scripts/count-instructions.c -nt "$counter" ]; then
  cc -O2 -Wall -o "$counter" Scripts/count-instructions.c
fi
if ! swift build -c release --product ratios >/dev/null 2>&1; then
  swift build -c release --product ratios  # again, to show why
  exit 1
fi
ratios=$(swift build -c release --show-bin-path)/ratios

# Prints the median count of the first measured region over REPEATS runs with $1 jobs.
median_count() {
  local count
  for _ in $(seq "$repeats"); do
    count=$("$counter" "$ratios" --only "$row" --side "$side" --jobs "$1" --rounds 1 2>&1 >/dev/null |
      sed -n 's/^region 1: [0-9]* instructions, \([0-9]*\) in the busiest thread$/\1/p')
    if [ -z "$count" ]; then
      echo "instructions-per-job: no measured region for row '$row' (is the name right?)" >&2
      exit 1
    fi
    echo "$1 jobs: $count instructions" >&2
    echo "$count"
  done | sort -n | sed -n "$(((repeats + 1) / 2))p"
}

small=$(median_count "$jobs")
large=$(median_count $((jobs * 2)))
echo "$row ($side): $(((large - small) / jobs)) instructions per job" \
  "($small for $jobs jobs, $large for $((jobs * 2)); median of $repeats)"
