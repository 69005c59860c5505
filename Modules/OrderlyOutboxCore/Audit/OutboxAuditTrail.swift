// The audit trail: what a store records of every delivery attempt when delivery starts with
// `audit` on, and what it reads back for `orderly outbox audit`.

public import Foundation

/// How a delivery attempt ended, as the audit trail records it.
public enum OutboxAuditOutcome: String, Sendable, Codable, CaseIterable {
  /// The handler returned and the store removed the message.
  case delivered
  /// The attempt failed and the message stays at the head of its line, to be tried again.
  case retried
  /// The attempt failed for good and the message was set aside as a dead letter.
  case deadLettered = "dead-lettered"
  /// The attempt's outcome was not recorded because the worker no longer held the line (its
  /// lease was lost or taken over, or the store refused it under the fence): the line's next
  /// holder delivers the message again.
  case cut
  /// Not an attempt: an operator dropped the message, a dead letter, for good.
  case dropped
}

/// One row of the audit trail: one delivery attempt of one message (or an operator's drop).
public struct OutboxAuditRecord: Sendable, Codable, Equatable {
  /// The row's number: rows of one key are numbered in the order their outcomes were recorded.
  public var number: Int64
  /// The message's key; `nil` for the default line.
  public var partition: String?
  /// The message's place in its line.
  public var sequence: Int64
  /// The message's identifier.
  public var messageID: UUID
  /// Which attempt of the message it was (1 for the first).
  public var attempt: Int
  /// The fence the worker held the line under (PostgreSQL); `nil` on a store without leases.
  public var fence: Int64?
  /// The worker: host, process and the time it started.
  public var worker: String
  /// When the handler was called.
  public var startedAt: Date
  /// When the handler returned or threw.
  public var endedAt: Date
  /// How the attempt ended.
  public var outcome: OutboxAuditOutcome

  /// A row of the trail.
  ///
  /// - Parameters:
  ///   - number: The row's number, in the order outcomes were recorded.
  ///   - partition: The message's key; `nil` for the default line.
  ///   - sequence: The message's place in its line.
  ///   - messageID: The message's identifier.
  ///   - attempt: Which attempt it was.
  ///   - fence: The fence the line was held under; `nil` without leases.
  ///   - worker: The worker.
  ///   - startedAt: When the handler was called.
  ///   - endedAt: When it returned or threw.
  ///   - outcome: How the attempt ended.
  public init(
    number: Int64,
    partition: String?,
    sequence: Int64,
    messageID: UUID,
    attempt: Int,
    fence: Int64?,
    worker: String,
    startedAt: Date,
    endedAt: Date,
    outcome: OutboxAuditOutcome
  ) {
    self.number = number
    self.partition = partition
    self.sequence = sequence
    self.messageID = messageID
    self.attempt = attempt
    self.fence = fence
    self.worker = worker
    self.startedAt = startedAt
    self.endedAt = endedAt
    self.outcome = outcome
  }

  /// Writes every field, `null` for one with no value (as every `orderly outbox` JSON does).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(number, forKey: .number)
    try container.encode(partition, forKey: .partition)
    try container.encode(sequence, forKey: .sequence)
    try container.encode(messageID, forKey: .messageID)
    try container.encode(attempt, forKey: .attempt)
    try container.encode(fence, forKey: .fence)
    try container.encode(worker, forKey: .worker)
    try container.encode(startedAt, forKey: .startedAt)
    try container.encode(endedAt, forKey: .endedAt)
    try container.encode(outcome, forKey: .outcome)
  }
}

/// A run of sequence numbers the store handed out, every one of which must be delivered (a
/// `delivered` row of the trail), pending, a dead letter, or dropped: nothing vanishes.
public struct OutboxAuditNumbers: Sendable, Codable, Equatable {
  /// Whose numbers: one key's (PostgreSQL numbers each line on its own), or every key's
  /// (`nil` with ``sharedByAllKeys``: SQLite numbers the whole file).
  public var partition: String?
  /// Whether the numbers are shared by every key (SQLite), not one key's.
  public var sharedByAllKeys: Bool
  /// The first number the trail answers for: numbers handed out before the audit began, or
  /// whose rows were pruned, are not checked.
  public var first: Int64
  /// The last number handed out when the trail was read.
  public var last: Int64

