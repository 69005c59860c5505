// One line of a SQLite outbox behind the line runner: claims, acknowledgements and dead letters in
// one-writer transactions.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyCore
import OrderlyOutboxCore

/// One line of a SQLite outbox, as the line runner delivers it: what the store does behind
/// ``LineStore`` (claims, acknowledgements and dead letters in one-writer transactions, the
/// mark that keeps merges out of messages in delivery, waking `waitUntilDelivered`).
struct OutboxLine<Message: Codable & Sendable>: LineStore {
  /// With fair shares, charges the line's group as the handler is given its messages.
  func handing(_ count: Int) {
    outbox.state.withLock(announcingTo: outbox) { $0.admission?.handing(partition, count) }
  }

  let outbox: Outbox<Message>
  let partition: String?
  /// The audit trail's options, as delivery started.
  let audit: OutboxAuditOptions

  /// A file outbox has one deliverer (its lock), not leases: no fence.
  var fence: Int64? { nil }

  var audits: Bool { audit.isOn }

  func halt() -> LineHalt? {
    if Task.isCancelled { return .settle }
    let partition = partition
    let halts = outbox.state.withLock(announcingTo: outbox) { state -> Bool in
      state.holdsBack(partition) || state.stopping || state.closed
    }
    return halts ? .settle : nil
  }

  func haltAfterFailure(_ error: any Error) -> LineHalt? {
    outbox.isStopping || (Task.isCancelled && error is CancellationError) ? .settle : nil
  }

  /// No bound in time: a turn is ``LineTurn/standardDeliveries`` deliveries.
  var turnTime: Duration? { nil }

  /// Whether another line's turn is enqueued and has not begun: it waits for a slot.
  func othersWait() async -> Bool { outbox.linesWaitForTurn(besides: partition) }

  func claim(upTo limit: Int, recording attempts: [AuditAttempt]) async -> LineStep {
    let (outbox, partition) = (outbox, partition)
    let trail = auditing(attempts)
    do {
      let claimed = try await outbox.database.write { db in
        try trail(db, [])
        return try outbox.claimHeads(of: partition, upTo: limit, in: db)
      }
      return claimed.isEmpty ? .end(.empty) : .deliver(claimed)
    } catch {
      // Stopped, closed, or the disk failed before anything was delivered: the messages stay
      // for the next turn or start; waiters hear why.
      let failure = outbox.failure(error)
      if failure != .cancelled, failure != .closed(path: outbox.path ?? ":memory:") {
        outbox.failWaiters(with: failure)
      }
      return .end(.stopped)
    }
  }

  /// Takes permits in one write transaction, on the outbox's clock read as wall time (this
  /// machine's clock, as every process that opens the file reads it; a test's manual clock
  /// moves the windows by hand).
  func takePermits(_ limits: [RateLimit], wanting: Int) async throws -> RateGrant {
    let (partition, wall) = (partition, outbox.scheduleTicker.wall)
    return try await outbox.database.write { db in
      try OutboxStore.takePermits(
        db,
        limits: limits,
        partition: partition,
        wanting: wanting,
        now: wall.milliseconds()
      )
    }
  }

  /// The outbox's clock read as wall time: the clock its rate windows are counted on.
  var permitClock: Int64 { outbox.scheduleTicker.wall.milliseconds() }

  /// Runs the handler in the line's task: ``Outbox/stop()`` cancels it with the line.
  func run(_ work: @escaping @Sendable () async throws -> Void) async -> Result<Void, any Error> {
    do {
      try await work()
      return .success(())
    } catch {
      return .failure(error)
    }
  }

