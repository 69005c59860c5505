import ArgumentParser
import Foundation
import OrderlyRepository

/// `orderly demo`: the notes screen's seven calls under each strategy, with log, timeline and verdict.
struct DemoCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo",
    abstract: "Run the notes screen's seven calls under each strategy and show their order.",
    discussion: """
      Each strategy makes the same seven calls (fetch all, fetch one, add, fetch all, update, \
      fetch all, delete) against an in-memory service with seeded random latency, and prints \
      the activity log, a timeline and a verdict.
      """
  )

  enum StrategyChoice: String, ExpressibleByArgument, CaseIterable {
    case sequential, unordered, actor, serial, all
  }

  enum Format: String, ExpressibleByArgument, CaseIterable {
    case text, json
  }

  @Option(help: "Which strategy to run.")
  var strategy: StrategyChoice = .all

  @Option(help: "The seed of the service's random latency.")
  var seed: UInt64 = 3

  @Option(help: ArgumentHelp("Each call's latency range in milliseconds.", valueName: "MIN-MAX"))
  var latency = LatencyRange(minimum: 20, maximum: 150)

  @Option(name: .customLong("fail-task"), help: "Make call N (1 to 7) fail.")
  var failTask: Int?

  @Option(help: "Output format.")
  var format: Format = .text

  func validate() throws {
    if let failTask, !(1...7).contains(failTask) {
      throw ValidationError("--fail-task must be a call number from 1 to 7; got \(failTask)")
    }
  }

  func run() async throws {
    let strategies: [NotesScenario<ContinuousClock>.Strategy] =
      switch strategy {
      case .all: NotesScenario<ContinuousClock>.Strategy.allCases
      case .sequential: [.sequential]
      case .unordered: [.unordered]
      case .actor: [.actor]
      case .serial: [.serial]
      }
    let scenario = NotesScenario(seed: seed, latency: latency.range, failingCall: failTask)
    var runs: [ScenarioRun] = []
    for strategy in strategies { runs.append(await scenario.run(strategy)) }
    switch format {
    case .json: try printJSON(runs)
    case .text: printText(runs, strategies: strategies)
    }
  }

  private struct Report: Encodable {
    let seed: UInt64
    let latencyMilliseconds: [Int]
    let failTask: Int?
    let runs: [ScenarioRun]
  }

  private func printJSON(_ runs: [ScenarioRun]) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let report = Report(
      seed: seed,
      latencyMilliseconds: [latency.minimum, latency.maximum],
      failTask: failTask,
      runs: runs
    )
    print(String(decoding: try encoder.encode(report), as: UTF8.self))
  }

  private func printText(
    _ runs: [ScenarioRun],
    strategies: [NotesScenario<ContinuousClock>.Strategy]
  ) {
    let paint = Paint(enabled: colourEnabled())
    print(
      "The notes screen's seven calls, latency \(latency) ms, seed \(seed)"
        + (failTask.map { ", call \($0) fails" } ?? "") + "."
    )
    for (run, strategy) in zip(runs, strategies) {
      print("")
      print(paint.bold("== \(strategy): \(strategy.summary)"))
      print("Activity log:")
      for line in run.log {
        print("  " + (line.hasPrefix("error") ? paint.red(line) : line))
      }
      print("Timeline:")
      for line in run.timeline() { print("  " + line) }
      let verdict = "Verdict: \(run.verdict)"
      print(run.inOrder ? paint.green(verdict) : paint.red(verdict))
    }
  }
}

/// ANSI colours, or plain text when colour is off.
struct Paint {
  let enabled: Bool

  func bold(_ text: String) -> String { wrap(text, "1") }
  func red(_ text: String) -> String { wrap(text, "31") }
  func green(_ text: String) -> String { wrap(text, "32") }

  private func wrap(_ text: String, _ code: String) -> String {
    enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
  }
}
