// The PostgreSQL outbox: its type, opening it on a client (its schema created or checked), and
// closing it.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
public import Logging
import OrderlyCore
public import OrderlyOutboxCore
public import PostgresNIO

/// The outbox on PostgreSQL: messages kept in a database that every worker process of a
/// service shares, each partition key delivered in order by one worker at a time, and carried
/// on by another when that worker dies.
///
/// It has the API of `Outbox` (append, partitions, retries, dead letters,
/// pause and resume, merging, events), over a `PostgresClient` you create and run:
///
/// ```swift
/// let client = PostgresClient(configuration: try .init(orderlyURL: url))
/// async let running: Void = client.run()
/// let outbox = try await PostgresOutbox<AccountChange>(client: client) { $0.accountID }
/// try await outbox.append(AccountChange(accountID: "acct-7", amount: 12))
/// try outbox.start(limit: 16) { envelope in
///   try await ledger.apply(envelope.message, id: envelope.id)
/// }
/// ```
///
/// ## Order across processes
///
/// Each line (the messages of one partition key, or the default line) is delivered in the order
/// its appends committed, one message at a time in the whole fleet: a worker takes a line through
/// a lease and delivers its oldest message, then the next. Two transactions that append to one
/// line at once are numbered in the order they commit (the second waits for the first's lock
/// on the line), so no message is ever skipped because a lower number committed late. Lines go
/// side by side, across workers, up to each worker's `limit`.
///
/// ## Leases and fences
///
/// A worker holds a line through a lease (owner, expiry, fence), renewed while it delivers. A
/// worker that dies or loses its connection loses its lines when their leases expire; another
/// worker takes each line, with a higher fence, and delivers the same head message first. The
/// old holder cannot acknowledge: an acknowledgement checks the fence and the expiry in the
/// database, and the worker cancels its handler once it can no longer be sure of its lease.
/// ``stop()`` releases every lease at once, so other workers take the lines without waiting.
///
/// Delivery is at least once: a receiver that remembers `Envelope.id` (or the highest
/// `Envelope.fence` it saw per key) applies each message once.
public final class PostgresOutbox<Message: Codable & Sendable>: Sendable {
  /// The client the outbox runs its queries on.
  ///
  /// You run it (`client.run()`), and end it after
  /// the outbox stopped.
  public let client: PostgresClient
  /// The database, as errors name it: `postgresql://USER@HOST:PORT/DATABASE`.
  public let database: String
  /// This outbox's name in the lease table while it delivers: unique for each ``start(limit:retry:onDeadLetter:lease:pollInterval:deliver:)``.
  public var workerID: String { state.withLock(announcingTo: self) { $0.workerID } }

  let clock: any Clock<Duration>
  let codec: MessageCodec<Message>
  let logger: Logger
  let hub = OutboxEventHub()
  /// The loop that appends recurring schedules' ticks while the outbox is started.
  let scheduleTicker: ScheduleTicker<Message>
  /// Retry waits in progress, ended early by pause, resume and stop.
  let retryWaits = RetryWaits()
  /// A test's hold on the worker's statements (see ``withholdAnswers(_:)``).
  let withheld = WithheldAnswers()
  let state: OrderlyLock<PostgresOutboxState<Message>>
  /// The task that runs `client`, when the outbox made the client itself (``init(url:clock:logger:coalescing:partition:)``).
  let clientRun: Task<Void, Never>?

