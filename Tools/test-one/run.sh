#!/usr/bin/env bash
# The quick path while iterating: builds one test target (or a few) and what it needs, and runs
# it, without building every example, the `orderly` command or the other test targets.
#
#   bash Tools/test-one/run.sh OrderlyCoreTests                       # every suite of the target
#   bash Tools/test-one/run.sh OrderlyCoreTests --filter SerialQueue  # one suite of it
#   bash Tools/test-one/run.sh OrderlyLaunchTests,OrderlyTaskStoreTests
#   bash Tools/test-one/run.sh OrderlyServerTests --traits SQLite,Server
#
# Further arguments go to `swift test` (--filter, --traits, --sanitize=thread, ...). It builds
# in .build-quick, apart from the full build in .build, since the two package graphs differ
# (Package.swift reads ORDERLY_TEST_TARGETS and declares only those test targets). Before a
# submission, run what CI runs: `bash .ci/run`, and `bash Tools/load-check/run.sh all`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  export PATH="/opt/swift/usr/bin:$PATH"
fi
if [ $# -lt 1 ] || [[ $1 == -* ]]; then
  echo "usage: bash Tools/test-one/run.sh TEST_TARGET[,TEST_TARGET...] [swift test arguments]" >&2
  exit 2
fi
targets=$1
shift
filter=()
[[ " $* " == *" --filter "* ]] || filter=(--filter "${targets//,/|}")
ORDERLY_TEST_TARGETS=$targets exec swift test --scratch-path .build-quick "${filter[@]}" "$@"
