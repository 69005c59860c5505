import OrderlyCourse
import OrderlyRepository
import OrderlyTestSupport
import Testing

@Suite("NotesScenario")
struct NotesScenarioTests {
  /// Runs one strategy on a manual clock, advancing it whenever a call waits.
  @MainActor
  private func run(
    _ strategy: NotesScenario<ManualClock>.Strategy,
    seed: UInt64,
    failingCall: Int? = nil
  ) async throws -> ScenarioRun {
    let clock = ManualClock()
    let scenario = NotesScenario(
      seed: seed,
      latency: .milliseconds(10) ... .milliseconds(200),
      failingCall: failingCall,
      clock: clock
    )
    let result = ResultBox()
    let task = Task { @MainActor in result.run = await scenario.run(strategy) }
    try await drive(clock, until: task)
    return try #require(result.run)
  }

  @Test("serial and sequential are in order for 30 seeds; unordered and actor are not always")
  @MainActor
  func verdicts() async throws {
    var outOfOrder: Set<String> = []
    for seed in UInt64(0)..<30 {
      for strategy in NotesScenario<ManualClock>.Strategy.allCases {
        let run = try await run(strategy, seed: seed)
        #expect(run.log.count == 14)
        if strategy == .serial || strategy == .sequential {
          #expect(run.inOrder, "\(strategy) seed \(seed): \(run.log)")
        } else if !run.inOrder {
          outOfOrder.insert(strategy.rawValue)
        }
      }
    }
    #expect(outOfOrder == ["unordered", "actor"])
  }

  @Test("the failing call fails in its place, and shows as a shaded bar")
  @MainActor
  func failingCall() async throws {
    let run = try await run(.serial, seed: 4, failingCall: 5)
    #expect(run.log[9] == "error 5 updateNote: injected failure: call 1 of updateNote")
    #expect(run.spans[4].failed)
    let timeline = run.timeline(width: 40)
    #expect(timeline.count == 8)
    #expect(timeline[4].hasPrefix("5 updateNote │") && timeline[4].contains("▒"))
    #expect(timeline[0].contains("█") && !timeline[0].contains("▒"))
    #expect(timeline.last?.hasSuffix(" ms") == true)
  }

  @Test("an in-order run with a failing call has no consequences: the comparison fails it too")
  @MainActor
  func failingCallIsNoConsequence() async throws {
    for failing in 1...7 {
      for strategy in [NotesScenario<ManualClock>.Strategy.serial, .sequential] {
        let run = try await run(strategy, seed: 7, failingCall: failing)
        #expect(run.inOrder)
        #expect(
          run.consequences.isEmpty,
          "\(strategy), call \(failing) failing: \(run.consequences)"
        )
      }
    }
    // The comparison is still made: out of order, a failed create is not what call 4 misses.
    let answers = await NotesScenario<ManualClock>.answersInOrder(failingCall: 3)
    #expect(answers[2] == "injected failure: call 1 of createNote")
    #expect(answers[3] == "2 notes")
  }
}

@Suite("NotesScenario latencies belong to call numbers")
struct NotesScenarioLatencyTests {
  @Test("a seed names seven latencies, spread evenly over the range, the same every time")
  func latenciesPerCall() {
    let range = Duration.milliseconds(20) ... .milliseconds(140)
    let first = NotesScenario(seed: 3, latency: range)
    #expect(first.latencies == NotesScenario(seed: 3, latency: range).latencies)
    #expect(first.latencies.sorted() == (0..<7).map { .milliseconds(20 + 20 * $0) })
    let shuffles = Set((UInt64(0)..<20).map { NotesScenario(seed: $0, latency: range).latencies })
    #expect(shuffles.count > 10)
  }
}

@MainActor
private final class ResultBox {
  var run: ScenarioRun?
}
