import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import OrderlyTestSupport
import Synchronization
import Testing

/// Records the envelopes a delivery closure saw.
private final class Seen: Sendable {
  private let envelopes = Mutex<[Envelope<Change>]>([])

  var all: [Envelope<Change>] { envelopes.withLock { $0 } }

  func add(_ envelope: Envelope<Change>) { envelopes.withLock { $0.append(envelope) } }
}

@Suite("Outbox: headers, graceful stop, end of events")
struct OutboxHeadersAndShutdownTests {
  @Test("headers are stored with the message and handed back, across a reopen")
  func headersSurviveReopen() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<Change>(path: path)
    try await first.append(Change("n", "1"), headers: ["traceparent": "00-abc-01", "k": "v"])
    try await first.append(Change("n", "2"))
    try await first.append(contentsOf: [Change("n", "3"), Change("n", "4")], headers: ["b": "1"])
    try await first.close()

    let second = try Outbox<Change>(path: path)
    let seen = Seen()
    try second.start { seen.add($0) }
    try await second.waitUntilDelivered()
    try await second.close()
    #expect(seen.all.map(\.message.text) == ["1", "2", "3", "4"])
    #expect(
      seen.all.map(\.headers) == [
        ["traceparent": "00-abc-01", "k": "v"], [:], ["b": "1"], ["b": "1"],
      ]
    )
    // A delivered message leaves no header row behind.
    let queue = try DatabaseQueue(path: path)
    #expect(
      try await queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM outbox_header") } == 0
    )
  }

  @Test("a message merged into a pending one keeps the pending one's headers")
  func mergeKeepsHeaders() async throws {
    let outbox = try Outbox<Change>(
      coalescing: Coalescing(
        entity: { $0.note },
        merge: { pending, new in
          Change(pending.note, pending.text + "+" + new.text)
        }
      )
    )
    try await outbox.append(Change("n", "a"), headers: ["first": "1"])
    try await outbox.append(Change("n", "b"), headers: ["second": "2"])
    let seen = Seen()
    try outbox.start { seen.add($0) }
    try await outbox.waitUntilDelivered()
    #expect(seen.all.map(\.message.text) == ["a+b"])
    #expect(seen.all.map(\.headers) == [["first": "1"]])
  }

  @Test("a dead letter keeps its headers when retried; dropping it removes them")
  func deadLetterHeaders() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    let server = FakeServer()
    server.refuse("bad")
    let seen = Seen()
    try outbox.start(retry: try exactRetry(), onDeadLetter: .continueLine) { envelope in
      seen.add(envelope)
      try await server.deliver(envelope)
    }
    let bad = try await outbox.append(Change("n", "bad"), headers: ["h": "bad"])
    let worse = try await outbox.append(Change("m", "worse"), headers: ["h": "worse"])
    server.refuse("worse")
    try await outbox.waitUntilDelivered()
    #expect(outbox.deadLetterCount == 2)
    server.accept("bad")
    try await outbox.retryDeadLetter(id: bad)
    try await outbox.waitUntilDelivered()
    #expect(seen.all.last?.headers == ["h": "bad"])
    #expect(seen.all.last?.attempt == 1)
    try await outbox.dropDeadLetter(id: worse)
    try await outbox.close()
    let queue = try DatabaseQueue(path: path)
    #expect(
      try await queue.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM outbox_header") } == 0
    )
  }

  @Test("an outbox file from before headers gains them when opened, its messages kept")
  func migratesOlderFile() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<Change>(path: path)
    try await first.append(Change("n", "old"))
    try await first.close()
    // Back to the first version's schema: no header table, no record of its migration.
    let queue = try DatabaseQueue(path: path)
    try await queue.write { db in
      try db.execute(sql: "DROP TABLE outbox_header")
      try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier LIKE 'orderly outbox 2%'")
    }
    try queue.close()

    let second = try Outbox<Change>(path: path)
    #expect(second.pendingCount == 1)
    try await second.append(Change("n", "new"), headers: ["h": "1"])
    let seen = Seen()
    try second.start { seen.add($0) }
    try await second.waitUntilDelivered()
    try await second.close()
    #expect(seen.all.map(\.message.text) == ["old", "new"])
    #expect(seen.all.map(\.headers) == [[:], ["h": "1"]])
  }

  @Test("stop(gracePeriod:): the delivery in progress finishes and is recorded; no new one starts")
  func gracefulStopLetsDeliveryFinish() async throws {
    let clock = ManualClock()
    let outbox = try Outbox<Change>(clock: clock)
    try await outbox.append(contentsOf: (1...3).map { Change("n", "\($0)") })
    let gate = Gate()
    let seen = Seen()
    try outbox.start { envelope in
      seen.add(envelope)
      try await gate.wait()
    }
    try await gate.waitForWaiters(1)
    let stopped = Task { await outbox.stop(gracePeriod: .seconds(10)) }
    // The grace period's timer is running: the stop has begun.
    try await clock.waitForSleepers(1)
    gate.open()
    await stopped.value
    #expect(seen.all.map(\.message.text) == ["1"])
    #expect(outbox.pendingCount == 2)
    // Started again, it goes on with the second message: the first was recorded as delivered.
    try outbox.start { seen.add($0) }
    try await outbox.waitUntilDelivered()
    #expect(seen.all.map(\.message.text) == ["1", "2", "3"])
  }

  @Test("stop(gracePeriod:): a delivery still running when it ends is cancelled and comes again")
  func gracefulStopCancelsLateDelivery() async throws {
    let clock = ManualClock()
    let outbox = try Outbox<Change>(clock: clock)
    try await outbox.append(contentsOf: (1...2).map { Change("n", "\($0)") })
    let gate = Gate()
    let seen = Seen()
    let cancelled = Mutex(false)
    try outbox.start { envelope in
      seen.add(envelope)
      do {
        try await gate.wait()
      } catch {
        cancelled.withLock { $0 = true }
        throw error
      }
    }
    try await gate.waitForWaiters(1)
    let stopped = Task { await outbox.stop(gracePeriod: .seconds(5)) }
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(5))
    await stopped.value
    #expect(cancelled.withLock { $0 })
    #expect(outbox.pendingCount == 2)
    gate.open()
    try outbox.start { seen.add($0) }
    try await outbox.waitUntilDelivered()
    #expect(seen.all.map(\.message.text) == ["1", "1", "2"])
    #expect(seen.all.map(\.attempt) == [1, 2, 1])
  }

  @Test("events end when the outbox closes; a sequence taken after closing is already over")
  func eventsEndOnClose() async throws {
    let outbox = try Outbox<Change>()
    let events = outbox.events
    let reader = Task {
      var seen: [String] = []
      for await event in events { seen.append("\(event)") }
      return seen
    }
    try await outbox.append(Change("n", "1"))
    try outbox.start(deliver: FakeServer().deliver)
    try await outbox.waitUntilDelivered()
    try await outbox.close()
    #expect(await reader.value == ["appended #1", "delivering #1", "delivered #1"])
    var late = outbox.events.makeAsyncIterator()
    #expect(await late.next() == nil)
  }

  @Test("oldestPendingAppendedAt: nil when nothing is pending, else the first append's time")
  func oldestPending() async throws {
    let outbox = try Outbox<Change>()
    #expect(try await outbox.oldestPendingAppendedAt() == nil)
    let before = Date()
    try await outbox.append(Change("n", "1"))
    try await outbox.append(Change("m", "2"), partition: "m")
    let oldest = try #require(try await outbox.oldestPendingAppendedAt())
    #expect(oldest.timeIntervalSince1970 >= before.timeIntervalSince1970 - 0.001)
    #expect(oldest <= Date())
    try outbox.start(deliver: FakeServer().deliver)
    try await outbox.waitUntilDelivered()
    #expect(try await outbox.oldestPendingAppendedAt() == nil)
  }
}
