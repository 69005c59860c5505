// Built with the Postgres trait only; see Package.swift.
#if Postgres
import BuiltProducts
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

/// A message of the fixture outbox.
private struct Change: Codable, Sendable {
  let note: String
  let text: String
}

/// Runs `orderly outbox ARGUMENTS --url URL` (the binary built with the Postgres trait).
private func operatorCommand(_ arguments: [String], url: String) async throws
  -> BuiltProducts.Result
{
  try await BuiltProducts.run("orderly", arguments: ["outbox"] + arguments + ["--url", url])
}

private func json(_ arguments: [String], url: String) async throws -> Any {
  let result = try await operatorCommand(arguments + ["--format", "json"], url: url)
  #expect(result.status == 0, "\(result.stderr)")
  return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8))
}

/// The test's schema as a URL `orderly outbox` takes.
private func commandURL(_ database: TestDatabase) -> String {
  database.url + "?search_path=" + database.schema
}

@Suite("orderly outbox on PostgreSQL", .serialized, .timeLimit(.minutes(5)))
struct OutboxCommandPostgresTests {
  @Test(
    "audit: two workers with the trail on leave a clean trail; a stale fence and a repeat written by hand are each caught"
  )
  func audit() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let url = commandURL(database)
    let workers = [
      try await database.outbox(of: Change.self), try await database.outbox(of: Change.self),
    ]
    let none = try await operatorCommand(["audit"], url: url)
    #expect(none.status == 1)
    #expect(none.stderr.contains("has no audit trail"))

    var options = FleetDeliveryOptions(limit: 4, lease: .seconds(30))
    options.audit = .on
    for worker in workers { try worker.start(options, deliver: .each { _ in }) }
    for key in 1...6 {
      try await workers[key % 2].append(
        contentsOf: (1...5).map { Change(note: "\(key)", text: "\($0)") },
        partition: "note-\(key)",
        headers: [:]
      )
    }
    for worker in workers { try await worker.waitUntilDelivered() }
    for worker in workers { await worker.stop() }

    let clean = try await operatorCommand(["audit"], url: url)
    #expect(clean.status == 0, "\(clean.stdout) \(clean.stderr)")
    #expect(clean.stdout.contains("30 attempt(s) over 6 key(s), 30 delivered"))
    #expect(clean.stdout.contains("no violation"))

    // A later holder of note-1 with a lower fence than the one before it, and note-2's last
    // message acknowledged a second time.
    try await database.execute(
      """
      INSERT INTO orderly_outbox_audit
        (line, partition, sequence, id, attempt, fence, worker, started_at, ended_at, outcome)
      SELECT line, partition, sequence + 100, gen_random_uuid(), 1, 0, 'stale-host/1/x',
        now(), now(), 'retried'
      FROM orderly_outbox_audit WHERE partition = 'note-1' ORDER BY number DESC LIMIT 1
      """
    )
    try await database.execute(
      """
      INSERT INTO orderly_outbox_audit
        (line, partition, sequence, id, attempt, fence, worker, started_at, ended_at, outcome)
      SELECT line, partition, sequence, id, attempt + 1, fence + 1, 'other-host/2/y',
        now(), now(), 'delivered'
      FROM orderly_outbox_audit WHERE partition = 'note-2' ORDER BY number DESC LIMIT 1
      """
    )
    let caught = try await operatorCommand(["audit"], url: url)
    #expect(caught.status == 1, "\(caught.stdout)")
    #expect(caught.stdout.contains("VIOLATION fence-not-raised"))
    #expect(caught.stdout.contains("VIOLATION acknowledged-twice"))
    #expect(caught.stdout.contains("stale-host/1/x"))
    let json = try await operatorCommand(
      ["audit", "--format", "json", "--key", "note-2"],
      url: url
    )
    #expect(json.status == 1)
    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    let report = object?["report"] as? [String: Any]
    let kinds = (report?["violations"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
    #expect(kinds == ["acknowledged-twice"])
    for worker in workers { await worker.close() }
  }

  @Test("keys, status and dead-letters show every worker's keys, the holder's lease and fence")
  func reads() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Change.self)
    let dead = try await outbox.append(Change(note: "1", text: "too long"), partition: "note-1")
    try await outbox.append(Change(note: "1", text: "b"), partition: "note-1")
    try await outbox.append(Change(note: "2", text: "milk"), partition: "note-2")
    try await outbox.append(Change(note: "3", text: "slow"), partition: "note-3")
    try await outbox.pause(partition: "note-2")
    // note-3's delivery runs until the test ends: its worker holds the key's lease meanwhile.
    let (held, holding) = AsyncStream.makeStream(of: Void.self)
    let (release, releasing) = AsyncStream.makeStream(of: Void.self)
    try outbox.start { envelope in
      switch envelope.message.note {
      case "1": throw PermanentDeliveryFailure("server said 422")
      case "3":
        holding.yield()
        for await _ in release { break }
      default: return
      }
    }
    for await _ in held { break }
    while try await outbox.counts().deadLetters == 0 {
      try await Task.sleep(for: .milliseconds(20))
    }
    let url = commandURL(database)

