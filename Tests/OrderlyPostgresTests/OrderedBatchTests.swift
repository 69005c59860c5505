// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

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

  @Test(
    "a failure in the middle: the messages before it are acknowledged, the failed one is retried first with its attempt counted, the ones after it are not counted as tried"
  )
  func failureMidBatch() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Int.self)
    try await outbox.append(contentsOf: Array(0..<6), partition: "k")
    let calls = Recorder<[String]>()
    let pendingAtRetry = Mutex<Int?>(nil)
    let retry = try RetryPolicy(
      initialDelay: .milliseconds(1),
      maximumDelay: .milliseconds(2),
      maximumAttempts: 5
    )
    try outbox.start(batchesOf: 6, retry: retry, pollInterval: .milliseconds(50)) { envelopes in
      calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
      if calls.all.count == 1 {
        throw BatchDeliveryError(delivered: 2, error: Refused())
      }
      if calls.all.count == 2 {
        let pending = try await outbox.pendingCount()
        pendingAtRetry.withLock { $0 = pending }
      }
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(
      calls.all == [["0#1", "1#1", "2#1", "3#1", "4#1", "5#1"], ["2#2", "3#1", "4#1", "5#1"]]
    )
    // 0 and 1 were acknowledged before the retry began.
    #expect(pendingAtRetry.withLock { $0 } == 4)
    #expect(try await outbox.pendingCount() == 0)
  }

  @Test(
    "any other error fails the batch's first message; once its attempts are spent it is a dead letter, and the line stops there (stopLine) or goes on (continueLine)"
  )
  func deadLetters() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let retry = try RetryPolicy(
      initialDelay: .milliseconds(1),
      maximumDelay: .milliseconds(2),
      maximumAttempts: 2
    )
    for policy in [DeadLetterPolicy.stopLine, .continueLine] {
      let outbox = try await database.outbox(of: String.self)
      try await outbox.append(contentsOf: ["ok", "poison", "after"], partition: "\(policy)")
      let calls = Recorder<[String]>()
      try outbox.start(
        batchesOf: 3,
        retry: retry,
        onDeadLetter: policy,
        pollInterval: .milliseconds(50)
      ) {
        envelopes in
        calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
        if let bad = envelopes.firstIndex(where: { $0.message == "poison" }) {
          // Said by index for a batch that starts before it, by a plain error once it is first.
          if bad == 0 { throw Refused() }
          throw BatchDeliveryError(delivered: bad, error: Refused())
        }
      }
      let settled = await eventually { try await outbox.deadLetterCount() == 1 }
      #expect(settled)
      let letters = try await outbox.deadLetters()
      #expect(letters.map(\.message) == ["poison"])
      #expect(letters.first?.attempts == 2)
      #expect(letters.first?.reason == "refused")
      if policy == .stopLine {
        // "after" waits behind the dead letter.
        #expect(try await outbox.pendingCount() == 1)
        #expect(calls.all == [["ok#1", "poison#1", "after#1"], ["poison#2", "after#1"]])
      } else {
        try await outbox.waitUntilDelivered()
        #expect(
          calls.all == [["ok#1", "poison#1", "after#1"], ["poison#2", "after#1"], ["after#1"]]
        )
      }
      await outbox.stop()
      await outbox.close()
      try await database.execute("DELETE FROM orderly_outbox_dead_letter")
      try await database.execute("DELETE FROM orderly_outbox_message")
    }
  }

  @Test(
    "a batch size below 1 is refused, saying what to give; a handler's count outside its batch fails the first message"
  )
  func badInput() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Int.self)
    #expect(throws: OutboxError.invalidOption("batchesOf must be 1 or more (got 0)")) {
      try outbox.start(batchesOf: 0) { _ in }
    }
    try await outbox.append(contentsOf: [0, 1], partition: "k")
    let calls = Recorder<[String]>()
    let retry = try RetryPolicy(
      initialDelay: .milliseconds(1),
      maximumDelay: .milliseconds(2),
      maximumAttempts: 5
    )
    try outbox.start(batchesOf: 2, retry: retry, pollInterval: .milliseconds(50)) { envelopes in
      calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
      if calls.all.count == 1 { throw BatchDeliveryError(delivered: 7, error: Refused()) }
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(calls.all == [["0#1", "1#1"], ["0#2", "1#1"]])
  }
}
#endif
