// swift-tools-version: 6.2
// The notes sync: a server (Hummingbird) and an offline-first client (AsyncHTTPClient) that
// sends its outbox to it. A package of its own, so that users of Orderly's libraries never
// fetch these two heavy dependencies; `.ci/run` builds and tests it.
import PackageDescription

let package = Package(
  name: "NotesSync",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "notes-sync", targets: ["notes-sync"])
  ],
  dependencies: [
    .package(name: "Orderly", path: "../.."),
    .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    // Both are fetched by the two above already; named here because the code uses them.
    .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
    .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.3"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
  ],
  targets: [
    // The server: applies note mutations once each (by idempotency key), in arrival order.
    .target(
      name: "NotesSyncServer",
      dependencies: [
        .product(name: "OrderlyRepository", package: "Orderly"),
        .product(name: "Hummingbird", package: "hummingbird"),
        .product(name: "HTTPTypes", package: "swift-http-types"),
        .product(name: "Logging", package: "swift-log"),
      ]
    ),
    // The client's delivery: one outbox message, one HTTP request with its idempotency key.
    .target(
      name: "NotesSyncClient",
      dependencies: [
        .product(name: "OrderlyOutbox", package: "Orderly"),
        .product(name: "OrderlyRepository", package: "Orderly"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ]
    ),
    // The example: edit offline, kill the app, restart, go online, watch the server catch up.
    .executableTarget(
      name: "notes-sync",
      dependencies: [
        "NotesSyncServer", "NotesSyncClient",
        .product(name: "OrderlySQLite", package: "Orderly"),
      ]
    ),
    .testTarget(
      name: "NotesSyncTests",
      dependencies: [
        "NotesSyncServer", "NotesSyncClient", "notes-sync",
        .product(name: "OrderlySQLite", package: "Orderly"),
        .product(name: "OrderlyTestSupport", package: "Orderly"),
        .product(name: "AsyncHTTPClient", package: "async-http-client"),
        .product(name: "NIOCore", package: "swift-nio"),
        .product(name: "NIOHTTP1", package: "swift-nio"),
      ]
    ),
  ]
)

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    // Zero warnings in this package's own code, without holding its dependencies to it (as
    // `-Xswiftc -warnings-as-errors` on the command line would). Allowed: a root package.
    .unsafeFlags(["-warnings-as-errors"]),
  ]
  target.swiftSettings = settings
}
