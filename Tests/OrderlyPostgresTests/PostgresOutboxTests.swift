// Built with the Postgres trait only; see Package.swift.
#if Postgres
import BuiltProducts
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Testing

/// Thrown by test deliveries that fail on purpose.
struct Refused: Error, CustomStringConvertible {
  var description: String { "refused" }
}

@Suite("PostgresOutbox in one process", .serialized, .timeLimit(.minutes(3)))
struct PostgresOutboxTests {
  @Test("lines deliver in append order, side by side; the default line too")
  func order() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    for n in 0..<20 {
      try await outbox.append("a\(n)", partition: "a")
      try await outbox.append("b\(n)", partition: "b")
      try await outbox.append("d\(n)")
    }
    #expect(try await outbox.pendingCount() == 60)
    let seen = Recorder<Envelope<String>>()
    try outbox.start(limit: 3, pollInterval: .milliseconds(100)) { seen.record($0) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    let all = seen.all
    #expect(all.count == 60)
    for (partition, prefix) in [("a", "a"), ("b", "b")] {
      let line = all.filter { $0.partition == partition }.map(\.message)
      #expect(line == (0..<20).map { "\(prefix)\($0)" })
    }
    #expect(all.filter { $0.partition == nil }.map(\.message) == (0..<20).map { "d\($0)" })
    #expect(all.allSatisfy { $0.attempt == 1 && $0.fence != nil })
    #expect(try await outbox.pendingCount() == 0)
  }

