// The SQLite outbox: opening the file, appending (with merges), dead letters, closing.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
public import Foundation
public import GRDB
import OrderlyCore
import OrderlyDatabaseFile
public import OrderlyOutboxCore

/// Ordered work that survives the process: messages written to an SQLite file, delivered in
/// the order they were appended, each removed only once its delivery returned.
///
/// An offline-first app appends every change it must send to its server; the outbox keeps them
/// on disk through relaunches, crashes and hours without a network, and delivers them in order
/// when it can:
///
/// ```swift
/// let outbox = try Outbox<NoteChange>(path: folder + "/outbox.sqlite")
/// try await outbox.append(NoteChange(noteID: 7, text: "milk, eggs"))  // on disk once it returns
/// try outbox.start { envelope in
///   try await api.send(envelope.message, idempotencyKey: envelope.id)
/// }
/// ```
///
/// ## Order
///
/// Appends are numbered in the order they took the database's write lock, and delivered in that
/// order, one at a time. A message appended with a partition key joins that key's line: each
/// line is delivered in order, and lines go side by side, at most `limit` at once. A message
/// that failed is retried before anything behind it in its line.
///
/// ## Delivery is at least once
///
/// A message is removed after its delivery returned. If the process dies while a message is
/// being delivered, it is delivered again, first in its line, on the next start, with the same
/// `Envelope.id`: a receiver that remembers the identifiers it applied applies each message
/// exactly once.
///
/// ## Failures
///
/// A delivery that throws is retried with exponential backoff and jitter (`RetryPolicy`),
/// measured on the outbox's clock. An error the policy does not retry, the last allowed attempt,
/// or a message that no longer decodes moves the message to the dead letters; the
/// `DeadLetterPolicy` says whether its line then waits (the default) or goes on.
///
/// ## Processes
///
/// Any number of processes may append to one file; one at a time delivers it (see
/// ``start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)``), and a
/// delivering outbox picks up other processes' appends within its poll interval. Open one
/// `Outbox` per file in a process: it keeps its counts and its lines' state in memory.
///
/// ## Files
///
/// An outbox at `PATH` is the database `PATH` (tables `outbox_message`, `outbox_dead_letter`
/// and GRDB's `grdb_migrations`), SQLite's `PATH-wal` and `PATH-shm` while it is open, and the
/// deliverer lock `PATH-deliverer`. ``close()`` leaves `PATH` complete on its own.
public final class Outbox<Message: Codable & Sendable>: Sendable {
  /// The database file, or `nil` for an outbox in memory or in a database you opened.
  public let path: String?
  /// How long a call waits for another connection's lock before it fails.
  public let busyTimeout: Duration

  let database: any DatabaseWriter
  /// Whether the outbox opened its file itself (and so checkpoints it when it closes).
  let ownsDatabase: Bool
  let clock: any Clock<Duration>
  let codec: MessageCodec<Message>
  let state: OrderlyLock<OutboxState<Message>>
  /// When the audit trail is pruned next (the rule of every store).
  let auditPruning = OrderlyLock(AuditPruning())
  let hub = OutboxEventHub()
  /// The loop that appends recurring schedules' ticks while the outbox is started.
  let scheduleTicker: ScheduleTicker<Message>
  /// Retry waits in progress, ended early by pause, resume and stop.
  let retryWaits = RetryWaits()

