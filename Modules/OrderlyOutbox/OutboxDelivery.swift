import Foundation
import GRDB
import OrderlyCore
import Synchronization

/// How a started outbox delivers.
struct DeliverySettings<Message: Sendable>: Sendable {
  let lines: KeyedSerialQueue<String?>
  let retry: RetryPolicy
  let onDeadLetter: DeadLetterPolicy
  let deliver: @Sendable (Envelope<Message>) async throws -> Void
}

/// What an outbox keeps in memory, behind its lock.
struct OutboxState<Message: Sendable>: Sendable {
  var pending: Int
  var deadLetters: Int
  var delivery: DeliverySettings<Message>?
  var paused = false
  var stopping = false
  var closed = false
  /// Lines with a turn enqueued that has not begun.
  var scheduled: Set<String?> = []
  /// Lines with messages that wait for ``Outbox/resume()``.
  var parked: Set<String?> = []
  /// Lines waiting for a dead letter to be retried or dropped.
  var stoppedLines: Set<String?> = []
  /// The message each line is delivering: it must not be merged into.
  var delivering: [String?: Int64] = [:]
  /// Retry waits in progress, ended early by pause, resume and stop.
  var backoffs: [UInt64: CheckedContinuation<Void, Never>] = [:]
  /// Retry waits whose time came before they were registered.
  var expiredBackoffs: Set<UInt64> = []
  /// Tasks in ``Outbox/waitUntilDelivered()``.
  var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
  var lastToken: UInt64 = 0

  init(pending: Int, deadLetters: Int) {
    self.pending = pending
    self.deadLetters = deadLetters
  }

  mutating func nextToken() -> UInt64 {
    lastToken += 1
    return lastToken
  }

  /// Takes every retry wait, to be ended.
  mutating func takeBackoffs() -> [CheckedContinuation<Void, Never>] {
    defer { backoffs = [:] }
    return Array(backoffs.values)
  }

  /// Takes the waiters, once nothing is pending.
  mutating func takeWaitersIfDelivered() -> [CheckedContinuation<Void, any Error>] {
    guard pending == 0 else { return [] }
    defer { waiters = [:] }
    return Array(waiters.values)
  }
}

extension Outbox {
  // MARK: - Starting and stopping

  /// Starts delivering: every message already in the outbox, then each one appended.
  ///
  /// Each line delivers one message at a time, in order; a message is removed once `deliver`
  /// returned. Messages without a partition key share the default line, so an outbox whose
  /// appends name no partition delivers strictly in order, one at a time.
  ///
  /// `deliver` runs on Swift's cooperative pool, with no isolation. A delivery that is still
  /// running when the outbox stops (``stop()``, ``close()``) is cancelled; if it throws, the
  /// message stays and is delivered again later.
  ///
  /// - Parameters:
  ///   - limit: How many lines deliver at once; 4 by default. It matters only with partitions.
  ///   - retry: When a failed delivery is tried again, and which errors are retried.
  ///   - onDeadLetter: Whether a line waits at a dead letter (the default) or goes on.
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  /// - Throws: ``OutboxError/alreadyStarted`` if the outbox is delivering;
  ///   ``OutboxError/invalidOption(_:)`` for a limit below 1 or a retry policy out of range;
  ///   ``OutboxError/closed(path:)``; a database error reading the lines.
  public func start(
    limit: Int = 4,
    retry: RetryPolicy = RetryPolicy(),
    onDeadLetter: DeadLetterPolicy = .stopLine,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) throws(OutboxError) {
    guard limit >= 1 else { throw .invalidOption("limit must be 1 or more (got \(limit))") }
    if let problem = retry.problem() { throw .invalidOption(problem) }
    try checkOpen()
    let lines: (busy: [String?], dead: [String?])
    do {
      lines = try database.read { db in
        (try OutboxStore.busyPartitions(db), try OutboxStore.deadPartitions(db))
      }
    } catch {
      throw failure(error)
    }
    let settings = DeliverySettings(
      lines: KeyedSerialQueue<String?>(name: "outbox", limit: limit),
      retry: retry,
      onDeadLetter: onDeadLetter,
      deliver: deliver
    )
    try state.withLock(announcingTo: self) { (state) throws(OutboxError) in
      guard state.delivery == nil, !state.stopping else { throw .alreadyStarted }
      state.delivery = settings
      state.stoppedLines = onDeadLetter == .stopLine ? Set(lines.dead) : []
    }
    for partition in lines.busy { schedule(partition) }
  }

