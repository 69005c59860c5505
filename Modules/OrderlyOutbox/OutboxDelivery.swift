// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyCore
import OrderlyDatabaseFile
public import OrderlyOutboxCore

/// How a started outbox delivers.
struct DeliverySettings<Message: Sendable>: Sendable {
  let lines: KeyedSerialQueue<String?>
  let retry: RetryPolicy
  let onDeadLetter: DeadLetterPolicy
  let pollInterval: Duration
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

/// What `start` does when another outbox already delivers the same file.
public enum WhenDeliveredElsewhere: Sendable, Equatable {
  /// Wait for it to stop (or its process to end, however it ends), then deliver from the head of
  /// every line. The default.
  case wait
  /// Throw `OutboxError.deliveredElsewhere(path:)` at once.
  case fail
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
  /// ``WhenDeliveredElsewhere/fail`` to be told instead. While it delivers, the outbox checks
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
  ///   positive; `OutboxError.deliveredElsewhere(path:)` with ``WhenDeliveredElsewhere/fail``;
  ///   `OutboxError.closed(path:)`; another `OutboxError` if reading the lines fails.
  public func start(
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    whenDeliveredElsewhere: WhenDeliveredElsewhere = .wait,
    pollInterval: Duration = .seconds(1),
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) throws(OutboxError) {
    guard limit >= 1 else { throw .invalidOption("limit must be 1 or more (got \(limit))") }
    guard pollInterval > .zero else {
      throw .invalidOption("pollInterval must be longer than zero (got \(pollInterval))")
    }
    try enterDatabase()
    defer { leaveDatabase() }
    let settings = DeliverySettings(
      lines: KeyedSerialQueue<String?>(name: "outbox", limit: limit),
      retry: retry,
      onDeadLetter: onDeadLetter,
      pollInterval: pollInterval,
      deliver: deliver
    )
    try state.withLock(announcingTo: self) { (state) throws(OutboxError) in
      guard state.delivery == nil, !state.stopping else { throw .alreadyStarted }
      state.delivery = settings
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
      // A file outbox delivers only while it holds the file's deliverer lock.
      guard let settings = state.delivery, !state.stopping, !state.closed,
        path == nil || state.lock != nil,
        !state.stoppedLines.contains(partition), !state.scheduled.contains(partition),
        !state.holdsBack(partition)
      else { return nil }
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
      return !state.holdsBack(partition) && !state.stopping && !state.closed
        && !state.stoppedLines.contains(partition)
    }
    guard proceed, !Task.isCancelled else { return }
    var head: StoredMessage?
    do {
      head = try await database.write { db in try self.claimHead(of: partition, in: db) }
    } catch {
      // Stopped, closed, or the disk failed before anything was delivered: the message stays
      // for the next turn or start; waiters hear why.
      let failure = failure(error)
      if failure != .cancelled, failure != .closed(path: path ?? ":memory:") {
        failWaiters(with: failure)
      }
      return
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
      let recorded = await record(current) { db in
        try OutboxStore.delete(db, sequence: current.sequence)
        db.afterNextTransaction { _ in
          self.state.withLock(announcingTo: self) { $0.pending -= 1 }
        }
        return goesOn ? try self.claimHead(of: partition, in: db) : nil
      }
      guard let recorded else {
        // The outbox stopped before the delivery could be recorded: it stays on disk, and is
        // delivered again by the next start (at least once).
        state.withLock(announcingTo: self) { $0.delivering[partition] = nil }
        return
      }
      head = recorded
      let waiters = state.withLock(announcingTo: self) { state in
        if head == nil { state.delivering[partition] = nil }
        return state.takeWaitersIfDelivered()
      }
      hub.emit(.delivered(id: current.id, sequence: current.sequence))
      for waiter in waiters { waiter.resume() }
      if !goesOn { schedule(partition) }
    }
  }

  /// Makes a write that records what happened to a delivered message (removed, or moved to the
  /// dead letters) until it succeeds.
  ///
  /// The write runs in a task of its own, so that ``stop()`` cancelling the delivery does not
  /// cancel it: a delivery that returned is recorded. A write that fails (a full disk, say) is
  /// reported as `OutboxEvent.recordFailed(id:sequence:reason:retryIn:)` and to the callers of
  /// ``waitUntilDelivered()``, then tried again after the retry policy's wait, on the outbox's
  /// clock; never dropped silently.
  ///
  /// - Returns: What `body` returned, or `nil` if the outbox stopped or closed before the write
  ///   succeeded: the message stays on disk and is delivered again later.
  private func record<Value: Sendable>(
    _ stored: StoredMessage,
    retry: RetryPolicy = .standard,
    _ body: @escaping @Sendable (Database) throws -> Value
  ) async -> Value? {
    var failures = 0
    while true {
      let database = self.database
      let result = await Task { try await database.write(body) }.result
      let error: OutboxError
      switch result {
      case .success(let value):
        if failures > 0 { state.withLock(announcingTo: self) { $0.recordFailure = nil } }
        return value
      case .failure(let failed): error = failure(failed)
      }
      if isStopping || error == .closed(path: path ?? ":memory:") { return nil }
      failures += 1
      let delay = retry.delay(afterAttempt: failures)
      hub.emit(
        .recordFailed(
          id: stored.id,
          sequence: stored.sequence,
          reason: error.description,
          retryIn: delay
        )
      )
      state.withLock(announcingTo: self) { $0.recordFailure = error }
      failWaiters(with: error)
      // Cancelled by stop(): the sleep ends at once.
      try? await clock.sleep(for: delay)
      if isStopping { return nil }
    }
  }

