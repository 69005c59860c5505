// swift-tools-version: 6.2
// The smallest program that shows a PostgresNIO query waiting for ever: a query sent on a
// connection whose channel has closed is written with no promise, dropped by the closed
// channel, and its own promise never completed. A package of its own (PostgresNIO alone), so
// that it can be handed upstream as it is; Orderly never builds it. See README.md.
import PackageDescription

let package = Package(
  name: "PostgresNIOClosedWrite",
  platforms: [.macOS(.v13)],
  dependencies: [
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2")
  ],
  targets: [
    .executableTarget(
      name: "postgres-nio-closed-write",
      dependencies: [.product(name: "PostgresNIO", package: "postgres-nio")],
      swiftSettings: [.swiftLanguageMode(.v6)]
    )
  ]
)
