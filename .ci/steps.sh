# The step runner of .ci/run, sourced by it (and usable by any script that wants the same):
# every step is timed and bounded.
#
#   step LIMIT NAME COMMAND [ARGUMENTS...]
#
# runs COMMAND (a program, or a function this shell exported with `export -f`) in a process
# group of its own, prints the time it starts and its output as it comes, and records its
# seconds. A step that outlives LIMIT (`90s`, `8m`) fails: the runner prints the tests that had
# started and not ended (from Swift Testing's output) and the processes still running in the
# step's group (an example, a test binary, a build), then ends the whole group: TERM, and KILL
# 15 s later. `step_table` prints every step with its limit, seconds and result; `.ci/run` calls
# it when it exits, whether the run passed or not.

steps_dir=$(mktemp -d "${TMPDIR:-/tmp}/orderly-ci-steps.XXXXXX")
steps_started=$SECONDS
step_rows=()

to_seconds() {
  case $1 in
    *m) echo $((${1%m} * 60)) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}

# What had not ended when a step ran out of time: the tests that started and did not pass, fail
# or skip (Swift Testing's console lines), and the step's processes, oldest first.
step_not_ended() {
  local log=$1 group=$2
  python3 - "$log" <<'PY'
import re, sys
from collections import Counter
started, ended, order = Counter(), Counter(), []
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r'◇ Test (.+?) started\.', line)
    if m:
        started[m.group(1)] += 1
        order.append(m.group(1))
        continue
    m = re.match(r'[✔✘➜] Test (.+?)(?: with \d+ test cases?)? (?:passed|failed|skipped)', line)
    if m:
        ended[m.group(1)] += 1
left = [name for name in dict.fromkeys(order) if started[name] > ended[name]]
if left:
    print("tests that had started and not ended:")
    for name in left:
        print("  " + name)
PY
  echo "processes of the step still running (seconds running, command):"
  ps -eo pgid=,pid=,etimes=,args= | awk -v g="$group" '$1 == g { $1 = ""; print "  " substr($0, 2) }' |
    cut -c1-220 | head -n 40
  echo "its last lines of output:"
  tail -n 15 "$log" | sed 's/^/  | /'
}

step() {
  local limit=$1 name=$2
  shift 2
  local seconds_limit start log pid watchdog tailer status=0
  seconds_limit=$(to_seconds "$limit")
  start=$SECONDS
  log="$steps_dir/${#step_rows[@]}.log"
  : >"$log"
  printf '\n==> %s  %s  (limit %s)\n' "$(date -u '+%H:%M:%S')" "$name" "$limit"
  # Not a process group leader here, so setsid makes this very process the leader of a new
  # group (no fork): $! is the group's id.
  setsid bash -c 'set -euo pipefail; "$@"' "$name" "$@" >"$log" 2>&1 </dev/null &
  pid=$!
  tail -n +1 -f --pid="$pid" "$log" &
  tailer=$!
  (
    deadline=$((SECONDS + seconds_limit))
    while ((SECONDS < deadline)); do sleep 2; done
    : >"$log.timeout"
    {
      printf '\n==> "%s" did not end within %s\n' "$name" "$limit"
      step_not_ended "$log" "$pid"
    } >"$log.report" 2>&1
    kill -TERM -- "-$pid" 2>/dev/null || true
    sleep 15
    kill -KILL -- "-$pid" 2>/dev/null || true
  ) &
  watchdog=$!
  wait "$pid" || status=$?
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  wait "$tailer" 2>/dev/null || true
  # A test binary that left the group (or a straggler) must not outlive its step.
  kill -KILL -- "-$pid" 2>/dev/null || true
  local seconds=$((SECONDS - start)) result=ok
  if [ -f "$log.timeout" ]; then
    result="did not end within $limit"
    cat "$log.report"
    status=124
  elif [ "$status" -ne 0 ]; then
    result="failed (exit $status)"
  fi
  step_rows+=("$name"$'\x1f'"$limit"$'\x1f'"$seconds"$'\x1f'"$result")
  printf '==> %s  %s: %s in %d s\n' "$(date -u '+%H:%M:%S')" "$name" "$result" "$seconds"
  return "$status"
}

# Every step run so far, then the total; a step that failed is the last row.
step_table() {
  local row name limit seconds result total=$((SECONDS - steps_started))
  printf '\n==> steps (seconds)\n'
  printf '  %-78s %6s %8s  %s\n' step limit seconds result
  for row in "${step_rows[@]}"; do
    IFS=$'\x1f' read -r name limit seconds result <<<"$row"
    printf '  %-78s %6s %8s  %s\n' "${name:0:78}" "$limit" "$seconds" "$result"
  done
  printf '  %-78s %6s %8s\n' "total (from the first step)" "" "$total"
  rm -rf "$steps_dir"
}
