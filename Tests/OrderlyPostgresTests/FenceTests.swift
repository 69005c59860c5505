// Built with the Postgres trait only; see Package.swift.
#if Postgres
import BuiltProducts
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `PostgresFences`: the handler's own writes, refused under a stale fence.
///
/// The stale worker test runs in `.ci/run` (the first PostgreSQL group): the article
/// "Exactly-once effects with fences" tells its story.
@Suite("Fences for the handler's own writes (PostgreSQL)", .timeLimit(.minutes(3)))
struct FenceTests {
  @Test(
    "a write under the key's newest fence or a higher one commits; under a lower one it is refused and rolled back"
  )
  func conditionalWrite() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let fences = try PostgresFences()
    try await fences.createTable(client, logger: TestServer.logger)
    try await fences.createTable(client, logger: TestServer.logger)
    try await database.execute("CREATE TABLE effect (key text NOT NULL, fence bigint NOT NULL)")

    func write(_ key: String, fence: Int64) async throws {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await fences.admit(key: key, fence: fence, on: connection, logger: TestServer.logger)
        try await connection.query(
          "INSERT INTO effect (key, fence) VALUES (\(key), \(fence))",
          logger: TestServer.logger
        )
      }
    }
    try await write("a", fence: 3)
    try await write("a", fence: 3)
    try await write("a", fence: 5)
    try await write("b", fence: 1)
    var refused: StaleFence?
    do {
      try await write("a", fence: 4)
    } catch {
      refused = StaleFence.in(error)
    }
    #expect(refused == StaleFence(key: "a", fence: 4, lastFence: 5))
    let rows = try await database.rows("SELECT key || ':' || fence FROM effect ORDER BY key, fence")
    #expect(rows == ["a:3", "a:3", "a:5", "b:1"])
    let stored = try await database.rows(
      "SELECT key || ':' || last_fence FROM orderly_outbox_fence ORDER BY key"
    )
    #expect(stored == ["a:5", "b:1"])
    let refusal = StaleFence(key: "a", fence: 4, lastFence: 5).description
    #expect(refusal.contains("fence 4") && refusal.contains("fence 5"))

    // An envelope without a fence (an outbox on SQLite) passes without a write.
    let unfenced = Envelope(
      id: UUID(),
      sequence: 1,
      partition: "c",
      message: "x",
      attempt: 1,
      appendedAt: Date()
    )
    try await client.withTransaction(logger: TestServer.logger) { connection in
      try await fences.admit(unfenced, on: connection, logger: TestServer.logger)
    }
    let keys = try await database.rows("SELECT key FROM orderly_outbox_fence ORDER BY key")
    #expect(keys == ["a", "b"])
  }

  @Test("the older holder's write waits for the newer holder's open transaction, then is refused")
  func waitsThenRefused() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let fences = try PostgresFences()
    try await fences.createTable(client, logger: TestServer.logger)
    try await client.withTransaction(logger: TestServer.logger) { connection in
      try await fences.admit(key: "k", fence: 1, on: connection, logger: TestServer.logger)
    }

    // The newer holder (fence 2) admits and keeps its transaction open until `release`.
    let (admitted, admittedSignal) = AsyncStream.makeStream(of: Void.self)
    let (release, releaseSignal) = AsyncStream.makeStream(of: Void.self)
    let newer = Task {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await fences.admit(key: "k", fence: 2, on: connection, logger: TestServer.logger)
        admittedSignal.yield()
        for await _ in release { break }
      }
    }
    for await _ in admitted { break }
    let older = Task {
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await fences.admit(key: "k", fence: 1, on: connection, logger: TestServer.logger)
      }
    }
    releaseSignal.yield()
    try await newer.value
    var refused: StaleFence?
    do {
      try await older.value
    } catch {
      refused = StaleFence.in(error)
    }
    #expect(refused == StaleFence(key: "k", fence: 1, lastFence: 2))
  }

  @Test("a table name that is not a plain identifier is refused, saying what a name may hold")
  func badTableName() {
    for name in ["", "Fence", "1fence", "fence; DROP TABLE x", String(repeating: "f", count: 64)] {
      #expect(throws: OutboxError.self) { try PostgresFences(table: name) }
    }
    let message = refusal("a-b")
    #expect(message.contains("'a-b'") && message.contains("lower-case letters"))
  }

  private func refusal(_ name: String) -> String {
    do {
      _ = try PostgresFences(table: name)
      return ""
    } catch {
      return error.description
    }
  }

  @Test(
    "a worker stopped (SIGSTOP) past its lease wakes inside its handler: its write is refused by the fence, the next holder's stands, and the message is delivered once"
  )
  func staleWorker() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let client = try database.client()
    let fences = try PostgresFences()
    try await fences.createTable(client, logger: TestServer.logger)
    try await database.execute(
      "CREATE TABLE fence_ledger (key text NOT NULL, n integer NOT NULL, fence bigint NOT NULL, worker text NOT NULL)"
    )
    let outbox = try await database.outbox(of: FleetMessage.self, client: client) { $0.key }
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
      "orderly-fence-\(UUID().uuidString)"
    )
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let goFile = folder.appendingPathComponent("go").path

    // The stale worker: a lease of 1 s, holding its delivery until the go file exists.
    let stale = try BuiltProducts.Running(
      "outbox-postgres-probe",
      arguments: ["fenced", database.url, database.schema, "1000", goFile]
    )
    let ready = await stale.readLines(1)
    #expect(ready.first?.hasPrefix("ready ") == true, "\(ready)")
    try await outbox.append(FleetMessage(key: "k", n: 1))
    let holding = await stale.readLines(1)
    let holdingFence = holding.first.flatMap { $0.split(separator: " ").last }.flatMap {
      Int64($0)
    }
    #expect(holding.first?.hasPrefix("holding k 1 ") == true, "\(holding)")

    // Paused: it renews nothing; its lease runs out and this worker takes the key.
    stale.send(SIGSTOP)
    let holder = Recorder<Int64>()
    try outbox.start(lease: .seconds(5), pollInterval: .milliseconds(50)) { envelope in
      let fence = envelope.fence ?? 0
      try await client.withTransaction(logger: TestServer.logger) { connection in
        try await fences.admit(envelope, on: connection, logger: TestServer.logger)
        try await connection.query(
          """
          INSERT INTO fence_ledger (key, n, fence, worker)
          VALUES (\(envelope.message.key), \(envelope.message.n), \(fence), 'holder')
          """,
          logger: TestServer.logger
        )
      }
      holder.record(fence)
    }
    try await outbox.waitUntilDelivered()
    let holderFences = holder.all

    // Woken after the key moved on, it writes: the fence refuses it.
    #expect(FileManager.default.createFile(atPath: goFile, contents: nil))
    stale.send(SIGCONT)
    let outcome = await stale.readLines(1)
    await outbox.stop()
    stale.send(SIGTERM)
    _ = await stale.finish()

    #expect(holderFences.count == 1, "\(holderFences)")
    let holderFence = holderFences.first ?? -1
    let staleFence = holdingFence ?? -1
    #expect(holderFence > staleFence)
    #expect(outcome == ["refused k 1 \(staleFence) \(holderFence)"])
    let ledger = try await database.rows(
      "SELECT worker || ' ' || key || ' ' || n || ' ' || fence FROM fence_ledger"
    )
    #expect(ledger == ["holder k 1 \(holderFence)"])
    let pending = try await outbox.pendingCount()
    #expect(pending == 0)
  }
}

extension TestDatabase {
  /// The first column of each row `sql` returns, as text.
  func rows(_ sql: String) async throws -> [String] {
    try await admin.withConnection { connection in
      try await connection.query(
        PostgresQuery(unsafeSQL: "SET search_path TO \(self.schema)"),
        logger: TestServer.logger
      )
      var values: [String] = []
      for try await value in try await connection.query(
        PostgresQuery(unsafeSQL: sql),
        logger: TestServer.logger
      ).decode(String.self) {
        values.append(value)
      }
      return values
    }
  }
}
#endif