  /// Opens the outbox in the database `client` connects to, creating its tables if the database
  /// has none of them.
  ///
  /// The tables (`orderly_outbox_line`, `orderly_outbox_lease`, `orderly_outbox_message`,
  /// `orderly_outbox_dead_letter`, `orderly_outbox_schema`) go to the first schema on the
  /// connection's `search_path`.
  ///
  /// - Parameters:
  ///   - client: A client for the database; it must be running (`client.run()` in a task).
  ///   - clock: The clock retry waits are measured on. Leases and polling use real time.
  ///   - logger: Where the outbox logs leases taken, lost and released (`debug`, `warning`),
  ///     and failed queries of its delivery loop (`warning`).
  ///   - coalescing: How new messages are folded into pending ones; `nil` never merges.
  ///   - partition: The line a message joins when an append names none; `nil` puts every
  ///     such message in the default line.
  /// - Throws: `OutboxError.cannotOpen(path:reason:)` when the server cannot be reached or
  ///   refuses the credentials or the database; `OutboxError.notAnOutbox(path:reason:)` when
  ///   the database holds tables named like the outbox's that Orderly did not create, or ones
  ///   written by a newer version; `OutboxError.storageFailed(path:reason:)` otherwise.
  ///   Nothing in the database was changed then.
  public convenience init(
    client: PostgresClient,
    clock: any Clock<Duration> = ContinuousClock(),
    logger: Logger = Logger(label: "orderly.outbox.postgres"),
    coalescing: Coalescing<Message>? = nil,
    partition: (@Sendable (Message) -> String?)? = nil
  ) async throws(OutboxError) {
    try await self.init(
      client: client,
      clientRun: nil,
      clock: clock,
      logger: logger,
      coalescing: coalescing,
      partition: partition,
      creatingTables: true
    )
  }

  /// Opens the outbox in the database a URL names, with a client of its own, after one
  /// connection proved the server, the credentials and the database.
  ///
  /// A client's pool retries a refused connection for about a minute before it fails with no
  /// detail; this initializer connects once first, so a wrong password, a missing database or a
  /// server that is not there is reported at once, in the server's words. Call ``close()`` to
  /// end the client.
  ///
  /// - Parameters:
  ///   - url: `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, without TLS (see
  ///     `PostgresClient.Configuration.init(orderlyURL:)`).
  ///   - clock: The clock retry waits are measured on.
  ///   - logger: Where the outbox logs.
  ///   - coalescing: How new messages are folded into pending ones; `nil` never merges.
  ///   - partition: The line a message joins when an append names none.
  /// - Throws: `OutboxError.invalidOption(_:)` for a URL that is not one;
  ///   `OutboxError.cannotOpen(path:reason:)` when the server cannot be reached or refuses
  ///   the credentials or the database; otherwise as ``init(client:clock:logger:coalescing:partition:)``.
  public convenience init(
    url: String,
    clock: any Clock<Duration> = ContinuousClock(),
    logger: Logger = Logger(label: "orderly.outbox.postgres"),
    coalescing: Coalescing<Message>? = nil,
    partition: (@Sendable (Message) -> String?)? = nil
  ) async throws(OutboxError) {
    try await self.init(
      url: url,
      clock: clock,
      logger: logger,
      coalescing: coalescing,
      partition: partition,
      creatingTables: true
    )
  }

  /// Opens the outbox in the database a URL names; with `creatingTables` false, a database
  /// without the outbox's tables is refused (`OutboxError.notAnOutbox(path:reason:)`) and left
  /// as it was: for `orderly outbox`, which must not create an outbox where it finds none.
  package convenience init(
    url: String,
    clock: any Clock<Duration> = ContinuousClock(),
    logger: Logger = Logger(label: "orderly.outbox.postgres"),
    coalescing: Coalescing<Message>? = nil,
    partition: (@Sendable (Message) -> String?)? = nil,
    creatingTables: Bool
  ) async throws(OutboxError) {
    let configuration = try PostgresClient.Configuration(orderlyURL: url)
    let shown = describe(configuration)
    do {
      // The connection, its log-in and its close, within the deadline of any call.
      try await withDeadline(Self.statementLimit) {
        let connection = try await PostgresConnection.connect(
          configuration: PostgresConnection.Configuration(
            host: configuration.host ?? "localhost",
            port: configuration.port ?? 5432,
            username: configuration.username,
            password: configuration.password,
            database: configuration.database,
            tls: .disable
          ),
          id: 0,
          logger: logger
        )
        try? await connection.close()
      }
    } catch {
      throw outboxError(error, database: shown)
    }
    let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    let run = Task { await client.run() }
    do {
      try await self.init(
        client: client,
        clientRun: run,
        clock: clock,
        logger: logger,
        coalescing: coalescing,
        partition: partition,
        creatingTables: creatingTables
      )
    } catch {
      run.cancel()
      throw error
    }
  }

