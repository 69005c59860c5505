// What an operator reads of any outbox: counts, keys, stored messages, deliverer statistics.

public import Foundation

/// One key (line) of an outbox as an operator sees it.
///
/// What waits in it, what holds it up, and, on PostgreSQL, which worker delivers it.
/// ``DurableOutbox/keys()`` reads them.
///
/// A key is listed when it has pending messages, dead letters, or a pause of its own.
public struct OutboxKey: Sendable, Equatable {
  /// The key's partition; `nil` for the default line.
  public var partition: String?
  /// Messages waiting in the key's line, the one being delivered included.
  public var pending: Int
  /// Dead letters of the key.
  public var deadLetters: Int
  /// Whether the key is paused on its own (``DurableOutbox/pause(partition:)``).
  public var paused: Bool
  /// The key's next message: the oldest pending one; `nil` when none is pending.
  public var head: UUID?
  /// Failed delivery attempts of the next message so far (the store records each).
  public var headAttempts: Int
  /// When the next message may be delivered, if it was appended with a not-before time
  /// (``DurableOutbox/append(contentsOf:partition:headers:deliverAfter:)``); `nil` otherwise.
  public var headNotBefore: Date?
  /// When the key's oldest pending message was appended; `nil` when none is pending.
  public var oldestPendingAppendedAt: Date?
  /// When the key's oldest dead letter failed; `nil` when it has none.
  public var oldestDeadLetterFailedAt: Date?
  /// The worker that holds the key's lease (`PostgresOutbox`); always `nil` for `Outbox`, which
  /// has one deliverer per file and no leases.
  public var holder: OutboxKeyHolder?
  /// Why delivery quarantined the key (``QuarantinePolicy``), when it is paused for that
  /// reason; `nil` when it is not paused, or was paused by hand.
  public var quarantine: String? = nil
  /// When a rate limit that counts the key lets it go on (``RateLimit``): its window is full
  /// until then; `nil` when no limit holds it.
  public var rateLimitedUntil: Date? = nil

  /// A key as read from a store.
  ///
  /// - Parameters:
  ///   - partition: The partition; `nil` for the default line.
  ///   - pending: Messages waiting.
  ///   - deadLetters: Dead letters.
  ///   - paused: Whether it is paused on its own.
  ///   - head: The next message.
  ///   - headAttempts: Failed attempts of the next message.
  ///   - headNotBefore: When the next message may be delivered.
  ///   - oldestPendingAppendedAt: When the oldest pending message was appended.
  ///   - oldestDeadLetterFailedAt: When the oldest dead letter failed.
  ///   - holder: The worker holding the key's lease.
  ///   - quarantine: Why delivery quarantined it, if it did.
  public init(
    partition: String?,
    pending: Int,
    deadLetters: Int,
    paused: Bool,
    head: UUID? = nil,
    headAttempts: Int = 0,
    headNotBefore: Date? = nil,
    oldestPendingAppendedAt: Date? = nil,
    oldestDeadLetterFailedAt: Date? = nil,
    holder: OutboxKeyHolder? = nil,
    quarantine: String? = nil
  ) {
    self.partition = partition
    self.pending = pending
    self.deadLetters = deadLetters
    self.paused = paused
    self.head = head
    self.headAttempts = headAttempts
    self.headNotBefore = headNotBefore
    self.oldestPendingAppendedAt = oldestPendingAppendedAt
    self.oldestDeadLetterFailedAt = oldestDeadLetterFailedAt
    self.holder = holder
    self.quarantine = quarantine
  }

