// The rule every outbox delivers a message by: envelope, retry or dead letter.

package import Foundation

/// A line's head message as a store claimed it: the attempt about to begin is already counted
/// in the store.
package struct ClaimedHead: Sendable {
  /// The message's identifier.
  package let id: UUID
  /// Its place in its line.
  package let sequence: Int64
  /// Its line; `nil` for the default line.
  package let partition: String?
  /// The stored JSON.
  package let payload: Data
  /// The attempt about to begin: 1 for a message never tried, and one more than the last
  /// attempt that began (here, or in a process that died or stopped since).
  package let attempt: Int
  /// When it was appended.
  package let appendedAt: Date
  /// Its headers.
  package let headers: [String: String]

  /// A claimed head.
  ///
  /// - Parameters:
  ///   - id: The message's identifier.
  ///   - sequence: Its place in its line.
  ///   - partition: Its line.
  ///   - payload: The stored JSON.
  ///   - attempt: The attempt about to begin, already counted.
  ///   - appendedAt: When it was appended.
  ///   - headers: Its headers.
  package init(
    id: UUID,
    sequence: Int64,
    partition: String?,
    payload: Data,
    attempt: Int,
    appendedAt: Date,
    headers: [String: String]
  ) {
    self.id = id
    self.sequence = sequence
    self.partition = partition
    self.payload = payload
    self.attempt = attempt
    self.appendedAt = appendedAt
    self.headers = headers
  }
}

/// What the rule says after a failed attempt.
package enum AfterFailure: Sendable, Equatable {
  /// Try the message again, as its line's first, after this wait (on the outbox's clock).
  case retry(after: Duration)
  /// Set the message aside as a dead letter, for this reason.
  case setAside(reason: String)
}

/// The rule every outbox delivers a message by, whichever store keeps it: decode it (or set it
/// aside), hand it over as an envelope, and after a failure retry it (the line waits; a retry
/// keeps its place) or set it aside, as the ``RetryPolicy`` says.
///
/// Decisions only: ``LineRunner`` acts on them, for every store.
package struct DeliveryRule<Message: Codable & Sendable>: Sendable {
  /// When a failed delivery is tried again, and which errors are retried.
  package let retry: RetryPolicy
  /// Where the events go.
  package let hub: OutboxEventHub
  /// The outbox's retry waits, ended early by pause, resume and stop.
  package let waits: RetryWaits
  /// The clock retry waits are measured on.
  package let clock: any Clock<Duration>

  /// A rule for one outbox.
  ///
  /// - Parameters:
  ///   - retry: The retry policy.
  ///   - hub: The outbox's events.
  ///   - waits: The outbox's retry waits.
  ///   - clock: The outbox's clock.
  package init(
    retry: RetryPolicy,
    hub: OutboxEventHub,
    waits: RetryWaits,
    clock: any Clock<Duration>
  ) {
    self.retry = retry
    self.hub = hub
    self.waits = waits
    self.clock = clock
  }

  /// The envelope of a claimed message, or why it cannot be delivered (its stored payload does
  /// not decode: it is set aside).
  ///
  /// - Parameters:
  ///   - claimed: The message, as the store claimed it.
  ///   - fence: The line's fence, for an outbox with leases.
  /// - Returns: The envelope, or the reason it is set aside.
  package func envelope(
    _ claimed: ClaimedHead,
    fence: Int64?
  ) -> Result<Envelope<Message>, DecodingFailure> {
    MessageCodec<Message>.decode(claimed.payload).map { message in
      Envelope(
        id: claimed.id,
        sequence: claimed.sequence,
        partition: claimed.partition,
        message: message,
        attempt: claimed.attempt,
        appendedAt: claimed.appendedAt,
        headers: claimed.headers,
        fence: fence
      )
    }
  }

  /// What follows attempt `attempt` of a message, which failed with `error`: a retry after the
  /// policy's wait, or the dead letters (the error is not retried, or the attempts are used
  /// up).
  ///
  /// - Parameters:
  ///   - error: What the attempt threw.
  ///   - attempt: The attempt that failed, counting from 1.
  /// - Returns: The decision.
  package func afterFailure(_ error: any Error, attempt: Int) -> AfterFailure {
    let exhausted = retry.maximumAttempts.map { attempt >= $0 } ?? false
    guard retry.isRetryable(error), !exhausted else { return .setAside(reason: "\(error)") }
    return .retry(after: retry.delay(afterAttempt: attempt))
  }
}
