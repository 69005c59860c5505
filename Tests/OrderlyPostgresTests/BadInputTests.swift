// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Synchronization
import Testing

@Suite(
  "PostgresOutbox refuses what it cannot use, and loses nothing",
  .serialized,
  .timeLimit(.minutes(3))
)
struct BadInputTests {
  @Test(
    "tables named like the outbox's that Orderly did not create: notAnOutbox, left as they were"
  )
  func foreignTables() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.execute("CREATE TABLE orderly_outbox_message (id int, note text)")
    try await database.execute("INSERT INTO orderly_outbox_message VALUES (1, 'theirs')")
    await #expect {
      _ = try await database.outbox(of: String.self)
    } throws: { error in
      guard case .notAnOutbox(_, let reason) = error as? OutboxError else { return false }
      return reason.contains("did not create") && reason.contains("orderly_outbox_message")
    }
    // Nothing was created or changed.
    let tables = try await database.fleetCount(
      """
      SELECT count(*)::bigint FROM information_schema.tables
      WHERE table_schema = '\(database.schema)'
      """
    )
    #expect(tables == 1)
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message") == 1
    )
  }

  @Test("tables written by a newer version: notAnOutbox, saying to upgrade; its messages are kept")
  func newerSchema() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append("kept")
    try await database.execute("INSERT INTO orderly_outbox_schema (version) VALUES (99)")
    await #expect {
      _ = try await database.outbox(of: String.self)
    } throws: { error in
      guard case .notAnOutbox(_, let reason) = error as? OutboxError else { return false }
      return reason.contains("newer version") && reason.contains("99")
    }
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message") == 1
    )
  }

  @Test(
    "a role, a database or a server that does not exist: cannotOpen at once, in the server's words"
  )
  func wrongCredentials() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    var parts = try #require(URLComponents(string: database.url))
    parts.user = "nobody_\(database.schema)"
    await #expect {
      _ = try await PostgresOutbox<String>(
        url: try #require(parts.string),
        logger: TestServer.logger
      )
    } throws: { error in
      guard case .cannotOpen(_, let reason) = error as? OutboxError else { return false }
      return reason.contains("nobody_") && reason.contains("28000")
    }
    parts = try #require(URLComponents(string: database.url))
    parts.path = "/no_such_database_\(database.schema)"
    await #expect {
      _ = try await PostgresOutbox<String>(
        url: try #require(parts.string),
        logger: TestServer.logger
      )
    } throws: { error in
      guard case .cannotOpen(_, let reason) = error as? OutboxError else { return false }
      return reason.contains("no_such_database") && reason.contains("3D000")
    }
    // A port nothing listens on (the server's own port, plus one, is free in the tests'
    // cluster; if it is not, the server there refuses the role anyway).
    parts = try #require(URLComponents(string: database.url))
    parts.port = (parts.port ?? 5432) + 1
    parts.user = "nobody_\(database.schema)"
    await #expect {
      _ = try await PostgresOutbox<String>(
        url: try #require(parts.string),
        logger: TestServer.logger
      )
    } throws: { error in
      guard case .cannotOpen = error as? OutboxError else { return false }
      return true
    }
    // A good URL opens (in the database's public schema, emptied after), appends and closes.
    let outbox = try await PostgresOutbox<String>(url: database.url, logger: TestServer.logger)
    try await outbox.append("hello")
    #expect(try await outbox.pendingCount() >= 1)
    await outbox.close()
    try await database.execute(
      """
      DROP TABLE IF EXISTS public.orderly_outbox_schema, public.orderly_outbox_line,
        public.orderly_outbox_lease, public.orderly_outbox_message, public.orderly_outbox_dead_letter
      """
    )
  }

  @Test("connections cut while a worker delivers: it reconnects, and nothing is lost or reordered")
  func connectionsCut() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let application = "cut-\(database.schema)"
    let outbox = try await database.outbox(
      of: String.self,
      client: try database.client(applicationName: application)
    )
    let writer = try await database.outbox(of: String.self)
    let seen = Recorder<String>()
    try outbox.start(lease: .seconds(3), pollInterval: .milliseconds(100)) { envelope in
      seen.record(envelope.message)
    }
    for round in 0..<5 {
      try await writer.append(contentsOf: (0..<20).map { "r\(round)-\($0)" }, partition: "k")
      try await database.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(application)'"
      )
    }
    #expect(await eventually { try await writer.pendingCount() == 0 })
    await outbox.stop()
    // At least once: a message whose acknowledgement was cut may come twice, one after the
    // other; none is missing and none is out of order.
    var distinct: [String] = []
    for message in seen.all where distinct.last != message { distinct.append(message) }
    #expect(distinct == (0..<5).flatMap { round in (0..<20).map { "r\(round)-\($0)" } })
  }

  @Test(
    "an append on a connection the server ended is stored on a new one, or refused with cannotOpen; never busy, never half-stored"
  )
  func appendAfterTerminatedConnection() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let application = "ended-\(database.schema)"
    let outbox = try await database.outbox(
      of: String.self,
      client: try database.client(applicationName: application, maximumConnections: 1)
    )
    try await outbox.append("first")
    var stored = 1
    for round in 0..<5 {
      // The pool's one connection is ended by the server: its next use fails with SQLSTATE
      // 57P01, or a reset, as the connection learns of it. Before the commit, nothing was
      // stored: the append tries once more on a new connection.
      try await database.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '\(application)'"
      )
      let outcome: Result<UUID, OutboxError>
      do {
        outcome = .success(try await outbox.append("after-\(round)"))
      } catch {
        outcome = .failure(error)
      }
      switch outcome {
      case .success: stored += 1
      case .failure(.cannotOpen(_, let reason)):
        let saysWhat = reason.contains("check that")
        #expect(saysWhat, "\(reason)")
      case .failure(let error): Issue.record("refused with \(error), not cannotOpen")
      }
    }
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_message")
        == stored
    )
  }

  @Test(
    "appends and a worker under a storm of ended connections: every append ends, stored or refused with cannotOpen; afterwards both go on, each key in order"
  )
  func stormOfEndedConnections() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let application = "storm-\(database.schema)"
    let client = try database.client(applicationName: application, maximumConnections: 4)
    let outbox = try await database.outbox(of: String.self, client: client) {
      String($0.prefix { $0 != ":" })
    }
    let seen = Recorder<String>()
    try outbox.start(limit: 4, lease: .seconds(2), pollInterval: .milliseconds(100)) {
      envelope in
      seen.record(envelope.message)
    }
    // The server ends every connection of the outbox's client that is running a statement or
    // idle in a transaction, over and over, while one task appends batches over eight keys.
    let storm = Task {
      while !Task.isCancelled {
        try? await database.execute(
          """
          SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE application_name = '\(application)' AND state IN ('active', 'idle in transaction')
          """
        )
        try? await Task.sleep(for: .milliseconds(20))
      }
    }
    var stored: [String] = []
    for round in 0..<30 {
      let batch = (0..<8).map { "k\($0):\(round)" }
      // The outcome is checked after the call (a catch pattern here crashes Swift 6.3.1's
      // compiler).
      let outcome: Result<[UUID], OutboxError>
      do {
        outcome = .success(
          try await outbox.append(
            contentsOf: batch,
            partition: nil,
            headers: [:],
            deliverAfter: nil
          )
        )
      } catch {
        outcome = .failure(error)
      }
      switch outcome {
      case .success: stored += batch
      case .failure(.cannotOpen(_, let reason)):
        // Refused: stored, if at all, only when the commit itself was cut (its outcome unknown).
        let saysWhat = reason.contains("check that")
        #expect(saysWhat, "\(reason)")
      case .failure(let error): Issue.record("refused with \(error), not cannotOpen")
      }
    }
    storm.cancel()
    _ = await storm.result
    // Afterwards: appends are stored, and everything stored is delivered.
    let after = (0..<8).map { "k\($0):after" }
    try await outbox.append(contentsOf: after, partition: nil, headers: [:], deliverAfter: nil)
    stored += after
    let wanted = Set(stored)
    let delivered = await seen.wait(upTo: .seconds(90)) { records in
      wanted.isSubset(of: Set(records))
    }
    #expect(delivered, "\(wanted.subtracting(seen.all).count) stored messages not delivered")
    await outbox.stop()
    // Each key in order: a message delivered again may repeat, none goes back.
    for key in 0..<8 {
      let rounds = seen.all.filter { $0.hasPrefix("k\(key):") }.map {
        $0.hasSuffix(":after") ? Int.max : Int($0.split(separator: ":")[1]) ?? -1
      }
      let ordered = zip(rounds, rounds.dropFirst()).allSatisfy { $0 <= $1 }
      #expect(ordered, "k\(key): \(rounds)")
    }
  }

  @Test("a table of another program's named orderly_outbox_schema: notAnOutbox, left as it was")
  func foreignSchemaTable() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    try await database.execute("CREATE TABLE orderly_outbox_schema (id int, note text)")
    try await database.execute("INSERT INTO orderly_outbox_schema VALUES (1, 'theirs')")
    await #expect {
      _ = try await database.outbox(of: String.self)
    } throws: { error in
      guard case .notAnOutbox(_, let reason) = error as? OutboxError else { return false }
      return reason.contains("did not create") && reason.contains("orderly_outbox_schema")
    }
    let tables = try await database.fleetCount(
      """
      SELECT count(*)::bigint FROM information_schema.tables
      WHERE table_schema = '\(database.schema)'
      """
    )
    #expect(tables == 1)
    #expect(
      try await database.fleetCount("SELECT count(*)::bigint FROM orderly_outbox_schema") == 1
    )
  }
}
#endif