  /// Why the key does not move, strongest reason first; empty for a key that moves.
  ///
  /// Judged under `onDeadLetter`, the policy its deliverers run with: the store does not keep
  /// it.
  ///
  /// - Parameters:
  ///   - onDeadLetter: What a dead letter does to its line; ``DeadLetterPolicy/stopLine`` (the
  ///     default of every `start`) unless you know the deliverers run otherwise.
  ///   - now: The time a lease is compared with.
  /// - Returns: The reasons; the first is the one an operator acts on.
  public func stuck(onDeadLetter: DeadLetterPolicy = .stopLine, at now: Date = Date())
    -> [OutboxKeyStuck]
  {
    var reasons: [OutboxKeyStuck] = []
    if deadLetters > 0, onDeadLetter == .stopLine { reasons.append(.atDeadLetter) }
    if paused, let quarantine {
      reasons.insert(.quarantined(reason: quarantine), at: 0)
    } else if paused {
      reasons.append(.paused)
    }
    if pending > 0, let headNotBefore, headNotBefore > now {
      reasons.append(.scheduled(until: headNotBefore))
    }
    if pending > 0, let rateLimitedUntil, rateLimitedUntil > now {
      reasons.append(.rateLimited(until: rateLimitedUntil))
    }
    if pending > 0, headAttempts > 0 { reasons.append(.retrying(attempts: headAttempts)) }
    if pending > 0, let holder, holder.leaseExpiresAt < now {
      reasons.append(.leaseEnded(owner: holder.owner, at: holder.leaseExpiresAt))
    }
    return reasons
  }
}

/// Who delivers a key of a `PostgresOutbox`, from its lease.
public struct OutboxKeyHolder: Sendable, Equatable {
  /// The worker holding the lease (its `workerID`).
  public var owner: String
  /// When the lease ends unless the holder renews it.
  public var leaseExpiresAt: Date
  /// The lease's fence: every new holder of the key gets a higher one, and the database refuses
  /// an acknowledgement made under a lower one.
  public var fence: Int64

  /// A lease as read from the database.
  ///
  /// - Parameters:
  ///   - owner: The worker holding it.
  ///   - leaseExpiresAt: When it ends.
  ///   - fence: Its fence.
  public init(owner: String, leaseExpiresAt: Date, fence: Int64) {
    self.owner = owner
    self.leaseExpiresAt = leaseExpiresAt
    self.fence = fence
  }
}

/// Why a key does not move, as ``OutboxKey/stuck(onDeadLetter:at:)`` tells it.
public enum OutboxKeyStuck: Sendable, Equatable {
  /// Its line waits at a dead letter: retry or drop it.
  case atDeadLetter
  /// It is paused on its own: resume it.
  case paused
  /// Its next message was appended with a not-before time, not reached yet: the key waits for
  /// it, in order, and goes on by itself then.
  case scheduled(until: Date)
  /// Its next message failed this many times and waits for its next attempt.
  case retrying(attempts: Int)
  /// The worker named by its lease stopped renewing it (it died, or hangs) and the lease has
  /// ended, but no worker has taken the key yet: any worker with room takes it.
  case leaseEnded(owner: String, at: Date)
  /// Delivery quarantined the key (``QuarantinePolicy``), and it stays paused until resumed;
  /// the reason says what failed. Listed first.
  case quarantined(reason: String)
  /// A rate limit that counts the key (``RateLimit``) is reached: the key waits, in order, until
  /// its window ends, and goes on by itself then.
  case rateLimited(until: Date)

  /// The reason in a few words, for a terminal.
  public var summary: String {
    switch self {
    case .atDeadLetter: "waits at a dead letter (retry or drop it)"
    case .paused: "paused (resume it)"
    case .scheduled(let until):
      "scheduled: its next message waits until \(until.formatted(.iso8601))"
    case .retrying(let attempts): "retrying: its next message failed \(attempts) time(s)"
    case .leaseEnded(let owner, _): "\(owner)'s lease ended; waits for a worker with room"
    case .quarantined(let reason): "quarantined (resume it once fixed): \(reason)"
    case .rateLimited(let until): "rate limited until \(until.formatted(.iso8601))"
    }
  }
}

