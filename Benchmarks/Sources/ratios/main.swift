// Runs each Orderly scenario and its baseline alternately (A B A B ...) in one process and
// prints one row per scenario; exits 1 when a target is missed.
//
//   swift run -c release --package-path Benchmarks ratios [--quick] [--only TEXT]
//     [--side orderly|baseline] [--jobs N] [--rounds N]
//
// Ratios within one run are what count: absolute times drift on a shared machine.
import Foundation
import Scenarios

let arguments = CommandLine.arguments
let quick = arguments.contains("--quick")
// `--only TEXT` runs only the scenarios whose name contains TEXT (for profiling one row).
let only = arguments.firstIndex(of: "--only").flatMap { index in
  index + 1 < arguments.count ? arguments[index + 1] : nil
}
// `--side orderly` or `--side baseline` runs one side only (for profiling it alone).
let side = arguments.firstIndex(of: "--side").flatMap { index in
  index + 1 < arguments.count ? arguments[index + 1] : nil
}
/// The value of an option that takes a positive number, or `nil` when it is not given.
func positiveNumber(after option: String) -> Int? {
  guard let index = arguments.firstIndex(of: option) else { return nil }
  guard index + 1 < arguments.count, let value = Int(arguments[index + 1]), value > 0 else {
    FileHandle.standardError.write(Data("ratios: \(option) needs a positive whole number\n".utf8))
    exit(2)
  }
  return value
}
// `--jobs N` replaces every scenario's job count and `--rounds N` the number of rounds (for
// counting instructions: Scripts/instructions-per-job.sh).
let jobsOverride = positiveNumber(after: "--jobs")
let rounds = positiveNumber(after: "--rounds") ?? (quick ? 3 : 5)

func median(_ values: [Double]) -> Double {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

func format(_ value: Double, _ unit: MetricUnit) -> String {
  switch unit {
  case .seconds: String(format: "%.3f s", value)
  case .bytesPerJob: String(format: "%.0f B", value)
  case .nanosecondsPerJob, .nanoseconds: String(format: "%.0f ns", value)
  }
}

func pad(_ text: String, _ width: Int) -> String {
  text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

print("ratios: \(quick ? "quick" : "full") run, \(rounds) rounds per side, median of each side")
print(
  [
    pad("scenario", 52), pad("Orderly", 11), pad("baseline", 11), pad("ratio", 7),
    pad("target", 9), "result",
  ].joined(separator: " | ")
)
var missed = 0
for scenario in scenarios + laneScenarios + executorScenarios + producerShapeScenarios
  + outboxScenarios + appModuleScenarios
where only.map({ scenario.name.contains($0) }) ?? true {
  let jobs = jobsOverride ?? (quick ? scenario.jobs.quick : scenario.jobs.full)
  if case .pending(let reason) = scenario.target {
    print(
      [
        pad(scenario.name, 52), pad("-", 11), pad("-", 11), pad("-", 7), pad("-", 9),
        "pending: \(reason)",
      ]
      .joined(separator: " | ")
    )
    continue
  }
  var orderly: [Double] = []
  var baseline: [Double] = []
  do {
    for _ in 0..<rounds {
      if side != "baseline" { orderly.append(try await scenario.orderly(jobs)) }
      if side != "orderly", let run = scenario.baseline { baseline.append(try await run(jobs)) }
    }
  } catch {
    print("\(scenario.name): failed: \(error)")
    missed += 1
    continue
  }
  let a = orderly.isEmpty ? .nan : median(orderly)
  let b = baseline.isEmpty ? nil : median(baseline)
  let ratio = b.map { a / $0 }
  let (targetText, passed): (String, Bool?) =
    switch scenario.target {
    case .ratio(let limit): ("≤ \(limit)×", ratio.map { $0 <= limit })
    case .absolute(let limit): ("≤ \(format(limit, scenario.unit))", a <= limit)
    case .info, .pending: ("-", nil)
    }
  let result = passed.map { $0 ? "pass" : "MISS" } ?? "info (vs \(scenario.baselineName))"
  if passed == false { missed += 1 }
  print(
    [
      pad(scenario.name, 52), pad(format(a, scenario.unit), 11),
      pad(b.map { format($0, scenario.unit) } ?? "-", 11),
      pad(ratio.map { String(format: "%.2f", $0) } ?? "-", 7), pad(targetText, 9), result,
    ].joined(separator: " | ")
  )
}
print(missed == 0 ? "all targets met" : "\(missed) target(s) missed")
exit(missed == 0 ? 0 : 1)
