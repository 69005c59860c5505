// What a store does to deliver a line: the effects behind the line runner.
package import Foundation

/// What a store must do to deliver one line: the effects behind ``LineRunner``'s decisions.
///
/// One value stands for one line while it is delivered (on PostgreSQL, one lease under its
/// fence). The runner decides; the store claims, acknowledges, sets aside and releases, each in
/// its own transactions (SQLite: one writer and the deliverer lock; PostgreSQL: leases, fences,
/// turns and the commit confirmation).
package protocol LineStore<Message>: Sendable {
  /// What the outbox carries.
  associatedtype Message: Codable & Sendable

  /// Told before the handler is given `count` messages of the line, so that a fair share is
  /// charged as deliveries happen (a default does nothing).
  ///
  /// - Parameter count: How many messages the handler is about to be given.
  func handing(_ count: Int)

  /// The line's fence, handed to each envelope (``Envelope/fence``); `nil` for a store
  /// without leases.
  var fence: Int64? { get }

  /// The line's key (`nil`: the default line).
  var partition: String? { get }

  /// Whether each attempt is written to the audit trail (delivery started with `audit` on):
  /// only then does the runner time attempts and hand them to the store's writes.
  var audits: Bool { get }

  /// Whether the line must stop before it takes or retries a message, and how.
  ///
  /// - Returns: `nil` to go on.
  func halt() -> LineHalt?

  /// Whether the line stops after an attempt that failed with `error`, neither retrying nor
  /// setting the message aside (the outbox is stopping, or the line can no longer deliver).
  ///
  /// The runner also stops when ``halt()`` says so (a pause included): a failure while the
  /// line is held back never sets the message aside. Answer here only what is particular to a
  /// failure.
  ///
  /// - Parameter error: What the attempt threw.
  /// - Returns: `nil` to go on to the retry policy.
  func haltAfterFailure(_ error: any Error) -> LineHalt?

  /// How long a turn of this line lasts at most, besides ``LineTurn/standardDeliveries``
  /// deliveries (see ``LineTurn``); `nil` for a store that bounds turns by deliveries only.
  var turnTime: Duration? { get }

  /// Whether another line waits for a delivery slot now: asked when the line's turn is spent,
  /// and only then does the line give its slot up (after its next delivery; it is delivered
  /// again later, after the others).
  ///
  /// - Returns: `true` if a line waits for a slot.
  func othersWait() async -> Bool

  /// Claims the line's first messages that are due, up to `limit`, in order, and counts the
  /// attempt about to begin of each.
  ///
  /// - Parameters:
  ///   - limit: Up to how many (1 or more).
  ///   - attempts: Attempts for the audit trail not written yet (a failed one about to be
  ///     retried), written in the same step; a store that no longer holds the line writes them
  ///     as cut.
  /// - Returns: The messages (``LineStep/deliver(_:)``, never empty), or how the line ends
  ///   (none is due, or the store could not read them).
  func claim(upTo limit: Int, recording attempts: [AuditAttempt]) async -> LineStep

  /// Runs a delivery's handler: in the calling task, or in one of its own that stopping (or
  /// losing the line) cancels.
  ///
  /// - Parameter work: The handler's call.
  /// - Returns: What it did.
  func run(_ work: @escaping @Sendable () async throws -> Void) async -> Result<Void, any Error>

  /// Acknowledges delivered messages (the line's first, in order), gives the attempts of
  /// messages claimed but not tried back, and takes the line's next messages as `next` says,
  /// in one step. One try: a failure is thrown, and the runner decides whether to try again
  /// (``recordFailed(_:failures:)``).
  ///
  /// - Parameters:
  ///   - delivered: The messages delivered; none when a batch's first message failed.
  ///   - givingBack: Messages claimed with them but not tried.
  ///   - next: What the step takes next.
  ///   - attempts: The attempts to write in the audit trail in the same step (none when it is
  ///     off): a `delivered` one is written only if the step removed its message (a step
  ///     tried again after it took effect writes none twice), and every one as cut when the
  ///     store no longer holds the line.
  ///   - announce: Called once the step is durable, if it removed `delivered`, before anyone
  ///     waiting for the outbox to empty is woken: it emits their events.
  /// - Returns: What the line does next.
  /// - Throws: Why the step failed; whether it took effect is not known.
  func acknowledge(
    _ delivered: [ClaimedHead],
    givingBack: [ClaimedHead],
    then next: NextTake,
    recording attempts: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep

  /// Moves a message to the dead letters. One try, as ``acknowledge(_:givingBack:then:recording:announce:)``.
  ///
  /// - Parameters:
  ///   - message: The message, the line's first.
  ///   - attempts: The attempts it had.
  ///   - reason: Why it was set aside.
  ///   - stopsLine: Whether its line waits at it (``DeadLetterPolicy/stopLine``).
  ///   - recording: The attempts to write in the audit trail in the same step, as
  ///     ``acknowledge(_:givingBack:then:recording:announce:)`` does.
  ///   - announce: Called once the move is durable, before anyone waiting is woken.
  /// - Returns: What the line does next: ``LineStep/again`` when it goes on.
  /// - Throws: Why the move failed.
  func setAside(
    _ message: ClaimedHead,
    attempts: Int,
    reason: String,
    stopsLine: Bool,
    recording: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep

  /// Quarantines the line (``QuarantinePolicy``): pauses it in the store, for every deliverer
  /// and across restarts, with the reason, as ``DurableOutbox/pause(partition:)`` does; this
  /// deliverer stops taking it at once. One try, as
  /// ``acknowledge(_:givingBack:then:recording:announce:)``.
  ///
  /// - Parameter reason: Why, as ``OutboxKey/quarantine`` shows it.
  /// - Throws: Why the pause could not be written.
  func quarantine(reason: String) async throws

  /// Takes up to `wanting` permits of every limit in `limits` (each counts this line), in one
  /// transaction on the counters every deliverer shares: reads the store's clock, the windows'
  /// counts (``RateLimits/windows(for:limits:at:)``), asks ``RateLimits/grant(wanting:windows:used:)``
  /// and adds what it granted to each window.
  ///
  /// - Parameters:
  ///   - limits: The limits that count the line (never empty).
  ///   - wanting: How many deliveries the line would begin.
  /// - Returns: The grant.
  /// - Throws: Why the counters could not be read or written; nothing was taken.
  func takePermits(_ limits: [RateLimit], wanting: Int) async throws -> RateGrant

  /// The time on the clock rate windows are counted on (milliseconds since 1970), as near as
  /// this process can read it: whether a grant's permits have lapsed (``RateGrant/lapses``).
  var permitClock: Int64 { get }

  /// Writes attempts to the audit trail on their own: those of a line that ends before a step
  /// could carry them (it stops, or lost its lease). One try; a failure is logged and the rows
  /// are lost (the trail then misses attempts, never invents them).
  ///
  /// - Parameter attempts: The attempts (never empty).
  func recordAudit(_ attempts: [AuditAttempt]) async

  /// After an acknowledgement or a move to the dead letters failed: whether to try the write
  /// again, or `false` to stop the line (its message stays, and is delivered again later).
  ///
  /// The store logs, and tells whoever waits for it; the runner emits
  /// ``OutboxEvent/recordFailed(id:sequence:reason:retryIn:)`` and waits, on every store, the
  /// delays of `RetryPolicy.standard` (1 s, doubling, with jitter), capped at
  /// ``longestRecordWait``.
  ///
  /// - Parameters:
  ///   - error: Why the write failed.
  ///   - failures: How many tries of this write have failed, counting this one.
  /// - Returns: Whether to try again.
  func recordFailed(_ error: any Error, failures: Int) -> Bool

  /// The longest wait between tries of a failed write, or `nil` for none beyond the standard
  /// policy's: a store with leases must try again before its lease runs out.
  var longestRecordWait: Duration? { get }

  /// Waits before the next try of a failed write; ends early when the outbox stops.
  ///
  /// - Parameters:
  ///   - delay: The wait ``recordFailed(_:failures:)`` gave.
  ///   - error: Why the write failed (after its event was emitted: the store may tell those
  ///     who wait for the outbox now).
  /// - Returns: Whether to try again.
  func waitToRecordAgain(_ delay: Duration, after error: any Error) async -> Bool
}

/// How a line stops.
package enum LineHalt: Sendable, Equatable {
  /// Stop once what was delivered is acknowledged (the outbox stops or pauses).
  case settle
  /// Stop at once: nothing more can be recorded for the line here (its lease is lost; the line's
  /// next holder delivers its messages again).
  case abandon
}

/// What an acknowledgement takes next.
package enum NextTake: Sendable, Equatable {
  /// The line's next messages that are due, up to this many.
  case upTo(Int)
  /// Nothing: the line's turn is over, and the store gives the line up (it is delivered again
  /// after the lines that wait).
  case yield
  /// Nothing, and the line is kept: a failed batch is settled before its failed message is
  /// retried or set aside, or the line is about to stop.
  case nothing
}

/// What a line does next.
package enum LineStep: Sendable {
  /// Deliver these messages, claimed already (never empty).
  case deliver([ClaimedHead])
  /// Look again: stop if the line must, or claim its first messages.
  case again
  /// The line ends.
  case end(LineEnd)
}

/// Why a line's run ended.
package enum LineEnd: Sendable, Equatable {
  /// No message is due.
  case empty
  /// No message is due, and the store's last step gave the line up already.
  case released
  /// The line's turn is over: it is delivered again after the lines that wait.
  case yielded
  /// The line stops: the outbox stops or pauses, the line waits at a dead letter, its lease
  /// is lost, or the store failed (and said so).
  case stopped
  /// A rate limit that counts the line is reached: the line waits, in order, until `until`
  /// (when its window ends), and is delivered again then; other lines go on.
  case limited(until: Date)
}

extension LineStore {
  /// Told before the handler is given `count` messages of the line (a fair share's charge:
  /// ``FairShareTurns``); a store without fair shares does nothing.
  ///
  /// - Parameter count: How many messages the handler is about to be given.
  package func handing(_ count: Int) {}
}