/// One stored message, pending or dead, with its payload as stored: what
/// ``DurableOutbox/storedMessage(id:)`` reads for an operator.
public struct OutboxStoredMessage: Sendable, Equatable {
  /// The message's identifier (``Envelope/id``).
  public var id: UUID
  /// Its place in its line: lines deliver in sequence order.
  public var sequence: Int64
  /// Its key; `nil` for the default line.
  public var partition: String?
  /// The encoded message, as the store keeps it (JSON).
  public var payload: Data
  /// The headers stored with it.
  public var headers: [String: String]
  /// Failed delivery attempts so far.
  public var attempts: Int
  /// When it was appended.
  public var appendedAt: Date
  /// The earliest time it may be delivered, if it was appended with one.
  public var notBefore: Date?
  /// For a dead letter: when it failed for good and why; `nil` for a pending message.
  public var deadLetter: (failedAt: Date, reason: String)? {
    get { failedAt.map { ($0, reason ?? "") } }
    set {
      failedAt = newValue?.failedAt
      reason = newValue?.reason
    }
  }
  private var failedAt: Date?
  private var reason: String?
  /// The unique key it holds while it is pending (``UniqueAppend``); `nil` when it was appended
  /// without one, or is a dead letter (which holds none).
  public var uniqueKey: String? = nil

  /// A message as read from a store.
  ///
  /// - Parameters:
  ///   - id: Its identifier.
  ///   - sequence: Its place in its line.
  ///   - partition: Its key.
  ///   - payload: The encoded message.
  ///   - headers: Its headers.
  ///   - attempts: Failed attempts.
  ///   - appendedAt: When it was appended.
  ///   - notBefore: The earliest time it may be delivered.
  ///   - deadLetter: When and why it failed for good, for a dead letter.
  ///   - uniqueKey: The unique key it holds, if any.
  public init(
    id: UUID,
    sequence: Int64,
    partition: String?,
    payload: Data,
    headers: [String: String],
    attempts: Int,
    appendedAt: Date,
    notBefore: Date? = nil,
    deadLetter: (failedAt: Date, reason: String)?,
    uniqueKey: String? = nil
  ) {
    self.id = id
    self.sequence = sequence
    self.partition = partition
    self.payload = payload
    self.headers = headers
    self.attempts = attempts
    self.appendedAt = appendedAt
    self.notBefore = notBefore
    self.failedAt = deadLetter?.failedAt
    self.reason = deadLetter?.reason
    self.uniqueKey = uniqueKey
  }
}

extension Array where Element == OutboxKey {
  /// The keys ordered for an operator: the stuck ones first (quarantined, those waiting at a
  /// dead letter, then paused, retrying, lease ended, rate limited, scheduled), each group by
  /// its oldest message;
  /// then the others, by their oldest pending message.
  ///
  /// - Parameters:
  ///   - onDeadLetter: The policy the deliverers run with.
  ///   - now: The time leases are compared with.
  /// - Returns: The keys, sorted.
  public func sortedForOperator(onDeadLetter: DeadLetterPolicy = .stopLine, at now: Date = Date())
    -> [OutboxKey]
  {
    func rank(_ key: OutboxKey) -> Int {
      switch key.stuck(onDeadLetter: onDeadLetter, at: now).first {
      case .quarantined: 0
      case .atDeadLetter: 1
      case .paused: 2
      case .retrying: 3
      case .leaseEnded: 4
      case .rateLimited: 5
      case .scheduled: 6
      case nil: 7
      }
    }
    func since(_ key: OutboxKey) -> Date {
      [key.oldestPendingAppendedAt, key.oldestDeadLetterFailedAt].compactMap { $0 }.min()
        ?? .distantFuture
    }
    return sorted { a, b in
      let (ra, rb) = (rank(a), rank(b))
      if ra != rb { return ra < rb }
      let (sa, sb) = (since(a), since(b))
      if sa != sb { return sa < sb }
      return (a.partition ?? "") < (b.partition ?? "")
    }
  }
}
