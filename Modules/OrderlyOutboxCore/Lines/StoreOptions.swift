// Each store's delivery options: what `start` takes on SQLite (`OutboxDeliveryOptions`) and on
// PostgreSQL (`FleetDeliveryOptions`). Plain values, kept below every store so that code built
// on the protocol (`OutboxService`) can name them without importing a store.

/// What `start` does when another outbox already delivers the same file.
public enum WhenDeliveredElsewhere: Sendable, Equatable {
  /// Wait for it to stop (or its process to end, however it ends), then deliver from the head of
  /// every line. The default.
  case wait
  /// Throw ``OutboxError/deliveredElsewhere(path:)`` at once.
  case fail
}

/// How a SQLite outbox (`Outbox`, in `OrderlyOutbox`) delivers, for its `start(_:deliver:)` (and
/// `OutboxService`): the options of every store, and what to do when another process delivers
/// the file.
///
/// ```swift
/// var options = OutboxDeliveryOptions(limit: 8)
/// options.batchSize = 50
/// try outbox.start(options, deliver: .batches { envelopes in try await ledger.apply(envelopes) })
/// ```
public struct OutboxDeliveryOptions: DeliveryOptions {
  /// How many lines deliver at once (4 by default); it matters only with partitions.
  public var limit: Int
  /// Up to how many messages of one line a batch handler gets; 1 by default.
  public var batchSize: Int
  /// When a failed delivery is tried again, and which errors are retried.
  public var retry: RetryPolicy
  /// Whether a line waits at a dead letter (the default) or goes on.
  public var onDeadLetter: DeadLetterPolicy
  /// What to do when another outbox delivers the same file: wait for it (the default), or fail.
  public var whenDeliveredElsewhere: WhenDeliveredElsewhere
  /// How often the outbox looks for other processes' appends, and for the deliverer lock while
  /// it waits for it; 1 second by default.
  public var pollInterval: Duration
  /// Whether each delivery attempt is recorded in the file's audit trail, and for how long.
  ///
  /// Off by default. `orderly outbox audit` checks the trail: see the article "Auditing
  /// delivery".
  public var audit: OutboxAuditOptions = .off
  /// When delivery quarantines a poison key by itself (``QuarantinePolicy``).
  ///
  /// It pauses the key, with the reason, after a run of failed attempts at its first message.
  /// Off (`nil`) by default.
  public var quarantine: QuarantinePolicy? = nil
  /// At most so many deliveries per interval, for each key, one key or a key prefix's keys
  /// (``RateLimit``); none by default.
  public var rateLimits: [RateLimit] = []
  /// Groups of keys with weights: while more lines wait than there are slots, the deliveries
  /// each group gets follow its weight (``FairShares``); `nil`, the default, takes lines in the
  /// order they came to wait.
  public var fairShares: FairShares? = nil

  /// Options with the given values; each has the default `start` uses.
  ///
  /// - Parameters:
  ///   - limit: How many lines deliver at once.
  ///   - batchSize: Up to how many messages of one line a batch handler gets.
  ///   - retry: When a failed delivery is tried again.
  ///   - onDeadLetter: Whether a line waits at a dead letter or goes on.
  ///   - whenDeliveredElsewhere: What to do when another outbox delivers the same file.
  ///   - pollInterval: How often the outbox looks for other processes' appends.
  public init(
    limit: Int = 4,
    batchSize: Int = 1,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    whenDeliveredElsewhere: WhenDeliveredElsewhere = .wait,
    pollInterval: Duration = .seconds(1)
  ) {
    self.limit = limit
    self.batchSize = batchSize
    self.retry = retry
    self.onDeadLetter = onDeadLetter
    self.whenDeliveredElsewhere = whenDeliveredElsewhere
    self.pollInterval = pollInterval
  }
}

/// How a worker of an outbox on PostgreSQL (`PostgresOutbox`, in `OrderlyPostgres`) delivers,
/// for its `start(_:deliver:)` (and `OutboxService`): the options of every store, and the lease.
///
/// ```swift
/// var options = FleetDeliveryOptions(limit: 16, lease: .seconds(20))
/// options.batchSize = 40
/// try outbox.start(options, deliver: .batches { envelopes in try await search.index(envelopes) })
/// ```
public struct FleetDeliveryOptions: DeliveryOptions {
  /// How many lines this worker delivers at once; 4 by default.
  public var limit: Int
  /// Up to how many messages of one line a batch handler gets; 1 by default.
  public var batchSize: Int
  /// When a failed delivery is tried again (on the outbox's clock), and which errors are
  /// retried; the line keeps its lease while it waits.
  public var retry: RetryPolicy
  /// Whether a line waits at a dead letter (the default) or goes on; give every worker of a
  /// fleet the same policy.
  public var onDeadLetter: DeadLetterPolicy
  /// How long a line stays with this worker without a renewal; 30 seconds by default, 400
  /// milliseconds at least (see `PostgresOutbox.start(limit:retry:onDeadLetter:lease:pollInterval:deliver:)`).
  public var lease: Duration
  /// How often the worker looks for lines when no notification came; 1 second by default.
  public var pollInterval: Duration
  /// Whether each delivery attempt is recorded in the database's audit trail, and for how long.
  ///
  /// Off by default. Give every worker of a fleet the same setting: `orderly outbox audit`
  /// checks the trail (see the article "Auditing delivery").
  public var audit: OutboxAuditOptions = .off
  /// When delivery quarantines a poison key by itself (``QuarantinePolicy``).
  ///
  /// It pauses the key, with the reason, after a run of failed attempts at its first message.
  /// Off (`nil`) by default.
  public var quarantine: QuarantinePolicy? = nil
  /// At most so many deliveries per interval, for each key, one key or a key prefix's keys
  /// (``RateLimit``); none by default.
  public var rateLimits: [RateLimit] = []
  /// Groups of keys with weights: while more lines wait than there are slots, the deliveries
  /// each group gets follow its weight (``FairShares``); `nil`, the default, takes lines in the
  /// order they came to wait.
  public var fairShares: FairShares? = nil

  /// Options with the given values; each has the default `start` uses.
  ///
  /// - Parameters:
  ///   - limit: How many lines this worker delivers at once.
  ///   - batchSize: Up to how many messages of one line a batch handler gets.
  ///   - retry: When a failed delivery is tried again.
  ///   - onDeadLetter: Whether a line waits at a dead letter or goes on.
  ///   - lease: How long a line stays with this worker without a renewal.
  ///   - pollInterval: How often the worker looks for lines when no notification came.
  public init(
    limit: Int = 4,
    batchSize: Int = 1,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    lease: Duration = .seconds(30),
    pollInterval: Duration = .seconds(1)
  ) {
    self.limit = limit
    self.batchSize = batchSize
    self.retry = retry
    self.onDeadLetter = onDeadLetter
    self.lease = lease
    self.pollInterval = pollInterval
  }
}