#if Postgres
@Suite("PostgresOutbox upgrades an outbox written by an earlier version", .timeLimit(.minutes(3)))
struct SchemaUpgradeTests {
  @Test(
    "schema version 1 (no not-before times) is upgraded to 2; its messages are kept and delivered"
  )
  func fromVersionOne() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let old = try await database.outbox(of: String.self)
    try await old.append("kept", partition: "k")
    await old.close()
    // The tables as version 1 left them.
    try await database.execute("ALTER TABLE orderly_outbox_message DROP COLUMN not_before")
    try await database.execute("UPDATE orderly_outbox_schema SET version = 1")
    let outbox = try await database.outbox(of: String.self)
    let version = try await database.fleetCount(
      "SELECT max(version)::bigint FROM orderly_outbox_schema"
    )
    #expect(version == 2)
    try await outbox.append("later", partition: "k", headers: [:], deliverAfter: Date())
    let seen = Delivered()
    try outbox.start { envelope in seen.add(envelope.message) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    await outbox.close()
    #expect(seen.values == ["kept", "later"])
  }

  @Test(
    "an outbox from before unique keys and quarantine gains their columns, index and table; its messages are kept"
  )
  func beforeUniqueKeys() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let old = try await database.outbox(of: String.self)
    try await old.append("kept", partition: "k")
    await old.close()
    // The tables as a version before unique keys left them.
    try await database.execute("DROP TABLE orderly_outbox_unique_window")
    try await database.execute("ALTER TABLE orderly_outbox_message DROP COLUMN unique_key")
    try await database.execute("ALTER TABLE orderly_outbox_lease DROP COLUMN pause_reason")
    let outbox = try await database.outbox(of: String.self)
    let first = try await outbox.append("once", uniqueKey: "u", partition: "k")
    let second = try await outbox.append("once", uniqueKey: "u", uniqueFor: .seconds(60))
    #expect(first.wasAppended && second == .duplicate(of: first.id))
    let seen = Delivered()
    try outbox.start { envelope in seen.add(envelope.message) }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    await outbox.close()
    #expect(seen.values == ["kept", "once"])
  }

  @Test(
    "orderly outbox (which changes no table) on an outbox from before quarantine: keys, pause and resume work"
  )
  func operatorBeforeQuarantine() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let old = try await database.outbox(of: String.self)
    try await old.append("kept", partition: "k")
    await old.close()
    try await database.execute("ALTER TABLE orderly_outbox_lease DROP COLUMN pause_reason")
    let separator = database.url.contains("?") ? "&" : "?"
    let outbox = try await PostgresOutbox<String>(
      url: database.url + separator + "search_path=" + database.schema,
      creatingTables: false
    )
    try await outbox.pause(partition: "k")
    let paused = try await outbox.keys()
    #expect(paused.map(\.paused) == [true] && paused.first?.quarantine == nil)
    try await outbox.resume(partition: "k")
    let resumed = try await outbox.keys()
    #expect(resumed.map(\.paused) == [false])
    await outbox.close()
  }
}

/// What a handler delivered, in order.
private final class Delivered: Sendable {
  private let storage = Mutex<[String]>([])
  func add(_ value: String) { storage.withLock { $0.append(value) } }
  var values: [String] { storage.withLock { $0 } }
}
#endif
