// swift-tools-version: 6.2
// Order across processes: three workers of one outbox on PostgreSQL, each a service; one of
// them killed, one stopped with SIGTERM. A
// package of its own, so that users of Orderly's other examples never fetch PostgresNIO and
// SwiftNIO; `.ci/run` builds it and runs its test against the server it starts.
import PackageDescription

let package = Package(
  name: "FleetOutbox",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "fleet-outbox", targets: ["fleet-outbox"])
  ],
  dependencies: [
    .package(name: "Orderly", path: "../..", traits: ["Server", "Postgres"]),
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
  ],
  targets: [
    .executableTarget(
      name: "fleet-outbox",
      dependencies: [
        .product(name: "OrderlyPostgres", package: "Orderly"),
        .product(name: "OrderlyServer", package: "Orderly"),
        .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
        .product(name: "UnixSignals", package: "swift-service-lifecycle"),
        .product(name: "PostgresNIO", package: "postgres-nio"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    // Runs the built example against the server ORDERLY_POSTGRES_URL names.
    .testTarget(name: "FleetOutboxTests", dependencies: ["fleet-outbox"]),
  ]
)

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    // Zero warnings in this package's own code, without holding its dependencies to it.
    .unsafeFlags(["-warnings-as-errors"]),
  ]
  target.swiftSettings = settings
}
