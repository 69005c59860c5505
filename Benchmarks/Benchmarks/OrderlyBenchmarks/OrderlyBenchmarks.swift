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
  for scenario in scenarios {
    if case .pending = scenario.target { continue }
    let jobs = scenario.jobs.quick
    Benchmark("Orderly: \(scenario.name)") { _ in
      blackHole(try await scenario.orderly(jobs))
    }
    if let baseline = scenario.baseline {
      Benchmark("Baseline: \(scenario.baselineName)") { _ in
        blackHole(try await baseline(jobs))
      }
    }
  }
}