    let rows = try #require(try await json(["keys"], url: url) as? [[String: Any]])
    let names = rows.map { $0["key"] as? String }
    #expect(names == ["note-1", "note-2", "note-3"])
    let holder = try #require(rows[2]["holder"] as? [String: Any])
    #expect(holder["worker"] as? String == outbox.workerID)
    #expect((holder["fence"] as? Int ?? 0) >= 1)
    #expect(holder["leaseExpiresAt"] is String)

    let status = try #require(try await json(["status"], url: url) as? [String: Any])
    #expect(status["store"] as? String == "postgresql")
    #expect(status["pending"] as? Int == 3)
    #expect(status["deadLetters"] as? Int == 1)
    #expect(status["keysInFlight"] as? Int == 1)
    #expect(status["blockedKeys"] as? [String] == ["note-1", "note-2"])
    let workers = try #require(status["workers"] as? [[String: Any]])
    #expect(workers.map { $0["worker"] as? String } == [outbox.workerID])

    let text = try await operatorCommand(["keys"], url: url)
    #expect(text.status == 0, "\(text.stderr)")
    #expect(text.stdout.contains("HELD BY"))
    #expect(text.stdout.contains(outbox.workerID))

    let letters = try #require(try await json(["dead-letters"], url: url) as? [[String: Any]])
    #expect(letters.map { $0["id"] as? String } == [dead.uuidString])
    #expect(letters.first?["lastError"] as? String == "server said 422")
    let peek = try await operatorCommand(["peek", dead.uuidString], url: url)
    #expect(peek.stdout.contains("\"text\" : \"too long\""), "\(peek.stdout)")
    releasing.yield()
    await outbox.stop()
    await outbox.close()
  }

  @Test("retry, drop, pause and resume change the database; a running worker follows")
  func changes() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: Change.self)
    let first = try await outbox.append(Change(note: "1", text: "a"), partition: "note-1")
    try await outbox.append(Change(note: "1", text: "b"), partition: "note-1")
    let delivered = Delivered()
    let failing = Flag(true)
    try outbox.start { envelope in
      if envelope.message.text == "a", failing.value { throw PermanentDeliveryFailure("no") }
      delivered.add(envelope.message.text)
    }
    while try await outbox.counts().deadLetters == 0 {
      try await Task.sleep(for: .milliseconds(20))
    }
    failing.value = false
    let url = commandURL(database)
    let paused = try await operatorCommand(["pause", "note-1"], url: url)
    #expect(paused.status == 0, "\(paused.stderr)")
    let retried = try await operatorCommand(["retry", first.uuidString], url: url)
    #expect(retried.status == 0, "\(retried.stderr)")
    let keys = try #require(try await json(["keys"], url: url) as? [[String: Any]])
    #expect(keys.first?["next"] as? String == first.uuidString)
    #expect(keys.first?["stuck"] as? [String] == ["paused"])
    let resumed = try await operatorCommand(["resume", "note-1"], url: url)
    #expect(resumed.status == 0, "\(resumed.stderr)")
    try await outbox.waitUntilDelivered()
    #expect(delivered.values == ["a", "b"])
    await outbox.stop()
    await outbox.close()
  }

  @Test(
    "a server that does not answer, an unknown role, a schema without an outbox: refused, nothing made"
  )
  func refusals() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let nobody = try await operatorCommand(
      ["status"],
      url: "postgresql://orderly@127.0.0.1:1/orderly"
    )
    #expect(nobody.status == 1)
    #expect(nobody.stderr.contains("127.0.0.1"), "\(nobody.stderr)")
    #expect(nobody.stdout.isEmpty)

    var parts = try #require(URLComponents(string: database.url))
    parts.user = "no_such_role_\(database.schema)"
    let stranger = try await operatorCommand(["keys"], url: try #require(parts.string))
    #expect(stranger.status == 1)
    #expect(stranger.stderr.contains("no_such_role"), "\(stranger.stderr)")

    let empty = try await operatorCommand(["status"], url: commandURL(database))
    #expect(empty.status == 1)
    #expect(empty.stderr.contains("holds no Orderly outbox"), "\(empty.stderr)")
    let tables = try await database.fleetCount(
      """
      SELECT count(*)::bigint FROM information_schema.tables
      WHERE table_schema = '\(database.schema)'
      """
    )
    #expect(tables == 0)

    let bad = try await operatorCommand(["status"], url: database.url + "?sslmode=require")
    #expect(bad.status == 1)
    #expect(bad.stderr.contains("sslmode"), "\(bad.stderr)")

    _ = try await database.outbox(of: String.self)
    let unknown = UUID()
    let retry = try await operatorCommand(["retry", unknown.uuidString], url: commandURL(database))
    #expect(retry.status == 1)
    #expect(retry.stderr.contains("no message \(unknown.uuidString)"), "\(retry.stderr)")
  }

  @Test(
    "chaos: worker processes killed and cut off while messages are appended; the drain and the audit find nothing lost or reordered, and the schema is dropped"
  )
  func chaos() async throws {
    guard let url = TestServer.available() else { return }
    let result = try await BuiltProducts.run(
      "orderly",
      arguments: [
        "outbox", "chaos", "--url", url, "--workers", "2", "--keys", "20", "--messages", "300",
        "--duration", "6", "--lease", "1", "--seed", "7",
      ]
    )
    #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
    for line in [
      "chaos: 2 worker(s), 20 key(s), 300 message(s) over 6.00 s, lease 1.00 s, one at a time;",
      "appended                 300", "delivered                300", "lost                     0",
      "order violations         0", "overlapping holders      0", "verdict: no violation",
    ] {
      #expect(result.stdout.contains(line), "\(line) in \(result.stdout)")
    }
    let harm = result.stdout.split(separator: "\n").first.map(String.init) ?? ""
    #expect(harm.contains("kill(s)") && harm.contains("seed 7"), "\(harm)")
    // The run's own schema is gone.
    let client = PostgresClient(configuration: try .init(orderlyURL: url))
    let running = Task { await client.run() }
    defer { running.cancel() }
    var left: [String] = []
    for try await name in try await client.query(
      "SELECT schema_name::text FROM information_schema.schemata WHERE schema_name LIKE 'orderly_chaos_%'",
      logger: TestServer.logger
    ).decode(String.self) {
      left.append(name)
    }
    #expect(left.isEmpty, "\(left)")
  }

  @Test("chaos: bad options are refused with what to do (exit 64), and nothing is created")
  func chaosRefusals() async throws {
    let cases: [([String], String)] = [
      (["--url", "mysql://x/y"], "--url must be a PostgreSQL URL"),
      (["--url", "postgresql://u@h/d", "--workers", "0"], "--workers must be from 1 to 32"),
      (["--url", "postgresql://u@h/d", "--keys", "0"], "--keys must be 1 or more"),
      (["--url", "postgresql://u@h/d", "--messages", "0"], "--messages must be 1 or more"),
      (["--url", "postgresql://u@h/d", "--duration", "0"], "--duration must be from 1 to 3600"),
      (["--url", "postgresql://u@h/d", "--lease", "0.1"], "--lease must be from 0.4 to 600"),
      (["--url", "postgresql://u@h/d", "--batch", "0"], "--batch must be from 1 to 1000"),
    ]
    for (arguments, expected) in cases {
      let result = try await BuiltProducts.run(
        "orderly",
        arguments: ["outbox", "chaos"] + arguments
      )
      #expect(result.status == 64, "\(arguments): \(result.stderr)")
      #expect(result.stderr.contains(expected), "\(arguments): \(result.stderr)")
    }
    // A server that cannot be reached: one clear line, exit 1.
    let away = try await BuiltProducts.run(
      "orderly",
      arguments: ["outbox", "chaos", "--url", "postgresql://orderly@127.0.0.1:1/orderly"]
    )
    #expect(away.status == 1, "\(away.stderr)")
    #expect(away.stderr.contains("orderly: cannot open the outbox at"), "\(away.stderr)")
    #expect(away.stderr.contains("check that it runs"), "\(away.stderr)")
  }
}

/// What a handler delivered, in order.
private final class Delivered: Sendable {
  private let storage = Mutex<[String]>([])
  func add(_ value: String) { storage.withLock { $0.append(value) } }
  var values: [String] { storage.withLock { $0 } }
}

/// A switch a handler reads.
private final class Flag: Sendable {
  private let storage: Mutex<Bool>
  init(_ value: Bool) { storage = Mutex(value) }
  var value: Bool {
    get { storage.withLock { $0 } }
    set { storage.withLock { $0 = newValue } }
  }
}
#endif
