import BuiltProducts
import Foundation
import GRDB
import OrderlyCore
import OrderlyOutbox
import OrderlyTestSupport
import Testing

@Suite("Outbox: order, retries, dead letters, pause, merge")
struct OutboxTests {
  @Test("messages are delivered in append order, one at a time, and removed")
  func deliversInOrder() async throws {
    let outbox = try Outbox<Change>()
    let changes = (1...20).map { Change("n\($0 % 3)", "edit \($0)") }
    for change in changes { try await outbox.append(change) }
    #expect(outbox.pendingCount == 20)
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied == changes)
    #expect(server.mostRunning == 1)
    #expect(outbox.pendingCount == 0)
  }

  @Test("appends from many tasks are delivered in the order they were written")
  func manyAppenders() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    var events = outbox.events.makeAsyncIterator()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for task in 0..<8 {
        group.addTask {
          for index in 0..<50 { try await outbox.append(Change("t\(task)", "\(index)")) }
        }
      }
      try await group.waitForAll()
    }
    try await outbox.waitUntilDelivered()
    var appended: [Int64] = []
    while appended.count < 400, let event = await events.next() {
      if case .appended(_, let sequence, _) = event { appended.append(sequence) }
    }
    #expect(server.applied.count == 400)
    #expect(appended == appended.sorted())
    for task in 0..<8 {
      let mine = server.applied.filter { $0.note == "t\(task)" }.map(\.text)
      #expect(mine == (0..<50).map(String.init))
    }
  }

  @Test("a batch is appended in one transaction, in order")
  func batch() async throws {
    let outbox = try Outbox<Change>()
    let ids = try await outbox.append(contentsOf: (1...5).map { Change("n", "\($0)") })
    #expect(ids.count == 5 && Set(ids).count == 5)
    let server = FakeServer()
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    var delivered: [UUID] = []
    while delivered.count < 5, let event = await events.next(where: \.isDelivered) {
      delivered.append(event.id)
    }
    #expect(delivered == ids)
  }

  @Test("each line of a line's events comes in order: delivering, then delivered")
  func eventOrder() async throws {
    let outbox = try Outbox<Change>()
    var events = outbox.events.makeAsyncIterator()
    let id = try await outbox.append(Change("n", "a"))
    try outbox.start(deliver: FakeServer().deliver)
    try await outbox.waitUntilDelivered()
    var seen: [String] = []
    while seen.count < 3, let event = await events.next() {
      #expect(event.id == id)
      seen.append("\(event)")
    }
    #expect(seen == ["appended #1", "delivering #1", "delivered #1"])
  }

  // MARK: - Retries

  @Test("server down, then up: retries wait 1, 2, 4 s on the injected clock, then drain in order")
  func serverDownThenUp() async throws {
    let clock = ManualClock()
    let outbox = try Outbox<Change>(clock: clock)
    let server = FakeServer()
    server.setDown(true)
    for index in 1...3 { try await outbox.append(Change("n", "\(index)")) }
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(retry: exactRetry(), deliver: server.deliver)
    for (expected, deliveries) in [(Duration.seconds(1), 1), (.seconds(2), 2), (.seconds(4), 3)] {
      guard
        case .retrying(_, let sequence, _, let delay, let reason) =
          await events.next(where: \.isRetrying)
      else {
        Issue.record("no retry event")
        return
      }
      #expect(sequence == 1 && delay == expected && reason == "the server is down")
      try await clock.waitForSleepers(1)
      // Not a moment early: the wait is measured on the clock.
      clock.advance(by: expected - .milliseconds(1))
      #expect(server.deliveries == deliveries)
      if expected == .seconds(4) { server.setDown(false) }
      clock.advance(by: .milliseconds(1))
    }
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "2", "3"])
    #expect(server.attempts == [1, 2, 3, 4, 1, 1])
  }

  @Test("jitter moves a wait by at most its share, and the backoff stops growing at the maximum")
  func backoffShape() throws {
    let policy = try RetryPolicy(
      initialDelay: .seconds(1),
      maximumDelay: .seconds(10),
      jitter: 0.2
    )
    #expect(
      (1...6).map { policy.baseDelay(afterAttempt: $0) }
        == [1, 2, 4, 8, 10, 10].map { Duration.seconds($0) }
    )
    var generator = SeededGenerator(seed: 11)
    for attempt in 1...6 {
      let base = policy.baseDelay(afterAttempt: attempt)
      for _ in 0..<50 {
        let seeded = policy.delay(afterAttempt: attempt, using: &generator)
        let system = policy.delay(afterAttempt: attempt)
        #expect(seeded >= base * 0.8 && seeded <= base * 1.2)
        #expect(system >= base * 0.8 && system <= base * 1.2)
      }
    }
  }

  @Test("resume retries at once, without waiting out the backoff")
  func resumeRetriesAtOnce() async throws {
    let clock = ManualClock()
    let outbox = try Outbox<Change>(clock: clock)
    let server = FakeServer()
    server.setDown(true)
    try await outbox.append(Change("n", "1"))
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(retry: exactRetry(), deliver: server.deliver)
    _ = await events.next(where: \.isRetrying)
    outbox.pause()
    server.setDown(false)
    #expect(outbox.pendingCount == 1)
    outbox.resume()
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1"])
    #expect(clock.now == ManualClock.Instant(offset: .zero))
  }

  @Test("a message that fails maximumAttempts times becomes a dead letter")
  func maximumAttempts() async throws {
    let clock = ManualClock()
    let outbox = try Outbox<Change>(clock: clock)
    let server = FakeServer()
    server.setDown(true)
    try await outbox.append(Change("n", "1"))
    var events = outbox.events.makeAsyncIterator()
    let policy = try exactRetry(maximumAttempts: 3)
    try outbox.start(retry: policy, deliver: server.deliver)
    for _ in 0..<2 {
      _ = await events.next(where: \.isRetrying)
      try await clock.waitForSleepers(1)
      clock.advance(by: .seconds(10))
    }
    _ = await events.next(where: \.isDeadLettered)
    #expect(server.deliveries == 3)
    #expect(outbox.deadLetterCount == 1 && outbox.pendingCount == 0)
    let letters = try await outbox.deadLetters()
    #expect(letters.map(\.attempts) == [3])
    #expect(letters.first?.reason == "the server is down")
  }

  // MARK: - Dead letters

  @Test("a poison message stops its line by default; dropping it lets the rest through")
  func poisonStopsLine() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    server.refuse("2")
    let ids = try await outbox.append(contentsOf: (1...4).map { Change("n", "\($0)") })
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(deliver: server.deliver)
    guard
      case .deadLettered(let id, _, let reason, let stopped) =
        await events.next(where: \.isDeadLettered)
    else { return }
    #expect(id == ids[1] && stopped && reason == "the server refused n:2")
    await #expect(throws: OutboxError.lineStopped(partition: nil, deadLetter: ids[1])) {
      try await outbox.waitUntilDelivered()
    }
    #expect(server.applied.map(\.text) == ["1"])
    #expect(outbox.pendingCount == 2 && outbox.deadLetterCount == 1)
    let letters = try await outbox.deadLetters()
    #expect(letters.map(\.id) == [ids[1]] && letters.first?.message == Change("n", "2"))
    try await outbox.dropDeadLetter(id: ids[1])
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "3", "4"])
    #expect(outbox.deadLetterCount == 0)
  }

  @Test("a retried dead letter goes back to its place, before the messages behind it")
  func retryDeadLetter() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    server.refuse("2")
    let ids = try await outbox.append(contentsOf: (1...4).map { Change("n", "\($0)") })
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(deliver: server.deliver)
    _ = await events.next(where: \.isDeadLettered)
    server.accept("2")
    try await outbox.retryDeadLetter(id: ids[1])
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "2", "3", "4"])
    await #expect(throws: OutboxError.noSuchDeadLetter(ids[1])) {
      try await outbox.dropDeadLetter(id: ids[1])
    }
  }

  @Test("with continueLine, a poison message is set aside and the line goes on")
  func poisonContinues() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    server.refuse("2")
    try await outbox.append(contentsOf: (1...4).map { Change("n", "\($0)") })
    try outbox.start(onDeadLetter: .continueLine, deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "3", "4"])
    #expect(outbox.deadLetterCount == 1 && outbox.pendingCount == 0)
  }

  @Test("an error the classifier calls permanent is not retried")
  func classifier() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    server.setDown(true)
    try await outbox.append(Change("n", "1"))
    let policy = try exactRetry(isRetryable: { !($0 is ServerDown) })
    try outbox.start(retry: policy, onDeadLetter: .continueLine, deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.deliveries == 1 && outbox.deadLetterCount == 1)
  }

  // MARK: - Partitions

  @Test("10,000 messages over 100 partition keys: order kept per key, keys side by side")
  func partitions() async throws {
    let outbox = try Outbox<Change>(partition: { $0.note })
    var changes: [Change] = []
    var generator = SeededGenerator(seed: 7)
    for index in 0..<10_000 {
      changes.append(Change("k\(Int.random(in: 0..<100, using: &generator))", "\(index)"))
    }
    for start in stride(from: 0, to: changes.count, by: 1_000) {
      try await outbox.append(contentsOf: Array(changes[start..<start + 1_000]))
    }
    let server = FakeServer()
    try outbox.start(limit: 4, deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    let applied = server.applied
    #expect(applied.count == 10_000)
    let expected = Dictionary(grouping: changes, by: \.note)
    let got = Dictionary(grouping: applied, by: \.note)
    #expect(got == expected)
    #expect(server.mostRunning <= 4)
    #expect(server.mostRunning > 1)
  }

  @Test("an explicit partition overrides the closure, and nil keys share the default line")
  func explicitPartition() async throws {
    let outbox = try Outbox<Change>()
    var events = outbox.events.makeAsyncIterator()
    try await outbox.append(Change("a", "1"), partition: "left")
    try await outbox.append(Change("b", "2"))
    guard case .appended(_, _, let first) = await events.next(),
      case .appended(_, _, let second) = await events.next()
    else { return }
    #expect(first == "left" && second == nil)
  }

  // MARK: - Pause and merge

  @Test("paused, nothing is delivered; appends go on; resume delivers them in order")
  func pauseResume() async throws {
    let outbox = try Outbox<Change>()
    let server = FakeServer()
    outbox.pause()
    #expect(outbox.isPaused)
    try outbox.start(deliver: server.deliver)
    for index in 1...3 { try await outbox.append(Change("n", "\(index)")) }
    // Every append's turn has been taken and parked: a probe message proves the line is idle.
    #expect(server.deliveries == 0)
    #expect(outbox.pendingCount == 3)
    outbox.resume()
    try await outbox.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "2", "3"])
  }

  @Test("two edits of one note become one message; a delete is never merged")
  func coalescing() async throws {
    let outbox = try Outbox<Change>(
      coalescing: Coalescing(
        entity: { $0.note },
        merge: { pending, new in
          new.text == "delete" ? nil : Change(pending.note, pending.text + "+" + new.text)
        }
      )
    )
    var events = outbox.events.makeAsyncIterator()
    let first = try await outbox.append(Change("a", "e1"))
    try await outbox.append(Change("b", "e1"))
    let merged = try await outbox.append(Change("a", "e2"))
    try await outbox.append(Change("a", "delete"))
    #expect(merged == first)
    #expect(outbox.pendingCount == 3)
    var kinds: [String] = []
    for _ in 0..<4 { if let event = await events.next() { kinds.append("\(event)") } }
    #expect(kinds == ["appended #1", "appended #2", "merged into #1", "appended #3"])
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied == [Change("a", "e1+e2"), Change("b", "e1"), Change("a", "delete")])
  }

  @Test("a message being delivered is never merged into: the new one is appended")
  func noMergeInFlight() async throws {
    let outbox = try Outbox<Change>(
      coalescing: Coalescing(entity: { $0.note }, merge: { pending, new in new })
    )
    let gate = Gate()
    let seen = OrderedRecorder<Change>()
    try await outbox.append(Change("a", "1"))
    try outbox.start { envelope in
      seen.record(envelope.message)
      if envelope.message.text == "1" { try await gate.wait() }
    }
    try await seen.waitForCount(1)
    try await outbox.append(Change("a", "2"))
    #expect(outbox.pendingCount == 2)
    gate.open()
    try await outbox.waitUntilDelivered()
    #expect(seen.values == [Change("a", "1"), Change("a", "2")])
  }

  // MARK: - In the app's own database

  @Test("appended in the app's transaction: stored with the change, or not at all")
  func sameTransaction() async throws {
    let database = try DatabaseQueue()
    try await database.write { db in
      try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT)")
    }
    let outbox = try Outbox<Change>(database: database)
    try await database.write { db in
      try db.execute(sql: "INSERT INTO note (id, text) VALUES (1, 'hello')")
      try outbox.append(Change("1", "hello"), in: db)
    }
    struct Undo: Error {}
    do {
      try await database.write { db in
        try db.execute(sql: "UPDATE note SET text = 'lost' WHERE id = 1")
        try outbox.append(Change("1", "lost"), in: db)
        throw Undo()
      }
    } catch is Undo {}
    #expect(outbox.pendingCount == 1)
    let server = FakeServer()
    try outbox.start(deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    #expect(server.applied == [Change("1", "hello")])
    let reopened = try Outbox<Change>(database: database)
    #expect(reopened.pendingCount == 0)
  }

  // MARK: - Misuse

  @Test("starting twice, a limit of 0 and a bad policy are refused with a clear error")
  func misuse() async throws {
    let outbox = try Outbox<Change>()
    #expect(throws: OutboxError.invalidOption("limit must be 1 or more (got 0)")) {
      try outbox.start(limit: 0) { _ in }
    }
    #expect(
      throws: OutboxError.invalidOption("jitter must be between 0 and 1 (got 2.0)")
    ) {
      try RetryPolicy(jitter: 2)
    }
    // An audit retention: any length longer than zero, fractions of a second included.
    var noRetention = OutboxDeliveryOptions()
    noRetention.audit = OutboxAuditOptions(isOn: true, retention: .zero)
    #expect(
      throws: OutboxError.invalidOption(
        "audit retention must be longer than zero (got 0.0 seconds); the default is 7 days"
      )
    ) { try outbox.start(noRetention, deliver: .each { _ in }) }
    var shortRetention = OutboxDeliveryOptions()
    shortRetention.audit = OutboxAuditOptions(isOn: true, retention: .milliseconds(500))
    try outbox.start(shortRetention, deliver: .each { _ in })
    await outbox.stop()
    try outbox.start { _ in }
    #expect(throws: OutboxError.alreadyStarted) { try outbox.start { _ in } }
    #expect(OutboxError.alreadyStarted.description.contains("call stop()"))
  }

  @Test("after close, every call says the outbox is closed")
  func closed() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<Change>(path: path)
    try await outbox.close()
    await #expect(throws: OutboxError.closed(path: path)) {
      try await outbox.append(Change("n", "1"))
    }
    #expect(throws: OutboxError.closed(path: path)) { try outbox.start { _ in } }
  }

  @Test("waitUntilDelivered ends with OutboxError.cancelled when its task is cancelled")
  func waitCancelled() async throws {
    let outbox = try Outbox<Change>()
    try await outbox.append(Change("n", "1"))
    let waiter = Task { try await outbox.waitUntilDelivered() }
    waiter.cancel()
    await #expect(throws: OutboxError.cancelled) { try await waiter.value }
    #expect(outbox.pendingCount == 1)
  }

  @Test("a message that cannot be encoded is refused and nothing is stored")
  func cannotEncode() async throws {
    struct Bad: Codable, Sendable {
      let value: Double
    }
    let outbox = try Outbox<Bad>()
    await #expect(throws: OutboxError.self) {
      try await outbox.append(Bad(value: .nan))
    }
    #expect(outbox.pendingCount == 0)
  }
}
