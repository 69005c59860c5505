import BuiltProducts
import Foundation
import GRDB
import OrderlyCore
import OrderlyOutbox
import OrderlyTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The probe's message: its index.
struct Step: Codable, Sendable, Equatable {
  let index: Int
}

/// Every message in an outbox file, in line order, read without delivering.
func storedIndexes(_ path: String) throws -> [Int] {
  let database = try DatabaseQueue(path: path)
  defer { try? database.close() }
  return try database.read { db in
    try Data.fetchAll(db, sql: "SELECT payload FROM outbox_message ORDER BY sequence").map {
      try JSONDecoder().decode(Step.self, from: $0).index
    }
  }
}

@Suite("Outbox on disk: restarts, SIGKILL, refused files")
struct OutboxFileTests {
  @Test("order is kept across restarts: the rest is delivered after reopening, in order")
  func orderAcrossRestarts() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<Change>(path: path)
    try await first.append(contentsOf: (1...10).map { Change("n", "\($0)") })
    let server = FakeServer()
    try first.start { envelope in
      // The fifth message never gets through before the app quits.
      if envelope.message.text == "5" { try await Task.sleep(for: .seconds(3_600)) }
      try await server.deliver(envelope)
    }
    var events = first.events.makeAsyncIterator()
    _ = await events.next { if case .delivering(_, 5, _) = $0 { true } else { false } }
    try await first.close()
    #expect(server.applied.map(\.text) == ["1", "2", "3", "4"])

