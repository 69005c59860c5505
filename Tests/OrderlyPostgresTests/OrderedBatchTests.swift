// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

/// Two workers sharing one line's batches; the rest of the batch contract (failures part-way,
/// dead letters, not-before, undecodable messages, bad input) runs on every store in
/// `OutboxContractTests.BatchContractTests`.
@Suite("PostgresOutbox delivers ordered batches", .serialized, .timeLimit(.minutes(3)))
struct OrderedBatchTests {
  @Test(
    "each call gets up to N consecutive messages of one key, in order; never two batches of a key at once; an event per message"
  )
  func batches() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Int.self)
    for key in ["a", "b", "c"] {
      try await outbox.append(contentsOf: Array(0..<25), partition: key)
    }
    let calls = Recorder<[String]>()
    let inDelivery = Mutex<Set<String>>([])
    let overlaps = Atomic<Int>(0)
    let other = try await database.outbox(of: Int.self)
    // Each worker's own events, subscribed here, before anything is delivered.
    let events = Recorder<String>()
    var listening: [Task<Void, Never>] = []
    for stream in [outbox.events, other.events] {
      listening.append(
        Task {
          for await event in stream {
            switch event {
            case .delivering(_, let sequence, let attempt):
              events.record("delivering \(sequence)#\(attempt)")
            case .delivered(_, let sequence): events.record("delivered \(sequence)")
            default: break
            }
          }
        }
      )
    }
    defer { for task in listening { task.cancel() } }
    // Two workers share the keys: a key is never in two batches at once, in the whole fleet.
    for worker in [outbox, other] {
      try worker.start(limit: 3, batchesOf: 10, pollInterval: .milliseconds(50)) { envelopes in
        let keys = Set(envelopes.map { $0.partition ?? "-" })
        let overlapping = inDelivery.withLock { busy in
          defer { busy.formUnion(keys) }
          return !busy.isDisjoint(with: keys)
        }
        if overlapping { overlaps.add(1, ordering: .relaxed) }
        calls.record(envelopes.map { "\($0.partition ?? "-") \($0.message)#\($0.attempt)" })
        try await Task.sleep(for: .milliseconds(5))
        inDelivery.withLock { $0.subtract(keys) }
      }
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    await other.stop()
    await other.close()
    let all = calls.all
    #expect(overlaps.load(ordering: .relaxed) == 0)
    #expect(all.allSatisfy { (1...10).contains($0.count) })
    #expect(all.allSatisfy { Set($0.map { $0.prefix(1) }).count == 1 })
    for key in ["a", "b", "c"] {
      let line = all.joined().filter { $0.hasPrefix("\(key) ") }
      #expect(line == (0..<25).map { "\(key) \($0)#1" })
    }
    // 3 keys of 25 in batches of up to 10: at least 9 calls, and far fewer than 75.
    #expect(all.count >= 9 && all.count < 30)
    let counted = await events.wait { $0.count { $0.hasPrefix("delivered ") } == 75 }
    #expect(counted)
    #expect(events.all.count { $0.hasPrefix("delivering ") } == 75)
  }
}
#endif