  @Test("append(contentsOf:) is one transaction; messages keep their order and ids")
  func batch() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self) { String($0.prefix(1)) }
    let ids = try await outbox.append(contentsOf: ["x1", "y1", "x2", "y2", "x3"])
    #expect(ids.count == 5 && Set(ids).count == 5)
    let seen = Recorder<Envelope<String>>()
    try outbox.start(pollInterval: .milliseconds(100)) { seen.record($0) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all.filter { $0.partition == "x" }.map(\.message) == ["x1", "x2", "x3"])
    #expect(seen.all.filter { $0.partition == "y" }.map(\.message) == ["y1", "y2"])
    #expect(Set(seen.all.map(\.id)) == Set(ids))
  }

  @Test(
    "a batch over many keys in one statement: each key's numbers go on from the ones there, ids match their messages, headers, not-before times and the default line are kept"
  )
  func batchOverManyKeys() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    // "-..." joins the default line; any other message the key of its first letter.
    let outbox = try await database.outbox(of: String.self) {
      $0.hasPrefix("-") ? nil : String($0.prefix(1))
    }
    try await outbox.append(contentsOf: ["a0"], partition: nil, headers: [:], deliverAfter: nil)
    try await outbox.append("-0")
    let messages = ["b1", "a1", "-1", "c1", "a2", "b2", "-2", "a3"]
    let ids = try await outbox.append(
      contentsOf: messages,
      partition: nil,
      headers: ["trace": "t-1"],
      deliverAfter: nil
    )
    let past = Date().addingTimeInterval(-60)
    let late = try await outbox.append(
      contentsOf: ["c2", "d1"],
      partition: nil,
      headers: [:],
      deliverAfter: past
    )
    // Stored as given: the not-before times of the last batch, no other.
    let notBefore = try await database.fleetCount(
      """
      SELECT count(*)::bigint FROM orderly_outbox_message
      WHERE not_before IS NOT NULL AND abs(extract(epoch FROM not_before) - \(past.timeIntervalSince1970)) < 0.001
      """
    )
    #expect(notBefore == 2)
    let noNotBefore = try await database.fleetCount(
      "SELECT count(*)::bigint FROM orderly_outbox_message WHERE not_before IS NULL"
    )
    #expect(noNotBefore == 10)
    let seen = Recorder<Envelope<String>>()
    try outbox.start(limit: 4, pollInterval: .milliseconds(100)) { seen.record($0) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    let all = seen.all
    #expect(all.count == 12)
    let byKey = Dictionary(grouping: all, by: { $0.partition ?? "(default)" })
    #expect(byKey["a"]?.map(\.message) == ["a0", "a1", "a2", "a3"])
    #expect(byKey["a"]?.map(\.sequence) == [1, 2, 3, 4])
    #expect(byKey["b"]?.map(\.message) == ["b1", "b2"])
    #expect(byKey["b"]?.map(\.sequence) == [1, 2])
    #expect(byKey["c"]?.map(\.message) == ["c1", "c2"])
    #expect(byKey["d"]?.map(\.message) == ["d1"])
    #expect(byKey["(default)"]?.map(\.message) == ["-0", "-1", "-2"])
    #expect(byKey["(default)"]?.map(\.sequence) == [1, 2, 3])
    let idOf = Dictionary(uniqueKeysWithValues: all.map { ($0.message, $0.id) })
    #expect(messages.map { idOf[$0] } == ids)
    #expect(["c2", "d1"].map { idOf[$0] } == late)
    let withHeaders = all.filter { messages.contains($0.message) }
    #expect(withHeaders.count == messages.count)
    #expect(withHeaders.allSatisfy { $0.headers == ["trace": "t-1"] })
    #expect(all.filter { !messages.contains($0.message) }.allSatisfy { $0.headers.isEmpty })
  }

  @Test("an append inside the app's transaction is stored exactly when it commits")
  func transactional() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let outbox = try await database.outbox(of: String.self, client: client)
    try await database.execute("CREATE TABLE account (id int PRIMARY KEY, balance int)")
    try await database.execute("INSERT INTO account VALUES (7, 100)")
    struct Abort: Error {}
    await #expect(throws: (any Error).self) {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await connection.query(
          "UPDATE account SET balance = balance - 12 WHERE id = 7",
          logger: TestServer.logger
        )
        try await outbox.append("rolled back", partition: "7", on: connection)
        throw Abort()
      }
    }
    #expect(try await outbox.pendingCount() == 0)
    try await client.withTransaction(logger: TestServer.logger) { connection in
      try await connection.query(
        "UPDATE account SET balance = balance - 12 WHERE id = 7",
        logger: TestServer.logger
      )
      try await outbox.append("committed", partition: "7", on: connection)
    }
    #expect(try await outbox.pendingCount() == 1)
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(100)) { seen.record($0.message) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["committed"])
  }

  @Test(
    "a unique key taken in the app's transaction holds once it commits, for an outbox on another client too"
  )
  func uniqueKeyInTransaction() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let outbox = try await database.outbox(of: String.self, client: client)
    // Another pool: its own sessions, as another process would have.
    let elsewhere = try await database.outbox(of: String.self, client: database.client())
    struct Abort: Error {}
    // Rolled back: the key was never taken. The other outbox's append, to another line, waits
    // for the open transaction on the key alone, then stores its message.
    let taken = AsyncGate()
    let release = AsyncGate()
    let rolledBack = Task {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        let result = try await outbox.append(
          "rolled back",
          uniqueKey: "order-7",
          partition: "a",
          on: connection
        )
        #expect(result.wasAppended)
        await taken.open()
        await release.wait()
        throw Abort()
      }
    }
    await taken.wait()
    let waiter = Task {
      try await elsewhere.append("appended elsewhere", uniqueKey: "order-7", partition: "b")
    }
    let waiting = try await database.countWaitingOnLocks()
    #expect(waiting >= 1)
    await release.open()
    _ = await rolledBack.result
    let after = try await waiter.value
    #expect(after.wasAppended)
    // Committed: a later append of the key, here or elsewhere, is a duplicate of it.
    let committed = try await client.withTransaction(logger: TestServer.logger) { connection in
      try await outbox.append(
        "second",
        uniqueKey: "order-8",
        uniqueFor: .seconds(60),
        on: connection
      )
    }
    let again = try await elsewhere.append("second again", uniqueKey: "order-8")
    #expect(committed.wasAppended && again == .duplicate(of: committed.id))
    let inside = try await client.withTransaction(logger: TestServer.logger) { connection in
      try await outbox.append("inside", uniqueKey: "order-7", on: connection)
    }
    #expect(inside == .duplicate(of: after.id))
    #expect(try await outbox.pendingCount() == 2)
    await elsewhere.close()
  }

  @Test("worker processes racing on 300 unique keys: each key is stored exactly once")
  func uniqueKeysAcrossProcesses() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    // The tables first, so that the processes race on the keys, not on creating them.
    let outbox = try await database.outbox(of: String.self)
    let folder = try ScratchFolder()
    let go = folder.path("go")
    var appenders: [BuiltProducts.Running] = []
    for _ in 0..<3 {
      let appender = try BuiltProducts.Running(
        "outbox-postgres-probe",
        arguments: ["unique", database.url, database.schema, "300", go]
      )
      let ready = await appender.readLines(1)
      #expect(ready == ["ready"])
      appenders.append(appender)
    }
    #expect(FileManager.default.createFile(atPath: go, contents: Data()))
    var appended = 0
    var duplicates = 0
    for appender in appenders {
      let ended = await appender.finish()
      let words = ended.stdout.split(whereSeparator: \.isWhitespace)
      #expect(words.count == 4, "\(ended.stdout) \(ended.stderr)")
      if words.count == 4 {
        appended += Int(words[1]) ?? 0
        duplicates += Int(words[3]) ?? 0
      }
    }
    #expect(appended == 300 && duplicates == 600)
    let stored = try await database.fleetCount(
      "SELECT count(DISTINCT unique_key)::bigint FROM orderly_outbox_message"
    )
    let rows = try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message")
    #expect(stored == 300 && rows == 300)
    await outbox.close()
  }

  @Test("two transactions appending to one key: delivered in commit order, none skipped")
  func commitOrder() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let outbox = try await database.outbox(of: String.self, client: client)
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(50)) { seen.record($0.message) }
    // The first transaction appends and stays open; the second appends to the same key and
    // must wait for it, so it is numbered after it; the worker sees neither until they commit.
    let firstAppended = AsyncGate()
    let releaseFirst = AsyncGate()
    let first = Task {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await outbox.append("first", partition: "k", on: connection)
        await firstAppended.open()
        await releaseFirst.wait()
      }
    }
    await firstAppended.wait()
    let second = Task { try await outbox.append("second", partition: "k") }
    // The second append is blocked on the line's lock: it has not returned.
    let waiting = try await database.countWaitingOnLocks()
    #expect(waiting >= 1)
    #expect(seen.all.isEmpty)
    await releaseFirst.open()
    try await first.value
    _ = try await second.value
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["first", "second"])
  }

  @Test("a retried delivery comes before the rest of its line; attempts are counted")
  func retries() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["flaky", "after"], partition: "k")
    let seen = Recorder<String>()
    let retry = try RetryPolicy(
      initialDelay: .milliseconds(1),
      maximumDelay: .milliseconds(2),
      maximumAttempts: 5
    )
    try outbox.start(retry: retry, pollInterval: .milliseconds(50)) { envelope in
      seen.record("\(envelope.message)#\(envelope.attempt)")
      if envelope.message == "flaky" && envelope.attempt < 3 { throw Refused() }
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["flaky#1", "flaky#2", "flaky#3", "after#1"])
  }

  @Test("a poison message stops its line (others flow); retrying the dead letter goes on")
  func poisonStopsLine() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["p1", "poison", "p2"], partition: "p")
    try await outbox.append(contentsOf: ["q1", "q2"], partition: "q")
    let seen = Recorder<String>()
    let cured = Mutex(false)
    try outbox.start(pollInterval: .milliseconds(50)) { envelope in
      if envelope.message == "poison" && !cured.withLock({ $0 }) {
        throw PermanentDeliveryFailure("cannot apply")
      }
      seen.record(envelope.message)
    }
    #expect(await seen.wait { $0.contains("q2") && $0.contains("p1") })
    await #expect(throws: OutboxError.self) { try await outbox.waitUntilDelivered() }
    let letters = try await outbox.deadLetters()
    #expect(letters.map(\.message) == ["poison"])
    #expect(letters.first?.reason == "cannot apply")
    #expect(try await outbox.pendingCount() == 1)
    #expect(!seen.all.contains("p2"))
    cured.withLock { $0 = true }
    try await outbox.retryDeadLetter(id: try #require(letters.first?.id))
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all.filter { $0.hasPrefix("p") } == ["p1", "poison", "p2"])
    #expect(try await outbox.deadLetterCount() == 0)
    await #expect(throws: OutboxError.noSuchDeadLetter(letters[0].id)) {
      try await outbox.dropDeadLetter(id: letters[0].id)
    }
  }

  @Test("with goOn, a poison message is set aside and its line goes on")
  func poisonGoesOn() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["p1", "poison", "p2"], partition: "p")
    let seen = Recorder<String>()
    try outbox.start(onDeadLetter: .continueLine, pollInterval: .milliseconds(50)) { envelope in
      if envelope.message == "poison" { throw PermanentDeliveryFailure("cannot apply") }
      seen.record(envelope.message)
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["p1", "p2"])
    #expect(try await outbox.deadLetterCount() == 1)
    try await outbox.dropDeadLetter(id: try await outbox.deadLetters()[0].id)
    #expect(try await outbox.deadLetterCount() == 0)
  }

  @Test("a paused key waits while the others flow; resumed, it delivers in order")
  func pausedKey() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.pause(partition: "held")
    #expect(try await outbox.pausedPartitions() == ["held"])
    try await outbox.append(contentsOf: ["h1", "h2"], partition: "held")
    try await outbox.append(contentsOf: ["f1", "f2"], partition: "free")
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(50)) { seen.record($0.message) }
    #expect(await seen.wait { $0.contains("f2") })
    #expect(await eventually { try await outbox.pendingCount() == 2 })
    #expect(!seen.all.contains("h1"))
    let blocked = try await outbox.counts()
    #expect(blocked.blockedKeys == 1 && blocked.worstBlockedPartition == "held")
    #expect(blocked.worstBlockedSince != nil)
    try await outbox.resume(partition: "held")
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all.filter { $0.hasPrefix("h") } == ["h1", "h2"])
  }

  @Test(
    "a key paused from another process ends this worker's retry wait by its next renewal; resumed, it goes on"
  )
  func pausedElsewhere() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let worker = try await database.outbox(of: String.self)
    let operator_ = try await database.outbox(of: String.self)
    try await worker.append(contentsOf: ["m1", "m2"], partition: "k")
    let failing = Recorder<Bool>()
    let seen = Recorder<String>()
    let retry = try RetryPolicy(
      initialDelay: .seconds(3_600),
      maximumDelay: .seconds(3_600),
      jitter: 0,
      maximumAttempts: 5
    )
    try worker.start(retry: retry, lease: .seconds(2), pollInterval: .milliseconds(50)) {
      envelope in
      seen.record("\(envelope.message)#\(envelope.attempt)")
      if failing.all.isEmpty { throw Refused() }
    }
    #expect(await seen.wait { $0 == ["m1#1"] })
    try await operator_.pause(partition: "k")
    // The worker reads the flag with a renewal (every half second here), ends the wait and
    // lets the key go.
    #expect(await eventually { worker.delivererStatistics.keysHeld == 0 })
    failing.record(false)
    try await operator_.resume(partition: "k")
    try await worker.waitUntilDelivered()
    await worker.stop()
    #expect(seen.all == ["m1#1", "m1#2", "m2#1"])
  }

  @Test("merging folds a new message into a pending one, never into one being delivered")
  func merging() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let coalescing = Coalescing<String>(
      entity: { String($0.prefix(1)) },
      merge: { pending, new in pending + "+" + new }
    )
    let outbox = try await database.outbox(of: String.self, coalescing: coalescing)
    let first = try await outbox.append("a1")
    let merged = try await outbox.append("a2")
    #expect(merged == first)
    #expect(try await outbox.pendingCount() == 1)
    let inDelivery = AsyncGate()
    let finish = AsyncGate()
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(50)) { envelope in
      seen.record(envelope.message)
      if seen.all.count == 1 {
        await inDelivery.open()
        await finish.wait()
      }
    }
    await inDelivery.wait()
    // The pending message is being delivered: this one is appended, not merged.
    let third = try await outbox.append("a3")
    #expect(third != first)
    await finish.open()
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["a1+a2", "a3"])
  }

  @Test(
    "stop releases the worker's lines at once: another worker takes them long before the lease ends"
  )
  func stopHandsOver() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let first = try await database.outbox(of: String.self)
    let second = try await database.outbox(of: String.self)
    try await first.append(contentsOf: (1...6).map { "m\($0)" }, partition: "k")
    let started = AsyncGate()
    let seen = Recorder<String>()
    try first.start(lease: .seconds(120), pollInterval: .milliseconds(50)) { envelope in
      seen.record("first:\(envelope.message)")
      await started.open()
      // Held until stop() cancels it: its message stays for the next holder.
      try await Task.sleep(for: .seconds(600))
    }
    await started.wait()
    let took = ContinuousClock.now
    try second.start(lease: .seconds(120), pollInterval: .milliseconds(100)) { envelope in
      seen.record("second:\(envelope.message)")
    }
    await first.stop()
    try await second.waitUntilDelivered()
    let waited = ContinuousClock.now - took
    await second.stop()
    #expect(seen.all == ["first:m1"] + (1...6).map { "second:m\($0)" })
    // Far below the 120-second lease: the stopped worker released the line.
    #expect(waited < .seconds(60))
  }

  @Test(
    "a worker that loses its connection loses its line; the next holder delivers the same message first, with a higher fence"
  )
  func lostConnection() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let role = try await database.workerRole("w_")
    let setup = try await database.outbox(of: String.self)
    try await setup.append(contentsOf: ["m1", "m2"], partition: "k")
    let cut = try await database.outbox(
      of: String.self,
      client: try database.client(username: role, applicationName: "cut-worker")
    )
    let inDelivery = AsyncGate()
    let seen = Recorder<String>()
    let cancelled = Recorder<Bool>()
    try cut.start(lease: .milliseconds(1200), pollInterval: .milliseconds(100)) { envelope in
      seen.record("cut:\(envelope.message):\(envelope.fence ?? 0)")
      await inDelivery.open()
      do {
        try await Task.sleep(for: .seconds(600))
      } catch {
        cancelled.record(true)
        throw error
      }
    }
    await inDelivery.wait()
    // The worker's connections are cut, and it cannot connect again.
    try await database.cutOff(role)
    // Its handler is cancelled before the lease ends in the database.
    #expect(await cancelled.wait { !$0.isEmpty })
    let other = try await database.outbox(of: String.self)
    try other.start(lease: .seconds(30), pollInterval: .milliseconds(100)) { envelope in
      seen.record("other:\(envelope.message):\(envelope.fence ?? 0)")
    }
    try await other.waitUntilDelivered()
    await other.stop()
    try await database.restore(role)
    await cut.stop()
    #expect(seen.all == ["cut:m1:1", "other:m1:2", "other:m2:2"])
    // Its renewals failed while it was cut off; it acknowledged nothing it did not hold.
    #expect(cut.delivererStatistics.leaseRenewalsFailed >= 1)
    #expect(cut.delivererStatistics.keysHeld == 0)
  }

  @Test(
    "a delivery that ends after another worker took its line is not acknowledged: counted as refused, delivered again"
  )
  func refusedAcknowledgement() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["m1", "m2"], partition: "k")
    let inDelivery = AsyncGate()
    let finish = AsyncGate()
    let seen = Recorder<String>()
    try outbox.start(lease: .seconds(8), pollInterval: .milliseconds(50)) { envelope in
      seen.record("\(envelope.message):\(envelope.fence ?? 0)")
      if envelope.fence == 1 {
        await inDelivery.open()
        // Not cancellable: the handler returns as if it had delivered.
        await finish.wait()
      }
    }
    await inDelivery.wait()
    #expect(outbox.delivererStatistics.keysHeld == 1)
    // Another worker's takeover, as the database would record it: a higher fence, another
    // owner, for a moment; then the line is free again.
    try await database.execute(
      """
      UPDATE orderly_outbox_lease SET owner = 'elsewhere', fence = fence + 1,
        expires_at = now() + interval '200 milliseconds'
      WHERE line = 'p:k'
      """
    )
    await finish.open()
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(outbox.delivererStatistics.acknowledgementsRefused == 1)
    #expect(seen.all == ["m1:1", "m1:3", "m2:3"])
  }

  @Test(
    "a worker with room takes a dead holder's lines when their leases end, not a poll interval later"
  )
  func takeoverAtLeaseEnd() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let role = try await database.workerRole("d_")
    let setup = try await database.outbox(of: String.self)
    let lines = (1...3).map { "k\($0)" }
    for line in lines { try await setup.append("\(line)-1", partition: line) }
    let dead = try await database.outbox(
      of: String.self,
      client: try database.client(username: role, applicationName: "dead-worker")
    )
    let holding = Recorder<String>()
    try dead.start(limit: 3, lease: .milliseconds(1600), pollInterval: .milliseconds(50)) {
      envelope in
      holding.record(envelope.message)
      try await Task.sleep(for: .seconds(600))
    }
    #expect(await holding.wait { $0.count == 3 })
    // The other worker starts while every line is held, and looks only every five minutes: it must
    // find the lines when the dead holder's leases end.
    let seen = Recorder<String>()
    let other = try await database.outbox(of: String.self)
    try other.start(limit: 3, lease: .seconds(30), pollInterval: .seconds(300)) { envelope in
      seen.record(envelope.message)
    }
    // Give its first look time to see the live leases (a look later would do as well).
    try await Task.sleep(for: .milliseconds(200))
    // The holder dies: it can neither renew nor connect again, and nothing notifies.
    let cut = ContinuousClock.now
    try await database.cutOff(role)
    #expect(await seen.wait { Set($0) == Set(lines.map { "\($0)-1" }) })
    let waited = ContinuousClock.now - cut
    await other.stop()
    try await database.restore(role)
    await dead.stop()
    // The leases were 1.6 seconds long; the next look by polling would have been five minutes in.
    #expect(waited < .seconds(30), "took \(waited)")
  }

  @Test("pause() releases this worker's lines and starts nothing until resume()")
  func pauseWorker() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    outbox.pause()
    #expect(outbox.isPaused)
    try await outbox.append(contentsOf: ["a", "b"], partition: "k")
    let seen = Recorder<String>()
    try outbox.start(pollInterval: .milliseconds(20)) { seen.record($0.message) }
    // Several poll intervals pass: nothing is delivered while paused.
    for _ in 0..<10 { try await Task.sleep(for: .milliseconds(20)) }
    #expect(seen.all.isEmpty)
    outbox.resume()
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    #expect(seen.all == ["a", "b"])
  }

  @Test("code written against DurableOutbox runs the same on SQLite and on PostgreSQL")
  func oneAPI() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    /// Appends, poisons one message, and settles the dead letter: through the protocol only.
    func exercise(_ outbox: some DurableOutbox<String>) async throws -> [String] {
      let events = outbox.events
      try await outbox.append(contentsOf: ["one", "two"], partition: "k", headers: [:])
      try await outbox.append("three", partition: "k", headers: ["trace": "t"])
      var seen: [String] = []
      for await event in events {
        seen.append(String(describing: event))
        if seen.count == 3 { break }
      }
      #expect(try await outbox.deadLetters().isEmpty)
      await outbox.stop()
      try await outbox.close()
      return seen
    }
    let sqlite = try Outbox<String>()
    let postgres = try await database.outbox(of: String.self)
    let fromSQLite = try await exercise(sqlite)
    let fromPostgres = try await exercise(postgres)
    #expect(fromSQLite == ["appended #1 [k]", "appended #2 [k]", "appended #3 [k]"])
    #expect(fromPostgres == fromSQLite)
  }

  @Test("bad options are refused with what to do; a second start is refused")
  func badOptions() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    #expect(throws: OutboxError.self) { try outbox.start(limit: 0) { _ in } }
    #expect(throws: OutboxError.self) { try outbox.start(lease: .milliseconds(10)) { _ in } }
    #expect(throws: OutboxError.self) { try outbox.start(pollInterval: .zero) { _ in } }
    try outbox.start { _ in }
    #expect(throws: OutboxError.alreadyStarted) { try outbox.start { _ in } }
    await outbox.stop()
    #expect(throws: OutboxError.self) {
      try PostgresClient.Configuration(orderlyURL: "mysql://localhost/x")
    }
  }
}