  /// Reads a line's first message, counts the attempt about to begin, and marks it as being
  /// delivered, inside a write transaction: a merge, which also writes, sees the mark or comes
  /// before the read.
  private func claimHead(of partition: String?, in db: Database) throws -> StoredMessage? {
    var head = try OutboxStore.head(db, partition: partition)
    if let notBefore = head?.notBefore, notBefore > Date() {
      // The line waits for its next message's time, in order; other lines go on.
      head = nil
      wakeUp(partition, at: notBefore)
    }
    if let head {
      try OutboxStore.recordAttempts(db, sequence: head.sequence, attempts: head.attempts + 1)
    }
    state.withLock(announcingTo: self) { $0.delivering[partition] = head?.sequence }
    return head
  }

  /// Schedules a line at `date`, when its next message may be delivered (wall clock), unless a
  /// wake-up as early is set already.
  private func wakeUp(_ partition: String?, at date: Date) {
    state.withLock(announcingTo: self) { state in
      if let set = state.wakeUps[partition], set.at <= date { return }
      state.wakeUps[partition]?.task.cancel()
      let task = Task.detached { [weak self] in
        // Wall time on purpose, not the outbox's clock: `deliverAfter` is a date on this
        // machine's clock, as other processes that open the file read it. Cancelled by stop()
        // (the sleep ends at once); the turn it schedules checks the date again, so a wake-up
        // early or late by the clocks' difference costs one more wake-up, never an early
        // delivery.
        let delay = date.timeIntervalSinceNow
        if delay > 0 { try? await Task.sleep(for: .seconds(delay)) }
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

  /// Whether a line may take its next message in this turn.
  private func canGoOn(_ partition: String?) -> Bool {
    state.withLock(announcingTo: self) { state in
      !state.holdsBack(partition) && !state.stopping && !state.closed
    }
  }

  enum Outcome { case delivered, next, halt }

  /// Delivers a claimed message with its retries, by the rule every outbox follows
  /// (``DeliveryRule``); a message set aside goes to the dead letters here.
  ///
  /// `stored.attempts` does not count the attempt about to begin, which
  /// ``claimHead(of:in:)`` recorded already.
  private func deliver(_ stored: StoredMessage, settings: DeliverySettings<Message>) async
    -> Outcome
  {
    let head = ClaimedHead(
      id: stored.id,
      sequence: stored.sequence,
      partition: stored.partition,
      payload: stored.payload,
      attempt: stored.attempts + 1,
      appendedAt: stored.appendedAt,
      headers: stored.headers
    )
    let rule = DeliveryRule<Message>(
      retry: settings.retry,
      hub: hub,
      waits: retryWaits,
      clock: clock
    )
    let hooks = FileLineHooks(outbox: self, stored: stored, deliver: settings.deliver)
    switch await rule.deliver(head, fence: nil, hooks: hooks) {
    case .delivered: return .delivered
    case .halted: return .halt
    case .deadLetter(let attempts, let reason):
      return await kill(stored, attempts: attempts, reason: reason, settings: settings)
    }
  }

  /// What a line of this outbox does around each attempt.
  private struct FileLineHooks: LineHooks {
    let outbox: Outbox<Message>
    let stored: StoredMessage
    let deliver: @Sendable (Envelope<Message>) async throws -> Void

    func run(_ envelope: Envelope<Message>) async -> Result<Void, any Error> {
      do {
        try await deliver(envelope)
        return .success(())
      } catch {
        return .failure(error)
      }
    }

    func haltsAfterFailure(_ error: any Error) -> Bool {
      outbox.isStopping || (Task.isCancelled && error is CancellationError)
    }

    func haltsBeforeRetry() -> Bool {
      let partition = stored.partition
      return outbox.state.withLock(announcingTo: outbox) { state -> Bool in
        state.holdsBack(partition) || state.stopping || state.closed
      }
    }

    func recordAttempt(_ attempt: Int) async {
      let sequence = stored.sequence
      try? await outbox.database.write { db in
        try OutboxStore.recordAttempts(db, sequence: sequence, attempts: attempt)
      }
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
    let recorded = await record(stored) { db in
      try OutboxStore.kill(db, stored, attempts: attempts, reason: reason)
      db.afterNextTransaction { _ in
        self.state.withLock(announcingTo: self) { state in
          state.pending -= 1
          state.deadLetters += 1
        }
      }
      // Only a stopped line makes waiters fail, and only with messages behind it.
      return stops ? try OutboxStore.count(db, partition: stored.partition) : 0
    }
    guard let behind = recorded else { return .halt }
    let (waiters, failed) = state.withLock(announcingTo: self) { state in
      if stops { state.stoppedLines.insert(stored.partition) }
      if stops && behind > 0 {
        return ([CheckedContinuation<Void, any Error>](), state.takeWaiters())
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
}
#endif