  /// Stops starting deliveries, until ``resume()``: for an app that went offline.
  ///
  /// A delivery in progress finishes and is recorded; a retry wait ends at once, and its message
  /// waits, first in its line, for ``resume()``. Appends go on.
  public func pause() {
    let woken = state.withLock(announcingTo: self) { state in
      state.paused = true
      return state.takeBackoffs()
    }
    for backoff in woken { backoff.resume() }
  }

  /// Delivers again after ``pause()``: every line with messages starts, and a message that
  /// waited to be retried is tried at once, without waiting out its backoff.
  public func resume() {
    let (woken, parked) = state.withLock(announcingTo: self) { state in
      state.paused = false
      let parked = state.parked
      state.parked = []
      return (state.takeBackoffs(), parked)
    }
    for backoff in woken { backoff.resume() }
    for partition in parked { schedule(partition) }
  }

  /// Stops delivering and waits until no delivery runs.
  ///
  /// Deliveries in progress are cancelled: one that returns anyway is recorded as delivered;
  /// one that throws leaves its message, to be delivered again by the next start. Messages stay
  /// on disk. The outbox can be started again.
  public func stop() async {
    let (settings, woken) = state.withLock(announcingTo: self) { state in
      state.stopping = true
      return (state.delivery, state.takeBackoffs())
    }
    for backoff in woken { backoff.resume() }
    if let settings {
      settings.lines.cancelAll()
      try? await settings.lines.waitUntilIdle()
    }
    state.withLock(announcingTo: self) { state in
      state.delivery = nil
      state.stopping = false
      state.scheduled = []
      state.parked = []
      state.delivering = [:]
    }
  }

