// swift-tools-version: 6.1
// Orderly's benchmarks: a package of its own, so neither the root build nor CI compiles the
// benchmark dependencies. See docs/benchmarks.md.
import PackageDescription

let package = Package(
  name: "OrderlyBenchmarks",
  platforms: [.macOS(.v15)],
  dependencies: [
    // SQLite for the outbox rows; the Postgres trait builds OrderlyPostgres for the fleet rows
    // (only `fleet` links it, so building `ratios` alone compiles no SwiftNIO).
    .package(name: "Orderly", path: "..", traits: ["SQLite", "Postgres"]),
    .package(
      url: "https://github.com/ordo-one/benchmark",
      from: "1.38.1",
      traits: ["MallocInterposer"]
    ),
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
    // The plain GRDB baseline of the outbox rows.
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    // The fleet rows talk to PostgreSQL directly for their baseline.
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    // Each scenario's Orderly side and its baseline, shared by both harnesses.
    // malloc's bytes in use, for the memory rows (mallinfo2 is not in the Glibc module).
    .target(name: "CMallocInfo"),
    .target(
      name: "Scenarios",
      dependencies: [
        "CMallocInfo",
        .product(name: "OrderlyCore", package: "Orderly"),
        .product(name: "OrderlyOutbox", package: "Orderly"),
        .product(name: "OrderlyTaskStore", package: "Orderly"),
        .product(name: "OrderlyLaunch", package: "Orderly"),
        .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
        .product(name: "GRDB", package: "GRDB.swift"),
      ]
    ),
    // A B A B ratios in one process: `swift run -c release --package-path Benchmarks ratios`.
    .executableTarget(name: "ratios", dependencies: ["Scenarios"]),
    // The PostgreSQL outbox against a SKIP LOCKED queue on one server:
    // `swift run -c release --package-path Benchmarks fleet --url URL`.
    .executableTarget(
      name: "fleet",
      dependencies: [
        .product(name: "OrderlyPostgres", package: "Orderly"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    // Orderly's adapter for the public PostgreSQL queue harness
    // (hardbyte/postgresql-job-queue-benchmarking): see Benchmarks/Harness/README.md.
    .executableTarget(
      name: "harness-adapter",
      dependencies: [
        .product(name: "OrderlyPostgres", package: "Orderly"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    // package-benchmark suites: `swift package --package-path Benchmarks benchmark`.
    .executableTarget(
      name: "OrderlyBenchmarks",
      dependencies: [
        "Scenarios",
        .product(name: "Benchmark", package: "benchmark"),
      ],
      path: "Benchmarks/OrderlyBenchmarks",
      plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
    ),
  ]
)

for target in package.targets where target.name != "CMallocInfo" {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
  ]
  target.swiftSettings = settings
}