  /// Opens the outbox at `path`, creating it if there is no file there yet.
  ///
  /// The file runs in WAL mode with `synchronous = FULL` (every commit synced): an append that
  /// returned is on disk, and survives the process being killed right after, or a power cut.
  ///
  /// - Parameters:
  ///   - path: The database file. Its folder must exist. It must be empty, or an outbox
  ///     (possibly half-created by a process killed while it created it).
  ///   - busyTimeout: How long to wait when another connection holds the database's lock;
  ///     60 seconds by default, so that a write waits, rather than fails, while another
  ///     process writes on a busy machine.
  ///   - clock: The clock retry waits are measured on.
  ///   - partition: The line a message joins when `append(_:partition:headers:)` names none; `nil`
  ///     puts every such message in the default line.
  ///   - coalescing: How new messages are folded into pending ones; `nil` (the default) never
  ///     merges.
  /// - Throws: `OutboxError` if the file cannot be opened (`OutboxError.cannotOpen(path:reason:)`),
  ///   is not an outbox (`OutboxError.notAnOutbox(path:reason:)`) or is damaged
  ///   (`OutboxError.damaged(path:reason:)`). The file and its folder are then as they were.
  public convenience init(
    path: String,
    busyTimeout: Duration = .seconds(60),
    clock: any Clock<Duration> = ContinuousClock(),
    partition: (@Sendable (Message) -> String?)? = nil,
    coalescing: Coalescing<Message>? = nil
  ) throws(OutboxError) {
    let existed: Bool
    do {
      existed = try DatabaseFile.check(
        path,
        busyTimeout: busyTimeout,
        schema: OutboxSchema.alone
      )
    } catch {
      throw OutboxError(error)
    }
    let pool: DatabasePool
    do {
      pool = try DurableDatabase.openPool(path: path, busyTimeout: busyTimeout)
    } catch {
      if !existed { DatabaseFile.remove(path) }
      throw Self.openingError(error, path: path, busyTimeout: busyTimeout)
    }
    do {
      try self.init(
        opened: pool,
        schema: OutboxSchema.alone,
        path: path,
        ownsDatabase: true,
        busyTimeout: busyTimeout,
        clock: clock,
        partition: partition,
        coalescing: coalescing
      )
    } catch {
      try? pool.close()
      if !existed { DatabaseFile.remove(path) }
      throw error
    }
  }

  /// Opens the outbox at `path` only if the file is already an outbox.
  ///
  /// For `orderly outbox`, which must never create one where it finds none. A missing file, an empty one, or an
  /// SQLite database without the outbox's tables is refused (`OutboxError.cannotOpen` or
  /// `OutboxError.notAnOutbox`) and left as it was; otherwise as ``init(path:busyTimeout:clock:partition:coalescing:)``.
  ///
  /// - Parameters:
  ///   - path: The outbox file.
  ///   - busyTimeout: How long to wait when another connection holds the database's lock.
  /// - Throws: `OutboxError` naming the cause; the file is then as it was.
  package convenience init(existingAt path: String, busyTimeout: Duration = .seconds(60))
    throws(OutboxError)
  {
    do {
      try DatabaseFile.checkExisting(path, busyTimeout: busyTimeout, schema: OutboxSchema.alone)
    } catch {
      throw OutboxError(error)
    }
    // One connection (not a pool): opening a pool writes to the file even to read it (GRDB
    // makes sure a `-wal` exists by creating and dropping a table), and a command that only
    // reads, or refuses what it was asked, must leave the file byte for byte as it was. This
    // connection writes only when a command changes something; closed last, it checkpoints and
    // removes the side files, as a pool's does. Every commit is synced (synchronous = FULL).
    let queue: DatabaseQueue
    do {
      var configuration = Configuration()
      configuration.busyMode = DurableDatabase.busyMode(waitingUpTo: busyTimeout)
      configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
      queue = try DatabaseQueue(path: path, configuration: configuration)
    } catch {
      throw Self.openingError(error, path: path, busyTimeout: busyTimeout)
    }
    do {
      try self.init(
        opened: queue,
        schema: OutboxSchema.alone,
        path: path,
        ownsDatabase: true,
        busyTimeout: busyTimeout,
        clock: ContinuousClock(),
        partition: nil,
        coalescing: nil
      )
    } catch {
      try? queue.close()
      throw error
    }
  }

