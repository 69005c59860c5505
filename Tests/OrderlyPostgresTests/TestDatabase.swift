// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyOutbox
import OrderlyPostgres
import PostgresNIO
import Testing

/// The server the tests use: `ORDERLY_POSTGRES_URL`.
///
/// `.ci/run` starts one; on a developer's
/// machine: `export ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start)`.
enum TestServer {
  static let url = ProcessInfo.processInfo.environment["ORDERLY_POSTGRES_URL"]

  /// The server's URL, or `nil` after saying how to start one.
  ///
  /// Under CI a missing server is a
  /// failure, not a skip.
  static func available() -> String? {
    if let url, !url.isEmpty { return url }
    if ProcessInfo.processInfo.environment["CI"] == "true" {
      Issue.record(
        "ORDERLY_POSTGRES_URL is not set: .ci/run starts a server with Tools/postgres/cluster.sh"
      )
    } else {
      print(
        "skipped: no PostgreSQL; run `export ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start)` first"
      )
    }
    return nil
  }

  /// Errors only; `ORDERLY_TEST_LOG=debug` (or `trace`, `info`, ...) says more, to standard
  /// error.
  static var logger: Logger {
    var logger = Logger(label: "orderly.tests")
    logger.logLevel =
      ProcessInfo.processInfo.environment["ORDERLY_TEST_LOG"].flatMap { Logger.Level(rawValue: $0) }
      ?? .error
    return logger
  }
}

/// A schema of its own on the test server, for one test: every client made here has it first
/// on its `search_path`, so the outbox's tables of one test never meet another's.
final class TestDatabase: Sendable {
  let url: String
  let schema: String
  let admin: PostgresClient
  private let adminRun: Task<Void, Never>
  private let clients: ClientBag

  /// A new schema, or `nil` (the test returns) when there is no server.
  static func make() async throws -> TestDatabase? {
    guard let url = TestServer.available() else { return nil }
    return try await TestDatabase(url: url)
  }

  /// A new schema on the server at `url` (a cluster a test started for itself).
  static func make(onServerAt url: String) async throws -> TestDatabase {
    try await TestDatabase(url: url)
  }

  private init(url: String) async throws {
    self.url = url
    schema =
      "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
    let configuration = try PostgresClient.Configuration(orderlyURL: url)
    admin = PostgresClient(configuration: configuration)
    let admin = admin
    adminRun = Task { await admin.run() }
    clients = ClientBag()
    try await admin.query(
      PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"),
      logger: TestServer.logger
    )
  }

  /// A login role of its own, `prefix` + the schema's name, allowed to use this test's outbox
  /// tables (created here first): the role of a worker whose connections a test cuts with
  /// ``cutOff(_:)``.
  func workerRole(_ prefix: String) async throws -> String {
    let role = prefix + schema
    try await execute("CREATE ROLE \(role) LOGIN")
    try await execute("GRANT ALL ON SCHEMA \(schema) TO \(role)")
    _ = try await outbox(of: String.self)
    try await execute("GRANT ALL ON ALL TABLES IN SCHEMA \(schema) TO \(role)")
    return role
  }

  /// Cuts every connection of `role` and refuses new ones: a worker that lost its database.
  func cutOff(_ role: String) async throws {
    try await execute("ALTER ROLE \(role) NOLOGIN")
    try await execute(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '\(role)'"
    )
  }

  /// Lets `role` connect again after ``cutOff(_:)``.
  func restore(_ role: String) async throws {
    try await execute("ALTER ROLE \(role) LOGIN")
  }

  /// A running client whose `search_path` is this test's schema, on the test server or, given
  /// `url`, on another address (a ``ServerSwitch``'s).
  func client(
    url: String? = nil,
    username: String? = nil,
    applicationName: String = "orderly-tests",
    maximumConnections: Int = 20
  ) throws -> PostgresClient {
    var configuration = try PostgresClient.Configuration(orderlyURL: url ?? self.url)
    if let username { configuration.username = username }
    configuration.options.additionalStartupParameters += [
      ("search_path", schema), ("application_name", applicationName),
    ]
    configuration.options.maximumConnections = maximumConnections
    configuration.options.connectTimeout = .seconds(5)
    let client = PostgresClient(configuration: configuration, backgroundLogger: TestServer.logger)
    clients.add(Task { await client.run() })
    return client
  }

  /// An outbox of strings in this test's schema.
  func outbox<Message: Codable & Sendable>(
    of type: Message.Type,
    client: PostgresClient? = nil,
    coalescing: Coalescing<Message>? = nil,
    partition: (@Sendable (Message) -> String?)? = nil
  ) async throws -> PostgresOutbox<Message> {
    try await PostgresOutbox<Message>(
      client: client ?? self.client(),
      logger: TestServer.logger,
      coalescing: coalescing,
      partition: partition
    )
  }

  /// Runs SQL on the admin connection, in this test's schema.
  func execute(_ sql: String) async throws {
    try await admin.withConnection { connection in
      try await connection.query(
        PostgresQuery(unsafeSQL: "SET search_path TO \(self.schema)"),
        logger: TestServer.logger
      )
      try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestServer.logger)
    }
  }

  /// Drops the schema and ends every client.
  func drop() async {
    clients.cancelAll()
    _ = try? await admin.query(
      PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"),
      logger: TestServer.logger
    )
    adminRun.cancel()
  }
}

/// The run tasks of a test's clients.
final class ClientBag: Sendable {
  private let tasks = Mutex<[Task<Void, Never>]>([])
  func add(_ task: Task<Void, Never>) { tasks.withLock { $0.append(task) } }
  func cancelAll() {
    for task in tasks.withLock({ $0 }) { task.cancel() }
  }
}

import Synchronization

/// What deliveries saw, in order.
final class Recorder<Value: Sendable>: Sendable {
  private let values = Mutex<[Value]>([])
  func record(_ value: Value) { values.withLock { $0.append(value) } }
  var all: [Value] { values.withLock { $0 } }

  /// Waits (polling every 10 ms, up to `limit`) until `condition` holds for what was recorded.
  func wait(
    upTo limit: Duration = .seconds(60),
    until condition: @Sendable ([Value]) -> Bool
  ) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
      if condition(all) { return true }
      try? await Task.sleep(for: .milliseconds(10))
    }
    return condition(all)
  }
}
#endif
