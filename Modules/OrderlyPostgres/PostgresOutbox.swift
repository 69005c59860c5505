// The PostgreSQL outbox: opening it on a client, appending (in the caller's transaction too), dead
// letters, pausing keys.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
public import Foundation
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
    self.state = OrderlyLock(PostgresOutboxState())
    // The client's configuration is not public; the database is named by its first connection.
    var name = "the PostgreSQL database"
    do {
      name = try await withDeadline(Self.statementLimit) {
        var name = "the PostgreSQL database"
        let rows = try await client.query(
          "SELECT current_user::text, current_database()::text, coalesce(inet_server_addr()::text, 'local'), coalesce(inet_server_port(), 0)",
          logger: logger
        )
        for try await (user, db, host, port) in rows.decode((String, String, String, Int).self) {
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

  // MARK: - Appending

  /// Appends messages in one transaction, all committed once it returns, or none; to be
  /// delivered no earlier than `deliverAfter`.
  ///
  /// Each line's row is locked until the commit, so the messages of one line are numbered
  /// after every earlier committed append of that line, and before any later one. With a
  /// `deliverAfter`, their line waits for them in order, in every worker, and other lines go
  /// on (see `DurableOutbox`); the time is compared with the database server's clock.
  /// `append(contentsOf:partition:headers:)` (`DurableOutbox`) appends for delivery at once.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - partition: The line they join; `nil` asks the outbox's `partition` closure for each.
  ///   - headers: Strings stored with every one of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` for at once.
  /// - Returns: Their identifiers, in the order of `messages`.
  /// - Throws: `OutboxError.cannotEncode(reason:)`, `OutboxError.cancelled`, or the database's
  ///   error as an `OutboxError`; nothing was stored.
  @discardableResult public func append(
    contentsOf messages: [Message],
    partition: String?,
    headers: [String: String],
    deliverAfter: Date?
  ) async throws(OutboxError) -> [UUID] {
    guard !messages.isEmpty else { return [] }
    let prepared = try codec.prepare(
      messages,
      partition: partition,
      headers: headers,
      deliverAfter: deliverAfter
    )
    // A task cancelled already asks for no connection: PostgresNIO's pool can miss a
    // cancellation that lands just as a request is queued, and such a request then waits for a
    // connection however long the server stays away.
    guard !Task.isCancelled else { throw .cancelled }
    var written = Written()
    var tries = 0
    while true {
      do {
        // Never longer than a minute: a query PostgresNIO loses on a connection the server
        // ended would otherwise keep the append waiting forever. (A wait for another
        // transaction's lock on the line is cut too, after that minute.)
        let client = client
        written = try await withDeadline(.seconds(60)) {
          try await client.transaction(logger: self.logger) { connection in
            try await self.write(prepared, on: connection)
          }
        }
        break
      } catch {
        if Task.isCancelled { throw .cancelled }
        // A pooled connection the server had ended (a restart, an administrator) fails at once,
        // before the commit: nothing was stored, so a few more tries. The pool may hand out the
        // same ended connection again until it has seen it close: each try waits a little longer
        // first (10, 50 and 250 milliseconds, real time: a wait for the network, which the
        // outbox's injected clock does not drive).
        if tries < 3, endedBeforeCommit(error) {
          // Safe as library code: at most 310 ms in all (`tries < 3` keeps the index in range),
          // and a cancelled task ends the wait at once and stops here, storing nothing.
          try? await Task.sleep(for: .milliseconds([10, 50, 250][tries]))
          if Task.isCancelled { throw .cancelled }
          tries += 1
          continue
        }
        throw outboxError(error, database: database)
      }
    }
    for event in written.events { hub.emit(event) }
    return written.ids
  }

  /// Appends a message inside a transaction you opened on the outbox's database: it is stored
  /// exactly when your transaction commits, with the rows you wrote in it (the transactional
  /// outbox).
  ///
  /// ```swift
  /// try await client.withTransaction(logger: logger) { connection in
  ///   try await connection.query("UPDATE account SET balance = balance - 12 WHERE id = 7", logger: logger)
  ///   try await outbox.append(AccountChange(accountID: "7", amount: -12), on: connection)
  /// }
  /// ```
  ///
  /// The line's lock is held until your transaction ends: other appends to the same line wait
  /// for it (that is how lines keep commit order), so keep such transactions short.
  /// `OutboxEvent.appended(id:sequence:partition:)` is emitted at once, before the commit.
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message.
  ///   - connection: A connection inside a transaction (`BEGIN` ran) on the outbox's database.
  /// - Returns: The message's identifier.
  /// - Throws: `OutboxError.cannotEncode(reason:)`, or the database's error (roll back).
  @discardableResult public func append(
    _ message: Message,
    partition: String? = nil,
    headers: [String: String] = [:],
    on connection: PostgresConnection
  ) async throws -> UUID {
    let prepared = try codec.prepare([message], partition: partition, headers: headers)
    let written = try await withDeadline(Self.statementLimit) {
      try await self.write(prepared, on: connection)
    }
    for event in written.events { hub.emit(event) }
    return written.ids[0]
  }

  /// What a write did.
  struct Written: Sendable {
    var ids: [UUID] = []
    var events: [OutboxEvent] = []
  }

  // deadline: the caller's
  /// Writes messages on a connection inside a transaction.
  ///
  /// Each line's row is updated first, lines in sorted order (so two batches never wait for
  /// each other in a cycle), reserving as many numbers as the batch has messages for that line;
  /// the row stays locked until the transaction ends.
  private func write(_ batch: [PreparedMessage<Message>], on connection: PostgresConnection)
    async throws
    -> Written
  {
    if batch.count == 1, codec.coalescing == nil || batch[0].entity == nil {
      return try await writeOne(batch[0], on: connection)
    }
    if codec.coalescing == nil || batch.allSatisfy({ $0.entity == nil }) {
      return try await writeMany(batch, on: connection)
    }
    var needed: [String: Int64] = [:]
    for prepared in batch { needed[Line.key(prepared.partition), default: 0] += 1 }
    var next: [String: Int64] = [:]
    for line in needed.keys.sorted() {
      let count = needed[line] ?? 0
      let rows = try await connection.checkedQuery(
        """
        INSERT INTO orderly_outbox_line (line, last_sequence) VALUES (\(line), \(count))
        ON CONFLICT (line) DO UPDATE
          SET last_sequence = orderly_outbox_line.last_sequence + \(count)
        RETURNING last_sequence
        """,
        logger: logger
      )
      for try await last in rows.decode(Int64.self) { next[line] = last - count + 1 }
    }
    var written = Written()
    for prepared in batch {
      let line = Line.key(prepared.partition)
      let sequence = next[line] ?? 1
      next[line] = sequence + 1
      if let merged = try await merge(prepared, line: line, on: connection) {
        written.ids.append(merged.id)
        written.events.append(
          .merged(into: merged.id, sequence: merged.sequence, partition: prepared.partition)
        )
        continue
      }
      let id = UUID()
      try await connection.checkedQuery(
        """
        INSERT INTO orderly_outbox_message
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before)
        VALUES (\(line), \(sequence), \(id), \(prepared.partition), \(prepared.entity),
          \(prepared.payload), 0, \(Date()), \(prepared.headers), \(prepared.notBefore))
        """,
        logger: logger
      )
      written.ids.append(id)
      written.events.append(.appended(id: id, sequence: sequence, partition: prepared.partition))
    }
    // Delivered to listeners when the transaction commits; dropped if it rolls back.
    try await connection.checkedQuery(
      "SELECT pg_notify(\(PostgresSchema.channel), '')",
      logger: logger
    )
    return written
  }

  // deadline: the caller's
  /// Writes messages none of which can be merged, over any number of lines, in a single
  /// statement: the lines' numbers (each line's row updated once, lines in sorted order, as
  /// ``write(_:on:)`` does), the rows and the notification in one round trip.
  private func writeMany(_ batch: [PreparedMessage<Message>], on connection: PostgresConnection)
    async throws
    -> Written
  {
    let ids = batch.map { _ in UUID() }
    let lines = batch.map { Line.key($0.partition) }
    // PostgreSQL arrays of nullable values, as a value and a flag each: PostgresNIO encodes
    // arrays of non-optional elements only.
    let partitions = batch.map { $0.partition ?? "" }
    let partitionGiven = batch.map { $0.partition != nil }
    let payloads = batch.map { ByteBuffer(bytes: $0.payload) }
    let headers = batch.map { $0.headers ?? "" }
    let headersGiven = batch.map { $0.headers != nil }
    let notBefore = batch.map { $0.notBefore ?? Date(timeIntervalSince1970: 0) }
    let notBeforeGiven = batch.map { $0.notBefore != nil }
    let now = Date()
    var sequences: [UUID: Int64] = [:]
    let rows = try await connection.checkedQuery(
      """
      WITH input AS (
        SELECT * FROM unnest(\(lines)::text[], \(ids)::uuid[], \(partitions)::text[],
          \(partitionGiven)::boolean[], \(payloads)::bytea[], \(headers)::text[],
          \(headersGiven)::boolean[], \(notBefore)::timestamptz[], \(notBeforeGiven)::boolean[])
          WITH ORDINALITY AS i(line, id, partition, partition_given, payload, headers,
            headers_given, not_before, not_before_given, position)
      ), needed AS (
        SELECT line, count(*)::bigint AS count FROM input GROUP BY line
      ), numbered AS (
        INSERT INTO orderly_outbox_line AS l (line, last_sequence)
        SELECT line, count FROM needed ORDER BY line
        ON CONFLICT (line) DO UPDATE SET last_sequence = l.last_sequence + excluded.last_sequence
        RETURNING l.line, l.last_sequence
      ), written AS (
        INSERT INTO orderly_outbox_message
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before)
        SELECT i.line,
          n.last_sequence - d.count + row_number() OVER (PARTITION BY i.line ORDER BY i.position),
          i.id, CASE WHEN i.partition_given THEN i.partition END, NULL, i.payload, 0, \(now),
          CASE WHEN i.headers_given THEN i.headers END,
          CASE WHEN i.not_before_given THEN i.not_before END
        FROM input i JOIN numbered n ON n.line = i.line JOIN needed d ON d.line = i.line
        RETURNING id, sequence
      )
      SELECT id, sequence FROM written, LATERAL (SELECT pg_notify(\(PostgresSchema.channel), '')) n
      """,
      logger: logger
    )
    for try await (id, sequence) in rows.decode((UUID, Int64).self) { sequences[id] = sequence }
    guard sequences.count == batch.count else {
      throw OutboxError.storageFailed(
        path: database,
        reason: "the append stored \(sequences.count) of \(batch.count) rows"
      )
    }
    var written = Written()
    written.ids = ids
    for (id, prepared) in zip(ids, batch) {
      written.events.append(
        .appended(id: id, sequence: sequences[id] ?? 0, partition: prepared.partition)
      )
    }
    return written
  }

  // deadline: the caller's
  /// Writes one message that cannot be merged in a single statement: the line's number, the
  /// row and the notification in one round trip.
  private func writeOne(_ prepared: PreparedMessage<Message>, on connection: PostgresConnection)
    async throws
    -> Written
  {
    let line = Line.key(prepared.partition)
    let id = UUID()
    var sequence: Int64?
    let rows = try await connection.checkedQuery(
      """
      WITH numbered AS (
        INSERT INTO orderly_outbox_line (line, last_sequence) VALUES (\(line), 1)
        ON CONFLICT (line) DO UPDATE SET last_sequence = orderly_outbox_line.last_sequence + 1
        RETURNING last_sequence
      ), written AS (
        INSERT INTO orderly_outbox_message
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before)
        SELECT \(line), last_sequence, \(id), \(prepared.partition), \(prepared.entity),
          \(prepared.payload), 0, \(Date()), \(prepared.headers), \(prepared.notBefore)
        FROM numbered
        RETURNING sequence
      )
      SELECT sequence FROM written, LATERAL (SELECT pg_notify(\(PostgresSchema.channel), '')) n
      """,
      logger: logger
    )
    for try await value in rows.decode(Int64.self) { sequence = value }
    guard let sequence else {
      throw OutboxError.storageFailed(path: database, reason: "the append stored no row")
    }
    var written = Written()
    written.ids = [id]
    written.events = [.appended(id: id, sequence: sequence, partition: prepared.partition)]
    return written
  }

  // deadline: the caller's
  /// Folds the message into the newest pending one for its entity in its line, if the merge
  /// closure says so and no delivery of that message ever began.
  ///
  /// The update checks `attempts = 0` again on the row's latest version, so a worker that took
  /// the message a moment ago (and counted its attempt) wins, and the new message is appended.
  private func merge(
    _ prepared: PreparedMessage<Message>,
    line: String,
    on connection: PostgresConnection
  )
    async throws -> (id: UUID, sequence: Int64)?
  {
    guard codec.coalescing != nil, let entity = prepared.entity else { return nil }
    var pending: (sequence: Int64, id: UUID, payload: Data, attempts: Int)?
    let rows = try await connection.checkedQuery(
      """
      SELECT sequence, id, payload, attempts FROM orderly_outbox_message
      WHERE line = \(line) AND entity = \(entity) ORDER BY sequence DESC LIMIT 1
      """,
      logger: logger
    )
    for try await row in rows.decode((Int64, UUID, Data, Int).self) { pending = row }
    // A delivery that began counted its attempt first, so `attempts` tells what a worker of
    // the fleet is delivering.
    guard let pending,
      let payload = codec.merge(prepared, into: pending.payload, attempts: pending.attempts)
    else { return nil }
    var updated = false
    for try await _ in try await connection.checkedQuery(
      """
      UPDATE orderly_outbox_message SET payload = \(payload)
      WHERE line = \(line) AND sequence = \(pending.sequence) AND attempts = 0
      RETURNING sequence
      """,
      logger: logger
    ).decode(Int64.self) {
      updated = true
    }
    return updated ? (pending.id, pending.sequence) : nil
  }

  // MARK: - Counts and events

  /// How many messages wait for delivery in the whole database, those being delivered
  /// included; dead letters are not counted.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func pendingCount() async throws(OutboxError) -> Int {
    try await count("SELECT count(*)::bigint FROM orderly_outbox_message")
  }

  /// How many dead letters the database keeps.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func deadLetterCount() async throws(OutboxError) -> Int {
    try await count("SELECT count(*)::bigint FROM orderly_outbox_dead_letter")
  }

  /// How many messages wait in the whole database, how many are dead letters, and when the
  /// oldest waiting message was appended, in one query.
  ///
  /// A key is blocked when it is paused (``pause(partition:)``), or when its line waits at a dead
  /// letter: under `DeadLetterPolicy.stopLine`, the policy of this worker's current (or a
  /// coming) `start`. Every worker's keys count.
  ///
  /// - Returns: The counts.
  /// - Throws: The database's error as an `OutboxError`.
  public func counts() async throws(OutboxError) -> OutboxCounts {
    let stops =
      state.withLock(announcingTo: self) { $0.worker?.settings.onDeadLetter ?? .stopLine }
      == .stopLine
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var counts = OutboxCounts(pending: 0, deadLetters: 0, oldestPendingAppendedAt: nil)
        let rows = try await client.query(
          """
          WITH blocked AS (
            SELECT line, min(appended_at) AS since FROM orderly_outbox_dead_letter
            WHERE \(stops) GROUP BY line
            UNION ALL
            SELECT l.line,
              (SELECT min(m.appended_at) FROM orderly_outbox_message m WHERE m.line = l.line)
            FROM orderly_outbox_lease l WHERE l.paused
          ),
          worst AS (SELECT line, since FROM blocked WHERE since IS NOT NULL ORDER BY since LIMIT 1)
          SELECT (SELECT count(*)::bigint FROM orderly_outbox_message),
            (SELECT count(*)::bigint FROM orderly_outbox_dead_letter),
            (SELECT min(appended_at) FROM orderly_outbox_message),
            (SELECT count(DISTINCT line)::bigint FROM blocked),
            (SELECT line FROM worst), (SELECT since FROM worst)
          """,
          logger: logger
        )
        for try await (pending, dead, oldest, blocked, worst, since) in rows.decode(
          (Int64, Int64, Date?, Int64, String?, Date?).self
        ) {
          counts = OutboxCounts(
            pending: Int(pending),
            deadLetters: Int(dead),
            oldestPendingAppendedAt: oldest,
            blockedKeys: Int(blocked),
            worstBlockedPartition: worst.flatMap(Line.partition),
            worstBlockedSince: since
          )
        }
        return counts
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// What this worker holds and has met since this outbox was created: the lines it holds a
  /// lease on now, the lease renewals that failed, the acknowledgements the fence refused.
  public var delivererStatistics: DelivererStatistics {
    let (worker, statistics) = state.withLock(announcingTo: self) { ($0.worker, $0.statistics) }
    var result = statistics
    result.keysHeld = worker?.keysHeld ?? 0
    if let stalled = worker?.stalled {
      result.isStalled = stalled.isStalled
      result.stalledOn = stalled.on
    }
    return result
  }

  private func count(_ query: PostgresQuery) async throws(OutboxError) -> Int {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var total = 0
        for try await value in try await client.query(query, logger: logger).decode(Int64.self) {
          total = Int(value)
        }
        return total
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// What happens to messages this outbox appends and delivers.
  ///
  /// Appended, merged, delivering, delivered, retrying, dead-lettered. Other workers' deliveries are not reported here.
  ///
  /// Each access returns a new sequence that receives every event from then on; it ends when
  /// the outbox is released.
  public var events: AsyncStream<OutboxEvent> { hub.subscribe() }

  // MARK: - Pausing one line

  /// Stops every worker from delivering a line, until ``resume(partition:)``: the line's
  /// current delivery finishes, a retry wait ends (at once on this worker; on others, at their
  /// next lease renewal), and no worker takes its next message.
  ///
  /// - Parameter partition: The line; `nil` for the default line.
  /// - Throws: The database's error as an `OutboxError`.
  public func pause(partition: String?) async throws(OutboxError) {
    try await setPaused(true, partition: partition)
    // This worker stops the line at once (a retry wait ends); another process's worker reads
    // the flag with its next renewal, within a quarter of its lease.
    state.withLock(announcingTo: self) { $0.worker }?.linesPaused([Line.key(partition)])
  }

  /// Lets workers deliver a line that ``pause(partition:)`` stopped.
  ///
  /// - Parameter partition: The line; `nil` for the default line.
  /// - Throws: The database's error as an `OutboxError`.
  public func resume(partition: String?) async throws(OutboxError) {
    state.withLock(announcingTo: self) { $0.worker }?.linesResumed([Line.key(partition)])
    try await setPaused(false, partition: partition)
  }

  private func setPaused(_ paused: Bool, partition: String?) async throws(OutboxError) {
    let line = Line.key(partition)
    do {
      try await withDeadline(Self.statementLimit) { [self] in
        // Committed before this returns: the caller is told the line is paused (or resumed).
        try await client.committedQuery(
          """
          INSERT INTO orderly_outbox_lease (line, owner, expires_at, fence, paused)
          VALUES (\(line), NULL, now(), 0, \(paused))
          ON CONFLICT (line) DO UPDATE SET paused = \(paused)
          """,
          logger: logger
        ) { _ in }
        if !paused {
          try await client.query("SELECT pg_notify(\(PostgresSchema.channel), '')", logger: logger)
        }
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// The lines that are paused with ``pause(partition:)``.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func pausedPartitions() async throws(OutboxError) -> [String?] {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var lines: [String?] = []
        for try await line in try await client.query(
          "SELECT line FROM orderly_outbox_lease WHERE paused ORDER BY line",
          logger: logger
        ).decode(String.self) {
          lines.append(Line.partition(line))
        }
        return lines
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  // MARK: - Dead letters

  /// Every dead letter, by line and place.
  ///
  /// - Returns: The dead letters, each with its message (or `nil` if it no longer decodes) and
  ///   the reason it failed.
  /// - Throws: The database's error as an `OutboxError`.
  public func deadLetters() async throws(OutboxError) -> [DeadLetter<Message>] {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        let decoder = JSONDecoder()
        var letters: [DeadLetter<Message>] = []
        let rows = try await client.query(
          """
          SELECT id, sequence, partition, payload, attempts, appended_at, failed_at, reason
          FROM orderly_outbox_dead_letter ORDER BY failed_at, line, sequence
          """,
          logger: logger
        )
        for try await (id, sequence, partition, payload, attempts, appendedAt, failedAt, reason)
          in rows.decode((UUID, Int64, String?, Data, Int, Date, Date, String).self)
        {
          letters.append(
            DeadLetter(
              id: id,
              sequence: sequence,
              partition: partition,
              message: try? decoder.decode(Message.self, from: payload),
              payload: payload,
              attempts: attempts,
              appendedAt: appendedAt,
              failedAt: failedAt,
              reason: reason
            )
          )
        }
        return letters
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// Puts a dead letter back at its place in its line, to be delivered again before the
  /// messages that came after it.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`, or the database's error.
  public func retryDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(
      id: id,
      query: """
        WITH gone AS (DELETE FROM orderly_outbox_dead_letter WHERE id = \(id) RETURNING *)
        INSERT INTO orderly_outbox_message
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers)
        SELECT line, sequence, id, partition, entity, payload, 0, appended_at, headers FROM gone
        RETURNING sequence
        """
    )
  }

  /// Removes a dead letter for good; its line, if it waited for it, goes on.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`, or the database's error.
  public func dropDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(
      id: id,
      query: "DELETE FROM orderly_outbox_dead_letter WHERE id = \(id) RETURNING sequence"
    )
  }

  private func settleDeadLetter(id: UUID, query: PostgresQuery) async throws(OutboxError) {
    let found: Bool
    do {
      found = try await withDeadline(Self.statementLimit) { [self] in
        try await client.transaction(logger: logger) { connection in
          var found = false
          for try await _ in try await connection.checkedQuery(query, logger: self.logger)
            .decode(Int64.self)
          {
            found = true
          }
          try await connection.checkedQuery(
            "SELECT pg_notify(\(PostgresSchema.channel), '')",
            logger: self.logger
          )
          return found
        }
      }
    } catch {
      throw outboxError(error, database: database)
    }
    guard found else { throw .noSuchDeadLetter(id) }
  }

  // MARK: - Waiting

  /// Waits until no message is pending in the database: every worker's deliveries count.
  ///
  /// It looks every 50 milliseconds (and at once after each of this outbox's deliveries).
  ///
  /// - Throws: `OutboxError.lineStopped(partition:deadLetter:)` when a line waits at a dead
  ///   letter with messages behind it (while this outbox delivers with
  ///   `DeadLetterPolicy.stopLine`, or is not started); `OutboxError.cancelled` if the
  ///   calling task is cancelled; `OutboxError.closed(path:)` once ``close()`` is called (a
  ///   look under way when it is ends first, within its deadline); the database's error as an
  ///   `OutboxError` (a look the database does not answer within 30 seconds is
  ///   `OutboxError.cannotOpen(path:reason:)`).
  public func waitUntilDelivered() async throws(OutboxError) {
    while true {
      let (policy, closed) = state.withLock(announcingTo: self) {
        ($0.worker?.settings.onDeadLetter, $0.closed)
      }
      if closed { throw .closed(path: database) }
      do {
        let (pending, stopped) = try await withDeadline(Self.statementLimit) {
          try await self.pendingAndStopped()
        }
        if pending == 0 { return }
        if policy != .continueLine, let stopped {
          throw OutboxError.lineStopped(partition: Line.partition(stopped.0), deadLetter: stopped.1)
        }
        // Safe as library code: a poll interval, ended early by cancellation.
        try await Task.sleep(for: .milliseconds(50))
      } catch {
        throw outboxError(error, database: database)
      }
    }
  }

  /// How long the statements of one call (a count, a look of ``waitUntilDelivered()``, a dead
  /// letter settled, opening) may wait for the database, a pooled connection included; past
  /// it the call fails with `OutboxError.cannotOpen(path:reason:)`.
  static var statementLimit: Duration { .seconds(30) }

  // deadline: the caller's
  /// How many messages are pending, and the first line that waits at a dead letter with
  /// messages behind it.
  private func pendingAndStopped() async throws -> (Int64, (String, UUID)?) {
    var pending: Int64 = 0
    var stopped: (String, UUID)?
    let rows = try await client.query(
      """
      SELECT (SELECT count(*)::bigint FROM orderly_outbox_message),
        (SELECT d.line FROM orderly_outbox_dead_letter d
          WHERE EXISTS (SELECT 1 FROM orderly_outbox_message m WHERE m.line = d.line)
          ORDER BY d.line, d.sequence LIMIT 1),
        (SELECT d.id FROM orderly_outbox_dead_letter d
          WHERE EXISTS (SELECT 1 FROM orderly_outbox_message m WHERE m.line = d.line)
          ORDER BY d.line, d.sequence LIMIT 1)
      """,
      logger: logger
    )
    for try await (count, line, id) in rows.decode((Int64, String?, UUID?).self) {
      pending = count
      if let line, let id { stopped = (line, id) }
    }
    return (pending, stopped)
  }
}

/// What a PostgreSQL outbox keeps in memory, behind its lock.
struct PostgresOutboxState<Message: Codable & Sendable>: Sendable {
  /// The delivering worker, between `start` and `stop`.
  var worker: FleetWorker<Message>?
  /// Whether `stop` is under way.
  var stopping = false
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