  /// Keeps the outbox's tables in a database you opened, beside your own tables.
  ///
  /// Use it to append a message in the same transaction as the change it reports, with
  /// ``append(_:partition:headers:in:)``: both are stored, or neither. Open the database in WAL mode with
  /// `synchronous = FULL` (a `DatabasePool`) for appends that survive a crash.
  ///
  /// - Parameters:
  ///   - database: The database. The outbox creates its two tables (`outbox_message`,
  ///     `outbox_dead_letter`) and records the migration in `grdb_migrations`.
  ///   - clock: The clock retry waits are measured on.
  ///   - partition: The line a message joins when an append names none.
  ///   - coalescing: How new messages are folded into pending ones.
  /// - Throws: `OutboxError.notAnOutbox(path:reason:)` if the database holds outbox tables this
  ///   version cannot use.
  public convenience init(
    database: some DatabaseWriter,
    clock: any Clock<Duration> = ContinuousClock(),
    partition: (@Sendable (Message) -> String?)? = nil,
    coalescing: Coalescing<Message>? = nil
  ) throws(OutboxError) {
    try self.init(
      opened: database,
      schema: OutboxSchema.shared,
      path: database.path == ":memory:" || database.path.isEmpty ? nil : database.path,
      busyTimeout: .zero,
      clock: clock,
      partition: partition,
      coalescing: coalescing
    )
  }

  /// Opens a new, empty outbox in memory: for tests and examples; nothing survives the process.
  ///
  /// - Parameters:
  ///   - inMemory: Leave it out: it only tells this initializer from the others.
  ///   - clock: The clock retry waits are measured on.
  ///   - partition: The line a message joins when an append names none.
  ///   - coalescing: How new messages are folded into pending ones.
  /// - Throws: `OutboxError` in the unlikely case SQLite cannot create it.
  public convenience init(
    inMemory: Void = (),
    clock: any Clock<Duration> = ContinuousClock(),
    partition: (@Sendable (Message) -> String?)? = nil,
    coalescing: Coalescing<Message>? = nil
  ) throws(OutboxError) {
    let queue: DatabaseQueue
    do {
      queue = try DatabaseQueue()
    } catch {
      throw .cannotOpen(path: ":memory:", reason: "\(error)")
    }
    try self.init(
      opened: queue,
      schema: OutboxSchema.alone,
      path: nil,
      busyTimeout: .zero,
      clock: clock,
      partition: partition,
      coalescing: coalescing
    )
  }

  private init(
    opened database: any DatabaseWriter,
    schema: DatabaseSchema,
    path: String?,
    ownsDatabase: Bool = false,
    busyTimeout: Duration,
    clock: any Clock<Duration>,
    partition: (@Sendable (Message) -> String?)?,
    coalescing: Coalescing<Message>?
  ) throws(OutboxError) {
    let shown = path ?? ":memory:"
    let counts: (pending: Int, deadLetters: Int)
    do {
      if let problem = try schema.migrate(database) {
        throw OutboxError.notAnOutbox(path: shown, reason: problem)
      }
      counts = try database.read(OutboxStore.counts)
    } catch {
      throw Self.openingError(error, path: shown, busyTimeout: busyTimeout)
    }
    self.path = path
    self.busyTimeout = busyTimeout
    self.database = database
    self.ownsDatabase = ownsDatabase
    self.clock = clock
    self.codec = MessageCodec(partition: partition, coalescing: coalescing)
    self.scheduleTicker = ScheduleTicker(clock: clock, codec: codec, hub: hub)
    self.state = OrderlyLock(OutboxState(pending: counts.pending, deadLetters: counts.deadLetters))
  }

  // MARK: - Appending

