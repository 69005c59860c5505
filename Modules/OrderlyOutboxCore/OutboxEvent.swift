// What happened to a message, as an outbox reports it.

public import Foundation

/// Something that happened to a message, reported by ``DurableOutbox/events``.
///
/// The events of one line arrive in the order they happened. Events of different lines (with
/// partitions) interleave.
public enum OutboxEvent: Sendable, Equatable, CustomStringConvertible {
  /// A message was written to disk, as `sequence` in `partition`'s line.
  case appended(id: UUID, sequence: Int64, partition: String?)
  /// A new message was folded into the pending message `into` by the outbox's merge closure:
  /// nothing new was added to the line.
  case merged(into: UUID, sequence: Int64, partition: String?)
  /// Delivery of a message began; `attempt` is 1 the first time.
  case delivering(id: UUID, sequence: Int64, attempt: Int)
  /// A message was delivered and removed from the outbox.
  case delivered(id: UUID, sequence: Int64)
  /// Delivery failed with a retryable error; it is tried again after `delay` (on the outbox's
  /// clock), or as soon as the outbox is resumed.
  case retrying(id: UUID, sequence: Int64, attempt: Int, delay: Duration, reason: String)
  /// Delivery failed for good (or the message no longer decodes): it was moved to the dead
  /// letters. `lineStopped` says whether its line waits for it to be retried or dropped.
  case deadLettered(id: UUID, sequence: Int64, reason: String, lineStopped: Bool)
  /// A message was delivered (or given up), but the write that records it failed (a full disk,
  /// say): the outbox tries the write again after `retryIn`, on its clock, and
  /// ``DurableOutbox/waitUntilDelivered()`` callers get the error. If the outbox stops first, the
  /// message stays and is delivered again later.
  case recordFailed(id: UUID, sequence: Int64, reason: String, retryIn: Duration)
  /// A key was quarantined (``QuarantinePolicy``): paused in the store with `reason`, its
  /// message `id` (`sequence`) left at its head, or just set aside as a dead letter under
  /// go-on. Resume the key to deliver it again.
  case quarantined(id: UUID, sequence: Int64, partition: String?, reason: String)
  /// An append found its unique key held by the message `id` (`sequence`: pending, or appended
  /// within its window) and stored nothing (``UniqueAppend/duplicate(of:)``).
  case duplicate(id: UUID, sequence: Int64, uniqueKey: String)
  /// A recurring schedule (``OutboxSchedules``) appended the message `id` (`sequence`) for its
  /// tick at `tick`; the append's own ``appended(id:sequence:partition:)`` came first.
  case ticked(id: UUID, sequence: Int64, schedule: String, tick: Date)

  /// The message the event is about.
  public var id: UUID {
    switch self {
    case .appended(let id, _, _), .merged(let id, _, _), .delivering(let id, _, _),
      .delivered(let id, _), .retrying(let id, _, _, _, _), .deadLettered(let id, _, _, _),
      .recordFailed(let id, _, _, _), .quarantined(let id, _, _, _), .duplicate(let id, _, _),
      .ticked(let id, _, _, _):
      id
    }
  }

  /// The message's place in the outbox.
  public var sequence: Int64 {
    switch self {
    case .appended(_, let sequence, _), .merged(_, let sequence, _),
      .delivering(_, let sequence, _), .delivered(_, let sequence),
      .retrying(_, let sequence, _, _, _), .deadLettered(_, let sequence, _, _),
      .recordFailed(_, let sequence, _, _), .quarantined(_, let sequence, _, _),
      .duplicate(_, let sequence, _), .ticked(_, let sequence, _, _):
      sequence
    }
  }

  /// One line: `delivered #3`.
  public var description: String {
    switch self {
    case .appended(_, let sequence, let partition):
      "appended #\(sequence)" + (partition.map { " [\($0)]" } ?? "")
    case .merged(_, let sequence, _): "merged into #\(sequence)"
    case .delivering(_, let sequence, let attempt):
      "delivering #\(sequence)" + (attempt > 1 ? " (attempt \(attempt))" : "")
    case .delivered(_, let sequence): "delivered #\(sequence)"
    case .retrying(_, let sequence, _, let delay, let reason):
      "retrying #\(sequence) in \(delay): \(reason)"
    case .deadLettered(_, let sequence, let reason, let stopped):
      "dead letter #\(sequence): \(reason)" + (stopped ? " (line stopped)" : "")
    case .recordFailed(_, let sequence, let reason, let delay):
      "recording #\(sequence) failed, trying again in \(delay): \(reason)"
    case .quarantined(_, let sequence, let partition, let reason):
      "quarantined " + (partition.map { "[\($0)]" } ?? "(default line)")
        + " at #\(sequence): \(reason)"
    case .duplicate(_, let sequence, let key): "duplicate of #\(sequence) (unique key \(key))"
    case .ticked(_, let sequence, let schedule, let tick):
      "schedule \(schedule) ticked at \(ScheduleTicker<Int>.iso8601(ScheduleRow.milliseconds(tick))): "
        + "#\(sequence)"
    }
  }
}
