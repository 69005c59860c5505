import Benchmark
import Scenarios

// package-benchmark suites over the same scenarios: distributions and malloc counts.
//   swift package --package-path Benchmarks benchmark
let benchmarks: @Sendable () -> Void = {
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .mallocCountTotal, .peakMemoryResident],
    maxDuration: .seconds(5),
    maxIterations: 20
  )
  // Several rows share a baseline (the same work at the same job count): register it once,
  // since package-benchmark stops at a duplicate name.
  var registered: Set<String> = []
  for scenario in scenarios + laneScenarios {
    if case .pending = scenario.target { continue }
    let jobs = scenario.jobs.quick
    Benchmark("Orderly: \(scenario.name)") { _ in
      blackHole(try await scenario.orderly(jobs))
    }
    if let baseline = scenario.baseline {
      let name = "Baseline: \(scenario.baselineName), \(jobs) jobs"
      guard registered.insert(name).inserted else { continue }
      Benchmark(name) { _ in
        blackHole(try await baseline(jobs))
      }
    }
  }
}
