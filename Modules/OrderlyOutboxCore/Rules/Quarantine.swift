// Quarantine: a key whose head keeps failing is paused by delivery itself, with the reason.

/// When delivery sets a poison key aside by itself: after a run of failed attempts at the key's
/// first message, or (optionally) when one of its messages becomes a dead letter under
/// ``DeadLetterPolicy/continueLine``.
///
/// A quarantined key is paused in the store, for every worker and across restarts, with the
/// reason (``OutboxKey/quarantine``): its message stays at its head with its attempts, nothing
/// behind it moves, and every other key keeps flowing. ``OutboxEvent/quarantined(id:sequence:partition:reason:)``
/// is emitted, `keys` lists it first with why (``OutboxKeyStuck/quarantined(reason:)``), and
/// `orderly outbox resume KEY` (``DurableOutbox/resume(partition:)``) lets it go again, from the
/// same message. Off by default (``DeliveryOptions/quarantine`` is `nil`).
///
/// ```swift
/// var options = FleetDeliveryOptions()
/// options.quarantine = QuarantinePolicy(afterFailedAttempts: 5)
/// ```
///
/// The retry policy decides first: an attempt that makes the message a dead letter (an error
/// not retried, or ``RetryPolicy/maximumAttempts`` reached) sets it aside as before.
public struct QuarantinePolicy: Sendable, Equatable {
  /// After how many failed attempts at a key's first message it is quarantined; 1 or more.
  ///
  /// The key is quarantined instead of retried. The count is the message's own stored
  /// attempts, so it holds across restarts and workers.
  public var afterFailedAttempts: Int
  /// Whether a key is also quarantined when one of its messages becomes a dead letter under
  /// ``DeadLetterPolicy/continueLine`` (under ``DeadLetterPolicy/stopLine`` the dead letter
  /// stops its key already).
  public var onDeadLetter: Bool

  /// A policy.
  ///
  /// - Parameters:
  ///   - afterFailedAttempts: Failed attempts at a key's first message before the key is
  ///     quarantined; 5 by default.
  ///   - onDeadLetter: Whether a dead letter under go-on quarantines its key too; `true` by
  ///     default.
  public init(afterFailedAttempts: Int = 5, onDeadLetter: Bool = true) {
    self.afterFailedAttempts = afterFailedAttempts
    self.onDeadLetter = onDeadLetter
  }

  /// What is wrong with the policy, or `nil`.
  package var problem: String? {
    afterFailedAttempts >= 1
      ? nil
      : "quarantine.afterFailedAttempts must be 1 or more (got \(afterFailedAttempts))"
  }

  /// Whether a key is quarantined after attempt `attempt` at its first message failed and the
  /// retry policy would retry it.
  ///
  /// - Parameter attempt: The attempt that failed, counting from 1.
  /// - Returns: `true` to quarantine the key instead of retrying.
  package func quarantines(afterFailed attempt: Int) -> Bool {
    attempt >= afterFailedAttempts
  }

  /// Why a key was quarantined after a run of failed attempts, as the store keeps it.
  ///
  /// - Parameters:
  ///   - attempt: The attempt that failed.
  ///   - error: What it threw.
  /// - Returns: The reason.
  package static func reason(attempts attempt: Int, error: any Error) -> String {
    "its first message failed \(attempt) time(s) in a row; last error: \(error)"
  }

  /// Why a key was quarantined after a message became a dead letter under go-on.
  ///
  /// - Parameters:
  ///   - id: The dead letter's identifier.
  ///   - reason: Why it was set aside.
  /// - Returns: The reason.
  package static func reason(deadLetter id: some CustomStringConvertible, reason: String) -> String
  {
    "its message \(id) became a dead letter: \(reason)"
  }
}