  /// Removes the delivered messages, counts the others' attempts back, and takes the line's
  /// next messages, in one write transaction.
  ///
  /// The write runs in a task of its own, so that ``Outbox/stop()`` cancelling the delivery
  /// does not cancel it: a delivery that returned is recorded.
  func acknowledge(
    _ delivered: [ClaimedHead],
    givingBack: [ClaimedHead],
    then next: NextTake,
    recording attempts: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    let (outbox, partition) = (outbox, partition)
    let limit: Int? = if case .upTo(let limit) = next { limit } else { nil }
    let trail = auditing(attempts)
    let taken = try await written { db -> [ClaimedHead]? in
      // Refused if the messages are not the line's first: that would break its order.
      guard try OutboxStore.areFirst(db, delivered.map(\.sequence), of: partition) else {
        return nil
      }
      var removed: Set<Int64> = []
      for message in delivered {
        if try OutboxStore.delete(db, sequence: message.sequence) {
          removed.insert(message.sequence)
        }
      }
      try trail(db, removed)
      for message in givingBack {
        try OutboxStore.recordAttempts(
          db,
          sequence: message.sequence,
          attempts: message.attempt - 1
        )
      }
      if !delivered.isEmpty {
        let count = delivered.count
        db.afterNextTransaction { _ in
          outbox.state.withLock(announcingTo: outbox) { $0.pending -= count }
        }
      }
      guard let limit else { return [] }
      return try outbox.claimHeads(of: partition, upTo: limit, in: db)
    }
    guard let taken else {
      // Refused as out of order: nothing was recorded; the line (held by this deliverer, the
      // only one) is delivered again at once from its first message, as on every store.
      outbox.refusedOutOfOrder(partition)
      return .again
    }
    let waiters = outbox.state.withLock(announcingTo: outbox) { state in
      if limit != nil, taken.isEmpty { state.delivering[partition] = nil }
      state.recordFailure = nil
      return state.takeWaitersIfDelivered()
    }
    if !delivered.isEmpty { announce() }
    for waiter in waiters { waiter.resume() }
    switch next {
    case .upTo: return taken.isEmpty ? .end(.empty) : .deliver(taken)
    case .yield: return .end(.yielded)
    case .nothing: return .again
    }
  }

  /// Moves the message to the dead letters; when its line stops there with messages behind it,
  /// `waitUntilDelivered` ends with `OutboxError.lineStopped(partition:deadLetter:)`.
  func setAside(
    _ message: ClaimedHead,
    attempts: Int,
    reason: String,
    stopsLine stops: Bool,
    recording: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    let (outbox, partition) = (outbox, partition)
    let trail = auditing(recording)
    let behind = try await written { db -> Int in
      try OutboxStore.kill(db, sequence: message.sequence, attempts: attempts, reason: reason)
      try trail(db, [])
      db.afterNextTransaction { _ in
        outbox.state.withLock(announcingTo: outbox) { state in
          state.pending -= 1
          state.deadLetters += 1
        }
      }
      // Only a stopped line makes waiters fail, and only with messages behind it.
      return stops ? try OutboxStore.count(db, partition: partition) : 0
    }
    let (waiters, failed) = outbox.state.withLock(announcingTo: outbox) { state in
      state.recordFailure = nil
      if stops {
        state.stoppedLines.insert(partition)
        state.delivering[partition] = nil
      }
      if stops && behind > 0 {
        return ([CheckedContinuation<Void, any Error>](), state.takeWaiters())
      }
      return (state.takeWaitersIfDelivered(), [])
    }
    announce()
    for waiter in waiters { waiter.resume() }
    let error = OutboxError.lineStopped(partition: partition, deadLetter: message.id)
    for waiter in failed { waiter.resume(throwing: error) }
    return stops ? .end(.stopped) : .again
  }

  /// Pauses the line in the file with the reason: this deliverer stops taking it at once, and
  /// so does any other that opens the file, until it is resumed.
  func quarantine(reason: String) async throws {
    let (outbox, partition) = (outbox, partition)
    try await written { db in
      try OutboxStore.quarantine(db, partition: partition, reason: reason)
    }
    outbox.state.withLock(announcingTo: outbox) { state in
      state.recordFailure = nil
      _ = state.pausedLines.insert(partition)
    }
  }

  /// Tried again, after the runner's wait on the outbox's clock, until the outbox stops or
  /// closes (the message stays on disk, and is delivered again by the next start: at least
  /// once).
  func recordFailed(_ error: any Error, failures: Int) -> Bool {
    let failure = outbox.failure(error)
    return !(outbox.isStopping || failure == .closed(path: outbox.path ?? ":memory:"))
  }

