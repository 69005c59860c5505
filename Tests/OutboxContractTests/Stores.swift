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
#if Server
import OrderlyServer
import Tracing
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
  /// Starts through `DurableOutbox.start(_:deliver:)` with the store's options and this batch
  /// size, whatever the handler.
  let startHandler:
    @Sendable (_ batch: Int, _ handler: DeliveryHandler<Message>) throws(OutboxError) -> Void
  /// Starts with the store's options as `configure` leaves them (the options every store has,
  /// with a 50 ms poll interval to begin with).
  let startConfigured:
    @Sendable (
      _ configure: @Sendable (inout any DeliveryOptions) -> Void,
      _ handler: DeliveryHandler<Message>
    ) throws(OutboxError) -> Void
  let cleanUp: @Sendable () async -> Void
  #if Server
  /// An `OutboxService` for this store, delivering batches of up to `batch` messages.
  let service:
    @Sendable (
      _ name: String,
      _ batch: Int,
      _ tracer: any Tracer,
      _ deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
    ) -> OutboxService<Message>
  #endif

  /// A subject that starts `outbox` through `DurableOutbox.start(_:deliver:)`, with `options`
  /// (the store's own, such as its lease) and the options every store has set on them.
  init<Store: DurableOutbox<Message>>(
    _ outbox: Store,
    options base: Store.Options,
    cleanUp: @escaping @Sendable () async -> Void
  ) {
    self.outbox = outbox
    @Sendable func options(
      _ limit: Int,
      _ batch: Int,
      _ retry: RetryPolicy,
      _ onDeadLetter: DeadLetterPolicy,
      _ pollInterval: Duration
    ) -> Store.Options {
      var options = base
      options.limit = limit
      options.batchSize = batch
      options.retry = retry
      options.onDeadLetter = onDeadLetter
      options.pollInterval = pollInterval
      return options
    }
    startDelivery = { (limit, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
      try outbox.start(options(limit, 1, retry, onDeadLetter, poll), deliver: .each(deliver))
    }
    startBatches = { (limit, batch, retry, onDeadLetter, poll, deliver) throws(OutboxError) in
      try outbox.start(
        options(limit, batch, retry, onDeadLetter, poll),
        deliver: .batches(deliver)
      )
    }
    startHandler = { (batch, handler) throws(OutboxError) in
      try outbox.start(
        options(4, batch, .standard, .stopLine, .milliseconds(50)),
        deliver: handler
      )
    }
    startConfigured = { (configure, handler) throws(OutboxError) in
      var configured: any DeliveryOptions = options(4, 1, .standard, .stopLine, .milliseconds(50))
      configure(&configured)
      guard let options = configured as? Store.Options else {
        throw .invalidOption("the test's configure closure changed the options' type")
      }
      try outbox.start(options, deliver: handler)
    }
    self.cleanUp = cleanUp
    #if Server
    service = { name, batch, tracer, deliver in
      OutboxService(
        outbox: outbox,
        name: name,
        options: options(4, batch, .standard, .stopLine, .milliseconds(50)),
        tracer: tracer,
        deliverBatches: deliver
      )
    }
    #endif
  }

  /// Starts with the audit trail on, the dead-letter policy and retries given.
  func startAudited(
    _ onDeadLetter: DeadLetterPolicy,
    _ retry: RetryPolicy,
    _ handler: DeliveryHandler<Message>
  ) throws(OutboxError) {
    try startConfigured(
      { options in
        options.onDeadLetter = onDeadLetter
        options.retry = retry
        options.audit = .on
      },
      handler
    )
  }

  /// Starts with the audit trail on, this batch size and this retention.
  func startRetaining(
    _ batch: Int,
    _ retention: Duration,
    _ handler: DeliveryHandler<Message>
  ) throws(OutboxError) {
    try startConfigured(
      { options in
        options.batchSize = batch
        options.audit = OutboxAuditOptions(isOn: true, retention: retention)
      },
      handler
    )
  }

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
      return Subject(outbox, options: FleetDeliveryOptions(lease: .seconds(30))) {
        await database.drop()
      }
      #else
      return nil
      #endif
    }
  }
}

#if SQLite
extension Store {
  /// A SQLite outbox as a subject.
  fileprivate static func subject<Message: Codable & Sendable>(
    of outbox: Outbox<Message>,
    cleanUp: @escaping @Sendable () async -> Void
  ) -> Subject<Message> {
    Subject(outbox, options: OutboxDeliveryOptions(), cleanUp: cleanUp)
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
    configuration.options.additionalStartupParameters.append(("search_path", schema))
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
