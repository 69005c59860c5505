// What every outbox offers, whichever store keeps it.

public import Foundation

/// What every outbox offers, whichever store keeps it: `Outbox` on SQLite, and
/// `PostgresOutbox` (module `OrderlyPostgres`) on PostgreSQL.
///
/// Code that appends, starts delivery, watches and manages dead letters through this protocol
/// works against either store; the store is chosen where the outbox is created. Starting takes
/// the store's own options type (``Options``: a file has one deliverer, a PostgreSQL fleet has
/// leases), whose common part is ``DeliveryOptions``.
///
/// ```swift
/// func record(_ change: NoteChange, in outbox: some DurableOutbox<NoteChange>) async throws {
///   try await outbox.append(change, partition: "note-\(change.noteID)", headers: [:])
/// }
/// ```
public protocol DurableOutbox<Message>: AnyObject, Sendable {
  /// What the outbox carries.
  associatedtype Message: Codable & Sendable

  /// The store's delivery options: ``DeliveryOptions`` and what only this store has.
  associatedtype Options: DeliveryOptions

  /// Starts delivering: every message already in the outbox, then each one appended, each line
  /// in order, up to `options.limit` lines at once.
  ///
  /// Each store documents the rest of the contract on its own `start` methods, which call this
  /// one: `Outbox.start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)`
  /// and `PostgresOutbox.start(limit:retry:onDeadLetter:lease:pollInterval:deliver:)` for
  /// single messages, their `batchesOf:` forms for ordered batches. A line has one delivery in
  /// progress at a time; a message is removed once its delivery returned; a failure is retried
  /// by `options.retry` or set aside by `options.onDeadLetter`; events say what happened.
  ///
  /// - Parameters:
  ///   - options: The options.
  ///   - deliver: The handler: ``DeliveryHandler/each(_:)`` for one message a call (with a
  ///     batch size of 1), ``DeliveryHandler/batches(_:)`` for ordered batches of up to
  ///     `options.batchSize` messages.
  /// - Throws: ``OutboxError/alreadyStarted`` if the outbox is delivering;
  ///   ``OutboxError/invalidOption(_:)`` for an option out of range (see
  ///   ``DeliveryOptions``) or a batch size above 1 with an `.each` handler;
  ///   ``OutboxError/closed(path:)``; the store's own errors.
  func start(_ options: Options, deliver: DeliveryHandler<Message>) throws(OutboxError)

  /// Appends messages in one transaction, to be delivered no earlier than `deliverAfter`.
  ///
  /// They take their places in their line as any append does, and the line keeps its order:
  /// when the first of them is the line's next message, the line waits until `deliverAfter`
  /// (messages appended behind them wait too), and says so (``OutboxKey/headNotBefore``,
  /// ``OutboxKeyStuck/scheduled(until:)``); other lines are unaffected. A message with a
  /// not-before time is never merged (``Coalescing``). The time is the wall clock's: a file
  /// outbox compares it with this machine's, `PostgresOutbox` with the database server's.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` (or a time already
  ///     past) for at once.
  /// - Returns: Their identifiers, in order.
  /// - Throws: An ``OutboxError``; nothing was stored.
  @discardableResult
  func append(
    contentsOf messages: [Message],
    partition: String?,
    headers: [String: String],
    deliverAfter: Date?
  ) async throws(OutboxError) -> [UUID]