  /// No cap: the file has no lease to keep.
  var longestRecordWait: Duration? { nil }

  /// Tells the callers of `waitUntilDelivered` (a new call throws the error at once until a
  /// write succeeds), then waits.
  func waitToRecordAgain(_ delay: Duration, after error: any Error) async -> Bool {
    let failure = outbox.failure(error)
    outbox.state.withLock(announcingTo: outbox) { $0.recordFailure = failure }
    outbox.failWaiters(with: failure)
    // Cancelled by stop(): the sleep ends at once.
    try? await outbox.clock.sleep(for: delay)
    return !outbox.isStopping
  }

  /// Writes attempts on their own; a failure is logged by the outbox's failure path only (the
  /// trail then misses them).
  func recordAudit(_ attempts: [AuditAttempt]) async {
    // Only the write that removes a message records its delivery.
    let trail = auditing(attempts.map { $0.outcome == .delivered ? $0.cut : $0 })
    _ = try? await written { db in try trail(db, []) }
  }

  /// What a write transaction does for the audit trail; nothing when it is off.
  ///
  /// It marks the trail begun, writes `attempts` (a delivered one only if the transaction
  /// removed its message), and prunes rows past the retention when `AuditPruning` says a prune
  /// is due (every 10 minutes, and at the next write again while a prune comes back full).
  private func auditing(
    _ attempts: [AuditAttempt]
  ) -> @Sendable (Database, _ removed: Set<Int64>) throws -> Void {
    guard audit.isOn else { return { _, _ in } }
    let (outbox, retention) = (outbox, audit.retentionSeconds)
    // Rows age in real time, as they are stamped: no injected clock applies.
    let cutoff = outbox.auditPruning.withLock(announcingTo: outbox) {
      $0.begin(at: Date(), retentionSeconds: retention)
    }
    return { db, removed in
      try OutboxAuditStore.begin(db)
      try OutboxAuditStore.write(db, attempts, removed: removed, worker: AuditWorker.current)
      if let cutoff {
        let pruned = try OutboxAuditStore.prune(db, before: cutoff)
        // A lock of its own, held for an assignment: never around a database call.
        outbox.auditPruning.withLock(announcingTo: outbox) { $0.finished(removed: pruned) }
      }
    }
  }

  /// Runs a write in a task of its own (a cancelled delivery still records what it did).
  private func written<Value: Sendable>(
    _ body: @escaping @Sendable (Database) throws -> Value
  ) async throws -> Value {
    let database = outbox.database
    do {
      return try await Task { try await database.write(body) }.value
    } catch {
      throw outbox.failure(error)
    }
  }
}

extension Outbox {
  /// Reads a line's first messages that are due, up to `limit`, counts the attempt about to
  /// begin of each, and marks them as being delivered, inside a write transaction: a merge,
  /// which also writes, sees the mark or comes before the read.
  ///
  /// A message with a not-before time still to come ends the claim before it; when it is the
  /// line's first, the line waits for that time (other lines go on).
  func claimHeads(of partition: String?, upTo limit: Int, in db: Database) throws
    -> [ClaimedHead]
  {
    var claimed: [ClaimedHead] = []
    let now = Date()
    for stored in try OutboxStore.heads(db, partition: partition, limit: limit) {
      if let notBefore = stored.notBefore, notBefore > now {
        if claimed.isEmpty { wakeUp(partition, at: notBefore) }
        break
      }
      let attempt = stored.attempts + 1
      try OutboxStore.recordAttempts(db, sequence: stored.sequence, attempts: attempt)
      claimed.append(
        ClaimedHead(
          id: stored.id,
          sequence: stored.sequence,
          partition: stored.partition,
          payload: stored.payload,
          attempt: attempt,
          appendedAt: stored.appendedAt,
          headers: stored.headers
        )
      )
    }
    state.withLock(announcingTo: self) { $0.delivering[partition] = claimed.last?.sequence }
    return claimed
  }
}
#endif
