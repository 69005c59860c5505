// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import InMemoryLogging
import Logging
@testable import OrderlyPostgres
import Testing

/// The stall watch's decisions, on instants the test gives it: no server, no waiting.
@Suite("StallWatch: when a worker with work makes no progress")
struct StallWatchTests {
  private let start = ContinuousClock.now
  private func at(_ seconds: Double) -> ContinuousClock.Instant {
    start + .milliseconds(Int(seconds * 1000))
  }

  @Test("an idle worker whose looks find nothing is healthy, however long")
  func idleIsHealthy() {
    var watch = StallWatch(limit: .seconds(2), now: at(0))
    for second in 1...20 {
      watch.looked(foundNothing: true, at: at(Double(second)))
      #expect(watch.check(at: at(Double(second) + 0.5), keysHeld: 0) == .healthy)
    }
  }

  @Test(
    "a worker holding keys that makes no progress for the limit is stalled once, names its waits oldest first, and recovers at its next progress"
  )
  func holdingKeysStalls() {
    var watch = StallWatch(limit: .seconds(2), now: at(0))
    let renewal = watch.begin("renewing 2 leases", at: at(0.5))
    let acknowledgement = watch.begin("acknowledging line a", at: at(0.2))
    #expect(watch.check(at: at(1.9), keysHeld: 2) == .healthy)
    let verdict = watch.check(at: at(2.0), keysHeld: 2)
    #expect(
      verdict
        == .stalled(
          idle: .seconds(2),
          waitingOn: ["acknowledging line a (for 1800 ms)", "renewing 2 leases (for 1500 ms)"]
        )
    )
    #expect(watch.check(at: at(3), keysHeld: 2) == .stillStalled)
    watch.end(renewal, at: at(3.5))
    watch.end(acknowledgement, failed: true, at: at(3.6))
    #expect(
      watch.waitingOn(at: at(3.8))
        == ["acknowledging line a (failed 200 ms ago; tried again later)"]
    )
    watch.progressed(at: at(4))
    #expect(watch.check(at: at(4.1), keysHeld: 2) == .recovered(after: .milliseconds(2100)))
    #expect(watch.check(at: at(5), keysHeld: 2) == .healthy)
  }

  @Test("a look that finds nothing is no progress while the worker holds keys")
  func looksAreNotProgressWithKeys() {
    var watch = StallWatch(limit: .seconds(2), now: at(0))
    watch.looked(foundNothing: false, at: at(1))
    watch.looked(foundNothing: false, at: at(2))
    let verdict = watch.check(at: at(2.5), keysHeld: 1)
    #expect(
      verdict
        == .stalled(
          idle: .milliseconds(2500),
          waitingOn: ["nothing in flight: no statement was sent"]
        )
    )
  }

  @Test(
    "a worker with no keys whose looks do not end has work it cannot rule out: stalled; one that takes nothing (paused) is not"
  )
  func looksThatDoNotEnd() {
    var watch = StallWatch(limit: .seconds(2), now: at(0))
    _ = watch.begin("looking for the lines waiting longest", at: at(0.1))
    #expect(watch.check(at: at(1.5), keysHeld: 0) == .healthy)
    #expect(watch.check(at: at(2.5), keysHeld: 0, taking: false) == .healthy)
    let verdict = watch.check(at: at(2.5), keysHeld: 0)
    #expect(
      verdict
        == .stalled(
          idle: .milliseconds(2500),
          waitingOn: ["looking for the lines waiting longest (for 2400 ms)"]
        )
    )
  }

  @Test("a worker that polls less often than the limit is not stalled between its looks")
  func longPollInterval() {
    var watch = StallWatch(limit: .seconds(2), lookInterval: .seconds(10), now: at(0))
    #expect(watch.check(at: at(11.9), keysHeld: 0) == .healthy)
    watch.looked(foundNothing: true, at: at(10))
    #expect(watch.check(at: at(21.5), keysHeld: 0) == .healthy)
    let verdict = watch.check(at: at(22), keysHeld: 0)
    #expect(
      verdict
        == .stalled(idle: .seconds(12), waitingOn: ["nothing in flight: no statement was sent"])
    )
  }

  @Test("progress just inside the limit keeps the worker healthy")
  func progressInsideTheLimit() {
    var watch = StallWatch(limit: .seconds(2), now: at(0))
    for step in 1...10 {
      watch.progressed(at: at(Double(step) * 1.9))
      #expect(watch.check(at: at(Double(step) * 1.9 + 1.9), keysHeld: 3) == .healthy)
    }
  }
}

/// A worker whose database stops answering, against a real server: it says it is stalled (an
/// error naming what it waits on, `delivererStatistics.isStalled`), and says so again when the
/// answers come back and it goes on, in order.
@Suite("PostgresOutbox: a stalled worker says so", .serialized, .timeLimit(.minutes(3)))
struct StalledWorkerTests {
  /// Waits, looking every 50 ms, until `condition` holds, for at most `limit` of real time.
  ///
  /// The worker's stall limit is real time (its leases are); the limit here only bounds a
  /// failing test. Returns whether it held.
  private func eventually(
    within limit: Duration = .seconds(60),
    _ condition: () async throws -> Bool
  ) async throws -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
      if try await condition() { return true }
      try await Task.sleep(for: .milliseconds(50))
    }
    return try await condition()
  }

  @Test(
    "statements without answers: the worker logs that it is stalled and what it waits on, reports it, and recovers and delivers in order once answers come back"
  )
  func stallsAndRecovers() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "stall") { _ in handler }
    logger.logLevel = .notice
    let outbox = try await PostgresOutbox<String>(client: database.client(), logger: logger)
    for n in 0..<5 { try await outbox.append("k\(n)", partition: "k") }
    outbox.stallAfter = .seconds(2)
    outbox.withholdAnswers(true)
    let seen = Recorder<String>()
    try outbox.start(lease: .seconds(1), pollInterval: .milliseconds(100)) {
      seen.record($0.message)
    }
    let stalled = try await eventually { outbox.delivererStatistics.isStalled }
    #expect(stalled)
    let statistics = outbox.delivererStatistics
    #expect(statistics.stalledOn.first?.contains("looking for") == true, "\(statistics.stalledOn)")
    let entries = handler.entries
    let error = entries.first { $0.message.description.hasPrefix("outbox worker stalled") }
    #expect(error?.level == .error)
    let waitingOn = error?.metadata["waiting_on"]?.description ?? ""
    #expect(waitingOn.contains("looking for"), "\(waitingOn)")
    #expect(seen.all.isEmpty)

    outbox.withholdAnswers(false)
    let recovered = try await eventually { !outbox.delivererStatistics.isStalled }
    #expect(recovered)
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == (0..<5).map { "k\($0)" })
    let notice = handler.entries.first {
      $0.message.description == "outbox worker makes progress again"
    }
    #expect(notice?.level == .notice)
  }

  @Test("stallAfter must be longer than zero, said when delivery starts")
  func badStallLimit() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    outbox.stallAfter = .zero
    #expect(
      throws: OutboxError.invalidOption("stallAfter must be longer than zero (got 0.0 seconds)")
    ) {
      try outbox.start { _ in }
    }
  }
}
#endif
