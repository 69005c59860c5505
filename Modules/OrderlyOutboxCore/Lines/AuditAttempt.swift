// What the line runner hands a store to write in the audit trail.

package import Foundation

/// One delivery attempt, as the line runner hands it to its store for the audit trail: written
/// by the store in the statement that records the attempt's outcome (an acknowledgement, a move
/// to the dead letters, the claim that retries it).
package struct AuditAttempt: Sendable, Equatable {
  /// The message's identifier.
  package let id: UUID
  /// Its place in its line.
  package let sequence: Int64
  /// Its key; `nil` for the default line.
  package let partition: String?
  /// Which attempt it was.
  package let attempt: Int
  /// When the handler was called.
  package let startedAt: Date
  /// When it returned or threw.
  package let endedAt: Date
  /// How it ended, as the runner sees it; a store that finds it no longer holds the line
  /// writes ``OutboxAuditOutcome/cut`` instead.
  package private(set) var outcome: OutboxAuditOutcome

  /// An attempt of a claimed message.
  ///
  /// - Parameters:
  ///   - message: The message.
  ///   - startedAt: When the handler was called.
  ///   - endedAt: When it returned or threw.
  ///   - outcome: How it ended.
  package init(
    _ message: ClaimedHead,
    startedAt: Date,
    endedAt: Date,
    outcome: OutboxAuditOutcome
  ) {
    self.id = message.id
    self.sequence = message.sequence
    self.partition = message.partition
    self.attempt = message.attempt
    self.startedAt = startedAt
    self.endedAt = endedAt
    self.outcome = outcome
  }

  /// The same attempt, cut: its outcome was not recorded (the line was lost before the write).
  package var cut: AuditAttempt {
    var cut = self
    cut.outcome = .cut
    return cut
  }
}