  /// Appends messages in one transaction, to be delivered no earlier than `deliverAfter`.
  ///
  /// Their line waits for them in order, and other lines go on (see `DurableOutbox`).
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them.
  ///   - deliverAfter: The earliest time, on this machine's clock, they may be delivered; `nil`
  ///     for at once.
  /// - Returns: Their identifiers, in order.
  /// - Throws: As `append(_:partition:headers:)`; nothing was stored.
  @discardableResult
  public func append(
    contentsOf messages: [Message],
    partition: String?,
    headers: [String: String],
    deliverAfter: Date?
  ) async throws(OutboxError) -> [UUID] {
    let prepared = try codec.prepare(
      messages,
      partition: partition,
      headers: headers,
      deliverAfter: deliverAfter
    )
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.write { db in try self.write(prepared, in: db) }.map(\.id)
    } catch {
      throw failure(error)
    }
  }

  /// Appends messages in one transaction, each unless its unique key is held (by a pending
  /// message, or by one appended within its window); see `DurableOutbox`.
  ///
  /// The key is checked and taken in the file's one write transaction, so appenders racing in
  /// this process or in others on the same file never both store a message under one key.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - uniqueKeys: One key per message, or `nil` for one without.
  ///   - uniqueFor: How long after the append a key stays held, delivered or not, on this
  ///     machine's clock; `nil` for while its message is pending.
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` for at once.
  /// - Returns: One result per message, in order.
  /// - Throws: `OutboxError.invalidUniqueKey(_:)`, or as `append(_:partition:headers:)`;
  ///   nothing was stored.
  @discardableResult
  public func append(
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
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.write { db in try self.write(prepared, in: db) }
    } catch {
      throw failure(error)
    }
  }

  /// Appends a message inside a write transaction of the database the outbox lives in: it is
  /// stored exactly when the transaction commits.
  ///
  /// Use it with ``init(database:clock:partition:coalescing:)`` to record a change and the
  /// message that reports it together:
  ///
  /// ```swift
  /// try await database.write { db in
  ///   try db.execute(sql: "UPDATE note SET text = ? WHERE id = ?", arguments: ["milk", 7])
  ///   try outbox.append(NoteChange(noteID: 7, text: "milk"), in: db)
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message (see `append(_:partition:headers:)`).
  ///   - db: A connection inside a write transaction on the outbox's database.
  /// - Returns: The message's identifier.
  /// - Throws: `OutboxError.cannotEncode(reason:)`, or the database's error.
  @discardableResult
  public func append(
    _ message: Message,
    partition: String? = nil,
    headers: [String: String] = [:],
    in db: Database
  ) throws -> UUID {
    let prepared = try codec.prepare([message], partition: partition, headers: headers)
    try checkOpen()
    return try write(prepared, in: db)[0].id
  }

  /// Appends a message inside a write transaction of the outbox's database, unless its unique
  /// key is held: it is stored exactly when the transaction commits, and the key is taken with
  /// it (see `DurableOutbox`'s `append(_:uniqueKey:uniqueFor:partition:headers:deliverAfter:)`).
  ///
  /// ```swift
  /// try await database.write { db in
  ///   try db.execute(sql: "UPDATE invoice SET sent = 1 WHERE id = ?", arguments: [7])
  ///   try outbox.append(SendInvoice(id: 7), uniqueKey: "invoice-7", in: db)
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - uniqueKey: The key; non-empty, at most 200 UTF-8 bytes.
  ///   - uniqueFor: How long after this append the key stays held, delivered or not; `nil` for
  ///     while the message is pending.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message.
  ///   - db: A connection inside a write transaction on the outbox's database.
  /// - Returns: Whether it was appended, and the identifier of the message that holds the key.
  /// - Throws: `OutboxError.invalidUniqueKey(_:)`, `OutboxError.cannotEncode(reason:)`, or the
  ///   database's error.
  @discardableResult
  public func append(
    _ message: Message,
    uniqueKey: String,
    uniqueFor: Duration? = nil,
    partition: String? = nil,
    headers: [String: String] = [:],
    in db: Database
  ) throws -> UniqueAppend {
    let prepared = try codec.prepare(
      [message],
      partition: partition,
      headers: headers,
      uniqueKeys: [uniqueKey],
      uniqueFor: uniqueFor
    )
    try checkOpen()
    return try write(prepared, in: db)[0]
  }

  /// Writes messages (or merges them), and arranges for the counts, the events and the
  /// deliveries to follow the commit, with one commit hook for the whole batch.
  func write(_ batch: [PreparedMessage<Message>], in db: Database) throws
    -> [UniqueAppend]
  {
    var ids: [UniqueAppend] = []
    var events: [OutboxEvent] = []
    var added = 0
    var partitions: [String?] = []
    let now = Date()
    // Whether any key is held for a window: read once per transaction, and only by a batch
    // with a unique key, so that appends without windows look nothing up.
    var windows: Bool?
    for prepared in batch {
      if let key = prepared.uniqueKey {
        let held = try windows ?? OutboxStore.holdsWindows(db)
        windows = held
        if held, let holder = try OutboxStore.windowHolder(db, key: key, now: now) {
          ids.append(.duplicate(of: holder.id))
          events.append(.duplicate(id: holder.id, sequence: holder.sequence, uniqueKey: key))
          continue
        }
      }
      if let pending = try merge(prepared, in: db) {
        ids.append(.appended(pending.id))
        events.append(
          .merged(into: pending.id, sequence: pending.sequence, partition: pending.partition)
        )
        continue
      }
      let id = UUID()
      let inserted = try OutboxStore.insert(
        db,
        id: id,
        partition: prepared.partition,
        entity: prepared.entity,
        payload: prepared.payload,
        appendedAt: Date(),
        headers: prepared.headers,
        notBefore: prepared.notBefore,
        uniqueKey: prepared.uniqueKey
      )
      guard let sequence = inserted else {
        // Held by a pending message: the index refused the row.
        guard let key = prepared.uniqueKey,
          let holder = try OutboxStore.pendingHolder(db, key: key)
        else {
          throw OutboxError.storageFailed(
            path: path ?? ":memory:",
            reason: "a message with a unique key was refused, and no pending message holds it"
          )
        }
        ids.append(.duplicate(of: holder.id))
        events.append(.duplicate(id: holder.id, sequence: holder.sequence, uniqueKey: key))
        continue
      }
      if let key = prepared.uniqueKey, let seconds = prepared.uniqueFor {
        try OutboxStore.holdUniqueKey(
          db,
          key: key,
          id: id,
          sequence: sequence,
          now: now,
          seconds: seconds
        )
        windows = true
      }
      ids.append(.appended(id))
      events.append(.appended(id: id, sequence: sequence, partition: prepared.partition))
      added += 1
      if !partitions.contains(prepared.partition) { partitions.append(prepared.partition) }
    }
    db.afterNextTransaction { [events, added, partitions] _ in
      self.state.withLock(announcingTo: self) { $0.pending += added }
      for event in events { self.hub.emit(event) }
      for partition in partitions { self.schedule(partition) }
    }
    return ids
  }

  /// Folds the message into the newest pending one for its entity, if the merge closure says
  /// so and that message is not being delivered.
  ///
  /// Runs under the database's write lock, as a line takes its next message does: a line that
  /// took a message before this check marks it, and one that takes it after reads the merged
  /// payload.
  ///
  /// - Returns: The pending message it was folded into, or `nil` if it must be appended.
  private func merge(_ prepared: PreparedMessage<Message>, in db: Database) throws -> StoredMessage?
  {
    guard codec.coalescing != nil, let entity = prepared.entity,
      let pending = try OutboxStore.newest(db, entity: entity),
      pending.partition == prepared.partition
    else { return nil }
    // A line in delivery marks the last message it claimed: that one and those before it.
    let delivering = state.withLock(announcingTo: self) {
      $0.delivering[pending.partition].map { pending.sequence <= $0 } ?? false
    }
    let merged = codec.merge(
      prepared,
      into: pending.payload,
      attempts: pending.attempts,
      delivering: delivering
    )
    guard let payload = merged else { return nil }
    try OutboxStore.replacePayload(db, sequence: pending.sequence, payload: payload)
    return pending
  }

  // MARK: - Counts and events

  /// How many messages wait for delivery, the one being delivered included; dead letters are
  /// not counted.
  public var pendingCount: Int { state.withLock(announcingTo: self) { $0.pending } }

  /// How many dead letters the outbox keeps.
  public var deadLetterCount: Int { state.withLock(announcingTo: self) { $0.deadLetters } }

  /// Whether delivery is paused with ``pause()``.
  public var isPaused: Bool { state.withLock(announcingTo: self) { $0.paused } }

  /// What happens to messages from now on: appended, merged, delivering, delivered, retrying
  /// (with the wait before the next attempt), dead-lettered.
  ///
  /// Each access returns a new sequence that receives every event from then on. It ends when
  /// the outbox is closed (``close()``) or released; one taken after closing is already over.
  public var events: AsyncStream<OutboxEvent> { hub.subscribe() }

  /// When the oldest message still pending was appended, or `nil` if none is pending: for a
  /// gauge of how far delivery is behind.
  ///
  /// - Throws: `OutboxError.closed(path:)`, or an `OutboxError` if the read fails.
  public func oldestPendingAppendedAt() async throws(OutboxError) -> Date? {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db in try OutboxStore.oldestAppendedAt(db) }
    } catch {
      throw failure(error)
    }
  }

  /// How many messages wait, how many are dead letters, and when the oldest waiting message was
  /// appended.
  ///
  /// The two counts are this outbox's own (``pendingCount``, ``deadLetterCount``); the oldest
  /// message is read from the file.
  ///
  /// A key is blocked when it is paused (``pause(partition:)``), or when its line waits at a
  /// dead letter: under `DeadLetterPolicy.stopLine`, the policy of the current (or a coming)
  /// `start`.
  ///
  /// - Returns: The counts.
  /// - Throws: `OutboxError.closed(path:)`, or an `OutboxError` if the read fails.
  public func counts() async throws(OutboxError) -> OutboxCounts {
    try enterDatabase()
    defer { leaveDatabase() }
    let stops = state.withLock(announcingTo: self) { $0.delivery?.onDeadLetter ?? .stopLine }
    let (oldest, blocked) = try await readCounts(stops: stops == .stopLine)
    return state.withLock(announcingTo: self) { state in
      OutboxCounts(
        pending: state.pending,
        deadLetters: state.deadLetters,
        oldestPendingAppendedAt: oldest,
        blockedKeys: blocked.count,
        worstBlockedPartition: blocked.worst?.partition,
        worstBlockedSince: blocked.worst?.since
      )
    }
  }

  private func readCounts(stops: Bool) async throws(OutboxError) -> (
    Date?, (count: Int, worst: (partition: String?, since: Date)?)
  ) {
    do {
      return try await database.read { db in
        let oldest = try OutboxStore.oldestAppendedAt(db)
        return (oldest, try OutboxStore.blockedLines(db, deadLettersStop: stops))
      }
    } catch {
      throw failure(error)
    }
  }

  /// The lines this outbox delivers now (a turn under way or enqueued); no leases, no fences.
  public var delivererStatistics: DelivererStatistics {
    state.withLock(announcingTo: self) { state in
      var statistics = DelivererStatistics(
        keysHeld: state.scheduled.union(state.delivering.keys).count
      )
      statistics.orderRefusals.outOfOrder = state.refusedOutOfOrder
      return statistics
    }
  }

  /// Counts an acknowledgement the store refused as out of order (never expected: a defect
  /// kept from committing), and ends the line's turn without rescheduling it (a defect that
  /// repeats does not spin): the line is delivered again from its first message when it is
  /// next scheduled (an append, a look at the file, a new start).
  func refusedOutOfOrder(_ partition: String?) {
    state.withLock(announcingTo: self) { state in state.refusedOutOfOrder += 1 }
  }

  // MARK: - Dead letters

  /// Every dead letter, oldest place first.
  ///
  /// - Returns: The dead letters, each with its message (or `nil` if it no longer decodes) and
  ///   the reason it failed.
  /// - Throws: `OutboxError.busy(path:waited:)` or `OutboxError.closed(path:)`.
  public func deadLetters() async throws(OutboxError) -> [DeadLetter<Message>] {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db in
        let decoder = JSONDecoder()
        return try OutboxStore.deadLetterRows(db).map { row in
          let payload: Data = row["payload"]
          return DeadLetter(
            id: try UnreadableRow.id(of: row, in: OutboxSchema.deadLetterTable),
            sequence: row["sequence"],
            partition: row["partition"],
            message: try? decoder.decode(Message.self, from: payload),
            payload: payload,
            attempts: row["attempts"],
            appendedAt: Date(timeIntervalSince1970: row["appendedAt"]),
            failedAt: Date(timeIntervalSince1970: row["failedAt"]),
            reason: row["reason"]
          )
        }
      }
    } catch {
      throw failure(error)
    }
  }

  /// Puts a dead letter back at its place in its line, to be delivered again (before the
  /// messages that came after it, if its line waited).
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`; otherwise as ``deadLetters()``.
  public func retryDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(id: id, revive: true)
  }

  /// Removes a dead letter for good; its line, if it waited for it, goes on.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`; otherwise as ``deadLetters()``.
  public func dropDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(id: id, revive: false)
  }

  private func settleDeadLetter(id: UUID, revive: Bool) async throws(OutboxError) {
    try enterDatabase()
    defer { leaveDatabase() }
    let result: (partition: String?, remaining: Int)?
    do {
      result = try await database.write { db -> (String?, Int)? in
        guard let partition = try OutboxStore.deadLetterPartition(db, id: id) else { return nil }
        if revive { try OutboxStore.revive(db, id: id) } else { try OutboxStore.drop(db, id: id) }
        db.afterNextTransaction { _ in
          self.state.withLock(announcingTo: self) { state in
            state.deadLetters -= 1
            if revive { state.pending += 1 }
          }
        }
        return (
          partition, try OutboxStore.count(db, in: OutboxStore.deadLetters, partition: partition)
        )
      }
    } catch {
      throw failure(error)
    }
    guard let result else { throw .noSuchDeadLetter(id) }
    state.withLock(announcingTo: self) { state in
      if result.remaining == 0 { state.stoppedLines.remove(result.partition) }
    }
    schedule(result.partition)
  }

  // MARK: - Errors

  /// Counts a use of the database that begins, or refuses it once the outbox is closed.
  ///
  /// ``close()`` waits for every use under way before it closes the connection (SQLite must
  /// not be called on a closed connection). Pair it with ``leaveDatabase()``.
  ///
  /// - Throws: `OutboxError.closed(path:)`.
  func enterDatabase() throws(OutboxError) {
    let open = state.withLock(announcingTo: self) { state -> Bool in
      guard !state.closed else { return false }
      state.databaseUses += 1
      return true
    }
    if !open { throw .closed(path: path ?? ":memory:") }
  }

  /// Ends a use of the database begun with ``enterDatabase()``; the last one after ``close()``
  /// lets it close the connection.
  func leaveDatabase() {
    let closer = state.withLock(announcingTo: self) { state in
      state.databaseUses -= 1
      return state.closed && state.databaseUses == 0 ? state.takeCloser() : nil
    }
    closer?.resume()
  }

  func checkOpen() throws(OutboxError) {
    if state.withLock(announcingTo: self, { $0.closed }) {
      throw .closed(path: path ?? ":memory:")
    }
  }

  /// A database error as an outbox error that says what to do.
  func failure(_ error: any Error) -> OutboxError {
    if let error = error as? OutboxError { return error }
    if error is CancellationError { return .cancelled }
    let shown = path ?? ":memory:"
    guard let error = error as? DatabaseError else {
      return .storageFailed(path: shown, reason: "\(error)")
    }
    let reason = error.message ?? "SQLite error \(error.resultCode.rawValue)"
    switch error.resultCode {
    case .SQLITE_BUSY, .SQLITE_LOCKED: return .busy(path: shown, waited: busyTimeout)
    // A closed connection reports misuse (its message then reads "out of memory").
    case .SQLITE_MISUSE: return .closed(path: shown)
    case .SQLITE_FULL: return .diskFull(path: shown)
    case .SQLITE_CORRUPT, .SQLITE_NOTADB: return .damaged(path: shown, reason: reason)
    case .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH:
      return .cannotOpen(path: shown, reason: reason)
    default: return .storageFailed(path: shown, reason: reason)
    }
  }

  private static func openingError(_ error: any Error, path: String, busyTimeout: Duration)
    -> OutboxError
  {
    if let error = error as? OutboxError { return error }
    return OutboxError(DatabaseFileError(opening: error, path: path, busyTimeout: busyTimeout))
  }
}
#endif
