import Foundation
import OrderlyOutboxCore
import Testing

#if SQLite
import OrderlyOutbox
#endif
#if Postgres
import Logging
import OrderlyPostgres
import PostgresNIO
#endif

/// An outbox under test, whichever store keeps it: the protocol every outbox offers, and how
/// this store starts delivering.
struct Subject<Message: Codable & Sendable>: Sendable {
  let outbox: any DurableOutbox<Message>
  let startDelivery:
    @Sendable (
      _ limit: Int,
      _ retry: RetryPolicy,
      _ onDeadLetter: DeadLetterPolicy,
      _ pollInterval: Duration,
      _ deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
    ) throws(OutboxError) -> Void
  let startBatches:
    @Sendable (
      _ limit: Int,
      _ batch: Int,
      _ retry: RetryPolicy,
      _ onDeadLetter: DeadLetterPolicy,
      _ pollInterval: Duration,
      _ deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
    ) throws(OutboxError) -> Void
  let cleanUp: @Sendable () async -> Void

  /// Starts delivering in ordered batches, with the options every store has.
  func start(
    limit: Int = 4,
    batchesOf batch: Int,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    pollInterval: Duration = .milliseconds(50),
    deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) throws(OutboxError) {
    try startBatches(limit, batch, retry, onDeadLetter, pollInterval, deliver)
  }

  /// Starts delivering, with the options every store has.
  func start(
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    pollInterval: Duration = .milliseconds(50),
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) throws(OutboxError) {
    try startDelivery(limit, retry, onDeadLetter, pollInterval, deliver)
  }

  /// Stops, closes, and removes what the store left.
  func finish() async {
    await outbox.stop()
    try? await outbox.close()
    await cleanUp()
  }
}

/// Every store the contract runs against, in this build.
enum Store: String, Sendable, CustomTestStringConvertible {
  case sqliteInMemory = "SQLite in memory"
  case sqliteFile = "SQLite file"
  case postgres = "PostgreSQL"

  var testDescription: String { rawValue }

  /// The stores this build has: SQLite with the SQLite trait, PostgreSQL with the Postgres
  /// trait (against the server `ORDERLY_POSTGRES_URL` names).
  static var all: [Store] {
    var stores: [Store] = []
    #if SQLite
    stores += [.sqliteInMemory, .sqliteFile]
    #endif
    #if Postgres
    stores.append(.postgres)
    #endif
    return stores
  }

  /// A new, empty outbox in this store, or `nil` (the test returns) when the store is not
  /// there: PostgreSQL without a server, outside CI.
  func open<Message: Codable & Sendable>(
    _ type: Message.Type,
    clock: any Clock<Duration> = ContinuousClock(),
    coalescing: Coalescing<Message>? = nil
  ) async throws -> Subject<Message>? {
    switch self {
    case .sqliteInMemory:
      #if SQLite
      let outbox = try Outbox<Message>(clock: clock, coalescing: coalescing)
      return Self.subject(of: outbox, cleanUp: {})
      #else
      return nil
      #endif
    case .sqliteFile:
      #if SQLite
      let folder = FileManager.default.temporaryDirectory
        .appendingPathComponent("orderly-contract-\(UUID().uuidString)")
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
      let outbox = try Outbox<Message>(
        path: folder.appendingPathComponent("outbox.sqlite").path,
        clock: clock,
        coalescing: coalescing
      )
      return Self.subject(of: outbox) { try? FileManager.default.removeItem(at: folder) }
      #else
      return nil
      #endif
    case .postgres:
      #if Postgres
      guard let database = try await ContractDatabase.make() else { return nil }
      let outbox = try await PostgresOutbox<Message>(
        client: database.client,
        clock: clock,
        logger: ContractDatabase.logger,
        coalescing: coalescing
      )
      return Subject(
        outbox: outbox,
        startDelivery: { (limit, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
          try outbox.start(
            limit: limit,
            retry: retry,
            onDeadLetter: onDeadLetter,
            lease: .seconds(30),
            pollInterval: poll,
            deliver: deliver
          )
        },
        startBatches: { (limit, batch, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
          try outbox.start(
            limit: limit,
            batchesOf: batch,
            retry: retry,
            onDeadLetter: onDeadLetter,
            lease: .seconds(30),
            pollInterval: poll,
            deliver: deliver
          )
        },
        cleanUp: { await database.drop() }
      )
      #else
      return nil
      #endif
    }
  }
}

#if SQLite
extension Store {
  /// A SQLite outbox as a subject: started with the options every store has.
  fileprivate static func subject<Message: Codable & Sendable>(
    of outbox: Outbox<Message>,
    cleanUp: @escaping @Sendable () async -> Void
  ) -> Subject<Message> {
    Subject(
      outbox: outbox,
      startDelivery: { (limit, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
        try outbox.start(
          limit: limit,
          retry: retry,
          onDeadLetter: onDeadLetter,
          pollInterval: poll,
          deliver: deliver
        )
      },
      startBatches: { (limit, batch, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
        try outbox.start(
          limit: limit,
          batchesOf: batch,
          retry: retry,
          onDeadLetter: onDeadLetter,
          pollInterval: poll,
          deliver: deliver
        )
      },
      cleanUp: cleanUp
    )
  }
}
#endif

#if Postgres
/// A schema of its own on the test server, for one test.
final class ContractDatabase: Sendable {
  let client: PostgresClient
  let schema: String
  private let admin: PostgresClient
  private let runs: [Task<Void, Never>]

  static var logger: Logger {
    var logger = Logger(label: "orderly.contract-tests")
    logger.logLevel = .error
    return logger
  }

  /// A new schema on the server `ORDERLY_POSTGRES_URL` names, or `nil` after saying how to
  /// start one (under CI, a missing server is a failure).
  static func make() async throws -> ContractDatabase? {
    let url = ProcessInfo.processInfo.environment["ORDERLY_POSTGRES_URL"] ?? ""
    guard !url.isEmpty else {
      if ProcessInfo.processInfo.environment["CI"] == "true" {
        Issue.record(
          "ORDERLY_POSTGRES_URL is not set: .ci/run starts a server with Tools/postgres/cluster.sh"
        )
      } else {
        print(
          "skipped PostgreSQL: run `export ORDERLY_POSTGRES_URL=$(bash Tools/postgres/cluster.sh start)` first"
        )
      }
      return nil
    }
    return try await ContractDatabase(url: url)
  }

  private init(url: String) async throws {
    schema =
      "contract_"
      + UUID().uuidString.prefix(12).lowercased().replacingOccurrences(
        of: "-",
        with: "_"
      )
    let base = try PostgresClient.Configuration(orderlyURL: url)
    admin = PostgresClient(configuration: base, backgroundLogger: Self.logger)
    var configuration = base
    configuration.options.additionalStartupParameters = [("search_path", schema)]
    client = PostgresClient(configuration: configuration, backgroundLogger: Self.logger)
    let (admin, client) = (admin, client)
    runs = [Task { await admin.run() }, Task { await client.run() }]
    try await admin.query(
      PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"),
      logger: Self.logger
    )
  }

  /// Drops the schema and ends the clients.
  func drop() async {
    _ = try? await admin.query(
      PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"),
      logger: Self.logger
    )
    for run in runs { run.cancel() }
  }
}
#endif
