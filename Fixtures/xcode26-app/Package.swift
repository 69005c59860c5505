// swift-tools-version: 6.2
// An app target set up as Xcode 26 sets one up: main-actor isolation by default, and the
// upcoming features a new Xcode 26 project turns on (`NonisolatedNonsendingByDefault`,
// `InferIsolatedConformances`). It uses each app module's main API from main-actor code, and
// builds with warnings as errors, so an API that is awkward or unsafe in such a target fails
// here first. `.ci/run` builds it and runs its tests, which check the order of what it does.
import PackageDescription

let package = Package(
  name: "NotesApp",
  platforms: [.macOS(.v14), .iOS(.v17)],
  dependencies: [
    // The app modules alone: no trait, so neither GRDB nor a server package is fetched.
    .package(name: "Orderly", path: "../..", traits: [])
  ],
  targets: [
    .target(
      name: "NotesApp",
      dependencies: [
        .product(name: "OrderlyCore", package: "Orderly"),
        .product(name: "OrderlyTaskStore", package: "Orderly"),
        .product(name: "OrderlyLaunch", package: "Orderly"),
      ],
      swiftSettings: [
        // What Xcode 26's app template writes ("Default Actor Isolation: MainActor",
        // "Approachable Concurrency").
        .defaultIsolation(MainActor.self),
        .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
        .enableUpcomingFeature("InferIsolatedConformances"),
      ]
    ),
    .testTarget(
      name: "NotesAppTests",
      dependencies: [
        "NotesApp",
        .product(name: "OrderlyTestSupport", package: "Orderly"),
      ],
      swiftSettings: [
        .defaultIsolation(MainActor.self),
        .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
        .enableUpcomingFeature("InferIsolatedConformances"),
      ]
    ),
  ]
)

for target in package.targets {
  var settings = target.swiftSettings ?? []
  settings += [
    .swiftLanguageMode(.v6),
    // Built apart from the root package: warnings fail it here, as they do there.
    .unsafeFlags(["-warnings-as-errors"]),
  ]
  target.swiftSettings = settings
}
