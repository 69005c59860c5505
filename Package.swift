// swift-tools-version: 6.2
import Foundation
import PackageDescription

let package = Package(
  name: "Orderly",
  // The floor of every library product: Duration and Clock (macOS 13 / iOS 16 / tvOS 16 /
  // watchOS 9), which the API of every module but OrderlyCore uses (delays, timeouts, injected
  // clocks); OrderlyCore keeps the same floor, as SwiftPM sets one per package. Newer APIs are
  // behind @available where they are used: Observation (`TaskStore`, `LaunchSequencer`) from
  // macOS 14 / iOS 17; task executors (`DedicatedThreadExecutor`, the queues' `executor:`
  // initializers) from macOS 15 / iOS 18. Synchronization's Mutex and Atomic (macOS 15) are used
  // on Linux only: Apple systems get OrderlyLock, OrderlyAtomic and the jobs' stripe locks
  // (Modules/OrderlyCore/Platform, the platform room).
  platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
  products: [
    .library(name: "OrderlyCore", targets: ["OrderlyCore"]),
    .library(name: "OrderlyTestSupport", targets: ["OrderlyTestSupport"]),
    .library(name: "OrderlyRepository", targets: ["OrderlyRepository"]),
    .library(name: "OrderlySQLite", targets: ["OrderlySQLite"]),
    .library(name: "OrderlyOutboxCore", targets: ["OrderlyOutboxCore"]),
    .library(name: "OrderlyOutbox", targets: ["OrderlyOutbox"]),
    .library(name: "OrderlyLaunch", targets: ["OrderlyLaunch"]),
    .library(name: "OrderlyTaskStore", targets: ["OrderlyTaskStore"]),
    .library(name: "OrderlyServer", targets: ["OrderlyServer"]),
    .library(name: "OrderlyPostgres", targets: ["OrderlyPostgres"]),
    // No executable product: `swift run orderly` works in a checkout (SwiftPM runs a root
    // package's executable targets by name), and a package that depends on Orderly does not
    // fetch swift-argument-parser for a command it never runs.
  ],
  // What a package that depends on Orderly fetches is decided here (SE-0450). Without
  // `traits:` on its `.package` line it gets the default, SQLite: the outbox and the notes
  // store, with GRDB. `traits: []` keeps OrderlyCore and OrderlyOutboxCore alone
  // (swift-collections is all they fetch); "Server" adds OrderlyServer with
  // swift-service-lifecycle, swift-log, swift-metrics and swift-distributed-tracing;
  // "Postgres" adds OrderlyPostgres with PostgresNIO. Neither brings GRDB: a server on
  // PostgreSQL writes `traits: ["Server", "Postgres"]`, one on SQLite adds "SQLite" (or
  // `.defaults`). Tools/consumer-fetch checks every such line.
  traits: [
    .trait(
      name: "SQLite",
      description:
        "OrderlyOutbox and OrderlySQLite: ordered work that survives the process, on SQLite (GRDB)."
    ),
    .trait(
      name: "Server",
      description:
        "OrderlyServer: outbox delivery as a ServiceLifecycle service, logs, metrics and traces."
    ),
    .trait(
      name: "Postgres",
      description:
        "OrderlyPostgres: the outbox on PostgreSQL (PostgresNIO), per-key order across a fleet."
    ),
    .default(enabledTraits: ["SQLite"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
    .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    // The Server trait's packages: fetched only by a package that enables it.
    .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
    .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
    // The Postgres trait's package (with SwiftNIO): fetched only by a package that enables it.
    .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
    // `swift package generate-documentation`: the DocC catalogs, checked in CI.
    .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
  ],
  targets: []
)

// MARK: - Modules

/// A dependency that exists only with the SQLite trait: without it, the SQLite modules compile
/// to nothing (their sources are inside `#if SQLite`) and GRDB is never fetched.
let sqlite: TargetDependencyCondition? = .when(traits: ["SQLite"])
/// A dependency that exists only with the Server trait.
let server: TargetDependencyCondition? = .when(traits: ["Server"])
/// A dependency that exists only with the Postgres trait.
let postgres: TargetDependencyCondition? = .when(traits: ["Postgres"])
/// Either trait (a condition with several traits holds when any of them is on).
let serverOrPostgres: TargetDependencyCondition? = .when(traits: ["Server", "Postgres"])

package.targets += [
  .target(
    name: "OrderlyCore",
    dependencies: [
      "COrderlyPrimitives",
      .product(name: "DequeModule", package: "swift-collections"),
    ],
    path: "Modules/OrderlyCore",
    swiftSettings: [
      // The one choice of OrderlyCore's platform room (Modules/OrderlyCore/Platform): Apple
      // systems' locks and atomics (os_unfair_lock, the stripe table, C atomic built-ins), where
      // Synchronization's Mutex and Atomic need macOS 15 / iOS 18. `swift build -Xswiftc
      // -DORDERLY_PORTABLE_LOCKS` selects them on Linux too, which is how CI tests that path.
      .define(
        "ORDERLY_PORTABLE_LOCKS",
        .when(platforms: [.macOS, .macCatalyst, .iOS, .tvOS, .watchOS, .visionOS])
      )
    ]
  ),
  // The C side of OrderlyCore's platform room: the lock type and stripe table of Apple systems,
  // atomic built-ins, ThreadSanitizer's announcements (it cannot see Mutex's lock on Linux) and
  // the thread-local slot of `execute`. No product.
  .target(name: "COrderlyPrimitives", path: "Modules/COrderlyPrimitives"),
  .target(
    name: "OrderlyTestSupport",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyTestSupport"
  ),
  // The repository layer of the notes screen: notes domain, serialized repository, in-memory
  // service.
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
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
      // SQLite's C API, for the read-only check of a file before it is opened (URI flags).
      .product(name: "GRDBSQLite", package: "GRDB.swift", condition: sqlite),
    ],
    path: "Modules/OrderlyDatabaseFile"
  ),
  // NotesService on SQLite through GRDB, kept apart so OrderlyRepository users never build GRDB.
  .target(
    name: "OrderlySQLite",
    dependencies: [
      "OrderlyCore", "OrderlyRepository",
      .target(name: "OrderlyDatabaseFile", condition: sqlite),
      .target(name: "OrderlyOutbox", condition: sqlite),
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
    ],
    path: "Modules/OrderlySQLite"
  ),
  // The outbox's vocabulary (envelopes, retries, dead letters, events, errors, the
  // DurableOutbox protocol) and the rules every store delivers by. No GRDB, no PostgresNIO:
  // each store is a module above it.
  .target(
    name: "OrderlyOutboxCore",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyOutboxCore"
  ),
  // Ordered work that survives the process: an outbox on SQLite, delivered in order.
  .target(
    name: "OrderlyOutbox",
    dependencies: [
      "OrderlyCore", "OrderlyOutboxCore", .target(name: "OrderlyDatabaseFile", condition: sqlite),
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
    ],
    path: "Modules/OrderlyOutbox"
  ),
  // Outbox delivery as a ServiceLifecycle service; logs, metrics and traces for outboxes and
  // queues. Adapters beside the modules: OrderlyCore and OrderlyOutbox depend on none of it.
  .target(
    name: "OrderlyServer",
    dependencies: [
      "OrderlyCore",
      // The outbox protocol only: no store. OutboxService takes any `DurableOutbox`, with the
      // options of the store it is given; whichever stores an app builds, this module builds the
      // same.
      .target(name: "OrderlyOutboxCore", condition: server),
      .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
      .product(name: "Logging", package: "swift-log", condition: server),
      .product(name: "Metrics", package: "swift-metrics", condition: server),
      .product(name: "Tracing", package: "swift-distributed-tracing", condition: server),
      .product(name: "Instrumentation", package: "swift-distributed-tracing", condition: server),
    ],
    path: "Modules/OrderlyServer"
  ),
  // The outbox on PostgreSQL: one key at a time across every worker process, with leases and
  // fences. Its sources are inside `#if Postgres`: without the trait it is empty, and neither
  // PostgresNIO nor SwiftNIO is fetched.
  .target(
    name: "OrderlyPostgres",
    dependencies: [
      "OrderlyCore",
      .target(name: "OrderlyOutboxCore", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .product(name: "Logging", package: "swift-log", condition: postgres),
    ],
    path: "Modules/OrderlyPostgres"
  ),
  // The notes screen's seven calls as a scenario, and the timeline pictures of the course:
  // teaching scaffolding for the CLI, the examples and docs-gen. No product, so not API.
  .target(
    name: "OrderlyCourse",
    dependencies: ["OrderlyCore", "OrderlyRepository", "OrderlyTestSupport"],
    path: "Modules/OrderlyCourse"
  ),
  // The launch sequencer: steps run one at a time on the main actor, with timeouts.
  .target(
    name: "OrderlyLaunch",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyLaunch"
  ),
  // The keyed task store, with a policy for every collision of keys.
  .target(
    name: "OrderlyTaskStore",
    dependencies: ["OrderlyCore"],
    path: "Modules/OrderlyTaskStore"
  ),
  // `orderly outbox`, the operator's command, as a module: the `orderly` binary runs it, and so
  // does the course's outbox-operator example, in its own process. No product.
  .target(
    name: "OrderlyOperator",
    dependencies: [
      "OrderlyOutboxCore",
      .target(name: "OrderlyOutbox", condition: sqlite),
      // `orderly outbox --url`: with the Postgres trait only (`swift run --traits SQLite,Postgres`;
      // `--traits` replaces the default, and the `orderly` command needs SQLite).
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "Logging", package: "swift-log", condition: postgres),
      .product(name: "ArgumentParser", package: "swift-argument-parser"),
    ],
    path: "Modules/OrderlyOperator"
  ),
  // The `orderly` command: `orderly demo` and `orderly shell`. Thin: the logic is in the modules.
  .executableTarget(
    // Named as the command: `swift run orderly` runs a root package's executable target by its
    // name (there is no product, see above).
    name: "orderly",
    dependencies: [
      "OrderlyCore", "OrderlyRepository", "OrderlySQLite", "OrderlyCourse", "OrderlyOperator",
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
/// example means adding a folder. SwiftPM keeps the evaluated manifest until Package.swift
/// itself changes, so a new folder or a changed `modules:` line is seen only after
/// `rm -rf ~/.cache/org.swift.swiftpm/manifests .build/*.yaml` (or any edit of this file). `Tests/ExamplesTests` fails when an example has no front
/// matter, no lesson, or no test.
let examples: [(name: String, dependencies: [Target.Dependency])] = discoverExamples()

func discoverExamples() -> [(name: String, dependencies: [Target.Dependency])] {
  let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  let folder = root.appendingPathComponent("Examples")
  let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
  return names.sorted().compactMap { name in
    let readme = folder.appendingPathComponent(name).appendingPathComponent("README.md")
    // An example with a Package.swift of its own (notes-sync, async-channel-pipeline) brings
    // dependencies the root package must never fetch: it is built and tested in its folder, by
    // .ci/run.
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
      return .target(name: module)
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
    dependencies: ["OrderlyRepository", "OrderlyCourse"],
    path: "Tools/docs-gen",
    exclude: ["README.md"]
  )
]

// MARK: - Tests

package.targets += [
  // The code samples the DocC catalogs show, compiled by every `swift build`: docs-gen fills each
  // `orderly:sample` region from here, so a sample that stops compiling fails the build. No
  // product.
  .target(
    name: "DocSamples",
    dependencies: [
      "OrderlyCore", "OrderlyTestSupport", "OrderlyRepository", "OrderlyLaunch", "OrderlyTaskStore",
      "OrderlyOutboxCore",
      .target(name: "OrderlyOutbox", condition: sqlite),
      .target(name: "OrderlySQLite", condition: sqlite),
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
      .target(name: "OrderlyServer", condition: server),
      .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
      .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: server),
      .product(name: "Logging", package: "swift-log", condition: serverOrPostgres),
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
    ],
    path: "Tests/DocSamples"
  )
]

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
  // Delivers an outbox as a service in a ServiceGroup until SIGTERM: for the shutdown test.
  .executableTarget(
    name: "outbox-service-probe",
    dependencies: [
      .target(name: "OrderlyServer", condition: server),
      .target(name: "OrderlyOutbox", condition: sqlite),
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
      .product(name: "Logging", package: "swift-log", condition: server),
      .product(name: "UnixSignals", package: "swift-service-lifecycle", condition: server),
      .product(name: "Tracing", package: "swift-distributed-tracing", condition: server),
      .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: server),
    ],
    path: "Tests/Probes/outbox-service-probe"
  ),
  // One worker of a PostgreSQL outbox fleet, delivering until killed or stopped: for the fleet
  // tests.
  .executableTarget(
    name: "outbox-postgres-probe",
    dependencies: [
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .product(name: "Logging", package: "swift-log", condition: postgres),
    ],
    path: "Tests/Probes/outbox-postgres-probe"
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
    dependencies: ["OrderlyCore", "OrderlyRepository", "OrderlyCourse", "OrderlyTestSupport"]
  ),
  .testTarget(
    name: "OrderlySQLiteTests",
    // The probe is a child process the durability test kills; depending on it builds it first.
    dependencies: [
      "OrderlySQLite", "notes-sqlite-probe", "BuiltProducts", "OrderlyTestSupport",
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
    ]
  ),
  .testTarget(
    name: "OrderlyOutboxTests",
    // The probe is the child process the crash tests kill; depending on it builds it first.
    dependencies: [
      "OrderlyOutbox", "OrderlyTestSupport", "outbox-probe", "BuiltProducts",
      "OrderlyDatabaseFile", .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
    ]
  ),
  .testTarget(
    name: "OrderlyServerTests",
    // Built and run with the Server trait (.ci/run: `--traits Server`); empty without it.
    dependencies: [
      "BuiltProducts", "OrderlyCore", "OrderlyTestSupport",
      .target(name: "OrderlyServer", condition: server),
      .target(name: "OrderlyOutbox", condition: sqlite),
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .target(name: "outbox-service-probe", condition: server),
      .product(name: "ServiceLifecycle", package: "swift-service-lifecycle", condition: server),
      .product(
        name: "ServiceLifecycleTestKit",
        package: "swift-service-lifecycle",
        condition: server
      ),
      .product(name: "Logging", package: "swift-log", condition: server),
      .product(name: "InMemoryLogging", package: "swift-log", condition: server),
      .product(name: "Metrics", package: "swift-metrics", condition: server),
      .product(name: "MetricsTestKit", package: "swift-metrics", condition: server),
      .product(name: "Tracing", package: "swift-distributed-tracing", condition: server),
      .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: server),
    ]
  ),
  .testTarget(
    name: "OrderlyPostgresTests",
    // Built and run with the Postgres trait against the server ORDERLY_POSTGRES_URL names
    // (.ci/run starts one with Tools/postgres/cluster.sh); empty without the trait.
    dependencies: [
      "BuiltProducts", "OrderlyCore", "OrderlyTestSupport",
      .target(name: "OrderlyPostgres", condition: postgres),
      .target(name: "OrderlyOutbox", condition: sqlite),
      .target(name: "outbox-postgres-probe", condition: postgres),
      // `orderly outbox --url`, run as a process.
      .target(name: "orderly", condition: postgres),
      // A PostgreSQL worker as a service, for the SIGTERM hand-over test (with Server too).
      .target(name: "outbox-service-probe", condition: server),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .product(name: "Logging", package: "swift-log", condition: postgres),
      // A stalled worker's log, gauge and service (with Server too).
      .product(name: "InMemoryLogging", package: "swift-log", condition: postgres),
      .target(name: "OrderlyServer", condition: server),
      .product(name: "MetricsTestKit", package: "swift-metrics", condition: server),
    ]
  ),
  // The outbox's contract, one set of tests run against every store this build has: SQLite
  // (in memory and in a file) and, with the Postgres trait, PostgreSQL at ORDERLY_POSTGRES_URL.
  .testTarget(
    name: "OutboxContractTests",
    dependencies: [
      "OrderlyOutboxCore", "OrderlyTestSupport",
      .target(name: "OrderlyOutbox", condition: sqlite),
      .target(name: "OrderlyPostgres", condition: postgres),
      .product(name: "PostgresNIO", package: "postgres-nio", condition: postgres),
      .product(name: "Logging", package: "swift-log", condition: postgres),
      // OutboxService on every store (with the Server trait).
      .target(name: "OrderlyServer", condition: server),
      .product(name: "Tracing", package: "swift-distributed-tracing", condition: server),
      .product(name: "InMemoryTracing", package: "swift-distributed-tracing", condition: server),
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
    dependencies: [
      "orderly", "BuiltProducts",
      // The outbox files `orderly outbox` is tested on are made with the library.
      .target(name: "OrderlyOutbox", condition: sqlite),
      .target(name: "OrderlySQLite", condition: sqlite),
      .product(name: "GRDB", package: "GRDB.swift", condition: sqlite),
    ]
  ),
  .testTarget(
    name: "ExamplesTests",
    // Depending on the examples makes `swift test` build their binaries before running them.
    dependencies: examples.map { .target(name: $0.name) } + ["BuiltProducts"]
  ),
]

