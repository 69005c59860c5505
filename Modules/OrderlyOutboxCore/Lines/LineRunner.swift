// The one loop that delivers a line, on every store.

import Foundation

/// The one loop that delivers a line, on any store: it claims the line's first messages,
/// hands them to the handler, and acknowledges them, retries the one that failed or sets it
/// aside, by ``DeliveryRule``; events are emitted here, and only here.
///
/// The batch is the unit: a handler of single messages gets batches of one. A line has one
/// delivery in progress at a time; the next begins after the last is acknowledged (or taken
/// with it, in one step).
package struct LineRunner<Message: Codable & Sendable>: Sendable {
  /// The rule: decoding, envelopes, the retry decision, the retry waits and the events.
  package let rule: DeliveryRule<Message>
  /// Up to how many messages of the line one delivery gets.
  package let batch: Int
  /// Whether the handler takes batches: only then does a ``BatchDeliveryError`` say how far a
  /// delivery got (a handler of single messages may throw anything).
  package let batched: Bool
  /// What a dead letter does to its line.
  package let onDeadLetter: DeadLetterPolicy
  /// When the runner quarantines its line instead of retrying; `nil` never does.
  package let quarantine: QuarantinePolicy?
  /// The handler.
  package let handler: @Sendable ([Envelope<Message>]) async throws -> Void
  /// Called when a batch handler throws a ``BatchDeliveryError`` whose count is outside its
  /// batch (it is taken as a failure of the batch's first message): the store logs it.
  package let onBadCount: @Sendable (_ error: BatchDeliveryError, _ batch: Int) -> Void
  /// The rate limits delivery started with: a line one counts takes permits before each claim.
  package var rateLimits: [RateLimit] = []

  /// A runner of single messages.
  ///
  /// - Parameters:
  ///   - rule: The outbox's rule.
  ///   - onDeadLetter: What a dead letter does to its line.
  ///   - quarantine: When the line is quarantined instead of retried; `nil` never.
  ///   - deliver: The handler.
  package init(
    rule: DeliveryRule<Message>,
    onDeadLetter: DeadLetterPolicy,
    quarantine: QuarantinePolicy? = nil,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) {
    self.rule = rule
    self.batch = 1
    self.batched = false
    self.onDeadLetter = onDeadLetter
    self.quarantine = quarantine
    self.handler = { envelopes in
      for envelope in envelopes { try await deliver(envelope) }
    }
    self.onBadCount = { _, _ in }
  }

  /// A runner of ordered batches.
  ///
  /// - Parameters:
  ///   - rule: The outbox's rule.
  ///   - batch: Up to how many messages one call of `deliver` gets (1 or more).
  ///   - onDeadLetter: What a dead letter does to its line.
  ///   - quarantine: When the line is quarantined instead of retried; `nil` never.
  ///   - onBadCount: Told of a ``BatchDeliveryError`` whose count is outside its batch.
  ///   - deliver: The handler.
  package init(
    rule: DeliveryRule<Message>,
    batch: Int,
    onDeadLetter: DeadLetterPolicy,
    quarantine: QuarantinePolicy? = nil,
    onBadCount: @escaping @Sendable (_ error: BatchDeliveryError, _ batch: Int) -> Void,
    deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) {
    self.rule = rule
    self.batch = max(1, batch)
    self.batched = true
    self.onDeadLetter = onDeadLetter
    self.quarantine = quarantine
    self.handler = deliver
    self.onBadCount = onBadCount
  }

  /// Delivers the line until it has no message due, its turn is over, or it must stop.
  ///
  /// - Parameters:
  ///   - store: The line, in its store.
  ///   - taken: Messages claimed already with the line (a lease taken with its first
  ///     messages), or none.
  /// - Returns: Why the run ended; the caller releases the line unless the store did.
  package func run(_ store: some LineStore<Message>, taken: [ClaimedHead] = []) async -> LineEnd {
    var claimed = taken
    var turn = LineTurn(timeLimit: store.turnTime, at: .now)
    // Audit rows of a failed attempt about to be retried: written by the claim that retries it.
    var unwritten: [AuditAttempt] = []
    let limits = rateLimits.filter { $0.counts(store.partition) }
    // When the permits of the claimed messages stop counting (their window ends).
    var lapses: Int64?
    if !limits.isEmpty, !taken.isEmpty {
      // Messages taken with the line (a lease) begin only as far as the limits allow; the
      // others give their attempts back and wait in the line.
      let grant = await permits(taken.count, limits: limits, store: store)
      if grant.granted < taken.count {
        let settled = await acknowledge(
          [],
          givingBack: Array(taken.dropFirst(grant.granted)),
          then: .nothing,
          recording: [],
          store: store
        )
        if case .end(let end) = settled { return end }
        claimed = Array(taken.prefix(grant.granted))
        if claimed.isEmpty { return .limited(until: Self.date(grant.until)) }
      }
      lapses = grant.lapses
    }
    while true {
      if store.halt() != nil { return await ended(.stopped, leaving: unwritten, store: store) }
      if claimed.isEmpty {
        var upTo = batch
        if !limits.isEmpty {
          let grant = await permits(batch, limits: limits, store: store)
          if grant.granted == 0 {
            return await ended(
              .limited(until: Self.date(grant.until)),
              leaving: unwritten,
              store: store
            )
          }
          upTo = grant.granted
          lapses = grant.lapses
        }
        let step = await store.claim(upTo: upTo, recording: unwritten)
        unwritten = []
        switch step {
        case .deliver(let messages): claimed = messages
        case .again: continue
        case .end(let end): return end
        }
        guard !claimed.isEmpty else { return .empty }
      }
      // Decided before the delivery: its acknowledgement gives the line up, or takes the next.
      let turnOver = await turn.beforeDelivery(at: .now) { await store.othersWait() }
      if let ends = lapses, store.permitClock >= ends {
        // The window these permits counted in has ended before the deliveries begin: they are
        // counted again, in the window they begin in, so that no window sees more begin than
        // its limit.
        let grant = await permits(claimed.count, limits: limits, store: store)
        if grant.granted < claimed.count {
          let settled = await acknowledge(
            [],
            givingBack: Array(claimed.dropFirst(grant.granted)),
            then: .nothing,
            recording: [],
            store: store
          )
          if case .end(let end) = settled {
            return await ended(end, leaving: unwritten, store: store)
          }
          claimed = Array(claimed.prefix(grant.granted))
          if claimed.isEmpty {
            return await ended(
              .limited(until: Self.date(grant.until)),
              leaving: unwritten,
              store: store
            )
          }
        }
        lapses = grant.lapses
      }
      store.handing(claimed.count)
      let (step, left, nextLapses) = await deliver(
        claimed,
        store: store,
        turnOver: turnOver,
        limits: limits
      )
      lapses = nextLapses
      unwritten = left
      switch step {
      case .deliver(let next): claimed = next
      case .again: claimed = []
      case .end(let end): return await ended(end, leaving: unwritten, store: store)
      }
    }
  }

  /// How many of `wanting` deliveries the line may begin now, by the limits that count it.
  ///
  /// Counters the store cannot read or write grant nothing, and the line asks again a second
  /// later: a limit is never passed because its counter was out of reach.
  private func permits(_ wanting: Int, limits: [RateLimit], store: some LineStore<Message>)
    async -> RateGrant
  {
    do {
      return try await store.takePermits(limits, wanting: wanting)
    } catch {
      return RateGrant(granted: 0, until: ScheduleRow.milliseconds(Date()) + 1_000)
    }
  }

  /// A time in milliseconds since 1970 as a date; now for none.
  static func date(_ milliseconds: Int64?) -> Date {
    milliseconds.map(ScheduleRow.date) ?? Date()
  }

  /// Ends a run, writing the audit rows no step carried.
  private func ended(
    _ end: LineEnd,
    leaving unwritten: [AuditAttempt],
    store: some LineStore<Message>
  ) async -> LineEnd {
    if !unwritten.isEmpty { await store.recordAudit(unwritten) }
    return end
  }

  /// Delivers claimed messages with one call of the handler, and acknowledges them; when it
  /// fails, acknowledges those it says it delivered (``BatchDeliveryError``) and retries the
  /// one that failed or sets it aside.
  ///
  /// A message's attempt is counted when it is claimed; those after the one that failed are
  /// given their attempt back, as they were not tried. A message that does not decode ends
  /// the batch before it, and is set aside once it is the line's first. A retry waits on the
  /// outbox's clock, then claims the line's first messages again (which counts the attempt).
  private func deliver(
    _ claimed: [ClaimedHead],
    store: some LineStore<Message>,
    turnOver: Bool,
    limits: [RateLimit]
  ) async -> (LineStep, [AuditAttempt], Int64?) {
    guard let first = claimed.first else { return (.again, [], nil) }
    var envelopes: [Envelope<Message>] = []
    var undecodable: String?
    for message in claimed {
      switch rule.envelope(message, fence: store.fence) {
      case .success(let envelope):
        envelopes.append(envelope)
        continue
      case .failure(let failure): undecodable = failure.reason
      }
      break
    }
    let handed = Array(claimed.prefix(envelopes.count))
    let notHanded = Array(claimed.dropFirst(envelopes.count))
    if handed.isEmpty, let reason = undecodable {
      // The first message does not decode: the others give their attempts back, and it is set
      // aside (in the trail, an attempt that ended as it began).
      if claimed.count > 1 {
        let settled = await acknowledge(
          [],
          givingBack: Array(notHanded.dropFirst()),
          then: .nothing,
          recording: [],
          store: store
        )
        guard case .again = settled else { return (settled, [], nil) }
      }
      let now = Date()
      let trail =
        store.audits
        ? [AuditAttempt(first, startedAt: now, endedAt: now, outcome: .deadLettered)] : []
      let step = await setAside(
        first,
        attempts: first.attempt,
        reason: reason,
        recording: trail,
        store: store
      )
      return (step, [], nil)
    }
    for envelope in envelopes {
      rule.hub.emit(
        .delivering(id: envelope.id, sequence: envelope.sequence, attempt: envelope.attempt)
      )
    }
    let (handler, given) = (handler, envelopes)
    let started = store.audits ? Date() : nil
    let result = await store.run { try await handler(given) }
    // The trail's rows of this attempt, each message with its outcome.
    let attempts: (ArraySlice<ClaimedHead>, OutboxAuditOutcome) -> [AuditAttempt] = {
      [ended = Date()] messages, outcome in
      guard let started else { return [] }
      return messages.map { AuditAttempt($0, startedAt: started, endedAt: ended, outcome: outcome) }
    }
    guard case .failure(let thrown) = result else {
      var take = next(turnOver: turnOver, store: store)
      var heldUntil: Date?
      var nextLapses: Int64?
      if case .upTo(let wanted) = take, !limits.isEmpty {
        // Permits for the next messages, taken as they are: the deliveries begin right after.
        let grant = await permits(wanted, limits: limits, store: store)
        take = grant.granted > 0 ? .upTo(grant.granted) : .nothing
        if grant.granted == 0 { heldUntil = Self.date(grant.until) }
        nextLapses = grant.lapses
      }
      let step = await acknowledge(
        handed,
        givingBack: notHanded,
        then: take,
        recording: attempts(handed[...], .delivered),
        store: store
      )
      if let heldUntil, case .again = step {
        return (.end(.limited(until: heldUntil)), [], nil)
      }
      return (step, [], nextLapses)
    }
    let (done, error) = failure(thrown, handed: handed.count)
    let failed = handed[done]
    // One rule on every store: a line that must stop now (its key or the outbox paused or
    // stopping, its lease lost) stops after a failure too, leaving the message at its head for
    // a retry; it is never set aside as a dead letter while the line is held back.
    let halt = store.haltAfterFailure(error) ?? store.halt()
    // A line that can no longer record anything leaves its messages to its next holder.
    if halt == .abandon {
      return (.end(.stopped), attempts(handed[...done], .cut), nil)
    }
    let decision = rule.afterFailure(error, attempt: failed.attempt)
    let setsAside = halt == nil && { if case .setAside = decision { true } else { false } }()
    // The failed attempt's row goes with its move to the dead letters, or with the step that
    // settles the batch, or with the claim that retries it.
    var failedRow = attempts(handed[done...done], setsAside ? .deadLettered : .retried)
    if done > 0 || claimed.count > 1 {
      let settled = await acknowledge(
        Array(handed[..<done]),
        givingBack: Array(claimed.dropFirst(done + 1)),
        then: .nothing,
        recording: attempts(handed[..<done], .delivered) + (setsAside ? [] : failedRow),
        store: store
      )
      if !setsAside { failedRow = [] }
      guard case .again = settled else { return (settled, failedRow, nil) }
    }
    if halt != nil { return (.end(.stopped), failedRow, nil) }
    switch decision {
    case .setAside(let reason):
      let step = await setAside(
        failed,
        attempts: failed.attempt,
        reason: reason,
        recording: failedRow,
        store: store
      )
      return (step, [], nil)
    case .retry where quarantine?.quarantines(afterFailed: failed.attempt) == true:
      // One rule on every store: the key is paused in the store with why, its message left at
      // its head with its attempts; the failed attempt's row goes on its own, as a retried
      // one (it is tried again once the key is resumed).
      let step = await quarantined(
        failed,
        reason: QuarantinePolicy.reason(attempts: failed.attempt, error: error),
        store: store
      )
      return (step, failedRow, nil)
    case .retry(let delay):
      // The epoch first, before the event: a pause or resume after it ends the wait (one made
      // by a listener that heard `retrying` included), one before it is seen by the check.
      let epoch = rule.waits.epoch
      rule.hub.emit(
        .retrying(
          id: failed.id,
          sequence: failed.sequence,
          attempt: failed.attempt,
          delay: delay,
          reason: "\(error)"
        )
      )
      if store.halt() != nil { return (.end(.stopped), failedRow, nil) }
      await rule.waits.wait(delay, on: rule.clock, since: epoch)
      // Claimed again (and counted) by the next look, unless the line must stop.
      return (.again, failedRow, nil)
    }
  }

  /// What an acknowledgement takes next: nothing when the line must stop, the line given up
  /// when its turn is over, its next messages otherwise.
  private func next(turnOver: Bool, store: some LineStore<Message>) -> NextTake {
    if store.halt() != nil { return .nothing }
    return turnOver ? .yield : .upTo(batch)
  }

  /// Where a delivery failed: the index of the message that failed (a batch handler's
  /// ``BatchDeliveryError/delivered``, or 0 for any other error) and the error.
  private func failure(_ thrown: any Error, handed: Int) -> (Int, any Error) {
    guard batched, let partial = thrown as? BatchDeliveryError else { return (0, thrown) }
    guard (0..<handed).contains(partial.delivered) else {
      onBadCount(partial, handed)
      return (0, partial.error)
    }
    return (partial.delivered, partial.error)
  }

  /// Acknowledges, and emits `delivered` for each message once that is durable; a failed try
  /// is tried again as the store says.
  private func acknowledge(
    _ delivered: [ClaimedHead],
    givingBack: [ClaimedHead],
    then next: NextTake,
    recording attempts: [AuditAttempt],
    store: some LineStore<Message>
  ) async -> LineStep {
    let hub = rule.hub
    let announce: @Sendable () -> Void = {
      for message in delivered {
        hub.emit(.delivered(id: message.id, sequence: message.sequence))
      }
    }
    let about = delivered.first ?? givingBack.first
    return await recording(about, store: store) {
      try await store.acknowledge(
        delivered,
        givingBack: givingBack,
        then: next,
        recording: attempts,
        announce: announce
      )
    }
  }

  /// Moves a message to the dead letters, and emits `deadLettered` once that is durable.
  private func setAside(
    _ message: ClaimedHead,
    attempts: Int,
    reason: String,
    recording trail: [AuditAttempt],
    store: some LineStore<Message>
  ) async -> LineStep {
    let hub = rule.hub
    let stops = onDeadLetter == .stopLine
    let announce: @Sendable () -> Void = {
      hub.emit(
        .deadLettered(
          id: message.id,
          sequence: message.sequence,
          reason: reason,
          lineStopped: stops
        )
      )
    }
    let step = await recording(message, store: store) {
      try await store.setAside(
        message,
        attempts: attempts,
        reason: reason,
        stopsLine: stops,
        recording: trail,
        announce: announce
      )
    }
    // Under go-on the line would move past it: with the policy's `onDeadLetter`, the key is
    // quarantined instead, behind its dead letter.
    guard case .again = step, !stops, quarantine?.onDeadLetter == true else { return step }
    return await quarantined(
      message,
      reason: QuarantinePolicy.reason(deadLetter: message.id, reason: reason),
      store: store
    )
  }

  /// Quarantines the line in the store, and emits `quarantined` once that is durable; the
  /// line ends.
  private func quarantined(
    _ message: ClaimedHead,
    reason: String,
    store: some LineStore<Message>
  ) async -> LineStep {
    var written = false
    let step = await recording(message, store: store) { () async throws -> LineStep in
      try await store.quarantine(reason: reason)
      written = true
      return .end(.stopped)
    }
    // Not written (the outbox stopped first): the key is not paused, and its message is tried
    // again by the next start.
    guard written else { return step }
    rule.hub.emit(
      .quarantined(
        id: message.id,
        sequence: message.sequence,
        partition: message.partition,
        reason: reason
      )
    )
    return step
  }

  /// Makes a write that records what happened to delivered messages until it succeeds, the
  /// store gives up, or the outbox stops; each failure is reported as
  /// ``OutboxEvent/recordFailed(id:sequence:reason:retryIn:)``.
  private func recording(
    _ about: ClaimedHead?,
    store: some LineStore<Message>,
    _ write: () async throws -> LineStep
  ) async -> LineStep {
    var failures = 0
    while true {
      let thrown: any Error
      do {
        return try await write()
      } catch {
        thrown = error
      }
      failures += 1
      guard store.recordFailed(thrown, failures: failures) else { return .end(.stopped) }
      // One back-off on every store: the standard policy's, capped where a lease must be kept.
      var delay = RetryPolicy.standard.delay(afterAttempt: failures)
      if let longest = store.longestRecordWait { delay = min(delay, longest) }
      if let about {
        rule.hub.emit(
          .recordFailed(
            id: about.id,
            sequence: about.sequence,
            reason: "\(thrown)",
            retryIn: delay
          )
        )
      }
      guard await store.waitToRecordAgain(delay, after: thrown) else { return .end(.stopped) }
    }
  }
}
