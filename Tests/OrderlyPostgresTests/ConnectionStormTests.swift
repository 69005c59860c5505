// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

/// Two workers deliver and a producer appends while the server ends their connections, over
/// and over, at random moments: nothing confirmed is lost, each key stays in order, no key is
/// delivered by two workers at once, and no worker is left stalled or stopped.
///
/// A worker whose every statement the storm cuts for its stall limit (two leases) has made no
/// progress, and its stall watch says so: on a busy machine, where a new connection and a look
/// for lines take longer than the 20 to 100 ms between two rounds of the storm, that happens. A
/// stall said is then a true report, not a defect; what the test refuses is a stall that names
/// nothing, and a worker still stalled once the storm is over and everything is delivered.
@Suite("PostgresOutbox under a storm of ended connections", .timeLimit(.minutes(6)))
struct ConnectionStormTests {
  /// How long the storm lasts: 60 seconds, or `ORDERLY_STORM_SECONDS`.
  private static var stormLength: Duration {
    .seconds(
      ProcessInfo.processInfo.environment["ORDERLY_STORM_SECONDS"].flatMap(Int.init) ?? 60
    )
  }

  /// What the two workers' handlers saw: each delivery in order, and any key delivered by two
  /// handlers at once.
  final class Deliveries: Sendable {
    private struct State {
      var delivered: [String: [Int]] = [:]
      var inFlight: [String: String] = [:]
      var overlaps: [String] = []
      var count = 0
    }
    private let state = Mutex(State())

    func begin(_ key: String, by worker: String) {
      state.withLock { state in
        if let other = state.inFlight[key] {
          state.overlaps.append("\(key): \(worker) began while \(other) delivered it")
        }
        state.inFlight[key] = worker
      }
    }

    func end(_ key: String, number: Int, by worker: String, delivered: Bool) {
      state.withLock { state in
        if state.inFlight[key] == worker { state.inFlight[key] = nil }
        if delivered {
          state.delivered[key, default: []].append(number)
          state.count += 1
        }
      }
    }

    var byKey: [String: [Int]] { state.withLock { $0.delivered } }
    var overlaps: [String] { state.withLock { $0.overlaps } }
    var count: Int { state.withLock { $0.count } }
  }