  /// A run of numbers.
  ///
  /// - Parameters:
  ///   - partition: The key whose numbers they are; `nil` for the default line, or with
  ///     `sharedByAllKeys`.
  ///   - sharedByAllKeys: Whether every key shares the numbering.
  ///   - first: The first number checked.
  ///   - last: The last number handed out.
  public init(partition: String?, sharedByAllKeys: Bool, first: Int64, last: Int64) {
    self.partition = partition
    self.sharedByAllKeys = sharedByAllKeys
    self.first = first
    self.last = last
  }
}

/// A message the store holds now, pending or dead, as the audit reads it.
public struct OutboxAuditHeld: Sendable, Codable, Equatable, Hashable {
  /// Its key; `nil` for the default line.
  public var partition: String?
  /// Its place in its line.
  public var sequence: Int64
  /// Whether it is a dead letter.
  public var deadLetter: Bool

  /// A message held.
  ///
  /// - Parameters:
  ///   - partition: Its key.
  ///   - sequence: Its place in its line.
  ///   - deadLetter: Whether it is a dead letter.
  public init(partition: String?, sequence: Int64, deadLetter: Bool) {
    self.partition = partition
    self.sequence = sequence
    self.deadLetter = deadLetter
  }
}

/// Everything `orderly outbox audit` checks, read from a store in one transaction: the trail's
/// rows, the messages the store holds, and the numbers it handed out.
public struct OutboxAuditTrail: Sendable, Codable, Equatable {
  /// The trail's rows, by ``OutboxAuditRecord/number``.
  public var records: [OutboxAuditRecord]
  /// The messages held now, pending or dead.
  public var held: [OutboxAuditHeld]
  /// The numbers handed out that the trail answers for.
  public var numbers: [OutboxAuditNumbers]
  /// When the trail was read.
  public var readAt: Date

  /// A trail.
  ///
  /// - Parameters:
  ///   - records: The rows, in any order (they are sorted by number).
  ///   - held: The messages held now.
  ///   - numbers: The numbers handed out that the trail answers for.
  ///   - readAt: When it was read.
  public init(
    records: [OutboxAuditRecord],
    held: [OutboxAuditHeld],
    numbers: [OutboxAuditNumbers],
    readAt: Date
  ) {
    self.records = records.sorted { $0.number < $1.number }
    self.held = held
    self.numbers = numbers
    self.readAt = readAt
  }
}

/// What `start` records in the audit trail, for the options of either store.
public struct OutboxAuditOptions: Sendable, Equatable {
  /// Whether each delivery attempt is recorded; off by default.
  public var isOn: Bool
  /// How long rows are kept; 7 days by default.
  ///
  /// Older rows are pruned, in batches, by the workers that record.
  public var retention: Duration

  /// Options for the trail.
  ///
  /// - Parameters:
  ///   - isOn: Whether attempts are recorded.
  ///   - retention: How long rows are kept; longer than zero (fractions of a second count).
  public init(isOn: Bool, retention: Duration = .seconds(7 * 24 * 3600)) {
    self.isOn = isOn
    self.retention = retention
  }

  /// ``retention`` in seconds, fractions included: what both stores prune by.
  package var retentionSeconds: Double {
    let parts = retention.components
    return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
  }

  /// No trail: the default.
  public static let off = OutboxAuditOptions(isOn: false)
  /// A trail kept for 7 days.
  public static let on = OutboxAuditOptions(isOn: true)
}

/// Who a worker is, in the audit trail: host, process and the time it started, so that two
/// processes are never taken for one.
package enum AuditWorker {
  /// This process.
  package static let current: String = {
    let info = ProcessInfo.processInfo
    let started = ISO8601DateFormatter().string(from: Date())
    return "\(info.hostName)/\(info.processIdentifier)/\(started)"
  }()
}

extension OutboxAuditTrail {
  /// The trail from `start` on: the rows of attempts that began then or later, and the numbers
  /// from the lowest those rows name (per key, or for the whole store when it numbers every key
  /// together), so that messages delivered before the window are not taken for vanished.
  ///
  /// - Parameter start: The window's start.
  /// - Returns: The windowed trail.
  public func since(_ start: Date) -> OutboxAuditTrail {
    let kept = records.filter { $0.startedAt >= start }
    var lowest: [String?: Int64] = [:]
    for record in kept {
      lowest[record.partition] = min(lowest[record.partition] ?? .max, record.sequence)
    }
    let overall = lowest.values.min()
    let windowed = numbers.compactMap { run -> OutboxAuditNumbers? in
      guard let from = run.sharedByAllKeys ? overall : lowest[run.partition] else { return nil }
      var run = run
      run.first = max(run.first, from)
      return run
    }
    return OutboxAuditTrail(records: kept, held: held, numbers: windowed, readAt: readAt)
  }
}
