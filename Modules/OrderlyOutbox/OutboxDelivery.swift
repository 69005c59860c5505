// Delivery of a SQLite outbox: start, stop, pause, the watcher of the file, and lines scheduled
// side by side.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyCore
import OrderlyDatabaseFile
public import OrderlyOutboxCore

/// How a started outbox delivers.
struct DeliverySettings<Message: Codable & Sendable>: Sendable {
  let lines: KeyedSerialQueue<String?>
  let onDeadLetter: DeadLetterPolicy
  let pollInterval: Duration
  /// The loop each line's turn runs.
  let runner: LineRunner<Message>
  /// The audit trail: whether attempts are written, and how long rows are kept.
  let audit: OutboxAuditOptions
  /// Groups of keys whose deliveries follow their weights, if set (the lines wait in
  /// ``OutboxState/admission`` for a slot).
  let fairShares: FairShares?
}

/// What an outbox keeps in memory, behind its lock.
struct OutboxState<Message: Codable & Sendable>: Sendable {
  var pending: Int
  var deadLetters: Int
  var delivery: DeliverySettings<Message>?
  var paused = false
  var stopping = false
  var closed = false
  /// Lines with a turn enqueued that has not begun.
  var scheduled: Set<String?> = []
  /// With fair shares, the lines waiting for a slot by their groups' turns, and those
  /// delivering: a line's turn is enqueued on ``DeliverySettings/lines`` when it gets a slot.
  var admission: FairAdmission<String?>?
  /// Lines with messages that wait for ``Outbox/resume()``.
  var parked: Set<String?> = []
  /// Lines waiting for a dead letter to be retried or dropped.
  var stoppedLines: Set<String?> = []
  /// Lines paused on their own (``Outbox/pause(partition:)``), as last read from the store.
  var pausedLines: Set<String?> = []
  /// The message each line is delivering: it must not be merged into.
  var delivering: [String?: Int64] = [:]
  /// Lines whose next message has a not-before time not reached yet: the task that schedules
  /// the line at that time (wall clock).
  var wakeUps: [String?: (at: Date, task: Task<Void, Never>)] = [:]
  /// Tasks in ``Outbox/waitUntilDelivered()``.
  var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
  /// Uses of the database under way (``Outbox/enterDatabase()``).
  var databaseUses = 0
  /// ``Outbox/close()``, waiting for the last use of the database to end.
  var closer: CheckedContinuation<Void, Never>?
  var lastToken: UInt64 = 0
  /// The right to deliver the file, while this outbox delivers it (file outboxes only).
  var lock: DelivererLock?
  /// The task that watches the file (file outboxes only).
  ///
  /// It looks for other processes' changes and, while `start` waits for another deliverer, for
  /// the lock. It runs while the outbox is started or has waiters, and clears this itself when
  /// it ends.
  var watcher: Task<Void, Never>?
  /// The file's `data_version` when the watcher last looked: it changes when another
  /// connection commits.
  var dataVersion: Int?
  /// Acknowledgements the store refused as out of order (``DelivererStatistics/orderRefusals``).
  var refusedOutOfOrder = 0
  /// Why recording a delivery failed, while the outbox retries that write: a new
  /// ``Outbox/waitUntilDelivered()`` call throws it at once.
  var recordFailure: OutboxError?

  init(pending: Int, deadLetters: Int) {
    self.pending = pending
    self.deadLetters = deadLetters
  }

  /// Whether a line must not take a message now: the outbox is paused (the line is parked, for
  /// ``Outbox/resume()``), or the line is (``Outbox/resume(partition:)`` schedules it).
  mutating func holdsBack(_ partition: String?) -> Bool {
    if paused { parked.insert(partition) }
    return paused || pausedLines.contains(partition)
  }

  mutating func nextToken() -> UInt64 {
    lastToken += 1
    return lastToken
  }

  /// Takes the waiters, once nothing is pending.
  mutating func takeWaitersIfDelivered() -> [CheckedContinuation<Void, any Error>] {
    guard pending == 0 else { return [] }
    return takeWaiters()
  }

  /// Takes every waiter, to be resumed or failed.
  mutating func takeWaiters() -> [CheckedContinuation<Void, any Error>] {
    defer { waiters = [:] }
    return Array(waiters.values)
  }