  /// Stops delivering (see ``stop()``) and closes the database; later calls throw
  /// ``OutboxError/closed(path:)``.
  ///
  /// Close an outbox before its file is opened again by a new one (a relaunch in one process, a
  /// test). Tasks in ``waitUntilDelivered()`` end with ``OutboxError/closed(path:)``.
  ///
  /// - Throws: ``OutboxError/busy(path:waited:)`` if a statement of yours is still running on
  ///   the database.
  public func close() async throws(OutboxError) {
    await stop()
    let waiters = state.withLock(announcingTo: self) { state in
      state.closed = true
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    let shown = path ?? ":memory:"
    for waiter in waiters { waiter.resume(throwing: OutboxError.closed(path: shown)) }
    do {
      try database.close()
    } catch {
      throw failure(error)
    }
  }

  /// Waits until every message appended so far, and every one appended meanwhile, has been
  /// delivered or become a dead letter: until ``pendingCount`` is 0.
  ///
  /// It waits through pauses and before ``start(limit:retry:onDeadLetter:deliver:)``.
  ///
  /// - Throws: ``OutboxError/lineStopped(partition:deadLetter:)`` when a line stops at a dead
  ///   letter with messages behind it (or has stopped already); `CancellationError` if the
  ///   calling task is cancelled; ``OutboxError/closed(path:)`` if the outbox is closed.
  public func waitUntilDelivered() async throws {
    try checkOpen()
    if let stopped = try await stoppedLineWithMessages() { throw stopped }
    let token = state.withLock(announcingTo: self) { $0.nextToken() }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        // Cancellation is checked under the lock that `onCancel` takes: a cancel that came
        // first is seen here, one that comes later finds the waiter registered.
        let outcome = state.withLock(announcingTo: self) { state -> Bool? in
          if Task.isCancelled { return false }
          guard state.pending > 0 else { return true }
          state.waiters[token] = continuation
          return nil
        }
        switch outcome {
        case true?: continuation.resume()
        case false?: continuation.resume(throwing: CancellationError())
        case nil: break
        }
      }
    } onCancel: {
      let waiter = state.withLock(announcingTo: self) { $0.waiters.removeValue(forKey: token) }
      waiter?.resume(throwing: CancellationError())
    }
  }

  /// A line that waits at a dead letter with messages behind it, as the error that says so.
  private func stoppedLineWithMessages() async throws -> OutboxError? {
    let stopped = state.withLock(announcingTo: self) { $0.stoppedLines }
    guard !stopped.isEmpty else { return nil }
    do {
      return try await database.read { db -> OutboxError? in
        for partition in stopped where try OutboxStore.count(db, partition: partition) > 0 {
          let id = try String.fetchOne(
            db,
            sql: "SELECT id FROM \(OutboxStore.deadLetters) WHERE partition IS ? "
              + "ORDER BY sequence LIMIT 1",
            arguments: [partition]
          )
          return .lineStopped(
            partition: partition,
            deadLetter: id.flatMap(UUID.init(uuidString:)) ?? UUID()
          )
        }
        return nil
      }
    } catch {
      throw failure(error)
    }
  }

  // MARK: - Lines

  /// Enqueues a turn for a line, unless one is waiting to begin or the line cannot deliver now.
  func schedule(_ partition: String?) {
    let settings = state.withLock(announcingTo: self) { state -> DeliverySettings<Message>? in
      guard let settings = state.delivery, !state.stopping, !state.closed,
        !state.stoppedLines.contains(partition), !state.scheduled.contains(partition)
      else { return nil }
      if state.paused {
        state.parked.insert(partition)
        return nil
      }
      state.scheduled.insert(partition)
      return settings
    }
    guard let settings else { return }
    settings.lines.enqueueDetached(forKey: partition) {
      await self.turn(of: partition, settings: settings)
    }
  }

  /// How many messages a line delivers in one turn before it lets the other lines have theirs.
  static var burst: Int { 16 }

  /// Delivers the first messages of a line, each with its retries, then enqueues the line's next
  /// turn behind the other lines' (so that lines share the limit fairly).
  ///
  /// Removing a delivered message and taking the next one happen in one write transaction.
  private func turn(of partition: String?, settings: DeliverySettings<Message>) async {
    let proceed = state.withLock(announcingTo: self) { state -> Bool in
      state.scheduled.remove(partition)
      if state.paused { state.parked.insert(partition) }
      return !state.paused && !state.stopping && !state.closed
        && !state.stoppedLines.contains(partition)
    }
    guard proceed, !Task.isCancelled else { return }
    var head: StoredMessage?
    do {
      head = try await database.write { db in try self.claimHead(of: partition, in: db) }
    } catch {
      return  // closed, or the disk failed: the message stays for the next start
    }
    var delivered = 0
    while let current = head {
      let outcome = await deliver(current, settings: settings)
      guard outcome == .delivered else {
        state.withLock(announcingTo: self) { $0.delivering[partition] = nil }
        if outcome == .next { schedule(partition) }
        return
      }
      delivered += 1
      let goesOn = delivered < Self.burst && !Task.isCancelled && canGoOn(partition)
      do {
        head = try await database.write { db in
          try OutboxStore.delete(db, sequence: current.sequence)
          return goesOn ? try self.claimHead(of: partition, in: db) : nil
        }
      } catch {
        // Delivered, but still on disk: it will be delivered again (at least once).
        state.withLock(announcingTo: self) { $0.delivering[partition] = nil }
        return
      }
      let waiters = state.withLock(announcingTo: self) { state in
        state.pending -= 1
        if head == nil { state.delivering[partition] = nil }
        return state.takeWaitersIfDelivered()
      }
      hub.emit(.delivered(id: current.id, sequence: current.sequence))
      for waiter in waiters { waiter.resume() }
      if !goesOn { schedule(partition) }
    }
  }

  /// Reads a line's first message and marks it as being delivered, inside a write transaction:
  /// a merge, which also writes, sees the mark or comes before the read.
  private func claimHead(of partition: String?, in db: Database) throws -> StoredMessage? {
    let head = try OutboxStore.head(db, partition: partition)
    state.withLock(announcingTo: self) { $0.delivering[partition] = head?.sequence }
    return head
  }

  /// Whether a line may take its next message in this turn.
  private func canGoOn(_ partition: String?) -> Bool {
    state.withLock(announcingTo: self) { state in
      if state.paused { state.parked.insert(partition) }
      return !state.paused && !state.stopping && !state.closed
    }
  }

  enum Outcome { case delivered, next, halt }

  private func deliver(_ stored: StoredMessage, settings: DeliverySettings<Message>) async
    -> Outcome
  {
    let message: Message
    do {
      message = try JSONDecoder().decode(Message.self, from: stored.payload)
    } catch {
      return await kill(
        stored,
        attempts: stored.attempts,
        reason: "the message no longer decodes as \(Message.self): \(error)",
        settings: settings
      )
    }
    var attempt = stored.attempts + 1
    while true {
      hub.emit(.delivering(id: stored.id, sequence: stored.sequence, attempt: attempt))
      let envelope = Envelope(
        id: stored.id,
        sequence: stored.sequence,
        partition: stored.partition,
        message: message,
        attempt: attempt,
        appendedAt: stored.appendedAt
      )
      do {
        try await settings.deliver(envelope)
      } catch {
        if isStopping || (Task.isCancelled && error is CancellationError) { return .halt }
        let retryable = settings.retry.isRetryable(error)
        let exhausted = settings.retry.maximumAttempts.map { attempt >= $0 } ?? false
        if !retryable || exhausted {
          return await kill(
            stored,
            attempts: attempt,
            reason: "\(error)",
            settings: settings
          )
        }
        let recorded = attempt
        try? await database.write { db in
          try OutboxStore.recordAttempts(db, sequence: stored.sequence, attempts: recorded)
        }
        let delay = settings.retry.delay(afterAttempt: attempt)
        hub.emit(
          .retrying(
            id: stored.id,
            sequence: stored.sequence,
            attempt: attempt,
            delay: delay,
            reason: "\(error)"
          )
        )
        await backoff(delay)
        let halted = state.withLock(announcingTo: self) { state -> Bool in
          if state.paused { state.parked.insert(stored.partition) }
          return state.paused || state.stopping || state.closed
        }
        if halted { return .halt }
        attempt += 1
        continue
      }
      return .delivered
    }
  }

  private var isStopping: Bool {
    state.withLock(announcingTo: self) { $0.stopping || $0.closed }
  }

  /// Moves a message to the dead letters; its line stops or goes on, by the policy.
  private func kill(
    _ stored: StoredMessage,
    attempts: Int,
    reason: String,
    settings: DeliverySettings<Message>
  ) async -> Outcome {
    let stops = settings.onDeadLetter == .stopLine
    let behind: Int
    do {
      behind = try await database.write { db in
        try OutboxStore.kill(db, stored, attempts: attempts, reason: reason)
        // Only a stopped line makes waiters fail, and only with messages behind it.
        return stops ? try OutboxStore.count(db, partition: stored.partition) : 0
      }
    } catch {
      return .halt
    }
    let (waiters, failed) = state.withLock(announcingTo: self) { state in
      state.pending -= 1
      state.deadLetters += 1
      if stops { state.stoppedLines.insert(stored.partition) }
      if stops && behind > 0 {
        defer { state.waiters = [:] }
        return ([CheckedContinuation<Void, any Error>](), Array(state.waiters.values))
      }
      return (state.takeWaitersIfDelivered(), [])
    }
    hub.emit(
      .deadLettered(id: stored.id, sequence: stored.sequence, reason: reason, lineStopped: stops)
    )
    for waiter in waiters { waiter.resume() }
    let error = OutboxError.lineStopped(partition: stored.partition, deadLetter: stored.id)
    for waiter in failed { waiter.resume(throwing: error) }
    return stops ? .halt : .next
  }

  /// Waits `delay` on the outbox's clock, or until pause, resume or stop end the wait.
  private func backoff(_ delay: Duration) async {
    let token = state.withLock(announcingTo: self) { $0.nextToken() }
    let clock = self.clock
    let sleeper = Task {
      try? await clock.sleep(for: delay)
      guard !Task.isCancelled else { return }
      let waiting = self.state.withLock(announcingTo: self) {
        state -> CheckedContinuation<Void, Never>? in
        guard let waiting = state.backoffs.removeValue(forKey: token) else {
          state.expiredBackoffs.insert(token)
          return nil
        }
        return waiting
      }
      waiting?.resume()
    }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let endsNow = state.withLock(announcingTo: self) { state -> Bool in
        if state.expiredBackoffs.remove(token) != nil || state.paused || state.stopping
          || state.closed
        {
          return true
        }
        state.backoffs[token] = continuation
        return false
      }
      if endsNow { continuation.resume() }
    }
    // Woken early: the clock's sleeper is not needed any more.
    sleeper.cancel()
  }
}
