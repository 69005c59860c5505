// swift-tools-version: 6.2
import PackageDescription

let package = Package(
  name: "Orderly",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "OrderlyCore", targets: ["OrderlyCore"]),
    .library(name: "OrderlyTestSupport", targets: ["OrderlyTestSupport"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-collections", from: "1.6.0")
  ],
  targets: []
)

// MARK: - Modules

package.targets += [
  .target(
    name: "OrderlyCore",
    dependencies: [.product(name: "DequeModule", package: "swift-collections")],
    path: "Modules/OrderlyCore"
  ),
  .target(
    name: "OrderlyTestSupport",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyTestSupport"
  ),
]

// MARK: - Examples

/// Every runnable example: `swift run <name>`. Each folder holds `main.swift` and `README.md`.
let examples: [(name: String, dependencies: [Target.Dependency])] = []

// A hyphenated target name builds a module with underscores (`serial_queue`); the executable
// keeps the hyphenated name, so `swift run serial-queue` works as written.
package.targets += examples.map { example in
  .executableTarget(
    name: example.name,
    dependencies: example.dependencies,
    path: "Examples/\(example.name)",
    exclude: ["README.md"]
  )
}

// MARK: - Tools

// MARK: - Tests

package.targets += [
  .testTarget(
    name: "OrderlyCoreTests",
    dependencies: ["OrderlyCore", "OrderlyTestSupport"]
  ),
]

// MARK: - Shared settings

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
  ]
  target.swiftSettings = settings
}