  /// Takes the ``Outbox/close()`` call waiting for the database's last use to end.
  mutating func takeCloser() -> CheckedContinuation<Void, Never>? {
    defer { closer = nil }
    return closer
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
  /// One file has at most one deliverer, across every process: the outbox takes the file's
  /// deliverer lock (the file `PATH-deliverer`) before it delivers anything. If another outbox
  /// holds it (an app and its extension, two runs of a tool, a relaunch that overlaps the old
  /// process), `start` returns at once and the outbox waits in the background, checking every
  /// `pollInterval`, until that outbox stops or its process ends (a killed process releases the
  /// lock with it); it then delivers from the head of every line. Pass
  /// `WhenDeliveredElsewhere.fail` to be told instead. While it delivers, the outbox checks
  /// the file every `pollInterval` for messages other processes appended, so they are
  /// delivered within that time. An outbox in memory or in a database you opened without a path
  /// takes no lock.
  ///
  /// - Parameters:
  ///   - limit: How many lines deliver at once; 4 by default. It matters only with partitions.
  ///   - retry: When a failed delivery is tried again, and which errors are retried.
  ///   - onDeadLetter: Whether a line waits at a dead letter (the default) or goes on.
  ///   - whenDeliveredElsewhere: What to do when another outbox delivers the same file: wait
  ///     for it (the default), or fail.
  ///   - pollInterval: How often the outbox looks for other processes' appends, and for the
  ///     deliverer lock while it waits for it; 1 second by default.
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  /// - Throws: `OutboxError.alreadyStarted` if the outbox is delivering;
  ///   `OutboxError.invalidOption(_:)` for a limit below 1 or a poll interval that is not
  ///   positive; `OutboxError.deliveredElsewhere(path:)` with `WhenDeliveredElsewhere.fail`;
  ///   `OutboxError.closed(path:)`; another `OutboxError` if reading the lines fails.
  public func start(
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    whenDeliveredElsewhere: WhenDeliveredElsewhere = .wait,
    pollInterval: Duration = .seconds(1),
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) throws(OutboxError) {
    try start(
      OutboxDeliveryOptions(
        limit: limit,
        retry: retry,
        onDeadLetter: onDeadLetter,
        whenDeliveredElsewhere: whenDeliveredElsewhere,
        pollInterval: pollInterval
      ),
      deliver: .each(deliver)
    )
  }

  /// Starts delivering in ordered batches: the handler gets up to `batch` consecutive messages
  /// of one line at once, in order.
  ///
  /// Everything ``start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)``
  /// says holds, with a batch in place of a message:
  ///
  /// - A line has one batch in delivery at a time: its next batch starts after this one is
  ///   recorded. A batch holds the line's first messages that are due, up to `batch` of them:
  ///   it ends before a message appended with a later `deliverAfter`.
  /// - When `deliver` returns, every message of the batch is removed in one transaction (which
  ///   also takes the line's next batch). When it throws `BatchDeliveryError`, the first
  ///   `BatchDeliveryError.delivered` messages are removed, and the next one is the one that
  ///   failed; any other error is a failure of the batch's first message. The failed message is
  ///   retried by `retry`, as the line's first, in a new batch that goes on from it, or set
  ///   aside as a dead letter when the policy says so. A count outside the batch is taken as a
  ///   failure of its first message.
  /// - Each message's `Envelope.attempt` counts the batches it was handed in, up to and
  ///   including the one where it failed; the messages after a failed one are not counted as
  ///   tried. Events are per message: `delivering` for each message handed over, `delivered`
  ///   for each removed, `retrying` and `deadLettered` for the one that failed.
  /// - A message whose stored payload does not decode ends the batch before it, and becomes a
  ///   dead letter once it is the line's first.
  /// - A message in a batch is never merged into (`Coalescing`), as one in delivery.
  ///
  /// - Parameters:
  ///   - limit: How many lines deliver at once; 4 by default.
  ///   - batch: Up to how many messages of one line a call of `deliver` gets; 1 or more.
  ///   - retry: When a failed message is tried again, and which errors are retried (the error
  ///     inside a `BatchDeliveryError`).
  ///   - onDeadLetter: Whether a line waits at a dead letter (the default) or goes on.
  ///   - whenDeliveredElsewhere: What to do when another outbox delivers the same file.
  ///   - pollInterval: How often the outbox looks for other processes' appends.
  ///   - deliver: Sends a batch, in order; returns once the receiver has all of it, or throws
  ///     (a `BatchDeliveryError` to say how many came through first).
  /// - Throws: As ``start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)``,
  ///   and `OutboxError.invalidOption(_:)` for a batch below 1.
  public func start(
    limit: Int = 4,
    batchesOf batch: Int,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    whenDeliveredElsewhere: WhenDeliveredElsewhere = .wait,
    pollInterval: Duration = .seconds(1),
    deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) throws(OutboxError) {
    guard batch >= 1 else {
      throw .invalidOption("batchesOf must be 1 or more (got \(batch))")
    }
    try start(
      OutboxDeliveryOptions(
        limit: limit,
        batchSize: batch,
        retry: retry,
        onDeadLetter: onDeadLetter,
        whenDeliveredElsewhere: whenDeliveredElsewhere,
        pollInterval: pollInterval
      ),
      deliver: .batches(deliver)
    )
  }

  /// Starts delivering with options as one value: what
  /// ``start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)`` (for
  /// `DeliveryHandler.each`) and
  /// ``start(limit:batchesOf:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)``
  /// (for `DeliveryHandler.batches`, with `options.batchSize`) do, and what code written for
  /// any store calls (`DurableOutbox`, `OutboxService`).
  ///
  /// - Parameters:
  ///   - options: The options.
  ///   - deliver: The handler.
  /// - Throws: As the two methods above; `OutboxError.invalidOption(_:)` for a batch size
  ///   above 1 with an `.each` handler.
  public func start(
    _ options: OutboxDeliveryOptions,
    deliver: DeliveryHandler<Message>
  ) throws(OutboxError) {
    try options.check(for: deliver)
    try enterDatabase()
    defer { leaveDatabase() }
    let rule = DeliveryRule<Message>(
      retry: options.retry,
      hub: hub,
      waits: retryWaits,
      clock: clock
    )
    let settings = DeliverySettings(
      lines: KeyedSerialQueue<String?>(name: "outbox", limit: options.limit),
      onDeadLetter: options.onDeadLetter,
      pollInterval: options.pollInterval,
      runner: LineRunner(rule: rule, options: options, handler: deliver, onBadCount: { _, _ in }),
      audit: options.audit,
      fairShares: options.fairShares
    )
    let whenDeliveredElsewhere = options.whenDeliveredElsewhere
    if options.audit.isOn {
      // A prune is due when delivery starts (with this start's retention), as on every store.
      auditPruning.withLock(announcingTo: self) { $0 = AuditPruning() }
      // The trail begins (once for the file) before anything is delivered: what is appended
      // from now on is checked. A write, so `start` may wait for another connection's
      // transaction (up to the busy timeout) when the trail is on.
      do {
        try database.write { db in try OutboxAuditStore.begin(db) }
      } catch {
        throw failure(error)
      }
    }
    try state.withLock(announcingTo: self) { (state) throws(OutboxError) in
      guard state.delivery == nil, !state.stopping else { throw .alreadyStarted }
      state.delivery = settings
      state.admission = options.fairShares.map { FairAdmission($0, limit: options.limit) }
    }
    do {
      if let path {
        if let lock = try DelivererLock.acquire(for: path) {
          if keep(lock) { try beginDelivering(settings) }
        } else if whenDeliveredElsewhere == .fail {
          throw OutboxError.deliveredElsewhere(path: path)
        }
        ensureWatcher()
      } else {
        try beginDelivering(settings)
      }
    } catch {
      let lock = state.withLock(announcingTo: self) { state -> DelivererLock? in
        state.delivery = nil
        defer { state.lock = nil }
        return state.lock
      }
      lock?.release()
      throw failure(error)
    }
    // Recurring schedules tick while the outbox is started, whichever process delivers the
    // file: a tick is taken once, in the file's one write transaction.
    scheduleTicker.start(self, pollInterval: options.pollInterval)
  }

  /// Keeps the deliverer lock, if the outbox still wants to deliver; otherwise gives it back.
  ///
  /// - Returns: Whether the lock was kept: the caller then begins delivering.
  private func keep(_ lock: DelivererLock) -> Bool {
    let kept = state.withLock(announcingTo: self) { state -> Bool in
      guard state.delivery != nil, !state.stopping, !state.closed, state.lock == nil else {
        return false
      }
      state.lock = lock
      return true
    }
    if !kept { lock.release() }
    return kept
  }

  /// Begins delivering from `start`, once the outbox may deliver (it holds the deliverer lock, or
  /// needs none).
  ///
  /// A read, which in WAL mode never waits for another connection's lock: `start` is
  /// synchronous, and a write here could hold the caller's thread (a cooperative one, often) for
  /// the whole busy timeout. The counts are not read here: they are kept by this outbox's own
  /// commits, and a file outbox's watcher reads them again at once, in a write, for what other
  /// processes did.
  private func beginDelivering(_ settings: DeliverySettings<Message>) throws {
    let lines = try database.read { db in
      (
        busy: try OutboxStore.busyPartitions(db), dead: try OutboxStore.deadPartitions(db),
        paused: try OutboxStore.pausedPartitions(db)
      )
    }
    state.withLock(announcingTo: self) { state in
      state.stoppedLines = settings.onDeadLetter == .stopLine ? Set(lines.dead) : []
      state.pausedLines = Set(lines.paused)
    }
    for partition in lines.busy { schedule(partition) }
  }

  /// Reads the counts, which lines have messages and which wait at a dead letter, and returns
  /// the lines to schedule.
  ///
  /// Run in a write transaction, so that the counts read match the outbox's own count changes,
  /// which happen as its transactions commit.
  private func readLines(_ db: Database, settings: DeliverySettings<Message>?) throws
    -> [String?]
  {
    let counts = try OutboxStore.counts(db)
    let busy = try OutboxStore.busyPartitions(db)
    let dead = settings == nil ? [] : try OutboxStore.deadPartitions(db)
    let paused = try OutboxStore.pausedPartitions(db)
    state.withLock(announcingTo: self) { state in
      state.pending = counts.pending
      state.deadLetters = counts.deadLetters
      state.pausedLines = Set(paused)
      if let settings {
        state.stoppedLines = settings.onDeadLetter == .stopLine ? Set(dead) : []
      }
    }
    return busy
  }

  // MARK: - Watching the file

  /// Starts the watcher if the outbox needs one and has none: a file outbox that is started
  /// (to take the deliverer lock, and to see other processes' appends) or has waiters (to see
  /// other processes' deliveries).
  func ensureWatcher() {
    guard path != nil else { return }
    state.withLock(announcingTo: self) { state in
      guard state.watcher == nil, !state.closed,
        state.delivery != nil || !state.waiters.isEmpty
      else { return }
      state.watcher = Task.detached { [weak self] in
        // The first look is at once: other processes may have changed the file already.
        while true {
          guard !Task.isCancelled, let interval = self?.watchInterval(),
            await self?.watch() == true
          else { return }
          // Wall time on purpose, not the outbox's clock: other processes' commits happen in
          // real time, and retry tests that drive the injected clock must not see this sleeper.
          // Cancelled by stop() and close(), which then await this task.
          try? await Task.sleep(for: interval)
        }
      }
    }
  }

  /// How long the watcher sleeps, or `nil` (and the watcher is forgotten) if it should end.
  private func watchInterval() -> Duration? {
    state.withLock(announcingTo: self) { state -> Duration? in
      guard !state.closed, state.delivery != nil || !state.waiters.isEmpty else {
        state.watcher = nil
        return nil
      }
      return state.delivery?.pollInterval ?? Self.defaultPollInterval
    }
  }

  /// How often a file outbox that is not started looks for other processes' deliveries while a
  /// task waits in ``waitUntilDelivered()``.
  static var defaultPollInterval: Duration { .seconds(1) }

  /// One look at the file: takes the deliverer lock if the outbox waits for it, and picks up
  /// what other processes changed (new messages, deliveries).
  ///
  /// - Returns: `false` if the watcher should end.
  private func watch() async -> Bool {
    guard let path else { return false }
    do throws(OutboxError) {
      try enterDatabase()
    } catch {
      return false
    }
    defer { leaveDatabase() }
    let (settings, needsLock) = state.withLock(announcingTo: self) {
      ($0.stopping ? nil : $0.delivery, $0.lock == nil)
    }
    do {
      if let settings, needsLock {
        // Waiting for another deliverer: take its place once it is gone.
        if let lock = try DelivererLock.acquire(for: path), keep(lock) {
          try await refresh(settings: settings)
        }
        return true
      }
      let version = try await database.writeWithoutTransaction { db in
        try Int.fetchOne(db, sql: "PRAGMA data_version") ?? 0
      }
      let changed = state.withLock(announcingTo: self) { state -> Bool in
        defer { state.dataVersion = version }
        return state.dataVersion != version
      }
      // With the settings, so that a line another connection unblocked (a dead letter retried
      // or dropped by `orderly outbox`, say) is seen unblocked, and scheduled.
      if changed { try await refresh(settings: settings) }
    } catch {
      // Cancelled by stop() or close(), which end or keep the waiters themselves: a waiter
      // must not hear `.cancelled`, which means its own task was.
      if Task.isCancelled || error is CancellationError { return false }
      failWaiters(with: failure(error))
    }
    return true
  }

  /// Reads the counts and the lines with messages again (after the outbox took the deliverer
  /// lock, with `settings`, or after another process changed the file), schedules the lines
  /// (if the outbox delivers), and resumes waiters once nothing is pending.
  private func refresh(settings: DeliverySettings<Message>?) async throws {
    let busy = try await database.write { db in try self.readLines(db, settings: settings) }
    for partition in busy { schedule(partition) }
    let waiters = state.withLock(announcingTo: self) { $0.takeWaitersIfDelivered() }
    for waiter in waiters { waiter.resume() }
  }

  /// Ends every ``waitUntilDelivered()`` call with `error`.
  func failWaiters(with error: OutboxError) {
    let waiters = state.withLock(announcingTo: self) { $0.takeWaiters() }
    for waiter in waiters { waiter.resume(throwing: error) }
  }

  /// Stops starting deliveries, until ``resume()``: for an app that went offline.
  ///
  /// A delivery in progress finishes and is recorded; a retry wait ends at once, and its message
  /// waits, first in its line, for ``resume()``. Appends go on.
  public func pause() {
    state.withLock(announcingTo: self) { $0.paused = true }
    retryWaits.wakeAll()
  }

  /// Delivers again after ``pause()``: every line with messages starts, and a message that
  /// waited to be retried is tried at once, without waiting out its backoff.
  public func resume() {
    let parked = state.withLock(announcingTo: self) { state in
      state.paused = false
      defer { state.parked = [] }
      return state.parked
    }
    retryWaits.wakeAll()
    for partition in parked { schedule(partition) }
  }

  /// Stops delivering one line until ``resume(partition:)``.
  ///
  /// In this process and every other that opens the file, the line's delivery in progress
  /// finishes and is recorded, a retry wait ends at once, and no message of the line is taken
  /// after it. Appends go on, and the other
  /// lines deliver as before. The pause is kept in the file: it outlives the process.
  ///
  /// - Parameter partition: The line's partition key; `nil` for the default line.
  /// - Throws: `OutboxError.closed(path:)`, or an `OutboxError` if the write fails.
  public func pause(partition: String?) async throws(OutboxError) {
    try await setPaused(partition, true)
    state.withLock(announcingTo: self) { _ = $0.pausedLines.insert(partition) }
    retryWaits.wakeAll()
  }

  /// Lets a line that ``pause(partition:)`` stopped deliver again, from its oldest message.
  ///
  /// A message that waited to be retried is tried at once. Resuming a line that is not paused
  /// changes nothing.
  ///
  /// - Parameter partition: The line's partition key; `nil` for the default line.
  /// - Throws: `OutboxError.closed(path:)`, or an `OutboxError` if the write fails.
  public func resume(partition: String?) async throws(OutboxError) {
    try await setPaused(partition, false)
    state.withLock(announcingTo: self) { _ = $0.pausedLines.remove(partition) }
    retryWaits.wakeAll()
    schedule(partition)
  }

  /// The lines paused with ``pause(partition:)``, by partition key (`nil`: the default line).
  ///
  /// - Returns: The paused lines, in key order.
  /// - Throws: `OutboxError.closed(path:)`, or an `OutboxError` if the read fails.
  public func pausedPartitions() async throws(OutboxError) -> [String?] {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db in try OutboxStore.pausedPartitions(db) }
    } catch {
      throw failure(error)
    }
  }

  private func setPaused(_ partition: String?, _ on: Bool) async throws(OutboxError) {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      _ = try await database.write { db in
        try OutboxStore.setPaused(db, partition: partition, on)
      }
    } catch {
      throw failure(error)
    }
  }

  /// Stops delivering and waits until no delivery runs.
  ///
  /// Deliveries in progress are cancelled: one that returns anyway is recorded as delivered;
  /// one that throws leaves its message, to be delivered again by the next start. Messages stay
  /// on disk. The deliverer lock is given back, so another outbox waiting for this file takes
  /// over at once. The outbox can be started again.
  public func stop() async {
    await scheduleTicker.stop()
    let (settings, watcher) = state.withLock(announcingTo: self) { state in
      state.stopping = true
      defer { state.watcher = nil }
      return (state.delivery, state.watcher)
    }
    retryWaits.wakeAll()
    // Waited for: it uses the database, which close() is about to close.
    watcher?.cancel()
    await watcher?.value
    if let settings {
      settings.lines.cancelAll()
      try? await settings.lines.waitUntilIdle()
    }
    let lock = state.withLock(announcingTo: self) { state in
      state.delivery = nil
      state.stopping = false
      state.scheduled = []
      state.admission = nil
      state.parked = []
      state.delivering = [:]
      for wakeUp in state.wakeUps.values { wakeUp.task.cancel() }
      state.wakeUps = [:]
      state.recordFailure = nil
      defer { state.lock = nil }
      return state.lock
    }
    lock?.release()
    // Waiters still want to see other processes' deliveries.
    ensureWatcher()
  }

  /// Stops taking messages, gives the deliveries in progress up to `gracePeriod` to finish,
  /// then stops as ``stop()`` does: for a graceful shutdown.
  ///
  /// No line takes a new message once this is called, and a retry wait ends at once (its message
  /// waits for the next start). A delivery that returns within the grace period is recorded as
  /// delivered; one still running when it ends (measured on the outbox's clock) is cancelled,
  /// and if it throws, its message stays and is delivered again by the next start. Cancelling
  /// the calling task ends the grace period at once.
  ///
  /// - Parameter gracePeriod: How long deliveries in progress may go on; zero or less is
  ///   ``stop()``.
  public func stop(gracePeriod: Duration) async {
    guard gracePeriod > .zero else { return await stop() }
    let settings = state.withLock(announcingTo: self) { state in
      state.stopping = true
      return state.delivery
    }
    retryWaits.wakeAll()
    if let settings {
      let clock = self.clock
      await withTaskGroup(of: Void.self) { group in
        group.addTask { try? await settings.lines.waitUntilIdle() }
        group.addTask {
          // Ends early when the deliveries end first (the group cancels it) or the caller is
          // cancelled; either way what still runs is cancelled by stop() below.
          try? await clock.sleep(for: gracePeriod)
          settings.lines.cancelAll()
        }
        await group.next()
        group.cancelAll()
      }
    }
    await stop()
  }

  /// Stops delivering (see ``stop()``) and closes the database; later calls throw
  /// `OutboxError.closed(path:)`.
  ///
  /// Close an outbox before its file is opened again by a new one (a relaunch in one process, a
  /// test). Tasks in ``waitUntilDelivered()`` end with `OutboxError.closed(path:)`. An outbox
  /// that opened its file itself (``init(path:busyTimeout:clock:partition:coalescing:)``) moves
  /// everything its `-wal` file holds into the database file first, so that a copy of the
  /// database file alone is complete (unless another connection still reads it).
  ///
  /// - Throws: `OutboxError.busy(path:waited:)` if a statement of yours is still running on
  ///   the database.
  public func close() async throws(OutboxError) {
    await stop()
    let (waiters, watcher, wasClosed) = state.withLock(announcingTo: self) { state in
      defer { state.closed = true }
      return (state.takeWaiters(), state.watcher, state.closed)
    }
    // Closing twice does nothing more: a closed connection must not be used again.
    if wasClosed { return }
    watcher?.cancel()
    await watcher?.value
    // No use begins once `closed` is set; those under way (reads and appends of other tasks,
    // each bounded by the busy timeout) end before the connection closes.
    await withCheckedContinuation { (closer: CheckedContinuation<Void, Never>) in
      let now = state.withLock(announcingTo: self) { state -> Bool in
        guard state.databaseUses > 0 else { return true }
        state.closer = closer
        return false
      }
      if now { closer.resume() }
    }
    let shown = path ?? ":memory:"
    for waiter in waiters { waiter.resume(throwing: OutboxError.closed(path: shown)) }
    defer { hub.finish() }
    do {
      if ownsDatabase {
        try DurableDatabase.checkpointAndClose(database)
      } else {
        try database.close()
      }
    } catch {
      throw failure(error)
    }
  }

  /// Waits until every message appended so far, and every one appended meanwhile, has been
  /// delivered or become a dead letter: until ``pendingCount`` is 0.
  ///
  /// It waits through pauses and before
  /// ``start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)``. A file
  /// outbox also sees messages that other processes appended or delivered, within the poll
  /// interval.
  ///
  /// - Throws: `OutboxError.lineStopped(partition:deadLetter:)` when a line stops at a dead
  ///   letter with messages behind it (or has stopped already); the error of a write the outbox
  ///   could not make to record a delivery (`OutboxError.diskFull(path:)`, say), when it fails
  ///   and, while the outbox retries it, at once (a call after it succeeded waits again);
  ///   `OutboxError.cancelled` if the calling task is
  ///   cancelled (the outbox is not affected); `OutboxError.closed(path:)` if the outbox is
  ///   closed.
  public func waitUntilDelivered() async throws(OutboxError) {
    try checkOpen()
    if let stopped = try await stoppedLineWithMessages() { throw stopped }
    let token = state.withLock(announcingTo: self) { $0.nextToken() }
    do {
      try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation {
          (continuation: CheckedContinuation<Void, any Error>) in
          // Cancellation is checked under the lock that `onCancel` takes: a cancel that came
          // first is seen here, one that comes later finds the waiter registered.
          // `closed` is checked under the lock that `close()` takes the waiters under: a close
          // that came first is seen here, one that comes later finds the waiter registered.
          let outcome = state.withLock(announcingTo: self) { state -> Result<Bool, OutboxError> in
            if state.closed { return .failure(.closed(path: path ?? ":memory:")) }
            if Task.isCancelled { return .failure(.cancelled) }
            if let failure = state.recordFailure { return .failure(failure) }
            guard state.pending > 0 else { return .success(true) }
            state.waiters[token] = continuation
            return .success(false)
          }
          switch outcome {
          case .success(true): continuation.resume()
          case .success(false): ensureWatcher()
          case .failure(let error): continuation.resume(throwing: error)
          }
        }
      } onCancel: {
        let waiter = state.withLock(announcingTo: self) { $0.waiters.removeValue(forKey: token) }
        waiter?.resume(throwing: OutboxError.cancelled)
      }
    } catch {
      throw failure(error)
    }
  }

  /// A line that waits at a dead letter with messages behind it, as the error that says so.
  private func stoppedLineWithMessages() async throws(OutboxError) -> OutboxError? {
    let stopped = state.withLock(announcingTo: self) { $0.stoppedLines }
    guard !stopped.isEmpty else { return nil }
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db -> OutboxError? in
        for partition in stopped where try OutboxStore.count(db, partition: partition) > 0 {
          guard
            let row = try Row.fetchOne(
              db,
              sql: "SELECT id, sequence FROM \(OutboxStore.deadLetters) WHERE partition IS ? "
                + "ORDER BY sequence LIMIT 1",
              arguments: [partition]
            )
          else { continue }
          return .lineStopped(
            partition: partition,
            deadLetter: try UnreadableRow.id(of: row, in: OutboxSchema.deadLetterTable)
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
    let (settings, ready) = state.withLock(announcingTo: self) {
      state -> (DeliverySettings<Message>?, [String?]) in
      // A file outbox delivers only while it holds the file's deliverer lock.
      guard let settings = state.delivery, !state.stopping, !state.closed,
        path == nil || state.lock != nil,
        !state.stoppedLines.contains(partition), !state.scheduled.contains(partition),
        !state.holdsBack(partition)
      else { return (nil, []) }
      state.scheduled.insert(partition)
      // With fair shares the line waits for a slot by its group's turn; without, for the
      // queue's next slot.
      guard let group = settings.fairShares?.group(of: partition) else {
        return (settings, [partition])
      }
      return (settings, state.admission?.arrive(partition, group: group) ?? [])
    }
    guard let settings else { return }
    for line in ready { begin(line, settings: settings) }
  }

  /// Enqueues a line's turn, which has a slot (or waits for the queue's next one, without fair
  /// shares); with fair shares, the turn's end frees its slot for the next group's line.
  private func begin(_ partition: String?, settings: DeliverySettings<Message>) {
    settings.lines.enqueueDetached(forKey: partition) {
      await self.turn(of: partition, settings: settings)
      guard settings.fairShares != nil else { return }
      let next = self.state.withLock(announcingTo: self) { state in
        state.admission?.finished(partition) ?? []
      }
      for line in next { self.begin(line, settings: settings) }
    }
  }

  /// Whether a turn of a line other than `partition` is enqueued and has not begun: it waits
  /// for a slot. (A turn of `partition` itself, enqueued by an append while it is delivered,
  /// waits for this one, not for a slot.)
  func linesWaitForTurn(besides partition: String?) -> Bool {
    state.withLock(announcingTo: self) { state in
      state.scheduled.contains { $0 != partition }
    }
  }

  /// Delivers a line for one turn, by the line runner (``OutboxLine``): when the turn is spent
  /// (``LineTurn``) and another line waits, the line's next turn is enqueued behind the other
  /// lines' (so that lines share the limit fairly).
  ///
  /// Removing delivered messages and taking the next ones happen in one write transaction.
  private func turn(of partition: String?, settings: DeliverySettings<Message>) async {
    let proceed = state.withLock(announcingTo: self) { state -> Bool in
      state.scheduled.remove(partition)
      return !state.holdsBack(partition) && !state.stopping && !state.closed
        && !state.stoppedLines.contains(partition)
    }
    guard proceed, !Task.isCancelled else { return }
    let end = await settings.runner.run(
      OutboxLine(outbox: self, partition: partition, audit: settings.audit)
    )
    state.withLock(announcingTo: self) { $0.delivering[partition] = nil }
    switch end {
    case .yielded: schedule(partition)
    // Its rate limit is reached: the line goes on when the window ends, on the outbox's clock
    // (the windows' clock).
    case .limited(let until): wakeUp(partition, at: until, onOutboxClock: true)
    case .empty, .released, .stopped: break
    }
  }

  /// Schedules a line at `date`, when its next message may be delivered (wall clock), unless a
  /// wake-up as early is set already.
  func wakeUp(_ partition: String?, at date: Date, onOutboxClock: Bool = false) {
    let wall = scheduleTicker.wall
    state.withLock(announcingTo: self) { state in
      if let set = state.wakeUps[partition], set.at <= date { return }
      state.wakeUps[partition]?.task.cancel()
      let task = Task.detached { [weak self] in
        if onOutboxClock {
          // A rate limit's window ends on the outbox's clock read as wall time.
          try? await wall.sleepUntil(Int64((date.timeIntervalSince1970 * 1000).rounded(.up)))
        } else {
          // Wall time on purpose, not the outbox's clock: `deliverAfter` is a date on this
          // machine's clock, as other processes that open the file read it. Cancelled by
          // stop() (the sleep ends at once); the turn it schedules checks the date again, so a
          // wake-up early or late by the clocks' difference costs one more wake-up, never an
          // early delivery.
          let delay = date.timeIntervalSinceNow
          if delay > 0 { try? await Task.sleep(for: .seconds(delay)) }
        }
        guard !Task.isCancelled, let self else { return }
        self.state.withLock(announcingTo: self) { state in
          if state.wakeUps[partition]?.at == date { state.wakeUps[partition] = nil }
        }
        // Woken a little early (another clock), the turn sets a wake-up again.
        self.schedule(partition)
      }
      state.wakeUps[partition] = (date, task)
    }
  }

  /// Whether the outbox is stopping or closed.
  var isStopping: Bool {
    state.withLock(announcingTo: self) { $0.stopping || $0.closed }
  }
}
#endif
