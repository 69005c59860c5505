# The test groups .ci/run runs apart from the README's `swift test`, named once: .ci/run and
# Tools/load-check both source this file, so what fails CI is what a developer tries first.

# The concurrency suites under ThreadSanitizer (with the SQLite and Server traits), and under
# ThreadSanitizer with the Apple systems' locks (-DORDERLY_PORTABLE_LOCKS, default traits).
# Comma-separated test targets: each is also the ORDERLY_TEST_TARGETS of its build (Package.swift),
# so those builds compile only these targets and what they need.
tsan_targets="OrderlyCoreTests,OrderlyTestSupportTests,OrderlyRepositoryTests,OrderlySQLiteTests,OrderlyOutboxTests,OutboxContractTests,OrderlyLaunchTests,OrderlyTaskStoreTests,OrderlyServerTests"
portable_tsan_targets="OrderlyCoreTests,OrderlyTestSupportTests,OrderlyRepositoryTests,OrderlySQLiteTests,OrderlyOutboxTests,OutboxContractTests,OrderlyLaunchTests,OrderlyTaskStoreTests"

# The PostgreSQL groups, run from the warnings-as-errors build against a real server: each
# "LIMIT;FILTER;SKIP" (regular expressions, as `swift test --filter` and `--skip` take them). The first is every PostgreSQL suite and the outbox contract but those run
# apart (by skipping them), so a new suite is never left out; the others are the suites run
# apart: a client of one connection whose connection the server ends (BadInputTests), the
# suites that take the server away (a relay cut; the server stopped and started), and the
# fleet's worker processes (minutes of load). Usual times on a busy 2-core machine: about 100 s,
# 100 s, 70 s and 11 minutes; each limit is well above.
postgres_apart='OrderlyPostgresTests\.(BadInputTests|ServerAwayTests|ServerRestartTests|FleetTests)'
postgres_groups=(
  "8m;OrderlyPostgresTests|OutboxContractTests;$postgres_apart"
  "5m;OrderlyPostgresTests\.BadInputTests;"
  "6m;OrderlyPostgresTests\.(ServerAwayTests|ServerRestartTests);"
  "25m;OrderlyPostgresTests\.FleetTests;"
)