  private init(
    client: PostgresClient,
    clientRun: Task<Void, Never>?,
    clock: any Clock<Duration>,
    logger: Logger,
    coalescing: Coalescing<Message>?,
    partition: (@Sendable (Message) -> String?)?,
    creatingTables: Bool
  ) async throws(OutboxError) {
    self.client = client
    self.clientRun = clientRun
    self.clock = clock
    self.logger = logger
    self.codec = MessageCodec(partition: partition, coalescing: coalescing)
    self.scheduleTicker = ScheduleTicker(clock: clock, codec: codec, hub: hub)
    self.state = OrderlyLock(PostgresOutboxState())
    // The client's configuration is not public; the database is named by its first connection.
    var name = "the PostgreSQL database"
    do {
      name = try await withDeadline(Self.statementLimit) {
        var name = "the PostgreSQL database"
        let rows = try await client.query(
          """
          SELECT current_user::text AS user_name, current_database()::text AS database,
            coalesce(inet_server_addr()::text, 'local') AS host,
            coalesce(inet_server_port(), 0) AS port
          """,
          logger: logger
        )
        for try await row in rows {
          let row = NamedColumns(row)
          let host: String = try row("host")
          let port: Int = try row("port")
          let (user, db): (String, String) = (try row("user_name"), try row("database"))
          let shownHost = host.split(separator: "/").first.map(String.init) ?? host
          name = "postgresql://\(user)@\(shownHost):\(port)/\(db)"
        }
        return name
      }
    } catch {
      throw outboxError(error, database: name)
    }
    self.database = name
    let problem: String?
    do {
      // A minute: creating the tables or an index waits for other transactions' locks.
      problem = try await withDeadline(.seconds(60)) {
        try await PostgresSchema.prepare(client, creatingTables: creatingTables, logger: logger)
      }
    } catch {
      throw outboxError(error, database: name)
    }
    if let problem { throw .notAnOutbox(path: name, reason: problem) }
  }

  deinit {
    hub.finish()
    clientRun?.cancel()
  }

  /// Stops delivering (as ``stop()``), ends the events, and ends the client it made.
  ///
  /// The client is ended only if the outbox made it
  /// (``init(url:clock:logger:coalescing:partition:)``); a client you passed in stays yours.
  public func close() async {
    state.withLock(announcingTo: self) { $0.closed = true }
    await stop()
    hub.finish()
    clientRun?.cancel()
  }

}

/// What a PostgreSQL outbox keeps in memory, behind its lock.
struct PostgresOutboxState<Message: Codable & Sendable>: Sendable {
  /// The delivering worker, between `start` and `stop`.
  var worker: FleetWorker<Message>?
  /// Whether `stop` is under way.
  var stopping = false
  /// Whether the schedules' table was seen: once there, it stays (no query to look again).
  var hasScheduleTable = false
  /// Whether ``PostgresOutbox/close()`` was called: a waiter ends with `OutboxError.closed`.
  var closed = false
  /// ``PostgresOutbox/stallAfter``.
  var stallAfter: Duration?
  /// Whether delivery is paused with `pause()`.
  var paused = false
  /// The current (or last) worker's name.
  var workerID = ""
  /// Renewals failed and acknowledgements refused, over every `start`.
  var statistics = DelivererStatistics()
}

/// A line's key in the tables (see `LineKey`, which the SQLite store shares).
typealias Line = LineKey
#endif
