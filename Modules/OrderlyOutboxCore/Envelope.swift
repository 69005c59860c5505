// A message as it is handed to delivery.

public import Foundation

/// A message as it is handed to delivery: the message, its stable identifier, and where it
/// stands in its line.
///
/// Delivery is at least once: a message whose delivery was cut short (the process died, the
/// connection dropped after the server applied it) is delivered again, with the same ``id``.
/// Send the identifier along (an `Idempotency-Key` header, say) so that the receiver can apply
/// each message exactly once.
public struct Envelope<Message: Sendable>: Sendable, Identifiable {
  /// The message's identifier: created when it was appended, kept on disk, the same on every
  /// delivery attempt and across restarts.
  public let id: UUID
  /// Its place in the outbox: appends are numbered in the order they were written, and each
  /// line delivers in this order.
  public let sequence: Int64
  /// The line it belongs to; `nil` for the outbox's default line.
  public let partition: String?
  /// The message.
  public let message: Message
  /// Which attempt this is: 1 for the first.
  ///
  /// It counts every attempt that began, in this process or an earlier one, including one that
  /// a crash or ``DurableOutbox/stop()`` cut short: a message whose process was killed while delivering
  /// it is delivered again as attempt 2. (The outbox records an attempt on disk, in the same
  /// transaction that takes the message for delivery, before it begins.) A dead letter put back
  /// with ``DurableOutbox/retryDeadLetter(id:)`` counts from 1 again.
  public let attempt: Int
  /// When it was appended.
  public let appendedAt: Date
  /// The strings appended with it: a trace context, say.
  ///
  /// Given to ``DurableOutbox/append(_:partition:headers:)``; empty if it has none.
  public let headers: [String: String]
  /// The fence of the lease under which this delivery runs, for an outbox on PostgreSQL.
  ///
  /// It grows with every worker that takes the message's key, so a receiver can refuse a delivery whose
  /// fence is lower than one it already saw for the key. `nil` for an outbox on SQLite, which
  /// has one deliverer per file.
  public let fence: Int64?

  /// Creates an envelope; the outbox creates them, tests may too.
  public init(
    id: UUID,
    sequence: Int64,
    partition: String?,
    message: Message,
    attempt: Int,
    appendedAt: Date,
    headers: [String: String] = [:],
    fence: Int64? = nil
  ) {
    self.id = id
    self.sequence = sequence
    self.partition = partition
    self.message = message
    self.attempt = attempt
    self.appendedAt = appendedAt
    self.headers = headers
    self.fence = fence
  }
}

extension Envelope: Equatable where Message: Equatable {}

/// A message whose delivery failed for good, kept apart from the line with the reason.
///
/// List them with ``DurableOutbox/deadLetters()``, put one back in its line with
/// ``DurableOutbox/retryDeadLetter(id:)`` or remove it with ``DurableOutbox/dropDeadLetter(id:)``.
public struct DeadLetter<Message: Sendable>: Sendable, Identifiable {
  /// The message's identifier, as it was when delivery was attempted.
  public let id: UUID
  /// Its place in the outbox, kept: a retried dead letter goes back to the same place.
  public let sequence: Int64
  /// The line it belonged to.
  public let partition: String?
  /// The message, or `nil` when it no longer decodes (``payload`` keeps its bytes).
  public let message: Message?
  /// The message as stored (JSON).
  public let payload: Data
  /// How many delivery attempts were made.
  public let attempts: Int
  /// When it was appended.
  public let appendedAt: Date
  /// When it became a dead letter.
  public let failedAt: Date
  /// Why: the last delivery error, or the decoding error.
  public let reason: String

  package init(
    id: UUID,
    sequence: Int64,
    partition: String?,
    message: Message?,
    payload: Data,
    attempts: Int,
    appendedAt: Date,
    failedAt: Date,
    reason: String
  ) {
    self.id = id
    self.sequence = sequence
    self.partition = partition
    self.message = message
    self.payload = payload
    self.attempts = attempts
    self.appendedAt = appendedAt
    self.failedAt = failedAt
    self.reason = reason
  }
}
