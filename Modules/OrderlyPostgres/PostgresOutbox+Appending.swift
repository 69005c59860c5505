// Appending to a PostgreSQL outbox: a message's line numbered in commit order, in one transaction
// or in the caller's, merged into a pending one when the outbox merges.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
public import Foundation
import Logging
import OrderlyCore
public import OrderlyOutboxCore
public import PostgresNIO

extension PostgresOutbox {
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
    return try await transact(prepared).map(\.id)
  }

  /// Appends messages in one transaction, each unless its unique key is held (by a pending
  /// message, or by one appended within its window); see `DurableOutbox`.
  ///
  /// A pending message's key is held by a unique index on the messages, and a window's by the
  /// key's row: a second appender of the same key, in this process or another, waits for the
  /// first to commit or roll back, then finds the key held or free; no key is read first and
  /// written after.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - uniqueKeys: One key per message, or `nil` for one without.
  ///   - uniqueFor: How long after the append a key stays held, delivered or not, on the
  ///     database server's clock; `nil` for while its message is pending.
  ///   - partition: The line they join; `nil` asks the outbox's `partition` closure for each.
  ///   - headers: Strings stored with every one of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` for at once.
  /// - Returns: One result per message, in order.
  /// - Throws: `OutboxError.invalidUniqueKey(_:)`, or as
  ///   `append(contentsOf:partition:headers:deliverAfter:)`; nothing was stored.
  @discardableResult public func append(
    contentsOf messages: [Message],
    uniqueKeys: [String?],
    uniqueFor: Duration?,
    partition: String?,
    headers: [String: String],
    deliverAfter: Date?
  ) async throws(OutboxError) -> [UniqueAppend] {
    let prepared = try codec.prepare(
      messages,
      partition: partition,
      headers: headers,
      deliverAfter: deliverAfter,
      uniqueKeys: uniqueKeys,
      uniqueFor: uniqueFor
    )
    guard !prepared.isEmpty else { return [] }
    return try await transact(prepared)
  }

  /// Writes prepared messages in a transaction of their own, tried again when a pooled
  /// connection had ended before the commit, and emits their events once it committed.
  private func transact(_ prepared: [PreparedMessage<Message>]) async throws(OutboxError)
    -> [UniqueAppend]
  {
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
    return written.results
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
    return written.results[0].id
  }

  /// Appends a message inside a transaction you opened on the outbox's database, unless its
  /// unique key is held: it is stored, and the key taken, exactly when your transaction commits
  /// (see `DurableOutbox`'s `append(_:uniqueKey:uniqueFor:partition:headers:deliverAfter:)`).
  ///
  /// Another appender of the same key waits for your transaction to end, so keep it short.
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - uniqueKey: The key; non-empty, at most 200 UTF-8 bytes.
  ///   - uniqueFor: How long after this append the key stays held, delivered or not; `nil` for
  ///     while the message is pending.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message.
  ///   - connection: A connection inside a transaction (`BEGIN` ran) on the outbox's database.
  /// - Returns: Whether it was appended, and the identifier of the message that holds the key.
  /// - Throws: `OutboxError.invalidUniqueKey(_:)`, `OutboxError.cannotEncode(reason:)`, or the
  ///   database's error (roll back).
  @discardableResult public func append(
    _ message: Message,
    uniqueKey: String,
    uniqueFor: Duration? = nil,
    partition: String? = nil,
    headers: [String: String] = [:],
    on connection: PostgresConnection
  ) async throws -> UniqueAppend {
    let prepared = try codec.prepare(
      [message],
      partition: partition,
      headers: headers,
      uniqueKeys: [uniqueKey],
      uniqueFor: uniqueFor
    )
    let written = try await withDeadline(Self.statementLimit) {
      try await self.write(prepared, on: connection)
    }
    for event in written.events { hub.emit(event) }
    return written.results[0]
  }

  /// What a write did.
  struct Written: Sendable {
    var results: [UniqueAppend] = []
    var events: [OutboxEvent] = []

    /// Adds what a message with a unique key came to, with its event.
    mutating func add(_ keyed: KeyedWrite, key: String, partition: String?) {
      results.append(keyed.result)
      switch keyed.result {
      case .appended(let id):
        events.append(.appended(id: id, sequence: keyed.sequence, partition: partition))
      case .duplicate(let holder):
        events.append(.duplicate(id: holder, sequence: keyed.sequence, uniqueKey: key))
      }
    }
  }

  /// What the append of a message with a unique key came to: the result, and the new message's
  /// place in its line, or the holder's.
  struct KeyedWrite: Sendable {
    let result: UniqueAppend
    let sequence: Int64
  }

  // deadline: the caller's
  /// Writes messages on a connection inside a transaction.
  ///
  /// Each line's row is updated first, lines in sorted order (so two batches never wait for
  /// each other in a cycle), reserving as many numbers as the batch has messages for that line;
  /// the row stays locked until the transaction ends.
  func write(_ batch: [PreparedMessage<Message>], on connection: PostgresConnection)
    async throws
    -> Written
  {
    if batch.count == 1, let key = batch[0].uniqueKey {
      return try await writeKeyedOne(batch[0], key: key, on: connection)
    }
    let keyed = batch.contains { $0.uniqueKey != nil }
    if !keyed, batch.count == 1, codec.coalescing == nil || batch[0].entity == nil {
      return try await writeOne(batch[0], on: connection)
    }
    if !keyed, codec.coalescing == nil || batch.allSatisfy({ $0.entity == nil }) {
      return try await writeMany(batch, on: connection)
    }
    var needed: [String: Int64] = [:]
    for prepared in batch { needed[Line.key(prepared.partition), default: 0] += 1 }
    var next: [String: Int64] = [:]
    for line in needed.keys.sorted() {
      let count = needed[line] ?? 0
      let rows = try await connection.checkedQuery(
        """
        INSERT INTO \(Table.line) (line, last_sequence) VALUES (\(line), \(count))
        ON CONFLICT (line) DO UPDATE
          SET last_sequence = \(Table.line).last_sequence + \(count)
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
      if let key = prepared.uniqueKey {
        let keyed = try await writeKeyed(
          prepared,
          key: key,
          line: line,
          sequence: sequence,
          on: connection
        )
        written.add(keyed, key: key, partition: prepared.partition)
        continue
      }
      if let merged = try await merge(prepared, line: line, on: connection) {
        written.results.append(.appended(merged.id))
        written.events.append(
          .merged(into: merged.id, sequence: merged.sequence, partition: prepared.partition)
        )
        continue
      }
      let id = UUID()
      try await connection.checkedQuery(
        """
        INSERT INTO \(Table.message)
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before)
        VALUES (\(line), \(sequence), \(id), \(prepared.partition), \(prepared.entity),
          \(prepared.payload), 0, \(Date()), \(prepared.headers), \(prepared.notBefore))
        """,
        logger: logger
      )
      written.results.append(.appended(id))
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
        INSERT INTO \(Table.line) AS l (line, last_sequence)
        SELECT line, count FROM needed ORDER BY line
        ON CONFLICT (line) DO UPDATE SET last_sequence = l.last_sequence + excluded.last_sequence
        RETURNING l.line, l.last_sequence
      ), written AS (
        INSERT INTO \(Table.message)
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
    for try await row in rows {
      let row = NamedColumns(row)
      sequences[try row("id", as: UUID.self)] = try row("sequence")
    }
    guard sequences.count == batch.count else {
      throw OutboxError.storageFailed(
        path: database,
        reason: "the append stored \(sequences.count) of \(batch.count) rows"
      )
    }
    var written = Written()
    written.results = ids.map(UniqueAppend.appended)
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
        INSERT INTO \(Table.line) (line, last_sequence) VALUES (\(line), 1)
        ON CONFLICT (line) DO UPDATE SET last_sequence = \(Table.line).last_sequence + 1
        RETURNING last_sequence
      ), written AS (
        INSERT INTO \(Table.message)
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
    written.results = [.appended(id)]
    written.events = [.appended(id: id, sequence: sequence, partition: prepared.partition)]
    return written
  }

  // deadline: the caller's
  /// Writes a message with a unique key under the number `sequence` of its line, unless the
  /// key is held.
  ///
  /// The row goes in with `ON CONFLICT DO NOTHING` on the unique index of pending keys: an
  /// appender of the same key that has not committed makes this one wait, then conflict (it
  /// committed) or go in (it rolled back). A window is taken after, on the key's row, which
  /// an expired window gives up in the same statement; when the window is held, the row just
  /// written is taken out again, before anyone can see it. A number not used leaves a gap in
  /// the line, which its order does not mind.
  ///
  /// - Returns: `.appended` with the new identifier, or `.duplicate` with the holder's; and
  ///   the new message's place, or the holder's.
  private func writeKeyed(
    _ prepared: PreparedMessage<Message>,
    key: String,
    line: String,
    sequence: Int64,
    on connection: PostgresConnection,
    tried first: (id: UUID, inserted: Bool)? = nil
  ) async throws -> KeyedWrite {
    var first = first
    // The holder can be delivered between the conflict and the look-up: then the key is free,
    // and the insert goes again (a few times at most, each after a delivery of that key).
    for _ in 0..<8 {
      if let tried = first {
        first = nil
        if let result = try await afterInsert(
          prepared,
          key: key,
          line: line,
          sequence: sequence,
          id: tried.id,
          inserted: tried.inserted,
          on: connection
        ) {
          return result
        }
        continue
      }
      let id = UUID()
      var inserted = false
      for try await _ in try await connection.checkedQuery(
        """
        INSERT INTO \(Table.message)
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before, unique_key)
        VALUES (\(line), \(sequence), \(id), \(prepared.partition), NULL, \(prepared.payload), 0,
          \(Date()), \(prepared.headers), \(prepared.notBefore), \(key))
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
        RETURNING sequence
        """,
        logger: logger
      ).decode(Int64.self) {
        inserted = true
      }
      if let result = try await afterInsert(
        prepared,
        key: key,
        line: line,
        sequence: sequence,
        id: id,
        inserted: inserted,
        on: connection
      ) {
        return result
      }
    }
    throw OutboxError.storageFailed(
      path: database,
      reason: "the unique key '\(key)' was taken and freed again 8 times during one append"
    )
  }

  // deadline: the caller's
  /// What follows an insert of a keyed message: the holder's identifier when the index refused
  /// it, the window taken (or found held, and the row taken out again), or `nil` to try the
  /// insert again (the holder was delivered in between).
  private func afterInsert(
    _ prepared: PreparedMessage<Message>,
    key: String,
    line: String,
    sequence: Int64,
    id: UUID,
    inserted: Bool,
    on connection: PostgresConnection
  ) async throws -> KeyedWrite? {
    if !inserted {
      var holder: KeyedWrite?
      for try await row in try await connection.checkedQuery(
        "SELECT id, sequence FROM \(Table.message) WHERE unique_key = \(key)",
        logger: logger
      ) {
        let row = NamedColumns(row)
        holder = KeyedWrite(result: .duplicate(of: try row("id")), sequence: try row("sequence"))
      }
      return holder
    }
    var taken = false
    if let seconds = prepared.uniqueFor {
      for try await _ in try await connection.checkedQuery(
        """
        INSERT INTO \(Table.uniqueWindow) AS w (key, id, sequence, until)
        VALUES (\(key), \(id), \(sequence), now() + make_interval(secs => \(seconds)))
        ON CONFLICT (key) DO UPDATE
          SET id = excluded.id, sequence = excluded.sequence, until = excluded.until
          WHERE w.until <= now()
        RETURNING w.id
        """,
        logger: logger
      ) {
        taken = true
      }
    } else {
      // No window of its own, but one taken earlier still holds the key. A window taken
      // since this transaction's insert would have met that insert in the index and waited.
      var held = false
      for try await _ in try await connection.checkedQuery(
        "SELECT 1 FROM \(Table.uniqueWindow) WHERE key = \(key) AND until > now()",
        logger: logger
      ) {
        held = true
      }
      if !held { return KeyedWrite(result: .appended(id), sequence: sequence) }
    }
    if taken {
      // Keys whose windows passed, forgotten a few at a time by the appends that take one.
      try await connection.checkedQuery(
        """
        DELETE FROM \(Table.uniqueWindow) WHERE key IN (
          SELECT key FROM \(Table.uniqueWindow) WHERE until <= now()
          ORDER BY until LIMIT 16 FOR UPDATE SKIP LOCKED)
        """,
        logger: logger
      )
      return KeyedWrite(result: .appended(id), sequence: sequence)
    }
    try await connection.checkedQuery(
      "DELETE FROM \(Table.message) WHERE line = \(line) AND sequence = \(sequence)",
      logger: logger
    )
    var holder: KeyedWrite?
    for try await row in try await connection.checkedQuery(
      "SELECT id, sequence FROM \(Table.uniqueWindow) WHERE key = \(key)",
      logger: logger
    ) {
      let row = NamedColumns(row)
      holder = KeyedWrite(result: .duplicate(of: try row("id")), sequence: try row("sequence"))
    }
    guard let holder else {
      throw OutboxError.storageFailed(
        path: database,
        reason: "the unique key '\(key)' was held for a window, and then by nothing"
      )
    }
    return holder
  }

  // deadline: the caller's
  /// Writes one message with a unique key: the line's number, the row (unless the index holds
  /// the key) and the notification in one round trip, then the window as ``writeKeyed``.
  private func writeKeyedOne(
    _ prepared: PreparedMessage<Message>,
    key: String,
    on connection: PostgresConnection
  ) async throws -> Written {
    let line = Line.key(prepared.partition)
    let id = UUID()
    var answer: (sequence: Int64, inserted: Bool)?
    let rows = try await connection.checkedQuery(
      """
      WITH numbered AS (
        INSERT INTO \(Table.line) (line, last_sequence) VALUES (\(line), 1)
        ON CONFLICT (line) DO UPDATE SET last_sequence = \(Table.line).last_sequence + 1
        RETURNING last_sequence
      ), written AS (
        INSERT INTO \(Table.message)
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
           not_before, unique_key)
        SELECT \(line), last_sequence, \(id), \(prepared.partition), NULL, \(prepared.payload), 0,
          \(Date()), \(prepared.headers), \(prepared.notBefore), \(key)
        FROM numbered
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
        RETURNING sequence
      )
      SELECT n.last_sequence AS sequence, EXISTS (SELECT 1 FROM written) AS inserted,
        (SELECT count(pg_notify(\(PostgresSchema.channel), '')) FROM written) AS notified
      FROM numbered n
      """,
      logger: logger
    )
    for try await row in rows {
      let row = NamedColumns(row)
      answer = (try row("sequence"), try row("inserted"))
    }
    guard let answer else {
      throw OutboxError.storageFailed(path: database, reason: "the append numbered no line")
    }
    let keyed = try await writeKeyed(
      prepared,
      key: key,
      line: line,
      sequence: answer.sequence,
      on: connection,
      tried: (id, answer.inserted)
    )
    var written = Written()
    written.add(keyed, key: key, partition: prepared.partition)
    if case .appended(let appended) = keyed.result {
      // The first insert notified; one after a holder was delivered did not.
      if appended != id {
        try await connection.checkedQuery(
          "SELECT pg_notify(\(PostgresSchema.channel), '')",
          logger: logger
        )
      }
    }
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
      SELECT sequence, id, payload, attempts FROM \(Table.message)
      WHERE line = \(line) AND entity = \(entity) ORDER BY sequence DESC LIMIT 1
      """,
      logger: logger
    )
    for try await row in rows {
      let row = NamedColumns(row)
      pending = (
        try row("sequence"), try row("id"), try row("payload"), try row("attempts")
      )
    }
    // A delivery that began counted its attempt first, so `attempts` tells what a worker of
    // the fleet is delivering.
    guard let pending,
      let payload = codec.merge(prepared, into: pending.payload, attempts: pending.attempts)
    else { return nil }
    var updated = false
    for try await _ in try await connection.checkedQuery(
      """
      UPDATE \(Table.message) SET payload = \(payload)
      WHERE line = \(line) AND sequence = \(pending.sequence) AND attempts = 0
      RETURNING sequence
      """,
      logger: logger
    ).decode(Int64.self) {
      updated = true
    }
    return updated ? (pending.id, pending.sequence) : nil
  }
}
#endif