  @Test(
    "pg_terminate_backend every 20-100 ms for a minute while two workers deliver and a producer appends: nothing lost, each key in order, no overlap, no worker left stalled"
  )
  func storm() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let application = "storm-\(database.schema)"
    let keys = (0..<16).map { "key\($0)" }
    let deliveries = Deliveries()
    let key: @Sendable (String) -> String? = { String($0.prefix { $0 != ":" }) }
    func outbox(_ role: String) async throws -> PostgresOutbox<String> {
      let client = try database.client(
        applicationName: "\(application)-\(role)",
        maximumConnections: 4
      )
      return try await database.outbox(of: String.self, client: client, partition: key)
    }
    let producer = try await outbox("producer")
    var workers: [PostgresOutbox<String>] = []
    for name in ["a", "b"] {
      let worker = try await outbox(name)
      try worker.start(limit: 4, lease: .seconds(2), pollInterval: .milliseconds(100)) {
        envelope in
        let (key, number) = Self.parse(envelope.message)
        deliveries.begin(key, by: name)
        var delivered = false
        defer { deliveries.end(key, number: number, by: name, delivered: delivered) }
        // Work that takes a moment, so that deliveries of one key by two workers would meet.
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...3)))
        delivered = true
      }
      workers.append(worker)
    }
    // Each stall a worker said, once per stall, with what it named as waited on.
    let stalls = Mutex<[(worker: Int, on: [String])]>([])
    let watched = workers
    let watcher = Task {
      var wasStalled = watched.map { _ in false }
      while !Task.isCancelled {
        for (index, worker) in watched.enumerated() {
          let statistics = worker.delivererStatistics
          if statistics.isStalled, !wasStalled[index] {
            stalls.withLock { $0.append((index, statistics.stalledOn)) }
          }
          wasStalled[index] = statistics.isStalled
        }
        try? await Task.sleep(for: .milliseconds(100))
      }
    }
    // The server ends every connection of the workers' and the producer's clients, every 20 to
    // 100 ms, whatever it is doing.
    let storm = Task {
      var ended = 0
      while !Task.isCancelled {
        try? await database.execute(
          """
          SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name LIKE '\(application)-%'
          """
        )
        ended += 1
        try? await Task.sleep(for: .milliseconds(Int.random(in: 20...100)))
      }
      return ended
    }
    // The producer appends each key's next numbers, a few keys at a time, until the storm ends.
    var confirmed: [String: [Int]] = [:]
    var next: [String: Int] = [:]
    var refused = 0
    let end = ContinuousClock.now + Self.stormLength
    while ContinuousClock.now < end {
      let chosen = keys.shuffled().prefix(3)
      let batch = chosen.map { key -> String in
        defer { next[key, default: 0] += 1 }
        return "\(key):\(next[key, default: 0])"
      }
      let outcome: Result<[UUID], OutboxError>
      do {
        outcome = .success(
          try await producer.append(
            contentsOf: batch,
            partition: nil,
            headers: [:],
            deliverAfter: nil
          )
        )
      } catch {
        outcome = .failure(error)
      }
      switch outcome {
      case .success:
        for message in batch {
          let (key, number) = Self.parse(message)
          confirmed[key, default: []].append(number)
        }
      case .failure(.cannotOpen):
        // Its outcome is unknown (a cut commit may have stored it): its numbers are used up.
        refused += 1
      case .failure(let error):
        Issue.record("an append failed with \(error), not cannotOpen")
      }
    }
    storm.cancel()
    let ended = await storm.value
    // Afterwards: one more message per key, then everything confirmed is delivered.
    let last = keys.map { key in "\(key):\(next[key, default: 0])" }
    try await producer.append(contentsOf: last, partition: nil, headers: [:], deliverAfter: nil)
    for message in last {
      let (key, number) = Self.parse(message)
      confirmed[key, default: []].append(number)
    }
    let deadline = ContinuousClock.now + .seconds(120)
    var missing: [String: [Int]] = [:]
    repeat {
      let seen = deliveries.byKey
      missing = [:]
      for (key, numbers) in confirmed {
        let got = Set(seen[key] ?? [])
        let gone = numbers.filter { !got.contains($0) }
        if !gone.isEmpty { missing[key] = gone }
      }
      if missing.isEmpty { break }
      try await Task.sleep(for: .milliseconds(100))
    } while ContinuousClock.now < deadline
    // The storm is over and the workers have work no longer: a worker that said it was
    // stalled makes progress again (its next look finds nothing), and says so, within a few
    // of its stall watch's checks (each an eighth of a lease).
    _ = await eventually(upTo: .seconds(30), every: .milliseconds(100)) {
      workers.allSatisfy { !$0.delivererStatistics.isStalled }
    }
    let stillStalled = workers.indices.filter { workers[$0].delivererStatistics.isStalled }
    watcher.cancel()
    _ = await watcher.value
    for worker in workers { await worker.stop() }

    let total = confirmed.values.map(\.count).reduce(0, +)
    let stalled = stalls.withLock { $0 }
    print(
      "storm: \(ended) rounds of ended connections; \(total) messages confirmed, \(refused) appends refused; \(deliveries.count) deliveries; \(stalled.count) stalls said"
    )
    #expect(ended > 100, "the storm ended connections only \(ended) times")
    #expect(total > 100, "only \(total) appends confirmed under the storm (\(refused) refused)")
    #expect(missing.isEmpty, "confirmed but never delivered: \(missing)")
    // Each key in order: a message may come again (its acknowledgement was cut), none goes back.
    for (key, numbers) in deliveries.byKey {
      let backwards = zip(numbers, numbers.dropFirst()).filter { $0 > $1 }
      #expect(backwards.isEmpty, "\(key) went back: \(backwards) in \(numbers)")
    }
    #expect(deliveries.overlaps.isEmpty, "\(deliveries.overlaps)")
    // A stall said names what the worker waited on, or the statement that last failed.
    let unnamed = stalled.filter { $0.on.isEmpty }
    #expect(unnamed.isEmpty, "stalls that name nothing: \(unnamed)")
    #expect(
      stillStalled.isEmpty,
      "still stalled after the storm: workers \(stillStalled); every stall said: \(stalled)"
    )
  }

  /// A message's key and number: `key3:17`.
  private static func parse(_ message: String) -> (String, Int) {
    let parts = message.split(separator: ":")
    return (String(parts[0]), Int(parts[1]) ?? -1)
  }
}
#endif
