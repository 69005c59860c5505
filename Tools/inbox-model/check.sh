#!/usr/bin/env bash
# Checks the model of the queue engine's inbox protocol (inbox.pml) with spin, over every
# interleaving, for several sizes; then checks that two broken variants of it fail, so a pass
# means something. Needs spin and a C compiler: `apt-get install spin` (it installs spin when
# it is missing and the user is root, as in CI).
#
#   bash Tools/inbox-model/check.sh          # the sizes CI checks (about 10 seconds)
#   QUICK=1 bash Tools/inbox-model/check.sh  # the smaller sizes only (seconds)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if ! command -v spin >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq spin >/dev/null
  else
    echo "inbox-model: spin is missing; install it: sudo apt-get install spin" >&2
    exit 1
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/inbox.pml" "$work/"
cd "$work"

# Runs spin on one configuration; prints the verdict; returns 0 when no error was found.
verify() {
  rm -f pan pan.*
  spin -a "$@" inbox.pml >/dev/null
  gcc -O2 -DSAFETY -DCOLLAPSE -DMEMLIM=4096 -o pan pan.c
  local out
  out=$(./pan -m2000000 2>&1)
  local errors states
  errors=$(printf '%s\n' "$out" | sed -n 's/.*errors: \([0-9]*\).*/\1/p')
  states=$(printf '%s\n' "$out" | sed -n 's/^ *\([0-9]*\) states, stored.*/\1/p')
  # A search that stops at its first error is not complete either; one without an error must be.
  if [ "$errors" = 0 ] && printf '%s\n' "$out" | grep -qE 'Search not completed|out of memory|max search depth too small'; then
    echo "inbox-model: $*: the search did not complete" >&2
    printf '%s\n' "$out" | tail -n 5 >&2
    exit 1
  fi
  echo "  $*: $states states, $errors errors"
  [ "$errors" = 0 ]
}

sizes=("-DNPROD=2 -DNJOBS=2 -DNREADERS=1" "-DNPROD=2 -DNJOBS=3 -DNREADERS=1")
if [ -z "${QUICK:-}" ]; then
  sizes+=("-DNPROD=3 -DNJOBS=2 -DNREADERS=2" "-DNPROD=2 -DNJOBS=4 -DNREADERS=1")
fi
echo "inbox-model: every interleaving of producers, runners and readers"
for size in "${sizes[@]}"; do
  # shellcheck disable=SC2086
  verify $size || { echo "inbox-model: FAILED for $size (spin left its trail in $work)" >&2; trap - EXIT; exit 1; }
done
echo "inbox-model: broken variants must fail"
for mutant in MUTANT_FLAG_OUTSIDE_LOCK MUTANT_CLOSE_NONEMPTY; do
  if verify -DNPROD=2 -DNJOBS=2 -DNREADERS=1 "-D$mutant"; then
    echo "inbox-model: $mutant passed, so the model checks less than it claims" >&2
    exit 1
  fi
done
echo "inbox-model: passed"