  /// Appends messages in one transaction, each with a unique key or none: a message whose key
  /// is held already is not stored, and its result names the message that holds the key.
  ///
  /// A key is held while a message appended with it is pending (not yet delivered, not a dead
  /// letter), and, with `uniqueFor`, until that long after the append that took it, delivered
  /// or not. The store keeps the rule with a unique index, never by reading first and writing
  /// after, so it holds for appenders racing in one process and, on `PostgresOutbox`, across
  /// processes; a duplicate never waits on other appends, except on the one appending that
  /// same key at that moment, until it commits or rolls back. Two messages of one call with the
  /// same key: the second is a duplicate of the first. A message with a unique key is never
  /// merged, nor merged into (``Coalescing``); a dead letter no longer holds its key, and a
  /// retried one does not take it back. A duplicate emits
  /// ``OutboxEvent/duplicate(id:sequence:uniqueKey:)``, naming the holder.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - uniqueKeys: One key per message (`nil` for a message without one); each non-empty and
  ///     at most 200 UTF-8 bytes.
  ///   - uniqueFor: How long after its append a key stays held, delivered or not; `nil` for
  ///     while its message is pending. Positive, at most ten years. The wall clock's (the
  ///     database server's for `PostgresOutbox`).
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` for at once.
  /// - Returns: One result per message, in order.
  /// - Throws: ``OutboxError/invalidUniqueKey(_:)`` for a key or window out of range, or as
  ///   ``append(contentsOf:partition:headers:deliverAfter:)``; nothing was stored.
  @discardableResult
  func append(
    contentsOf messages: [Message],
    uniqueKeys: [String?],
    uniqueFor: Duration?,
    partition: String?,
    headers: [String: String],
    deliverAfter: Date?
  ) async throws(OutboxError) -> [UniqueAppend]

  /// What happens to messages from now on, as this outbox sees it.
  var events: AsyncStream<OutboxEvent> { get }

  /// Every dead letter.
  ///
  /// - Returns: The dead letters, with their messages (when they still decode) and reasons.
  /// - Throws: An ``OutboxError``.
  func deadLetters() async throws(OutboxError) -> [DeadLetter<Message>]

  /// Puts a dead letter back at its place in its line.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: ``OutboxError/noSuchDeadLetter(_:)``, or another ``OutboxError``.
  func retryDeadLetter(id: UUID) async throws(OutboxError)

  /// Removes a dead letter for good.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: ``OutboxError/noSuchDeadLetter(_:)``, or another ``OutboxError``.
  func dropDeadLetter(id: UUID) async throws(OutboxError)

  /// Waits until no message is pending.
  ///
  /// - Throws: ``OutboxError/lineStopped(partition:deadLetter:)`` when a line waits at a dead
  ///   letter with messages behind it; ``OutboxError/cancelled``; another ``OutboxError``.
  func waitUntilDelivered() async throws(OutboxError)

  /// Stops starting deliveries until ``resume()``; appends go on.
  func pause()

  /// Delivers again after ``pause()``.
  func resume()

  /// Whether delivery is paused with ``pause()``.
  var isPaused: Bool { get }

  /// Stops delivering one line, for every process that delivers the outbox, until
  /// ``resume(partition:)``: its delivery in progress finishes, a retry wait ends, and none of
  /// its messages is taken after that. The other lines go on; appends go on. The pause is kept
  /// in the store.
  ///
  /// - Parameter partition: The line's partition key; `nil` for the default line.
  /// - Throws: An ``OutboxError`` if the store cannot be written.
  func pause(partition: String?) async throws(OutboxError)

  /// Lets a line that ``pause(partition:)`` stopped deliver again, from its oldest message.
  ///
  /// - Parameter partition: The line's partition key; `nil` for the default line.
  /// - Throws: An ``OutboxError`` if the store cannot be written.
  func resume(partition: String?) async throws(OutboxError)

  /// The lines paused with ``pause(partition:)`` (`nil`: the default line).
  ///
  /// - Returns: The paused lines.
  /// - Throws: An ``OutboxError`` if the store cannot be read.
  func pausedPartitions() async throws(OutboxError) -> [String?]

  /// Stops delivering and waits until no delivery of this outbox runs; messages stay stored.
  func stop() async

  /// Stops taking messages, gives the deliveries in progress up to `gracePeriod` (on the
  /// outbox's clock) to finish, then stops as ``stop()`` does: for a graceful shutdown.
  ///
  /// A delivery that returns within the grace period is acknowledged; one still running when
  /// it ends is cancelled, and its message is delivered again later (at least once).
  ///
  /// - Parameter gracePeriod: How long deliveries in progress may go on; zero or less is
  ///   ``stop()``.
  func stop(gracePeriod: Duration) async

  /// How many messages wait, how many are dead letters, and when the oldest waiting message was
  /// appended, as the store has them now: for gauges and for an operator.
  ///
  /// - Returns: The counts.
  /// - Throws: An ``OutboxError`` if the store cannot be read.
  func counts() async throws(OutboxError) -> OutboxCounts

  /// Every key with pending messages, dead letters or a pause of its own, with what holds it
  /// up: for an operator (`orderly outbox keys`), read in one transaction.
  ///
  /// - Returns: The keys, in no set order (`sortedForOperator(onDeadLetter:at:)`
  ///   puts the stuck ones first).
  /// - Throws: An ``OutboxError`` if the store cannot be read.
  func keys() async throws(OutboxError) -> [OutboxKey]

  /// One stored message, pending or dead, with its payload as stored: for an operator
  /// (`orderly outbox peek`).
  ///
  /// - Parameter id: The message's identifier.
  /// - Returns: The message, or `nil` if the outbox holds none with that identifier (it was
  ///   delivered, dropped, or never appended).
  /// - Throws: An ``OutboxError`` if the store cannot be read.
  func storedMessage(id: UUID) async throws(OutboxError) -> OutboxStoredMessage?

  /// The audit trail of every delivery attempt, with the messages the store holds and the
  /// numbers it handed out, read in one transaction: for `orderly outbox audit`
  /// (``OutboxAuditTrail/audit(key:)``).
  ///
  /// - Returns: The trail, or `nil` if no delivery ever started with `audit` on.
  /// - Throws: An ``OutboxError`` if the store cannot be read.
  func auditTrail() async throws(OutboxError) -> OutboxAuditTrail?

  /// What this process's delivery holds and has met since the outbox was created: keys held,
  /// lease renewals that failed, acknowledgements the fence refused. Read from memory, so it
  /// does not throw; for gauges and counters.
  var delivererStatistics: DelivererStatistics { get }

  /// Stops delivering and lets go of the store.
  ///
  /// - Throws: An ``OutboxError`` if the store could not be closed cleanly.
  func close() async throws(OutboxError)

  /// The name logs, metrics and spans give this outbox when they are given none (`OutboxService`
  /// uses it): a SQLite file's name without its extension; `outbox` for a store with no name of
  /// its own (the default).
  var defaultName: String { get }

  /// The outbox's recurring schedules: each appends a message to its key on every tick, once
  /// across every process that delivers the outbox, while the outbox is started.
  var schedules: OutboxSchedules<Message> { get }
}

extension DurableOutbox {
  /// `outbox`: the name of a store with no name of its own.
  public var defaultName: String { "outbox" }
}

/// What an outbox holds, as ``DurableOutbox/counts()`` reads it.
///
/// A *blocked* key is one no delivery moves until someone acts: its line waits at a dead letter
/// (under ``DeadLetterPolicy/stopLine``), or the key was paused on its own (`PostgresOutbox`'s
/// `pause(partition:)`). Pausing the whole outbox blocks no key in this sense: see
/// ``DurableOutbox/isPaused``.
public struct OutboxCounts: Sendable, Equatable {
  /// Messages waiting for delivery, those being delivered included; dead letters are not
  /// counted.
  public var pending: Int
  /// Dead letters kept.
  public var deadLetters: Int
  /// When the oldest waiting message was appended; `nil` when none waits.
  public var oldestPendingAppendedAt: Date?
  /// How many keys are blocked: their line waits at a dead letter, or they are paused.
  public var blockedKeys: Int
  /// The key blocked longest.
  ///
  /// The one whose oldest message (its dead letter, or its oldest waiting message) was
  /// appended first. `nil` for the default line, or when no key is
  /// blocked; ``worstBlockedSince`` tells which.
  public var worstBlockedPartition: String?
  /// When the oldest message of the key blocked longest was appended; `nil` when no blocked
  /// key holds a message.
  public var worstBlockedSince: Date?

  /// Counts as read from a store.
  ///
  /// - Parameters:
  ///   - pending: Messages waiting for delivery.
  ///   - deadLetters: Dead letters kept.
  ///   - oldestPendingAppendedAt: When the oldest waiting message was appended.
  ///   - blockedKeys: How many keys are blocked.
  ///   - worstBlockedPartition: The key blocked longest (`nil` for the default line or none).
  ///   - worstBlockedSince: When its oldest message was appended.
  public init(
    pending: Int,
    deadLetters: Int,
    oldestPendingAppendedAt: Date?,
    blockedKeys: Int = 0,
    worstBlockedPartition: String? = nil,
    worstBlockedSince: Date? = nil
  ) {
    self.pending = pending
    self.deadLetters = deadLetters
    self.oldestPendingAppendedAt = oldestPendingAppendedAt
    self.blockedKeys = blockedKeys
    self.worstBlockedPartition = worstBlockedPartition
    self.worstBlockedSince = worstBlockedSince
  }

  /// How long the oldest waiting message has waited at `now`; zero when none waits.
  ///
  /// - Parameter now: The time to measure at.
  /// - Returns: The age, never negative.
  public func oldestPendingAge(at now: Date = Date()) -> TimeInterval {
    oldestPendingAppendedAt.map { max(0, now.timeIntervalSince($0)) } ?? 0
  }

  /// How long the key blocked longest has held its oldest message at `now`; zero when no
  /// blocked key holds one.
  ///
  /// - Parameter now: The time to measure at.
  /// - Returns: The age, never negative.
  public func worstBlockedAge(at now: Date = Date()) -> TimeInterval {
    worstBlockedSince.map { max(0, now.timeIntervalSince($0)) } ?? 0
  }
}

/// What one process's delivery of an outbox holds now, and what it has met since the outbox
/// was created, as ``DurableOutbox/delivererStatistics`` reports it.
///
/// The counts only grow; they start at zero when the outbox object is created, and survive
/// `stop` and a new `start`.
public struct DelivererStatistics: Sendable, Equatable {
  /// Keys this process delivers now: for `PostgresOutbox`, the lines it holds a lease on; for
  /// `Outbox`, the lines with a delivery under way or about to begin.
  public var keysHeld: Int
  /// Lease renewals that failed.
  ///
  /// Each held key whose lease could not be renewed counts once per renewal: the query
  /// failed, or another worker had taken it, or it had run out. Always zero for `Outbox`,
  /// which has no leases.
  public var leaseRenewalsFailed: Int
  /// Acknowledgements refused by the fence.
  ///
  /// An acknowledgement (a delivery recorded, or a message set aside as a dead letter) that the
  /// database refused because another worker holds the key under a higher fence, or that this
  /// worker withheld because its lease was no longer certain. The message is
  /// delivered again by the key's next holder. Always zero for `Outbox`, which has no fences.
  public var acknowledgementsRefused: Int
  /// Acknowledgements the store's own statement refused because they would have broken order.
  ///
  /// Refused under a fence that is no longer the key's (the key's next holder delivers the
  /// message again), or for messages that are not the first of their key (a message before
  /// them is still there). The second is never expected: it means a defect that the store kept
  /// from committing.
  public var orderRefusals: OrderRefusals = OrderRefusals()
  /// Whether the deliverer is stalled: it has work (keys held, or messages it cannot rule out)
  /// and has made no progress (nothing taken, delivered, retried, set aside or renewed) for its
  /// stall limit.
  ///
  /// `PostgresOutbox`'s worker sets it (its limit: `stallAfter` of `start`, two leases by
  /// default) and clears it at its next progress; it logs an error naming what it was waiting
  /// on when it sets it. Always `false` for `Outbox`. `OutboxMetrics` reports it as the gauge
  /// `orderly_outbox_worker_stalled`, and `OutboxService` ends its `run()` with an error when it
  /// is set, so that the process's supervisor restarts it.
  public var isStalled: Bool
  /// What the stalled deliverer was waiting on when it stalled, oldest first (a statement and
  /// for how long); empty when it is not stalled.
  public var stalledOn: [String]

  /// Statistics with the given values; all zero by default.
  ///
  /// - Parameters:
  ///   - keysHeld: Keys delivered now.
  ///   - leaseRenewalsFailed: Lease renewals that failed.
  ///   - acknowledgementsRefused: Acknowledgements refused by the fence.
  ///   - isStalled: Whether the deliverer is stalled.
  ///   - stalledOn: What it was waiting on when it stalled.
  public init(
    keysHeld: Int = 0,
    leaseRenewalsFailed: Int = 0,
    acknowledgementsRefused: Int = 0,
    isStalled: Bool = false,
    stalledOn: [String] = []
  ) {
    self.keysHeld = keysHeld
    self.leaseRenewalsFailed = leaseRenewalsFailed
    self.acknowledgementsRefused = acknowledgementsRefused
    self.isStalled = isStalled
    self.stalledOn = stalledOn
  }
}

/// Acknowledgements the store's statement refused because they would have broken order, by
/// why (``DelivererStatistics/orderRefusals``).
public struct OrderRefusals: Sendable, Equatable {
  /// Refused under a fence that is no longer the key's.
  public var staleFence: Int
  /// Refused because a message before them in their key is still there.
  public var outOfOrder: Int

  /// Counts; zero by default.
  ///
  /// - Parameters:
  ///   - staleFence: Refused under a stale fence.
  ///   - outOfOrder: Refused as out of order.
  public init(staleFence: Int = 0, outOfOrder: Int = 0) {
    self.staleFence = staleFence
    self.outOfOrder = outOfOrder
  }
}

extension DurableOutbox {
  /// Appends messages in one transaction, for delivery at once: all are stored once it returns
  /// (on disk for `Outbox`, committed for `PostgresOutbox`), or none is.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them, handed back in ``Envelope/headers``.
  /// - Returns: Their identifiers, in order.
  /// - Throws: ``OutboxError/cannotEncode(reason:)``, ``OutboxError/cancelled``, or the store's
  ///   error as an ``OutboxError``; nothing was stored.
  @discardableResult
  public func append(
    contentsOf messages: [Message],
    partition: String? = nil,
    headers: [String: String] = [:]
  ) async throws(OutboxError) -> [UUID] {
    try await append(
      contentsOf: messages,
      partition: partition,
      headers: headers,
      deliverAfter: nil
    )
  }

  /// Appends a message at the end of its line, and returns once it is stored for good: on disk
  /// for `Outbox`, committed for `PostgresOutbox`.
  ///
  /// Appends from many tasks are ordered by the store (the order they took the file's write
  /// lock, or committed on the line's row). With ``Coalescing``, the message may instead be
  /// folded into a pending one.
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure, or the
  ///     default line.
  ///   - headers: Strings stored with the message and handed back in ``Envelope/headers`` (a
  ///     trace context, say); none by default. A message merged into a pending one keeps the
  ///     pending one's headers.
  /// - Returns: The message's identifier (the pending message's, if it was merged).
  /// - Throws: ``OutboxError/cannotEncode(reason:)``, ``OutboxError/cancelled`` (the calling
  ///   task was cancelled), or the store's error as an ``OutboxError`` (see
  ///   ``append(contentsOf:partition:headers:)``); nothing was stored.
  @discardableResult
  public func append(
    _ message: Message,
    partition: String? = nil,
    headers: [String: String] = [:]
  ) async throws(OutboxError) -> UUID {
    try await append(contentsOf: [message], partition: partition, headers: headers)[0]
  }

  /// Appends a message at the end of its line, to be delivered no earlier than `deliverAfter`:
  /// its line waits for it in order (see
  /// ``append(contentsOf:partition:headers:deliverAfter:)``).
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message; none by default.
  ///   - deliverAfter: The earliest time it may be delivered.
  /// - Returns: The message's identifier.
  /// - Throws: As ``append(_:partition:headers:)``; nothing was stored.
  @discardableResult
  public func append(
    _ message: Message,
    partition: String? = nil,
    headers: [String: String] = [:],
    deliverAfter: Date
  ) async throws(OutboxError) -> UUID {
    try await append(
      contentsOf: [message],
      partition: partition,
      headers: headers,
      deliverAfter: deliverAfter
    )[0]
  }

  /// Appends a message unless its unique key is held: by a pending message, or by one appended
  /// within `uniqueFor` (see
  /// ``append(contentsOf:uniqueKeys:uniqueFor:partition:headers:deliverAfter:)``).
  ///
  /// ```swift
  /// let result = try await outbox.append(charge, uniqueKey: "charge-\(charge.invoice)")
  /// if !result.wasAppended { print("already queued: \(result.id)") }
  /// ```
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - uniqueKey: The key; non-empty, at most 200 UTF-8 bytes.
  ///   - uniqueFor: How long after this append the key stays held, delivered or not; `nil`
  ///     (the default) for while the message is pending.
  ///   - partition: The line to join; `nil` uses the outbox's `partition` closure.
  ///   - headers: Strings stored with the message; none by default.
  ///   - deliverAfter: The earliest time it may be delivered; `nil` for at once.
  /// - Returns: ``UniqueAppend/appended(_:)`` with the new message's identifier, or
  ///   ``UniqueAppend/duplicate(of:)`` with the identifier of the message that holds the key.
  /// - Throws: ``OutboxError/invalidUniqueKey(_:)``, or as ``append(_:partition:headers:)``;
  ///   nothing was stored.
  @discardableResult
  public func append(
    _ message: Message,
    uniqueKey: String,
    uniqueFor: Duration? = nil,
    partition: String? = nil,
    headers: [String: String] = [:],
    deliverAfter: Date? = nil
  ) async throws(OutboxError) -> UniqueAppend {
    let results = try await append(
      contentsOf: [message],
      uniqueKeys: [uniqueKey],
      uniqueFor: uniqueFor,
      partition: partition,
      headers: headers,
      deliverAfter: deliverAfter
    )
    guard let result = results.first else {
      throw .storageFailed(path: defaultName, reason: "the append answered for no message")
    }
    return result
  }

  /// Appends messages in one transaction, each unless its unique key is held (see
  /// ``append(contentsOf:uniqueKeys:uniqueFor:partition:headers:deliverAfter:)``), for delivery
  /// at once.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - uniqueKey: Each message's key, or `nil` for one without.
  ///   - uniqueFor: How long after the append the keys stay held; `nil` for while pending.
  ///   - partition: The line they join; `nil` uses the outbox's `partition` closure for each.
  ///   - headers: Strings stored with each of them.
  /// - Returns: One result per message, in order.
  /// - Throws: As the method above; nothing was stored.
  @discardableResult
  public func append(
    contentsOf messages: [Message],
    uniqueKey: (Message) -> String?,
    uniqueFor: Duration? = nil,
    partition: String? = nil,
    headers: [String: String] = [:]
  ) async throws(OutboxError) -> [UniqueAppend] {
    try await append(
      contentsOf: messages,
      uniqueKeys: messages.map(uniqueKey),
      uniqueFor: uniqueFor,
      partition: partition,
      headers: headers,
      deliverAfter: nil
    )
  }
}
