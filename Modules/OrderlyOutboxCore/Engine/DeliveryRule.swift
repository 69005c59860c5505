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

/// What a store's line does around each attempt: the parts of delivering one message that
/// depend on where the outbox is kept (how the handler runs, when a line must stop, how an
/// attempt is recorded).
package protocol LineHooks<Message>: Sendable {
  /// What the outbox carries.
  associatedtype Message: Codable & Sendable

  /// Runs the handler for one attempt.
  ///
  /// - Parameter envelope: The attempt's envelope.
  /// - Returns: What the handler did.
  func run(_ envelope: Envelope<Message>) async -> Result<Void, any Error>

  /// Whether the line stops at once after a failed attempt, neither retrying nor setting the
  /// message aside (the outbox is stopping, or the line can no longer deliver).
  ///
  /// - Parameter error: What the attempt threw.
  /// - Returns: Whether the line stops; its message stays at its head.
  func haltsAfterFailure(_ error: any Error) -> Bool

  /// Whether the line stops instead of trying again, checked before and after the retry wait
  /// (the outbox is paused or stopping).
  ///
  /// - Returns: Whether the line stops; its message stays at its head.
  func haltsBeforeRetry() -> Bool

  /// Records, before it begins, that attempt `attempt` of the message runs.
  ///
  /// - Parameter attempt: The attempt about to begin.
  func recordAttempt(_ attempt: Int) async
}

/// How the delivery of one message ended.
package enum DeliveryOutcome: Sendable, Equatable {
  /// The handler returned: the store acknowledges the message.
  case delivered
  /// The message goes to the dead letters, after `attempts` attempts, for `reason`.
  case deadLetter(attempts: Int, reason: String)
  /// The line stopped; the message stays at its head, and is delivered again later.
  case halted
}

/// The rule every outbox delivers a message by, whichever store keeps it: decode it (or set it
/// aside), hand it over, and after a failure retry it on the outbox's clock (the line waits; a
/// retry keeps its place) or set it aside, as the ``RetryPolicy`` says, with the events that
/// say so.
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

  /// Delivers a claimed message with its retries.
  ///
  /// `head.attempt` is already counted by the store; each retry is recorded before it begins
  /// (``LineHooks/recordAttempt(_:)``), so that ``Envelope/attempt`` counts every attempt that
  /// began, those a crash or a stop cut short included.
  ///
  /// - Parameters:
  ///   - head: The message, as the store claimed it.
  ///   - fence: The line's fence, for an outbox with leases.
  ///   - hooks: What the store does around each attempt.
  /// - Returns: How it ended; the store acknowledges, sets aside, or leaves the message.
  package func deliver(
    _ head: ClaimedHead,
    fence: Int64?,
    hooks: some LineHooks<Message>
  ) async -> DeliveryOutcome {
    let message: Message
    switch MessageCodec<Message>.decode(head.payload) {
    case .success(let decoded): message = decoded
    case .failure(let failure): return .deadLetter(attempts: head.attempt, reason: failure.reason)
    }
    var attempt = head.attempt
    while true {
      hub.emit(.delivering(id: head.id, sequence: head.sequence, attempt: attempt))
      let envelope = Envelope(
        id: head.id,
        sequence: head.sequence,
        partition: head.partition,
        message: message,
        attempt: attempt,
        appendedAt: head.appendedAt,
        headers: head.headers,
        fence: fence
      )
      guard case .failure(let error) = await hooks.run(envelope) else { return .delivered }
      if hooks.haltsAfterFailure(error) { return .halted }
      let retryable = retry.isRetryable(error)
      let exhausted = retry.maximumAttempts.map { attempt >= $0 } ?? false
      if !retryable || exhausted { return .deadLetter(attempts: attempt, reason: "\(error)") }
      let delay = retry.delay(afterAttempt: attempt)
      hub.emit(
        .retrying(
          id: head.id,
          sequence: head.sequence,
          attempt: attempt,
          delay: delay,
          reason: "\(error)"
        )
      )
      // The epoch first: a pause or resume after it ends the wait, one before it is seen by
      // the check.
      let epoch = waits.epoch
      if hooks.haltsBeforeRetry() { return .halted }
      await waits.wait(delay, on: clock, since: epoch)
      if hooks.haltsBeforeRetry() { return .halted }
      attempt += 1
      // Counted before it begins; if the write fails the attempt still runs, and a restart
      // counts from the last attempt recorded.
      await hooks.recordAttempt(attempt)
    }
  }
}