/// A gate a test opens once; every waiter, before or after, passes.
final class AsyncGate: Sendable {
  private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>(
    (false, [])
  )

  func open() async {
    let waiters = state.withLock { state in
      state.open = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  func wait() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let open = state.withLock { state in
        if !state.open { state.waiters.append(continuation) }
        return state.open
      }
      if open { continuation.resume() }
    }
  }
}

/// Whether `condition` holds, looking every `interval` (10 ms) for up to `limit` (a minute): for state another task or
/// process reaches (a count in the database), never for a duration.
func eventually(
  upTo limit: Duration = .seconds(60),
  every interval: Duration = .milliseconds(10),
  _ condition: () async throws -> Bool
) async -> Bool {
  let deadline = ContinuousClock.now + limit
  while ContinuousClock.now < deadline {
    if (try? await condition()) == true { return true }
    try? await Task.sleep(for: interval)
  }
  return false
}

extension TestDatabase {
  /// How many of this schema's sessions wait on a lock, once at least one does (up to a
  /// minute).
  func countWaitingOnLocks() async throws -> Int {
    let deadline = ContinuousClock.now + .seconds(60)
    while true {
      var waiting = 0
      let rows = try await admin.query(
        "SELECT count(*)::bigint FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
        logger: TestServer.logger
      )
      for try await count in rows.decode(Int64.self) { waiting = Int(count) }
      if waiting > 0 || ContinuousClock.now > deadline { return waiting }
      try await Task.sleep(for: .milliseconds(10))
    }
  }
}

import Synchronization
#endif
