// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

@Suite("PostgresOutbox takes the lines that wait longest", .serialized, .timeLimit(.minutes(3)))
struct LineTurnTests {
  @Test("a worker with one slot takes lines by the age of their oldest message, not by key")
  func oldestFirst() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    // Appended one after another, so "z" has the oldest message and "a" the newest: the key
    // order is the opposite of the age order.
    for key in ["z", "m", "a"] {
      try await outbox.append("\(key)1", partition: key)
      try await outbox.append("\(key)2", partition: key)
    }
    let seen = Recorder<String>()
    try outbox.start(limit: 1, pollInterval: .milliseconds(100)) { seen.record($0.message) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["z1", "z2", "m1", "m2", "a1", "a2"])
  }

  @Test(
    "a line that never runs out of messages gives its slot up after its turn, to a line whose message waits longer; each line stays in order"
  )
  func turns() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Int.self)
    try await outbox.append(0, partition: "busy")
    try await outbox.append(0, partition: "waiting")
    let seen = Recorder<String>()
    let busyFences = Recorder<Delivered>()
    let waitingSeen = Atomic<Bool>(false)
    // One slot, and a lease of 400 ms: a turn of 100 ms. Each delivery of "busy" appends its
    // next message, newer than the one "waiting" has, until "waiting" was delivered.
    try outbox.start(limit: 1, lease: .milliseconds(400), pollInterval: .milliseconds(100)) {
      envelope in
      seen.record("\(envelope.partition ?? "-") \(envelope.message)")
      if envelope.partition == "busy" {
        busyFences.record(Delivered(sequence: envelope.sequence, fence: envelope.fence ?? -1))
      }
      if envelope.partition == "waiting" {
        waitingSeen.store(true, ordering: .sequentiallyConsistent)
      } else if !waitingSeen.load(ordering: .sequentiallyConsistent) {
        try await outbox.append(envelope.message + 1, partition: "busy")
      }
    }
    let delivered = await seen.wait { $0.contains("waiting 0") }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(delivered)
    // On a busy machine a 400 ms lease can run out during a delivery: the next holder delivers
    // that message again (at least once), under a higher fence, and its handler appends once
    // more. Order means each message after the one before it, and a repeat only ever of the
    // message just delivered.
    let busy = busyFences.all
    var distinct: [Delivered] = []
    for delivery in busy {
      if let last = distinct.last, last.sequence == delivery.sequence {
        #expect(delivery.fence > last.fence, "a repeat under the same fence: \(busy)")
        continue
      }
      distinct.append(delivery)
    }
    let sequences = distinct.map(\.sequence)
    #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "\(busy)")
    #expect(sequences.count >= 2)
  }

  /// One delivery of the busy line: its message and the fence it came under.
  struct Delivered: Sendable, CustomStringConvertible {
    let sequence: Int64
    let fence: Int64
    var description: String { "\(sequence)@\(fence)" }
  }

  @Test("a worker with a free slot keeps a busy line past its turn: no other line waits")
  func keptWhileRoom() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Int.self)
    try await outbox.append(0, partition: "busy")
    let fences = Recorder<Int64>()
    // A lease of 2 s: a turn of 500 ms. 60 deliveries of 20 ms each outlast two turns.
    try outbox.start(limit: 2, lease: .seconds(2), pollInterval: .milliseconds(100)) { envelope in
      fences.record(envelope.fence ?? -1)
      try await Task.sleep(for: .milliseconds(20))
      if envelope.message < 59 { try await outbox.append(envelope.message + 1, partition: "busy") }
    }
    let done = await fences.wait { $0.count == 60 }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(done)
    #expect(Set(fences.all).count == 1, "\(fences.all)")
  }

  /// An outbox holding one message, "kept", closed, its tables changed by `change` (SQL), and
  /// opened again by a new worker.
  private func reopened(_ database: TestDatabase, after change: [String]) async throws
    -> PostgresOutbox<String>
  {
    let first = try await database.outbox(of: String.self)
    try await first.append("kept", partition: "k")
    await first.close()
    for sql in change { try await database.execute(sql) }
    return try await database.outbox(of: String.self)
  }

  /// How many indexes named `name` the test's schema has.
  private func indexes(named name: String, in database: TestDatabase) async throws -> Int {
    try await database.fleetCount(
      """
      SELECT count(*)::bigint FROM pg_indexes
      WHERE schemaname = current_schema() AND indexname = '\(name)'
      """
    )
  }

  /// What `outbox` delivers until it has nothing left.
  private func delivered(by outbox: PostgresOutbox<String>) async throws -> [String] {
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(100)) { seen.record($0.message) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    return seen.all
  }

  @Test("an outbox created before the age index gets it when a worker opens it")
  func indexAdded() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await reopened(
      database,
      after: ["DROP INDEX orderly_outbox_message_appended"]
    )
    let indexes = try await indexes(named: "orderly_outbox_message_appended", in: database)
    #expect(indexes == 1)
    let seen = try await delivered(by: outbox)
    #expect(seen == ["kept"])
  }

  @Test("the age index of an earlier version is replaced when a worker opens the outbox")
  func formerIndexReplaced() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    // The outbox as an earlier version left it: the age index on (appended_at, line, sequence).
    let outbox = try await reopened(
      database,
      after: [
        "DROP INDEX orderly_outbox_message_appended",
        """
        CREATE INDEX orderly_outbox_message_age
          ON orderly_outbox_message (appended_at, line, sequence)
        """,
      ]
    )
    let former = try await indexes(named: "orderly_outbox_message_age", in: database)
    let current = try await indexes(named: "orderly_outbox_message_appended", in: database)
    #expect(former == 0)
    #expect(current == 1)
    let seen = try await delivered(by: outbox)
    #expect(seen == ["kept"])
  }
}
#endif
