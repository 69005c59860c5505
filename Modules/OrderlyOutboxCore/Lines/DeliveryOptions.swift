// How delivery is started through `DurableOutbox`: the options every store has, and the handler.

/// The options of ``DurableOutbox/start(_:deliver:)`` that every store has; each store's own
/// options type adds what only it has (`OutboxDeliveryOptions` on SQLite: what to do when
/// another process delivers the file; `FleetDeliveryOptions` on PostgreSQL: the lease).
///
/// Code written for any store can set these on the options it is given:
///
/// ```swift
/// func startBulk<O: DurableOutbox<Change>>(_ outbox: O, options: O.Options) throws {
///   var options = options
///   options.batchSize = 50
///   try outbox.start(options, deliver: .batches { changes in try await bulk.write(changes) })
/// }
/// ```
public protocol DeliveryOptions: Sendable {
  /// How many lines deliver at once; 1 or more.
  var limit: Int { get set }
  /// Up to how many consecutive messages of one line a call of a
  /// ``DeliveryHandler/batches(_:)`` handler gets; 1 or more. A ``DeliveryHandler/each(_:)``
  /// handler needs 1.
  var batchSize: Int { get set }
  /// When a failed delivery is tried again, and which errors are retried.
  var retry: RetryPolicy { get set }
  /// Whether a line waits at a dead letter or goes on.
  var onDeadLetter: DeadLetterPolicy { get set }
  /// How often the store is looked at for work no notification announced; longer than zero.
  var pollInterval: Duration { get set }
  /// Whether each delivery attempt is recorded in the store's audit trail, and for how long;
  /// off by default (``OutboxAuditOptions/off``). `orderly outbox audit` checks the trail.
  var audit: OutboxAuditOptions { get set }
  /// When delivery quarantines a poison key by itself (pauses it with the reason); `nil`, the
  /// default, never does. See ``QuarantinePolicy``.
  var quarantine: QuarantinePolicy? { get set }
  /// At most so many deliveries per interval, for each key, one key or a key prefix's keys,
  /// across every process that delivers the outbox; none by default. See ``RateLimit``.
  var rateLimits: [RateLimit] { get set }
  /// Groups of keys with weights, whose deliveries follow their weights while more lines wait
  /// than there are slots; `nil` by default (lines take turns in the order they came to wait).
  /// See ``FairShares``.
  var fairShares: FairShares? { get set }
}

extension DeliveryOptions {
  /// Refuses a limit or a batch size below 1, a poll interval that is not positive, or a
  /// batch size above 1 for a handler of single messages, saying which and what it got.
  ///
  /// - Parameter handler: The handler delivery starts with.
  /// - Throws: ``OutboxError/invalidOption(_:)``.
  package func check<Message>(for handler: DeliveryHandler<Message>) throws(OutboxError) {
    guard limit >= 1 else { throw .invalidOption("limit must be 1 or more (got \(limit))") }
    guard batchSize >= 1 else {
      throw .invalidOption("batchSize must be 1 or more (got \(batchSize))")
    }
    guard pollInterval > .zero else {
      throw .invalidOption("pollInterval must be longer than zero (got \(pollInterval))")
    }
    if audit.isOn, audit.retention <= .zero {
      throw .invalidOption(
        "audit retention must be longer than zero (got \(audit.retention)); the default is 7 days"
      )
    }
    if let problem = quarantine?.problem { throw .invalidOption(problem) }
    if case .each = handler, batchSize != 1 {
      throw .invalidOption(
        "batchSize \(batchSize) needs a batch handler (.batches); .each gets one message a call"
      )
    }
  }
}

/// What a started outbox hands its messages to: one message a call, or ordered batches.
public enum DeliveryHandler<Message: Sendable>: Sendable {
  /// Sends one message; returns once the receiver has it, throws otherwise. The options'
  /// ``DeliveryOptions/batchSize`` must be 1.
  case each(@Sendable (Envelope<Message>) async throws -> Void)
  /// Sends up to ``DeliveryOptions/batchSize`` consecutive messages of one line, in order;
  /// returns once the receiver has all of them, or throws (a ``BatchDeliveryError`` to say how
  /// many came through before the one that failed; any other error is a failure of the first).
  case batches(@Sendable ([Envelope<Message>]) async throws -> Void)
}

extension LineRunner {
  /// A runner for a handler and the options it was started with.
  ///
  /// - Parameters:
  ///   - rule: The outbox's rule.
  ///   - options: The options (their batch size and dead-letter policy are read).
  ///   - handler: The handler.
  ///   - onBadCount: Told of a ``BatchDeliveryError`` whose count is outside its batch.
  package init(
    rule: DeliveryRule<Message>,
    options: some DeliveryOptions,
    handler: DeliveryHandler<Message>,
    onBadCount: @escaping @Sendable (_ error: BatchDeliveryError, _ batch: Int) -> Void
  ) {
    switch handler {
    case .each(let deliver):
      self.init(
        rule: rule,
        onDeadLetter: options.onDeadLetter,
        quarantine: options.quarantine,
        deliver: deliver
      )
    case .batches(let deliver):
      self.init(
        rule: rule,
        batch: options.batchSize,
        onDeadLetter: options.onDeadLetter,
        quarantine: options.quarantine,
        onBadCount: onBadCount,
        deliver: deliver
      )
    }
    rateLimits = options.rateLimits
  }
}
