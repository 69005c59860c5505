#!/usr/bin/env bash
# What a package that depends on Orderly fetches, checked: for each kind of user, a consumer
# package is written to a scratch folder with the one `.package` line the README gives that
# user (pointing at this checkout), resolved, and the packages SwiftPM cloned are compared with
# the ones that user is meant to get. An unexpected package, or a missing one, fails the check.
#
#   bash Tools/consumer-fetch/check.sh          # resolve only (seconds)
#   bash Tools/consumer-fetch/check.sh --build  # and build the OrderlyCore-only consumer
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$(pwd)
build=0
[ "${1:-}" = "--build" ] && build=1

scratch=$(mktemp -d "${TMPDIR:-/tmp}/orderly-consumers.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
# The dependency is named by a folder called Orderly, as a clone of the repository would be.
ln -s "$repo" "$scratch/Orderly"

failures=0

# consumer NAME PRODUCT TRAITS EXPECTED...
#   TRAITS is what follows `from:` on the README's line: "" (the default), "traits: []", ...
consumer() {
  local name=$1 product=$2 traits=$3
  shift 3
  local expected=("$@")
  local dir="$scratch/$name"
  mkdir -p "$dir/Sources/App"
  local line=".package(path: \"../Orderly\")"
  [ -n "$traits" ] && line=".package(path: \"../Orderly\", $traits)"
  cat >"$dir/Package.swift" <<MANIFEST
// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "App",
  platforms: [.macOS(.v15), .iOS(.v18)],
  dependencies: [$line],
  targets: [
    .executableTarget(
      name: "App",
      dependencies: [.product(name: "$product", package: "Orderly")]
    )
  ]
)
MANIFEST
  printf 'import %s\nprint("ok")\n' "$product" >"$dir/Sources/App/main.swift"
  if ! (cd "$dir" && swift package resolve >"$dir/resolve.log" 2>&1); then
    echo "FAIL $name: swift package resolve failed:"
    tail -20 "$dir/resolve.log"
    failures=$((failures + 1))
    return
  fi
  local fetched
  fetched=$(ls "$dir/.build/checkouts" 2>/dev/null | sort | paste -sd' ')
  local want
  want=$(printf '%s\n' "${expected[@]}" | sort | paste -sd' ')
  if [ "$fetched" = "$want" ]; then
    echo "ok   $name ($line, $product): fetches ${fetched:-nothing}"
  else
    echo "FAIL $name ($line, $product)"
    echo "     expected: ${want:-nothing}"
    echo "     fetched:  ${fetched:-nothing}"
    failures=$((failures + 1))
  fi
}

consumer core OrderlyCore "traits: []" swift-collections
consumer outbox-core OrderlyOutboxCore "traits: []" swift-collections
consumer outbox OrderlyOutbox "" swift-collections GRDB.swift
consumer sqlite-notes OrderlySQLite "" swift-collections GRDB.swift
# The server parts alone: no store, so no GRDB.
consumer server OrderlyServer 'traits: ["Server"]' \
  swift-collections swift-service-lifecycle swift-log swift-metrics \
  swift-distributed-tracing swift-async-algorithms
# A server on SQLite asks for it.
consumer server-sqlite OrderlyServer 'traits: ["Server", "SQLite"]' \
  swift-collections GRDB.swift swift-service-lifecycle swift-log swift-metrics \
  swift-distributed-tracing swift-async-algorithms
# A fleet worker on PostgreSQL: PostgresNIO and what it needs, never GRDB.
postgres_packages=(postgres-nio swift-asn1 swift-async-algorithms swift-atomics swift-crypto
  swift-log swift-metrics swift-nio swift-nio-ssl swift-nio-transport-services
  swift-service-lifecycle swift-system)
consumer postgres OrderlyPostgres 'traits: ["Postgres"]' \
  swift-collections "${postgres_packages[@]}"
consumer server-postgres OrderlyServer 'traits: ["Server", "Postgres"]' \
  swift-collections swift-distributed-tracing "${postgres_packages[@]}"

if [ "$build" = 1 ] && [ "$failures" = 0 ]; then
  if (cd "$scratch/core" && swift build >"$scratch/core/build.log" 2>&1); then
    echo "ok   core: builds with OrderlyCore alone"
  else
    echo "FAIL core: the OrderlyCore-only consumer does not build:"
    tail -30 "$scratch/core/build.log"
    failures=$((failures + 1))
  fi
fi

if [ "$failures" -gt 0 ]; then
  echo "consumer-fetch: $failures check(s) failed"
  exit 1
fi
echo "consumer-fetch: every kind of user fetches what it uses, and nothing more"
