// swift-tools-version: 6.2
import Foundation
import PackageDescription

let package = Package(
  name: "Orderly",
  platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
  products: [
    .library(name: "OrderlyCore", targets: ["OrderlyCore"]),
    .library(name: "OrderlyTestSupport", targets: ["OrderlyTestSupport"]),
    .library(name: "OrderlyRepository", targets: ["OrderlyRepository"]),
    .library(name: "OrderlySQLite", targets: ["OrderlySQLite"]),
    .library(name: "OrderlyOutbox", targets: ["OrderlyOutbox"]),
    .library(name: "OrderlyLaunch", targets: ["OrderlyLaunch"]),
    .library(name: "OrderlyTaskStore", targets: ["OrderlyTaskStore"]),
    .executable(name: "orderly", targets: ["OrderlyCLI"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    // `swift package generate-documentation`: the DocC catalogs, checked in CI.
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
  ],
  targets: []
)

// MARK: - Modules

package.targets += [
  .target(
    name: "OrderlyCore",
    dependencies: [
      "COrderlySanitizer",
      .product(name: "DequeModule", package: "swift-collections"),
    ],
    path: "Modules/OrderlyCore"
  ),
  // Announces lock edges to ThreadSanitizer, which cannot see Mutex's lock on Linux. No product.
  .target(name: "COrderlySanitizer", path: "Modules/COrderlySanitizer"),
  .target(
    name: "OrderlyTestSupport",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyTestSupport"
  ),
  // The repository layer of seed 000: notes domain, serialized repository, in-memory service.
  .target(
    name: "OrderlyRepository",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyRepository"
  ),
  // The check a database file passes before it is opened for writing, and the schema
  // migrations, shared by the notes database and the outbox. No product.
  .target(
    name: "OrderlyDatabaseFile",
    dependencies: [
      .product(name: "GRDB", package: "GRDB.swift"),
      // SQLite's C API, for the read-only check of a file before it is opened (URI flags).
      .product(name: "GRDBSQLite", package: "GRDB.swift"),
    ],
    path: "Modules/OrderlyDatabaseFile"
  ),
  // NotesService on SQLite through GRDB, kept apart so OrderlyRepository users never build GRDB.
  .target(
    name: "OrderlySQLite",
    dependencies: [
      "OrderlyCore", "OrderlyRepository", "OrderlyDatabaseFile", "OrderlyOutbox",
      .product(name: "GRDB", package: "GRDB.swift"),
    ],
    path: "Modules/OrderlySQLite"
  ),
  // Ordered work that survives the process: an outbox on SQLite, delivered in order.
  .target(
    name: "OrderlyOutbox",
    dependencies: [
      "OrderlyCore", "OrderlyDatabaseFile",
      .product(name: "GRDB", package: "GRDB.swift"),
    ],
    path: "Modules/OrderlyOutbox"
  ),
  // Seed 001's launch sequencer: steps run one at a time on the main actor, with timeouts.
  .target(
    name: "OrderlyLaunch",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyLaunch"
  ),
  // Seed 004's keyed task store, with a policy for every collision of keys.
  .target(
    name: "OrderlyTaskStore",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyTaskStore"
  ),
  // The `orderly` command: `orderly demo` and `orderly shell`. Thin: the logic is in the modules.
  .executableTarget(
    name: "OrderlyCLI",
    dependencies: [
      "OrderlyCore", "OrderlyRepository", "OrderlySQLite",
      .product(name: "ArgumentParser", package: "swift-argument-parser"),
    ],
    path: "Modules/OrderlyCLI"
  ),
]

// MARK: - Examples

/// Every runnable example, run as `swift run <name>`, discovered from `Examples/`.
///
/// An example is a folder holding `main.swift` and a `README.md` that opens with a front
/// matter; its `modules:` line (comma-separated) names what the example imports, so adding an
/// example means adding a folder. `Tests/ExamplesTests` fails when an example has no front
/// matter, no lesson, or no test.
let examples: [(name: String, dependencies: [Target.Dependency])] = discoverExamples()

func discoverExamples() -> [(name: String, dependencies: [Target.Dependency])] {
  // Products of other packages that examples may import, by module name.
  let external: [String: Target.Dependency] = [
    "AsyncAlgorithms": .product(name: "AsyncAlgorithms", package: "swift-async-algorithms")
  ]
  let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  let folder = root.appendingPathComponent("Examples")
  let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
  return names.sorted().compactMap { name in
    let readme = folder.appendingPathComponent(name).appendingPathComponent("README.md")
    // An example with a Package.swift of its own (notes-sync) brings dependencies the root
    // package must never fetch: it is built and tested in its folder, by .ci/run.
    let manifest = folder.appendingPathComponent(name).appendingPathComponent("Package.swift")
    if FileManager.default.fileExists(atPath: manifest.path) { return nil }
    guard let text = try? String(contentsOf: readme, encoding: .utf8) else { return nil }
    let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
    guard lines.first == "---", let end = lines.dropFirst().firstIndex(of: "---") else {
      return (name, [])
    }
    let modules =
      lines[1..<end]
      .first { $0.hasPrefix("modules:") }
      .map { $0.dropFirst("modules:".count).split(separator: ",") } ?? []
    let dependencies: [Target.Dependency] = modules.map { module in
      let module = module.trimmingCharacters(in: .whitespaces)
      return external[module] ?? .target(name: module)
    }
    return (name, dependencies)
  }
}

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

package.targets += [
  // Fills documentation regions with real example code and output: `swift run docs-gen`.
  .executableTarget(
    name: "docs-gen",
    dependencies: ["OrderlyRepository"],
    path: "Tools/docs-gen",
    exclude: ["README.md"]
  )
]

// MARK: - Tests

package.targets += [
  // Writes a note to an SQLite file, says so, and waits to be killed: for the durability test.
  .executableTarget(
    name: "notes-sqlite-probe",
    dependencies: ["OrderlySQLite"],
    path: "Tests/Probes/notes-sqlite-probe"
  ),
  // Appends to an outbox, or delivers it, and waits to be killed: for the crash tests.
  .executableTarget(
    name: "outbox-probe",
    dependencies: ["OrderlyOutbox"],
    path: "Tests/Probes/outbox-probe"
  ),
]

package.targets += [
  // Finds and runs the built executables (orderly, the examples, the probe) the same way on
  // Linux and macOS: every test that runs a binary goes through it. No product.
  .target(name: "BuiltProducts", path: "Tests/BuiltProducts"),
  .testTarget(
    name: "OrderlyCoreTests",
    dependencies: ["OrderlyCore", "OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlyTestSupportTests",
    dependencies: ["OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlyRepositoryTests",
    dependencies: ["OrderlyRepository", "OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlySQLiteTests",
    // The probe is a child process the durability test kills; depending on it builds it first.
    dependencies: [
      "OrderlySQLite", "notes-sqlite-probe", "BuiltProducts", "OrderlyTestSupport",
      .product(name: "GRDB", package: "GRDB.swift"),
    ]
  ),
  .testTarget(
    name: "OrderlyOutboxTests",
    // The probe is the child process the crash tests kill; depending on it builds it first.
    dependencies: [
      "OrderlyOutbox", "OrderlyTestSupport", "outbox-probe", "BuiltProducts",
      "OrderlyDatabaseFile", .product(name: "GRDB", package: "GRDB.swift"),
    ]
  ),
  .testTarget(
    name: "OrderlyLaunchTests",
    dependencies: ["OrderlyLaunch", "OrderlyCore", "OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlyTaskStoreTests",
    dependencies: ["OrderlyTaskStore", "OrderlyCore", "OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlyCLITests",
    // Runs the built `orderly` binary; depending on its target builds it first.
    dependencies: ["OrderlyCLI", "BuiltProducts"]
  ),
  .testTarget(
    name: "ExamplesTests",
    // Depending on the examples makes `swift test` build their binaries before running them.
    dependencies: examples.map { .target(name: $0.name) } + ["BuiltProducts"]
  ),
]

// MARK: - Shared settings

for target in package.targets where target.name != "COrderlySanitizer" {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
  ]
  target.swiftSettings = settings
}
