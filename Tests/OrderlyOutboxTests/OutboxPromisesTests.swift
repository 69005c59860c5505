import BuiltProducts
import Foundation
import GRDB
import OrderlyCore
import OrderlyDatabaseFile
import OrderlyTestSupport
import Testing

@testable import OrderlyOutbox

/// A trigger that makes removing delivered messages fail, as a full disk would.
private let failingDeletes = """
  CREATE TRIGGER fail_delete BEFORE DELETE ON outbox_message
  BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END
  """

@Suite("Outbox promises: durability, bookkeeping, stop, errors, close")
struct OutboxPromisesTests {
  @Test("a file outbox's writer syncs every commit (synchronous = FULL, not GRDB's NORMAL)")
  func synchronousFull() async throws {
    let folder = try ScratchFolder()
    let outbox = try Outbox<Change>(path: folder.path("outbox.sqlite"))
    #expect(try DurableDatabase.synchronousLevel(of: outbox.database) == 2)
    try await outbox.close()
  }

  @Test("a delivery whose removal fails is reported and retried, never silent")
  func failedRecordIsReportedAndRetried() async throws {
    let clock = ManualClock()
    let queue = try DatabaseQueue()
    let outbox = try Outbox<Change>(database: queue, clock: clock)
    try await outbox.append(Change("n", "1"))
    try await queue.write { db in try db.execute(sql: failingDeletes) }
    let server = FakeServer()
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(deliver: server.deliver)
    let failed = await events.next {
      if case .recordFailed = $0 { true } else { false }
    }
    guard case .recordFailed(_, 1, let reason, let delay) = failed else {
      Issue.record("no recordFailed event: \(String(describing: failed))")
      return
    }
    #expect(reason.contains("database or disk is full"))
    #expect(delay > .zero)
    // Waiting says why nothing more gets through, instead of waiting forever.
    await #expect(throws: OutboxError.self) { try await outbox.waitUntilDelivered() }
    #expect(outbox.pendingCount == 1)
    // Space is freed: the write is tried again after its wait, and the message is recorded.
    try await queue.write { db in try db.execute(sql: "DROP TRIGGER fail_delete") }
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(600))
    _ = await events.next(where: \.isDelivered)
    try await outbox.waitUntilDelivered()
    #expect(outbox.pendingCount == 0)
    #expect(server.applied == [Change("n", "1")] && server.deliveries == 1)
  }

  @Test("stop() records a delivery that ignores cancellation and returns")
  func stopRecordsReturnedDelivery() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(contentsOf: [Change("n", "1"), Change("n", "2")])
    let entered = Gate()
    let applied = OrderedRecorder<String>()
    try outbox.start { envelope in
      entered.open()
      // Returns only once cancelled, and then normally: the receiver has the message.
      try? await Gate().wait()
      applied.record(envelope.message.text)
    }
    try await entered.wait()
    await outbox.stop()
    #expect(applied.values == ["1"])
    #expect(outbox.pendingCount == 1)
    try await outbox.close()
    let reopened = try Outbox<Change>(path: path)
    #expect(reopened.pendingCount == 1)
    let server = FakeServer()
    try reopened.start(deliver: server.deliver)
    try await reopened.waitUntilDelivered()
    #expect(server.applied == [Change("n", "2")])
    try await reopened.close()
  }

  @Test("an append from a cancelled task throws .cancelled and stores nothing")
  func cancelledAppend() async throws {
    let outbox = try Outbox<Change>()
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await outbox.append(Change("n", "1"))
    }
    await #expect(throws: OutboxError.cancelled) { try await task.value }
    #expect(outbox.pendingCount == 0)
  }

  @Test("a full disk during append throws .diskFull; what was stored before is kept")
  func diskFullAppend() async throws {
    let queue = try DatabaseQueue()
    let outbox = try Outbox<Change>(database: queue)
    try await outbox.append(Change("n", "kept"))
    // The database may not grow past its current size, as on a full disk.
    try await queue.writeWithoutTransaction { db in
      let pages = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
      try db.execute(sql: "PRAGMA max_page_count = \(pages)")
    }
    await #expect(throws: OutboxError.diskFull(path: ":memory:")) {
      try await outbox.append(Change("n", String(repeating: "x", count: 100_000)))
    }
    #expect(outbox.pendingCount == 1)
    #expect(OutboxError.diskFull(path: "a").description.contains("full"))
  }

  @Test("a file damaged after it was opened is reported as damaged")
  func damagedFile() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(
      contentsOf: (0..<200).map { Change("n", String(repeating: "\($0)", count: 50)) }
    )
    try await outbox.close()
    let reopened = try Outbox<Change>(path: path)
    // Every page but the first (the schema) is overwritten behind SQLite's back.
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    let size = try handle.seekToEnd()
    try handle.seek(toOffset: 4_096)
    try handle.write(contentsOf: Data(repeating: 0xA5, count: Int(size) - 4_096))
    try handle.close()
    #expect {
      try reopened.start { _ in }
    } throws: { error in
      guard case .damaged(let errorPath, _) = error as? OutboxError else { return false }
      return errorPath == path
    }
    try await reopened.close()
    // Found damaged when opening: a file cut short.
    let half = folder.path("half.sqlite")
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: half))
    #expect {
      try Outbox<Change>(path: half)
    } throws: { error in
      guard case .damaged(let errorPath, let reason) = error as? OutboxError else { return false }
      return errorPath == half && reason.contains("damaged")
    }
  }

  @Test("close() leaves the database file complete on its own: no message only in the -wal")
  func closeCheckpoints() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Step>(path: path)
    try await outbox.append(contentsOf: (0..<20).map(Step.init(index:)))
    try await outbox.close()
    let walSize =
      (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
    #expect(walSize == 0)
    // A backup of the database file alone holds every message.
    let copy = folder.path("copy.sqlite")
    try FileManager.default.copyItem(atPath: path, toPath: copy)
    #expect(try storedIndexes(copy) == Array(0..<20))
  }

  @Test("counts change before the event that reports them")
  func countsBeforeEvents() async throws {
    let outbox = try Outbox<Change>()
    var events = outbox.events.makeAsyncIterator()
    let seen = OrderedRecorder<String>()
    let listener = Task {
      while let event = await events.next() {
        switch event {
        case .appended: seen.record("appended: pending \(outbox.pendingCount)")
        case .delivered: seen.record("delivered: pending \(outbox.pendingCount)")
        case .deadLettered:
          seen.record("dead letter: \(outbox.deadLetterCount), pending \(outbox.pendingCount)")
        default: continue
        }
        if seen.values.count == 4 { return }
      }
    }
    // Each step waits for its event, so nothing else changes the counts meanwhile.
    try await outbox.append(Change("n", "1"))
    try await seen.waitForCount(1)
    let server = FakeServer()
    server.refuse("2")
    try outbox.start(onDeadLetter: .continueLine, deliver: server.deliver)
    try await seen.waitForCount(2)
    outbox.pause()
    try await outbox.append(Change("n", "2"))
    try await seen.waitForCount(3)
    outbox.resume()
    await listener.value
    #expect(
      seen.values == [
        "appended: pending 1", "delivered: pending 0", "appended: pending 1",
        "dead letter: 1, pending 0",
      ]
    )
  }

  @Test("a delivery cut short by a crash is counted: the redelivery's attempt is 2")
  func attemptCountsCrashes() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let server = folder.path("server.log")
    let outbox = try Outbox<Step>(path: path)
    try await outbox.append(Step(index: 0))
    try await outbox.close()
    try await BuiltProducts.offThePool {
      let probe = try BuiltProducts.Running("outbox-probe", arguments: ["deliver", path, server])
      #expect(probe.readLines(1) == ["applied 0"])
      probe.send(SIGKILL)
      _ = probe.finish()
    }
    let reopened = try Outbox<Step>(path: path)
    let attempts = OrderedRecorder<Int>()
    try reopened.start { attempts.record($0.attempt) }
    try await reopened.waitUntilDelivered()
    #expect(attempts.values == [2])
    try await reopened.close()
  }

  @Test("an outbox can be stopped and started again; the error for starting twice says how")
  func restartAfterStop() async throws {
    let outbox = try Outbox<Change>()
    try outbox.start { _ in }
    #expect(throws: OutboxError.alreadyStarted) { try outbox.start { _ in } }
    #expect(OutboxError.alreadyStarted.description.contains("stop()"))
    await outbox.stop()
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    try await outbox.append(Change("n", "1"))
    try await outbox.waitUntilDelivered()
    #expect(server.applied == [Change("n", "1")])
  }

  @Test("a message whose delivery began is never merged into, even after a stop")
  func noMergeAfterAttempt() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let coalescing = Coalescing<Change>(entity: { $0.note }, merge: { Change($0.note, $1.text) })
    let outbox = try Outbox<Change>(path: path, coalescing: coalescing)
    let first = try await outbox.append(Change("n", "1"))
    let entered = Gate()
    try outbox.start { _ in
      entered.open()
      try await Task.sleep(for: .seconds(3_600))  // cancelled by stop(): throws
    }
    try await entered.wait()
    await outbox.stop()
    // The receiver may have "1" under `first`: "2" must not change that message.
    let second = try await outbox.append(Change("n", "2"))
    #expect(second != first)
    #expect(outbox.pendingCount == 2)
    // A message never attempted is still merged into.
    let third = try await outbox.append(Change("n", "3"))
    #expect(third == second)
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied == [Change("n", "1"), Change("n", "3")])
    try await outbox.close()
  }

  @Test("an invalid retry policy is refused when it is built")
  func invalidPolicy() {
    #expect(throws: OutboxError.self) { try RetryPolicy(initialDelay: .seconds(-1)) }
    #expect(throws: OutboxError.self) { try RetryPolicy(multiplier: 0.5) }
    #expect(throws: OutboxError.self) {
      try RetryPolicy(initialDelay: .seconds(10), maximumDelay: .seconds(1))
    }
    #expect(throws: OutboxError.self) { try RetryPolicy(maximumAttempts: 0) }
    #expect(throws: Never.self) { try RetryPolicy(jitter: 0, maximumAttempts: 3) }
  }
}
