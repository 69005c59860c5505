// swift-tools-version: 6.2
// The AsyncChannel pipeline: a package of its own, because it is the only code of Orderly's
// that uses swift-async-algorithms; in the root package that dependency made every `swift run`
// print its "unhandled file" warning. `.ci/run` builds and tests it.
import PackageDescription

let package = Package(
  name: "AsyncChannelPipeline",
  platforms: [.macOS(.v15)],
  products: [
    .executable(name: "async-channel-pipeline", targets: ["async-channel-pipeline"])
  ],
  dependencies: [
    // OrderlyCore alone: no trait, so GRDB is not fetched.
    .package(name: "Orderly", path: "../..", traits: []),
    .package(url: "https://github.com/apple/swift-async-algorithms", from: "1.1.4"),
  ],
  targets: [
    .executableTarget(
      name: "async-channel-pipeline",
      dependencies: [
        .product(name: "OrderlyCore", package: "Orderly"),
        .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
      ]
    ),
    .testTarget(
      name: "AsyncChannelPipelineTests",
      dependencies: ["async-channel-pipeline"]
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
    // This package is built apart from the root one: warnings fail it here, as they do there.
    .unsafeFlags(["-warnings-as-errors"]),
  ]
  target.swiftSettings = settings
}