// MARK: - Shared settings

/// The targets `roots` need: themselves and every target they depend on, directly or not.
@MainActor func targetClosure(of roots: [String]) -> Set<String> {
  let targets = Dictionary(uniqueKeysWithValues: package.targets.map { ($0.name, $0) })
  var closure = Set<String>()
  var pending = roots
  while let name = pending.popLast() {
    guard let target = targets[name], closure.insert(name).inserted else { continue }
    for dependency in target.dependencies {
      switch dependency {
      case .targetItem(let name, _), .byNameItem(let name, _): pending.append(name)
      default: break
      }
    }
  }
  return closure
}

/// The targets a package depending on Orderly can build: those of the library products and every
/// target they depend on.
let libraryTargets = targetClosure(
  of: package.products.compactMap { $0 as? Product.Library }.flatMap(\.targets)
)

// A build of a few test targets only: `ORDERLY_TEST_TARGETS=OrderlyCoreTests,OrderlyLaunchTests
// swift test ...` declares those test targets and what they need (and the products of those),
// and leaves out every other target: the examples, the `orderly` command, the tools, the other
// test targets and the modules none of these needs (GRDB is not built for OrderlyCoreTests), so a
// ThreadSanitizer build (.ci/run) or a developer's quick run (Tools/test-one) compiles only what
// its suites run. SwiftPM keys its cached manifest by the environment, so an ordinary
// `swift build` in the same shell still sees every target. A name that is not a test target is
// an error, not a silent empty run.
if let only = ProcessInfo.processInfo.environment["ORDERLY_TEST_TARGETS"], !only.isEmpty {
  let wanted = only.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
  let testTargets = Set(package.targets.filter { $0.type == .test }.map(\.name))
  let unknown = wanted.filter { !testTargets.contains($0) }
  guard unknown.isEmpty else {
    fatalError(
      "ORDERLY_TEST_TARGETS names \(unknown.joined(separator: ", ")), which is not a test target; "
        + "the test targets are \(testTargets.sorted().joined(separator: ", "))"
    )
  }
  let kept = targetClosure(of: wanted)
  package.targets.removeAll { !kept.contains($0.name) }
  package.products.removeAll { product in
    !((product as? Product.Library)?.targets.allSatisfy(kept.contains) ?? true)
  }
}

for target in package.targets where target.name != "COrderlyPrimitives" {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
  ]
  // Tests, examples and tools are built only in this repository, on a Mac new enough to run
  // them: they may use what the floor above does not have (Mutex, task executors) without an
  // @available on each use. No package depending on Orderly builds them, so the flag never
  // reaches one (SwiftPM refuses unsafe flags only in the targets a dependent builds).
  if !libraryTargets.contains(target.name) {
    settings.append(
      .unsafeFlags(
        ["-Xfrontend", "-disable-availability-checking"],
        .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS])
      )
    )
  }
  target.swiftSettings = settings
}