    let second = try Outbox<Change>(path: path)
    #expect(second.pendingCount == 6)
    try second.start(deliver: server.deliver)
    try await second.waitUntilDelivered()
    #expect(server.applied.map(\.text) == (1...10).map(String.init))
    try await second.close()
  }

  @Test("SIGKILL right after append returned loses nothing: 200 rounds")
  func killAfterAppend() async throws {
    try await BuiltProducts.offThePool(Self.killAfterAppendRounds)
  }

  @Sendable static func killAfterAppendRounds() throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    var acknowledged: [Int] = []
    var generator = SeededGenerator(seed: 200)
    for _ in 0..<200 {
      let probe = try BuiltProducts.Running(
        "outbox-probe",
        arguments: ["append", path, "\(acknowledged.count)"]
      )
      let wanted = Int.random(in: 1...3, using: &generator)
      let said = probe.readLines(wanted)
      probe.send(SIGKILL)
      let ended = probe.finish()
      #expect(ended.reason == .uncaughtSignal, "\(ended.stderr)")
      // Only the first lines are surely whole; a later one may have been cut by the kill.
      let indexes = said.prefix(wanted).compactMap { Int($0.dropFirst("appended ".count)) }
      #expect(indexes.count == wanted)
      acknowledged += indexes
      // The next round starts after everything stored, acknowledged or not.
      let stored = try storedIndexes(path)
      #expect(Array(stored.prefix(acknowledged.count)) == acknowledged)
      acknowledged = stored
    }
    let stored = try storedIndexes(path)
    #expect(stored == Array(0..<stored.count))
    #expect(stored.count >= 200)
  }

  @Test("SIGKILL during delivery: the message is delivered again first, and applied once")
  func killDuringDelivery() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let serverFile = folder.path("server.log")
    let outbox = try Outbox<Step>(path: path)
    try await outbox.append(contentsOf: (0..<5).map(Step.init(index:)))
    try await outbox.close()

    let (said, ended) = try await BuiltProducts.offThePool {
      let probe = try BuiltProducts.Running(
        "outbox-probe",
        arguments: ["deliver", path, serverFile]
      )
      let said = probe.readLines(1)
      probe.send(SIGKILL)
      return (said, probe.finish().reason)
    }
    #expect(said == ["applied 0"])
    #expect(ended == .uncaughtSignal)

    // The server saw message 0, but the app died before it heard back: it is still pending.
    let logged = try String(contentsOfFile: serverFile, encoding: .utf8)
      .split(separator: "\n").map { $0.split(separator: " ") }
    #expect(logged.count == 1)
    let reopened = try Outbox<Step>(path: path)
    #expect(reopened.pendingCount == 5)
    // The server remembers the identifiers it applied, as an idempotency key store does.
    // One line delivers one message at a time, so reading then recording the keys is safe.
    let appliedIDs = OrderedRecorder<String>()
    for line in logged { appliedIDs.record(String(line[0])) }
    let applied = OrderedRecorder<Int>()
    let redelivered = OrderedRecorder<Int>()
    try reopened.start { envelope in
      let isNew = !appliedIDs.values.contains(envelope.id.uuidString)
      appliedIDs.record(envelope.id.uuidString)
      (isNew ? applied : redelivered).record(envelope.message.index)
    }
    try await reopened.waitUntilDelivered()
    #expect(redelivered.values == [0])
    #expect([0] + applied.values == [0, 1, 2, 3, 4])
    try await reopened.close()
  }

  @Test("a file that is not an outbox is refused, named, and left as it was")
  func refusedFiles() async throws {
    let folder = try ScratchFolder()
    let text = folder.path("notes.txt")
    try Data("hello\n".utf8).write(to: URL(fileURLWithPath: text))
    let other = folder.path("other.sqlite")
    try await DatabaseQueue(path: other).write { db in
      try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY)")
    }
    let before = try folder.snapshot()
    #expect(throws: OutboxError.notAnOutbox(path: text, reason: "it is not an SQLite file")) {
      try Outbox<Change>(path: text)
    }
    #expect(
      throws: OutboxError.notAnOutbox(
        path: other,
        reason: "it is another program's SQLite database (tables: users)"
      )
    ) {
      try Outbox<Change>(path: other)
    }
    #expect(throws: OutboxError.self) { try Outbox<Change>(path: folder.path("no/such.sqlite")) }
    #expect(try folder.snapshot() == before)
    do {
      _ = try Outbox<Change>(path: other)
    } catch {
      #expect(error.description.contains("is not an Orderly outbox"))
      #expect(error.description.contains("left untouched"))
    }
  }

  @Test("a message that no longer decodes becomes a dead letter with the decoding error")
  func undecodable() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let old = try Outbox<Step>(path: path)
    try await old.append(Step(index: 1))
    try await old.close()

    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(Change("n", "after"))
    let server = FakeServer()
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(onDeadLetter: .continueLine, deliver: server.deliver)
    try await outbox.waitUntilDelivered()
    guard case .deadLettered(_, 1, let reason, false) = await events.next(where: \.isDeadLettered)
    else {
      Issue.record("no dead letter event")
      return
    }
    #expect(reason.contains("no longer decodes as Change"))
    #expect(server.applied == [Change("n", "after")])
    let letters = try await outbox.deadLetters()
    #expect(letters.count == 1 && letters[0].message == nil && !letters[0].payload.isEmpty)
    try await outbox.close()
  }

  @Test("the default policy stops the line at an undecodable message, and says so")
  func undecodableStopsLine() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let old = try Outbox<Step>(path: path)
    try await old.append(Step(index: 1))
    try await old.close()
    let outbox = try Outbox<Change>(path: path)
    try await outbox.append(Change("n", "after"))
    var events = outbox.events.makeAsyncIterator()
    try outbox.start(deliver: FakeServer().deliver)
    _ = await events.next(where: \.isDeadLettered)
    await #expect(throws: OutboxError.self) { try await outbox.waitUntilDelivered() }
    let letter = try #require(try await outbox.deadLetters().first)
    try await outbox.dropDeadLetter(id: letter.id)
    try await outbox.waitUntilDelivered()
    try await outbox.close()
  }

  @Test("counts and stopped lines are read back from the file on the next start")
  func countsSurvive() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<Change>(path: path)
    try await first.append(contentsOf: (1...3).map { Change("n", "\($0)") })
    let server = FakeServer()
    server.refuse("1")
    var events = first.events.makeAsyncIterator()
    try first.start(deliver: server.deliver)
    _ = await events.next(where: \.isDeadLettered)
    try await first.close()

    let second = try Outbox<Change>(path: path)
    #expect(second.pendingCount == 2 && second.deadLetterCount == 1)
    server.accept("1")
    try second.start(deliver: server.deliver)
    // The line still waits at its dead letter after the restart.
    await #expect(throws: OutboxError.self) { try await second.waitUntilDelivered() }
    #expect(server.applied.isEmpty)
    let letter = try #require(try await second.deadLetters().first)
    try await second.retryDeadLetter(id: letter.id)
    try await second.waitUntilDelivered()
    #expect(server.applied.map(\.text) == ["1", "2", "3"])
    try await second.close()
  }
}
