import ArgumentParser
import Foundation
import OrderlyCourse
import OrderlyRepository

/// `orderly demo`: the notes screen's seven calls under each strategy, with log, timeline and verdict.
struct DemoCommand: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "demo",
    abstract: "Run the notes screen's seven calls under each strategy and show their order.",
    discussion: """
      Each strategy makes the same seven calls (fetch all, fetch one, add, fetch all, update, \
      fetch all, delete) against an in-memory service whose latency is drawn per call number \
      from the seed, so a seed names one run. It prints the activity log, a timeline, the \
      verdict and what went wrong because of the order; --format json gives the same for \
      programs, --format svg a timeline picture (with --output, to a file).
      """
  )

  enum StrategyChoice: String, ExpressibleByArgument, CaseIterable {
    case sequential, unordered, actor, serial, all
  }

  enum Format: String, ExpressibleByArgument, CaseIterable {
    case text, json, svg
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

  @Option(help: ArgumentHelp("Write the output to this file instead.", valueName: "PATH"))
  var output: String?

  func validate() throws {
    if let failTask, !(1...7).contains(failTask) {
      throw ValidationError("--fail-task must be a call number from 1 to 7; got \(failTask)")
    }
  }

  func run() async throws {
    let strategies: [NotesScenario<ContinuousClock>.Strategy] =
      switch strategy {
      // The damage first, then the two ways that keep the order.
      case .all: [.unordered, .actor, .sequential, .serial]
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
    case .svg: try emit(Self.picture(of: runs).svg())
    }
  }

  /// One picture of every run: a run's rows, then the next run's, each labelled with its
  /// strategy, on a shared axis of milliseconds from each run's start.
  static func picture(of runs: [ScenarioRun]) -> TimelinePicture {
    guard runs.count > 1 else {
      return runs.first.map(TimelinePicture.init(run:))
        ?? TimelinePicture(rows: [], unit: "ms", caption: "")
    }
    var rows: [TimelinePicture.Row] = []
    for run in runs {
      for row in TimelinePicture(run: run).rows {
        rows.append(
          TimelinePicture.Row(
            label: "\(run.strategy) · \(row.label)",
            start: row.start,
            end: row.end,
            outcome: row.outcome
          )
        )
      }
    }
    let caption = runs.map { "\($0.strategy): \($0.verdict)" }.joined(separator: "; ")
    return TimelinePicture(rows: rows, unit: "ms", caption: caption)
  }

  /// Prints `text`, or writes it to `--output`.
  private func emit(_ text: String) throws {
    guard let output else {
      print(text, terminator: "")
      return
    }
    do {
      try text.write(toFile: output, atomically: true, encoding: .utf8)
    } catch {
      throw fail("cannot write \(output): \(error.localizedDescription)")
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
    try emit(String(decoding: try encoder.encode(report), as: UTF8.self) + "\n")
  }

  private func printText(
    _ runs: [ScenarioRun],
    strategies: [NotesScenario<ContinuousClock>.Strategy]
  ) {
    let paint = Paint(enabled: colourEnabled())
    let calls = NotesScenario<ContinuousClock>.calls.map(\.rawValue).joined(separator: ", ")
    print("The notes screen: when it opens, it makes seven calls to a slow notes service, in")
    print("this order in its code:")
    print("  " + calls)
    print("Each answer depends on the calls before it: in order, the fourth call sees the note")
    print(
      "the third one created. Each call takes \(latency) ms (seed \(seed))"
        + (failTask.map { ", and call \($0) fails" } ?? "") + "."
    )
    print(
      "Below, the same calls are made \(runs.count == 1 ? "one way" : "\(runs.count) ways"): "
        + "which answers come back wrong?"
    )
    // One time scale for every section, so that their timelines compare.
    let end = runs.flatMap(\.spans).map(\.endMilliseconds).max()
    for (run, strategy) in zip(runs, strategies) {
      print("")
      print(paint.bold("== \(strategy): \(strategy.summary)"))
      print("Activity log:")
      for line in run.log {
        print("  " + (line.hasPrefix("error") ? paint.red(line) : line))
      }
      print("Timeline:")
      for line in run.timeline(upTo: end) { print("  " + line) }
      let verdict = "Verdict: \(run.verdict)"
      print(run.inOrder ? paint.green(verdict) : paint.red(verdict))
      if run.consequences.isEmpty {
        print("What went wrong because of the order: nothing")
      } else {
        print("What went wrong because of the order:")
        for sentence in run.consequences { print("  " + paint.red(sentence)) }
      }
    }
    if runs.count > 1 {
      print("")
      print(paint.bold("== In short"))
      let width = strategies.map(\.rawValue.count).max() ?? 0
      for (run, strategy) in zip(runs, strategies) {
        let wrong = run.consequences.count
        let answers = wrong == 0 ? "every answer as in order" : "\(wrong) of 7 answers wrong"
        let line =
          "  \(strategy.rawValue.padding(toLength: width, withPad: " ", startingAt: 0))  "
          + "\(run.inOrder ? "in order    " : "out of order")  \(answers)"
        print(wrong == 0 && run.inOrder ? paint.green(line) : paint.red(line))
      }
    }
    // Where a newcomer goes next: the course tells this story first, then fixes it.
    print("")
    print("Why this happens and how to put it back in order: the course, lesson by lesson,")
    print("starting at docs/course/01-why-order.md (all lessons: docs/course/README.md).")
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
