#!/usr/bin/env bash
# Runs the ratios harness and the fleet benchmark (the PostgreSQL outbox) and writes
# docs/benchmarks.md from their output (never edit the tables by hand). Other arguments go to
# both, e.g. --quick.
#
#   bash Benchmarks/Scripts/update-docs.sh [--quick]               # both sections
#   bash Benchmarks/Scripts/update-docs.sh --ratios-only [--quick] # keeps the fleet section
#   bash Benchmarks/Scripts/update-docs.sh --fleet-only [--quick]  # keeps the ratios section
#
# Only the measured part of the two sections it writes changes (from each one's "- date:" line
# to the next `## ` heading: "## Latest run" and the fleet section); every other line of the
# page, the prose and the sections written by hand, stays where it is.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

fleet_heading='## The outbox on PostgreSQL, across workers'
run_ratios=1
run_fleet=1
case "${1:-}" in
  --ratios-only) run_fleet=0; shift ;;
  --fleet-only) run_ratios=0; shift ;;
esac

status=0
if [ "$run_ratios" = 1 ]; then
  output=$(swift run -c release --package-path Benchmarks ratios "$@" 2>/dev/null)
  status=$?
  if [ -z "$output" ]; then
    echo "update-docs: ratios printed nothing (exit $status); run it by hand to see why" >&2
    exit 1
  fi
fi

fleet_status=0
if [ "$run_fleet" = 1 ]; then
  # Against the server ORDERLY_POSTGRES_URL names, or a throwaway one started (and stopped)
  # here with Tools/postgres/cluster.sh.
  fleet_url=${ORDERLY_POSTGRES_URL:-}
  fleet_started=0
  if [ -z "$fleet_url" ]; then
    fleet_url=$(bash Tools/postgres/cluster.sh start) || {
      echo "update-docs: could not start PostgreSQL for the fleet rows" >&2
      exit 1
    }
    fleet_started=1
  fi
  # Built first, so that the build's own output stays out of the page.
  if swift build -c release --package-path Benchmarks --product fleet >/dev/null 2>&1; then
    fleet_bin=$(swift build -c release --package-path Benchmarks --show-bin-path)
    fleet_output=$("$fleet_bin/fleet" --url "$fleet_url" "$@" 2>&1)
    fleet_status=$?
  else
    fleet_output="the fleet benchmark does not build: swift build -c release --package-path Benchmarks --product fleet"
    fleet_status=1
  fi
  fleet_server=$(psql "$fleet_url" -Atc 'SHOW server_version' 2>/dev/null || echo "(version not read)")
  [ "$fleet_started" = 1 ] && bash Tools/postgres/cluster.sh stop
fi

# The measured part of a section: its run's facts and output. The rest of the page (each
# section's prose, and the sections written by hand) stays as it is and where it is.
ratios_block() {
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(uname -srm), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- toolchain: $(swift --version 2>/dev/null | head -n 1)"
  echo "- command: ratios $*, on commit $(git rev-parse --short HEAD)"
  echo "- exit status: $status"
  echo
  echo '```'
  echo "$output"
  echo '```'
  echo
}

fleet_block() {
  echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "- machine: $(uname -srm), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "- server: PostgreSQL $fleet_server on the same machine (loopback; fsync off for the throwaway cluster)"
  echo "- command: fleet $*, on commit $(git rev-parse --short HEAD)"
  echo "- exit status: $fleet_status"
  echo
  echo "$fleet_output"
  echo
}

# Standard input with the section under heading $1 replaced from its first line that starts
# with "- date:" up to the next `## ` heading by the file $2. Exits 1 when the page has no such
# section, or the section no "- date:" line, so a renamed heading is never silently skipped.
replace_block() {
  awk -v h="$1" -v block="$2" '
    $0 == h { in_section = 1; print; next }
    in_section && /^## / { in_section = 0; replacing = 0 }
    in_section && !done && /^- date:/ {
      while ((getline line < block) > 0) print line
      replacing = 1; done = 1; next
    }
    replacing { next }
    { print }
    END { if (!done) exit 1 }'
}

page=docs/benchmarks.md
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$page" "$work/page"
# Puts the file $2 in place of the measured part of the section under heading $1.
put_block() {
  replace_block "$1" "$2" <"$work/page" >"$work/next" || {
    echo "update-docs: $page has no '$1' section with a '- date:' line; page left as it was" >&2
    exit 1
  }
  mv "$work/next" "$work/page"
}
if [ "$run_ratios" = 1 ]; then
  ratios_block "$@" >"$work/ratios"
  put_block '## Latest run' "$work/ratios"
fi
if [ "$run_fleet" = 1 ]; then
  fleet_block "$@" >"$work/fleet"
  put_block "$fleet_heading" "$work/fleet"
fi
cp "$work/page" "$page"
echo "wrote docs/benchmarks.md (ratios exit status $status, fleet exit status $fleet_status)"
