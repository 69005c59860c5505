// A PostgreSQL worker of the fleet: start and stop, taking lines, keeping their leases,
// notifications, the stall watch.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
public import OrderlyOutboxCore
import PostgresNIO

extension PostgresOutbox {
  // MARK: - Starting and stopping

  /// Starts delivering as one worker of the fleet: this process takes lines that no other
  /// worker holds, up to `limit` at once, and delivers each in order.
  ///
  /// `deliver` runs on Swift's cooperative pool. It is cancelled when the outbox stops, or when
  /// the worker can no longer be sure of the line's lease (its renewal failed long enough, or
  /// another worker took the line); its message is then not acknowledged, and is delivered
  /// again first by whoever holds the line next.
  ///
  /// - Parameters:
  ///   - limit: How many lines this worker delivers at once; 4 by default.
  ///   - retry: When a failed delivery is tried again (on the outbox's clock), and which errors
  ///     are retried. The line keeps its lease while it waits.
  ///   - onDeadLetter: Whether a line waits at a dead letter (the default) or goes on. Give
  ///     every worker of a fleet the same policy.
  ///   - lease: How long a line stays with this worker without a renewal; 30 seconds by
  ///     default. A killed worker's lines are taken over when their leases run out, at most
  ///     this long after the kill, by workers with room for them (a worker with free slots looks
  ///     again the moment the first lease of another worker ends). The worker renews every
  ///     quarter of it, and cancels a delivery when less than a quarter is left unrenewed.
  ///   - pollInterval: How often the worker looks for lines to take when no notification came;
  ///     1 second by default. No line waits longer than this for a lost notification.
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  /// - Throws: `OutboxError.alreadyStarted` if the outbox is delivering;
  ///   `OutboxError.invalidOption(_:)` for a limit below 1, a lease shorter than 400
  ///   milliseconds, or a poll interval that is not positive.
  public func start(
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    lease: Duration = .seconds(30),
    pollInterval: Duration = .seconds(1),
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) throws(OutboxError) {
    try checkOptions(limit: limit, lease: lease, pollInterval: pollInterval)
    try begin(
      FleetSettings(
        limit: limit,
        retry: retry,
        onDeadLetter: onDeadLetter,
        lease: lease,
        pollInterval: pollInterval,
        deliver: deliver,
        stallAfter: lease * 2
      )
    )
  }

  /// Starts delivering as one worker of the fleet, in ordered batches: the handler gets up to
  /// `batch` consecutive messages of one line at once, in order.
  ///
  /// Everything ``start(limit:retry:onDeadLetter:lease:pollInterval:deliver:)`` says holds,
  /// with a batch in place of a message:
  ///
  /// - A line has one batch in delivery at a time, in the whole fleet: its next batch starts
  ///   after this one is acknowledged. A batch holds the line's first messages that are due,
  ///   up to `batch` of them: it ends before a message appended with a later `deliverAfter`.
  /// - When `deliver` returns, every message of the batch is acknowledged in one statement
  ///   (and the line's next batch taken by it). When it throws `BatchDeliveryError`, the
  ///   first `BatchDeliveryError.delivered` messages are acknowledged, and the next one is
  ///   the one that failed; any other error is a failure of the batch's first message. The
  ///   failed message is retried by `retry`, as the line's first, in a new batch that goes on
  ///   from it, or set aside as a dead letter when the policy says so.
  /// - Each message's `Envelope.attempt` counts the batches it was handed in, up to and
  ///   including the one where it failed; the messages after a failed one are not counted as
  ///   tried. Events are per message: `delivering` for each message handed over, `delivered`
  ///   for each acknowledged, `retrying` and `deadLettered` for the one that failed.
  /// - A message whose stored payload does not decode ends the batch before it, and becomes a
  ///   dead letter once it is the line's first.
  ///
  /// Batches cost one acknowledgement for many messages: use them when a receiver takes
  /// several changes of one key at once (a bulk write, one HTTP request with a list).
  ///
  /// - Parameters:
  ///   - limit: How many lines this worker delivers at once; 4 by default.
  ///   - batch: Up to how many messages of one line a call of `deliver` gets; 1 or more.
  ///   - retry: When a failed message is tried again, and which errors are retried (the
  ///     error inside a `BatchDeliveryError`).
  ///   - onDeadLetter: Whether a line waits at a dead letter (the default) or goes on.
  ///   - lease: How long a line stays with this worker without a renewal; 30 seconds by
  ///     default.
  ///   - pollInterval: How often the worker looks for lines when no notification came.
  ///   - deliver: Sends a batch, in order; returns once the receiver has all of it, or throws
  ///     (a `BatchDeliveryError` to say how many came through first).
  /// - Throws: `OutboxError.alreadyStarted` if the outbox is delivering;
  ///   `OutboxError.invalidOption(_:)` for a batch or limit below 1, a lease shorter than 400
  ///   milliseconds, or a poll interval that is not positive.
  public func start(
    limit: Int = 4,
    batchesOf batch: Int,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    lease: Duration = .seconds(30),
    pollInterval: Duration = .seconds(1),
    deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) throws(OutboxError) {
    guard batch >= 1 else {
      throw .invalidOption("batchesOf must be 1 or more (got \(batch))")
    }
    try checkOptions(limit: limit, lease: lease, pollInterval: pollInterval)
    var settings = FleetSettings(
      limit: limit,
      retry: retry,
      onDeadLetter: onDeadLetter,
      lease: lease,
      pollInterval: pollInterval,
      deliver: { envelope in try await deliver([envelope]) },
      stallAfter: lease * 2
    )
    settings.batch = batch
    settings.deliverBatch = deliver
    try begin(settings)
  }

  /// Refuses a limit below 1, a lease shorter than 400 milliseconds, or a poll interval that is
  /// not positive, saying which and what it got.
  private func checkOptions(limit: Int, lease: Duration, pollInterval: Duration)
    throws(OutboxError)
  {
    guard limit >= 1 else { throw .invalidOption("limit must be 1 or more (got \(limit))") }
    guard lease >= .milliseconds(400) else {
      throw .invalidOption("lease must be 400 milliseconds or longer (got \(lease))")
    }
    guard pollInterval > .zero else {
      throw .invalidOption("pollInterval must be longer than zero (got \(pollInterval))")
    }
  }

  /// How long a started worker may have work and make no progress before it says it is
  /// stalled; `nil` (the default) for two leases.
  ///
  /// A worker *has work* when it holds keys, or when it has not finished a look for lines
  /// within this time and its poll interval (it cannot rule out due messages). It *makes progress* when it takes a
  /// key, records a delivery's outcome (delivered, retried, set aside), renews its leases,
  /// releases a key, or finishes a look that finds nothing to take. When it has had work and
  /// made no progress for this long, it logs an error naming what it waits on (the statements
  /// in flight, oldest first, and for how long), and `delivererStatistics.isStalled` is `true`
  /// until its next progress (`OutboxMetrics`: `orderly_outbox_worker_stalled`; `OutboxService`
  /// ends its `run()` with an error, for the process's supervisor to restart it). A worker
  /// whose database does not answer for this long is stalled too: it can take nothing.
  ///
  /// Read when delivery starts: set it before `start`. It must be longer than zero.
  public var stallAfter: Duration? {
    get { state.withLock(announcingTo: self) { $0.stallAfter } }
    set { state.withLock(announcingTo: self) { $0.stallAfter = newValue } }
  }

  /// Starts a worker with these settings, checked already.
  private func begin(_ settings: FleetSettings<Message>) throws(OutboxError) {
    var settings = settings
    let worker = try state.withLock(announcingTo: self) {
      (state) throws(OutboxError) -> FleetWorker<Message> in
      guard state.worker == nil, !state.stopping else { throw .alreadyStarted }
      if let limit = state.stallAfter {
        guard limit > .zero else {
          throw .invalidOption("stallAfter must be longer than zero (got \(limit))")
        }
        settings.stallAfter = limit
      }
      let worker = FleetWorker(outbox: self, settings: settings, paused: state.paused)
      state.worker = worker
      state.workerID = worker.id
      return worker
    }
    worker.begin()
  }

  /// Stops delivering, waits until no delivery of this worker runs, and releases every line it
  /// held, so other workers take them at once (they are told through `NOTIFY`).
  ///
  /// Deliveries in progress are cancelled: one that returns anyway is acknowledged if the lease
  /// still holds; one that throws leaves its message, delivered again by the line's next
  /// holder. The outbox can be started again.
  public func stop() async {
    let worker = state.withLock(announcingTo: self) { state -> FleetWorker<Message>? in
      guard let worker = state.worker, !state.stopping else { return nil }
      state.stopping = true
      return worker
    }
    guard let worker else { return }
    await worker.end()
    state.withLock(announcingTo: self) { state in
      state.worker = nil
      state.stopping = false
    }
  }

  /// Stops taking messages, gives the deliveries in progress up to `gracePeriod` to finish,
  /// then stops as ``stop()`` does: for a graceful shutdown (SIGTERM).
  ///
  /// No line takes a new message once this is called, and a retry wait ends at once. Each line
  /// is released as soon as its delivery in progress returns and is acknowledged, so another
  /// worker takes it within its poll interval (at once, if it is listening) instead of after
  /// the lease. A delivery still running when the grace period ends (measured on the outbox's
  /// clock) is cancelled, and its message is delivered again by the line's next holder.
  /// Cancelling the calling task ends the grace period at once.
  ///
  /// - Parameter gracePeriod: How long deliveries in progress may go on; zero or less is
  ///   ``stop()``.
  public func stop(gracePeriod: Duration) async {
    let worker = state.withLock(announcingTo: self) { state -> FleetWorker<Message>? in
      state.stopping ? nil : state.worker
    }
    guard gracePeriod > .zero, let worker else { return await stop() }
    worker.drain()
    let clock = self.clock
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await worker.waitUntilIdle() }
      group.addTask { try? await clock.sleep(for: gracePeriod) }
      await group.next()
      group.cancelAll()
    }
    await stop()
  }

  /// Stops this worker from starting deliveries, until ``resume()``.
  ///
  /// A delivery in progress
  /// finishes and is acknowledged, a retry wait ends, and the worker releases its lines, so
  /// other workers of the fleet take them. Appends go on.
  public func pause() {
    let worker = state.withLock(announcingTo: self) { state in
      state.paused = true
      return state.worker
    }
    worker?.setPaused(true)
  }

  /// Lets this worker deliver again after ``pause()``; a message waiting to be retried is tried
  /// at once, without waiting out its delay.
  public func resume() {
    let worker = state.withLock(announcingTo: self) { state in
      state.paused = false
      return state.worker
    }
    worker?.setPaused(false)
  }

  /// Whether this worker is paused with ``pause()``.
  public var isPaused: Bool { state.withLock(announcingTo: self) { $0.paused } }
}

/// How a started worker delivers.
struct FleetSettings<Message: Sendable>: Sendable {
  let limit: Int
  let retry: RetryPolicy
  let onDeadLetter: DeadLetterPolicy
  let lease: Duration
  let pollInterval: Duration
  /// Up to how many consecutive messages of a line one delivery gets: 1 delivers one message
  /// at a time through `deliver`, more through `deliverBatch`.
  var batch = 1
  let deliver: @Sendable (Envelope<Message>) async throws -> Void
  /// How long the worker may have work and make no progress before it says it is stalled
  /// (see ``StallWatch``): two leases unless ``PostgresOutbox/stallAfter`` says otherwise.
  var stallAfter: Duration
  /// The handler of ``PostgresOutbox/start(limit:batchesOf:retry:onDeadLetter:lease:pollInterval:deliver:)``.
  var deliverBatch: (@Sendable ([Envelope<Message>]) async throws -> Void)?

  /// How often leases are renewed and checked: a quarter of the lease.
  var tick: Duration { lease / 4 }
  /// How long a worker delivers a line before it gives the line up to the line that waits
  /// longest (maybe this one again), when the worker has no free slot and a line waits for one:
  /// a quarter of the lease, so that a line whose holder died waits for no more than lines that
  /// wait for a free slot.
  var turn: Duration { lease / 4 }
  /// The lease in milliseconds, as the queries take it.
  var leaseMilliseconds: Double {
    Double(lease.components.seconds) * 1000 + Double(lease.components.attoseconds) / 1e15
  }
}

/// Waits until every task in `tasks` has ended, or `limit` (real time) has passed, or the
/// calling task is cancelled; the tasks are left to end on their own.
///
/// - Parameters:
///   - tasks: The tasks.
///   - limit: How long to wait for them.
/// - Returns: Whether every task ended in time.
func ended(_ tasks: [Task<Void, Never>], within limit: Duration) async -> Bool {
  guard !tasks.isEmpty else { return true }
  let (stream, continuation) = AsyncStream.makeStream(of: Bool.self)
  let waiter = Task {
    for task in tasks { await task.value }
    continuation.yield(true)
  }
  let timer = Task {
    // Safe as library code: the bound of a wait, on real time as the leases it stands for;
    // cancelled as soon as the tasks end.
    try? await Task.sleep(for: limit)
    continuation.yield(false)
  }
  var allEnded = false
  for await value in stream {
    allEnded = value
    break
  }
  continuation.finish()
  timer.cancel()
  _ = waiter
  return allEnded
}

extension ClaimedHead {
  /// The message a statement took beside something else (a lease, an acknowledgement), from its
  /// columns `sequence, id, partition, payload, attempts, appended_at, headers`, all `NULL`
  /// when it took none.
  ///
  /// - Returns: The message, or `nil` if the statement took none.
  static func taken(
    _ columns: (Int64?, UUID?, String?, Data?, Int?, Date?, String?)
  ) -> ClaimedHead? {
    guard let sequence = columns.0, let id = columns.1, let payload = columns.3,
      let attempts = columns.4, let appendedAt = columns.5
    else { return nil }
    return ClaimedHead(
      id: id,
      sequence: sequence,
      partition: columns.2,
      payload: payload,
      attempt: attempts,
      appendedAt: appendedAt,
      headers: StoredHeaders.decode(columns.6)
    )
  }
}

/// One start-to-stop run of delivery: the loop that takes lines, the loop that renews their
/// leases, the listener for notifications, and one task per line held.
final class FleetWorker<Message: Codable & Sendable>: Sendable {
  let outbox: PostgresOutbox<Message>
  let settings: FleetSettings<Message>
  let id: String
  /// The loop each held line runs.
  let runner: LineRunner<Message>
  private let bell = Doorbell()
  let state: OrderlyLock<WorkerState>
  /// Whether this worker makes progress (see ``StallWatch``), checked by the watch loop.
  private let stall: OrderlyLock<StallWatch>

  struct Held: Sendable {
    let fence: Int64
    /// Before this instant the database cannot have given the line to anyone else: the lease
    /// was renewed (or taken) by a query sent no earlier than `deadline - lease`.
    var deadline: ContinuousClock.Instant
    var lost = false
    var task: Task<Void, Never>?
    var delivery: Task<Void, any Error>?
  }

  struct WorkerState: Sendable {
    var held: [String: Held] = [:]
    var paused: Bool
    /// Lines known to be paused on their own.
    ///
    /// Paused by ``PostgresOutbox/pause(partition:)`` in this process, or read from the flag by
    /// a renewal: a line in it stops before its next message or retry, and is released. Cleared for a line this worker takes (the database said it was
    /// not paused) or that is resumed.
    var pausedLines: Set<String> = []
    /// Taking no new message, for a graceful stop: each line is released after its delivery.
    var draining = false
    /// Tasks in ``waitUntilIdle()``.
    var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    var lastToken: UInt64 = 0
    var ending = false
    var loops: [Task<Void, Never>] = []
    /// What the worker waited on when it stalled, while it is stalled (see ``StallWatch``).
    var stalledOn: [String]?
  }

  init(outbox: PostgresOutbox<Message>, settings: FleetSettings<Message>, paused: Bool) {
    self.outbox = outbox
    self.settings = settings
    let rule = DeliveryRule<Message>(
      retry: settings.retry,
      hub: outbox.hub,
      waits: outbox.retryWaits,
      clock: outbox.clock
    )
    let logger = outbox.logger
    if let deliverBatch = settings.deliverBatch {
      self.runner = LineRunner(
        rule: rule,
        batch: settings.batch,
        onDeadLetter: settings.onDeadLetter,
        onBadCount: { error, batch in
          logger.warning(
            "a batch handler threw BatchDeliveryError with a count outside its batch; counted as a failure of the batch's first message",
            metadata: [
              "delivered": "\(error.delivered)", "batch": "\(batch)", "error": "\(error.error)",
            ]
          )
        },
        deliver: deliverBatch
      )
    } else {
      self.runner = LineRunner(
        rule: rule,
        onDeadLetter: settings.onDeadLetter,
        deliver: settings.deliver
      )
    }
    self.id = "\(ProcessInfo.processInfo.hostName)/\(getpid())/\(UUID().uuidString.prefix(8))"
    self.state = OrderlyLock(WorkerState(paused: paused))
    self.stall = OrderlyLock(
      StallWatch(limit: settings.stallAfter, lookInterval: settings.pollInterval, now: .now)
    )
  }

  /// Whether this worker is stalled, and what it was waiting on when it stalled.
  var stalled: (isStalled: Bool, on: [String]) {
    state.withLock(announcingTo: self) { ($0.stalledOn != nil, $0.stalledOn ?? []) }
  }

  /// The lines this worker holds a lease on and has not given up.
  var keysHeld: Int {
    state.withLock(announcingTo: self) { state in state.held.values.count { !$0.lost } }
  }

  /// Counts into the outbox's `DelivererStatistics`.
  func count(_ change: (inout DelivererStatistics) -> Void) {
    outbox.state.withLock(announcingTo: outbox) { change(&$0.statistics) }
  }

  var logger: Logger { outbox.logger }
  var client: PostgresClient { outbox.client }

  /// Runs a query (and reads its rows) within a lease's time: a query that never ends must not
  /// hold a line, or this loop, for ever (see ``withDeadline(_:_:)``).
  ///
  /// The stall watch knows what is in flight: `what` names it in the error a stalled worker
  /// logs. A statement that moves the worker on (a take, an acknowledgement, a renewal, a
  /// release, a dead letter) counts as progress when it succeeds (`progress`).
  ///
  /// - Parameters:
  ///   - what: The wait, as the stall log names it ("renewing 3 leases").
  ///   - progress: Whether its success is progress.
  ///   - operation: The statements.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw, `QueryTimedOut` or `ConnectionLost`.
  func bounded<T: Sendable>(
    _ what: @autoclosure () -> String,
    progress: Bool = false,
    _ operation: @escaping @Sendable () async throws -> T
  ) async throws -> T {
    let token = stall.withLock { $0.begin(what(), at: .now) }
    let withheld = outbox.withheld
    let result: T
    do {
      result = try await withDeadline(settings.lease) {
        try await withheld.wait()
        return try await operation()
      }
    } catch {
      stall.withLock { $0.end(token, failed: true, at: .now) }
      throw error
    }
    stall.withLock { watch in
      watch.end(token, at: .now)
      if progress { watch.progressed(at: .now) }
    }
    return result
  }

  func begin() {
    let loops = [
      Task { await self.claimLoop() },
      Task { await self.renewLoop() },
      Task { await self.watchLoop() },
      Task { await self.listenLoop() },
    ]
    state.withLock(announcingTo: self) { $0.loops = loops }
  }

  func end() async {
    let (loops, lines) = state.withLock(announcingTo: self) { state in
      state.ending = true
      for line in state.held.values { line.delivery?.cancel() }
      return (state.loops, state.held.values.compactMap(\.task))
    }
    for loop in loops { loop.cancel() }
    // A line waiting to retry sees `ending` at once.
    outbox.retryWaits.wakeAll()
    // Line tasks are not cancelled: they see `ending` at their next step, and their last
    // queries (the acknowledgement of a delivery that returned anyway, the release) must run.
    // Each of those is bounded by a lease; a handler that ignores its cancellation is not, so
    // the stop waits a lease for the lines, and leaves the keys of those still running to
    // their leases (another worker takes each when it runs out; the fence refuses the stale
    // handler's acknowledgement).
    if await !ended(lines, within: settings.lease) {
      let running = state.withLock(announcingTo: self) { state in
        state.held.keys.sorted().map(Line.shown).joined(separator: ", ")
      }
      logger.error(
        "stopping: deliveries still running a lease after they were cancelled; their keys wait for their leases",
        metadata: ["worker": "\(id)", "partitions": "\(running)"]
      )
    }
    // The loops end at their next step: each statement they wait on is bounded by a lease.
    _ = await ended(loops, within: settings.lease)
    let running = state.withLock(announcingTo: self) { state in Array(state.held.keys) }
    // Lines end by releasing their leases; this catches any a failed query left behind.
    let (client, id, logger) = (client, id, logger)
    do {
      try await bounded("releasing every lease at the stop") {
        try await client.checkedQuery(
          """
          UPDATE orderly_outbox_lease SET owner = NULL, expires_at = now()
          WHERE owner = \(id) AND NOT (line = ANY(\(running)))
          """,
          logger: logger
        ) { _ in }
        try await client.checkedQuery(
          "SELECT pg_notify(\(PostgresSchema.channel), '')",
          logger: logger
        ) { _ in }
      }
    } catch {
      logger.warning(
        "could not release leases; other workers take them when they expire",
        metadata: ["worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))"]
      )
    }
  }

  /// Takes no new message from now on, for a graceful stop.
  ///
  /// Every line stops at its next step (after the delivery in progress is acknowledged) and is
  /// released; no line is taken.
  func drain() {
    state.withLock(announcingTo: self) { $0.draining = true }
    outbox.retryWaits.wakeAll()
    bell.ring()
  }

  /// Returns once this worker holds no line (after ``drain()``), or when the task is
  /// cancelled.
  ///
  /// Its caller bounds it: ``PostgresOutbox/stop(gracePeriod:)`` races it with the grace
  /// period.
  func waitUntilIdle() async {
    let token = state.withLock(announcingTo: self) { state -> UInt64 in
      state.lastToken &+= 1
      return state.lastToken
    }
    await withTaskCancellationHandler {
      // resumed by: the line task that ends last (a line ends when its lease is released or
      // lost), or the cancellation handler below; the caller's grace period cancels it.
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let now = state.withLock(announcingTo: self) { state -> Bool in
          if state.held.isEmpty || Task.isCancelled { return true }
          state.idleWaiters[token] = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let waiter = state.withLock(announcingTo: self) {
        $0.idleWaiters.removeValue(forKey: token)
      }
      waiter?.resume()
    }
  }

  /// Pauses or resumes this worker; either ends every retry wait at once (paused, the line is
  /// released; resumed, the message is tried again without waiting out its delay).
  func setPaused(_ paused: Bool) {
    state.withLock(announcingTo: self) { $0.paused = paused }
    outbox.retryWaits.wakeAll()
    bell.ring()
  }

  // MARK: Taking lines

  private func claimLoop() async {
    // Where the last look stopped in the lines (by key): the next look goes on from there, so
    // every line gets its turn, however many there are.
    var cursor: String?
    while !Task.isCancelled {
      let soonest = await claim(from: &cursor)
      // A line held by a worker that stopped renewing is free the moment its lease ends: look
      // then, not up to a poll interval later (a live holder renews long before its lease
      // ends, so this wakes the loop early only for a line whose holder has died or is cut
      // off).
      let wait = soonest.map { min(settings.pollInterval, max($0, .milliseconds(1))) }
      await bell.wait(upTo: wait ?? settings.pollInterval)
    }
  }

  /// Takes lines that have messages and no live lease, up to the free slots: the lines whose
  /// oldest message waits longest first, then, past the oldest messages, going round the lines
  /// from `cursor`.
  ///
  /// - Returns: When the first lease held by another worker ends, if this worker still has
  ///   free slots; `nil` if there is none, or nothing is known.
  private func claim(from cursor: inout String?) async -> Duration? {
    var free = state.withLock(announcingTo: self) { state -> Int in
      state.paused || state.draining || state.ending ? 0 : settings.limit - state.held.count
    }
    guard free > 0 else { return nil }
    let room = free
    do {
      // The lines waiting longest. A few rounds at most, as long as each finds all it asked
      // for: lines that other workers took at the same moment are skipped, not waited for.
      for _ in 0..<4 where free > 0 {
        let wanted = free * 2 + 4
        let oldest = try await oldestCandidates(limit: wanted)
        let mine = state.withLock(announcingTo: self) { state in Set(state.held.keys) }
        free -= try await take(oldest.filter { !mine.contains($0.line) }, upTo: free)
        if oldest.count < wanted { break }
      }
      if free == 0 {
        stall.withLock { $0.looked(foundNothing: false, at: .now) }
        return nil
      }
      // Room left: lines whose first message is younger than the oldest messages read, by key.
      // A few rounds at most: a round whose lines were all taken by other workers at the same
      // moment goes on past them.
      for _ in 0..<4 where free > 0 {
        let wanted = free * 2 + 4
        var found = try await candidates(after: cursor, through: nil, limit: wanted)
        var walkedAll = found.count < wanted
        if walkedAll, let cursor {
          // The end of the lines: go on from the first, up to where this walk began.
          found += try await candidates(after: nil, through: cursor, limit: wanted - found.count)
          walkedAll = found.count < wanted
        }
        cursor = walkedAll ? nil : found.last?.line
        let mine = state.withLock(announcingTo: self) { state in Set(state.held.keys) }
        free -= try await take(found.filter { !mine.contains($0.line) }, upTo: free)
        if walkedAll { break }
      }
      let soonest = free > 0 ? try await soonestLeaseEnd() : nil
      stall.withLock { $0.looked(foundNothing: free == room, at: .now) }
      return soonest
    } catch {
      if !Task.isCancelled {
        logger.warning(
          "could not look for lines to deliver; trying again in the poll interval",
          metadata: [
            "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
      }
      return nil
    }
  }

  /// How many of the oldest messages a look reads to find the lines that wait longest.
  ///
  /// Bounds a look's cost when the oldest messages belong to lines that are held: a line with
  /// a long backlog, held by a worker, would otherwise be read through on every look.
  static var ageWindow: Int { 2_048 }

  /// Up to `limit` lines with messages and no live lease whose first message is among the
  /// ``ageWindow`` oldest messages, the line whose first message is oldest first.
  ///
  /// A message's age is its append's time (`appended_at`). The walk reads the messages in
  /// that order through the age index and stops as soon as `limit` lines are found.
  private func oldestCandidates(limit: Int) async throws -> [Candidate] {
    let stopLine = settings.onDeadLetter == .stopLine
    let window = Self.ageWindow
    let (client, logger) = (client, logger)
    return try await bounded("looking for the lines waiting longest") { () -> [Candidate] in
      var candidates: [Candidate] = []
      try await client.checkedExecute(
        OldestLinesStatement(window: window, stopLine: stopLine, limit: limit),
        logger: logger
      ) { rows in
        for try await (line, fresh) in rows {
          candidates.append(Candidate(line: line, fresh: fresh))
        }
      }
      return candidates
    }
  }

  /// Up to `limit` lines with messages and no live lease, in key order: after `after` (from the
  /// first line if `nil`), and up to `through` if given.
  ///
  /// The lines are found by one index probe each (not a scan of every message), and the walk
  /// stops as soon as `limit` are found: a look costs what it finds, not the number of lines.
  private func candidates(after: String?, through: String?, limit: Int) async throws
    -> [Candidate]
  {
    let stopLine = settings.onDeadLetter == .stopLine
    let (client, logger) = (client, logger)
    return try await bounded("looking for lines by key") { () -> [Candidate] in
      var candidates: [Candidate] = []
      // The conditions are subqueries, not joins, so that the walk stays lazy: PostgreSQL
      // evaluates a recursive WITH only as far as the LIMIT reads it.
      try await client.checkedQuery(
        """
        WITH RECURSIVE lines(line) AS (
          (SELECT line FROM orderly_outbox_message
           WHERE \(after)::text IS NULL OR line > \(after) ORDER BY line LIMIT 1)
          UNION ALL
          SELECT (SELECT m.line FROM orderly_outbox_message m WHERE m.line > lines.line
                  ORDER BY m.line LIMIT 1)
          FROM lines
          WHERE lines.line IS NOT NULL AND (\(through)::text IS NULL OR lines.line < \(through))
        )
        SELECT lines.line,
          NOT EXISTS (SELECT 1 FROM orderly_outbox_lease f WHERE f.line = lines.line)
        FROM lines
        WHERE lines.line IS NOT NULL
          AND (\(through)::text IS NULL OR lines.line <= \(through))
          AND NOT EXISTS (
            SELECT 1 FROM orderly_outbox_lease l WHERE l.line = lines.line
              AND (l.paused OR (l.owner IS NOT NULL AND l.expires_at > now())))
          AND (NOT \(stopLine) OR NOT EXISTS (
            SELECT 1 FROM orderly_outbox_dead_letter d WHERE d.line = lines.line))
          AND coalesce((
            SELECT h.not_before FROM orderly_outbox_message h WHERE h.line = lines.line
            ORDER BY h.sequence LIMIT 1), '-infinity') <= now()
        LIMIT \(limit)
        """,
        logger: logger
      ) { rows in
        for try await (line, fresh) in rows.decode((String, Bool).self) {
          candidates.append(Candidate(line: line, fresh: fresh))
        }
      }
      return candidates
    }
  }

  /// How long until the first lease held by another worker ends (`nil` if none is held).
  ///
  /// A holder that is alive renews long before then; one that died, or cannot reach the
  /// database, does not, and its line is free from that moment.
  private func soonestLeaseEnd() async throws -> Duration? {
    let (client, id, logger) = (client, id, logger)
    return try await bounded("reading when the next lease ends") { () -> Duration? in
      var soonest: Duration?
      try await client.checkedQuery(
        """
        SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM orderly_outbox_lease
        WHERE owner IS NOT NULL AND owner <> \(id) AND expires_at > now() AND NOT paused
        """,
        logger: logger
      ) { rows in
        for try await seconds in rows.decode(Double?.self) {
          if let seconds { soonest = .milliseconds(Int64((seconds * 1000).rounded(.up)) + 2) }
        }
      }
      return soonest
    }
  }

  /// A line found with messages and no live lease.
  private struct Candidate {
    let line: String
    /// Whether the line has no lease row yet (no worker ever held it, and it was never paused).
    let fresh: Bool
  }

  /// Takes the leases of up to `limit` of `candidates` (in their order) that are still free or
  /// expired, with each line's first message, in one statement, and starts delivering each line
  /// taken.
  ///
  /// Lines another worker is taking at the same moment are skipped, not waited for (`SKIP
  /// LOCKED`), so workers that look at once share the lines out instead of queueing on them. A
  /// line that waits at a dead letter (under `DeadLetterPolicy.stopLine`) is not taken, even if
  /// it was found free a moment before.
  ///
  /// - Returns: How many lines were taken.
  private func take(_ candidates: [Candidate], upTo limit: Int) async throws -> Int {
    guard !candidates.isEmpty, limit > 0 else { return 0 }
    let sent = ContinuousClock.now
    let (client, id, logger, leaseMilliseconds) = (client, id, logger, settings.leaseMilliseconds)
    let stopLine = settings.onDeadLetter == .stopLine
    let batch = settings.batch
    let lines = candidates.map(\.line)
    let fresh = candidates.filter(\.fresh).map(\.line)
    let taken = try await bounded("taking \(lines.count) lines", progress: true) {
      () -> [TakenLine] in
      if !fresh.isEmpty {
        // A line's first lease row, free (fence 0: its first holder gets fence 1).
        try await client.checkedExecute(FreshLeasesStatement(lines: fresh), logger: logger) {
          rows in
          for try await _ in rows {}
        }
      }
      // Committed before any line is delivered under it (see `committedQuery`). The attempts
      // of the messages taken are counted here, as `claimBatch` counts them: each line's first
      // `batch` messages, up to the first that is not due (`due`, true while every message
      // so far is due).
      return try await client.committedExecute(
        TakeLinesStatement(
          lines: lines,
          stopLine: stopLine,
          limit: limit,
          owner: id,
          leaseMilliseconds: leaseMilliseconds,
          batch: batch
        ),
        logger: logger
      ) { rows in
        // A row per message taken (one with no message for a line with none due), a line's
        // rows together and in order.
        var taken: [TakenLine] = []
        for try await row in rows {
          let message = ClaimedHead.taken((row.2, row.3, row.4, row.5, row.6, row.7, row.8))
          if let last = taken.indices.last, taken[last].line == row.0 {
            if let message { taken[last].batch.append(message) }
          } else {
            taken.append(TakenLine(line: row.0, fence: row.1, batch: message.map { [$0] } ?? []))
          }
        }
        return taken
      }
    }
    // A line this worker still holds (one it is giving up), or a worker that is ending, does
    // not start a second task for it: the lease just taken is given back (its head's attempt
    // stays counted, one more than ran).
    let (started, refused) = state.withLock(announcingTo: self) { state in
      var started: [TakenLine] = []
      var refused: [TakenLine] = []
      for line in taken {
        guard !state.ending, !state.draining, state.held[line.line] == nil else {
          refused.append(line)
          continue
        }
        state.pausedLines.remove(line.line)
        var held = Held(fence: line.fence, deadline: sent + settings.lease)
        held.task = Task {
          await self.deliverLine(line.line, fence: line.fence, batch: line.batch)
        }
        state.held[line.line] = held
        started.append(line)
      }
      return (started, refused)
    }
    for line in refused { try await release(line.line, fence: line.fence) }
    for line in started {
      logger.debug(
        "took line",
        metadata: [
          "worker": "\(id)", "partition": "\(Line.shown(line.line))", "fence": "\(line.fence)",
        ]
      )
    }
    return started.count
  }

  /// A line whose lease was just taken, with its first messages that were due (up to the
  /// batch size; none if none was).
  private struct TakenLine: Sendable {
    let line: String
    let fence: Int64
    var batch: [ClaimedHead]
  }

  /// Gives a line's lease back, if it still is this worker's.
  private func release(_ line: String, fence: Int64) async throws {
    let (client, id, logger) = (client, id, logger)
    try await bounded("releasing line \(Line.shown(line))", progress: true) {
      try await client.checkedExecute(
        ReleaseStatement(line: line, owner: id, fence: fence),
        logger: logger
      ) { rows in
        for try await _ in rows {}
      }
    }
  }

  // MARK: Keeping lines

  private func renewLoop() async {
    while !Task.isCancelled {
      try? await Task.sleep(for: settings.tick)
      if Task.isCancelled { return }
      await renew()
    }
  }

  /// Renews every lease held, and gives up (cancelling its delivery) every line whose lease was
  /// taken by another worker or is no longer certain.
  private func renew() async {
    let held = state.withLock(announcingTo: self) { state in
      state.held.filter { !$0.value.lost }.mapValues(\.fence)
    }
    if !held.isEmpty {
      let lines = Array(held.keys)
      let sent = ContinuousClock.now
      let (client, id, logger, leaseMilliseconds) = (client, id, logger, settings.leaseMilliseconds)
      do {
        let paused = OrderlyLock([String]())
        let renewed = try await bounded("renewing \(lines.count) leases", progress: true) {
          () -> [String: Int64] in
          // Committed before the lines' deadlines move (see `committedQuery`).
          try await client.committedQuery(
            """
            UPDATE orderly_outbox_lease
            SET expires_at = now() + interval '1 millisecond' * \(leaseMilliseconds)
            WHERE owner = \(id) AND line = ANY(\(lines)) AND expires_at > now()
            RETURNING line, fence, paused
            """,
            logger: logger
          ) { rows in
            var renewed: [String: Int64] = [:]
            var pausedNow: [String] = []
            for try await (line, fence, paused) in rows.decode((String, Int64, Bool).self) {
              renewed[line] = fence
              if paused { pausedNow.append(line) }
            }
            paused.withLock { [pausedNow] in $0 = pausedNow }
            return renewed
          }
        }
        // A line paused by another process: its retry wait ends, and it stops.
        let pausedNow = paused.withLock { $0 }
        if !pausedNow.isEmpty { linesPaused(pausedNow) }
        for (line, fence) in held {
          if renewed[line] == fence {
            state.withLock(announcingTo: self) { state in
              if state.held[line]?.fence == fence {
                state.held[line]?.deadline = sent + settings.lease
              }
            }
          } else {
            count { $0.leaseRenewalsFailed += 1 }
            lose(line, fence: fence, why: "another worker took it, or it expired")
          }
        }
      } catch {
        count { $0.leaseRenewalsFailed += held.count }
        logger.warning(
          "could not renew leases",
          metadata: [
            "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
      }
    }
  }

  /// Gives up the lines whose leases are no longer certain, every eighth of the lease: apart
  /// from the renewals, whose queries may wait a long time for a connection that cannot be
  /// made.
  private func watchLoop() async {
    while !Task.isCancelled {
      try? await Task.sleep(for: settings.lease / 8)
      if Task.isCancelled { return }
      giveUpLateLines()
      checkProgress()
    }
  }

  /// Says so, once, when the worker has work and has made no progress for its stall limit: an
  /// error naming what it waits on, and ``stalled`` (which `delivererStatistics` reports, and
  /// `OutboxService` ends its run on); and again when it moves on.
  private func checkProgress() {
    let (keysHeld, taking) = state.withLock(announcingTo: self) { state in
      (
        state.held.values.count { !$0.lost },
        !(state.paused || state.draining || state.ending)
      )
    }
    let verdict = stall.withLock { $0.check(at: .now, keysHeld: keysHeld, taking: taking) }
    switch verdict {
    case .healthy, .stillStalled:
      break
    case .stalled(let idle, let waitingOn):
      state.withLock(announcingTo: self) { $0.stalledOn = waitingOn }
      logger.error(
        "outbox worker stalled: it has work and made no progress for \(StallWatch.shown(idle))",
        metadata: [
          "worker": "\(id)", "keys_held": "\(keysHeld)",
          "waiting_on": "\(waitingOn.joined(separator: "; "))",
        ]
      )
    case .recovered(let after):
      state.withLock(announcingTo: self) { $0.stalledOn = nil }
      logger.notice(
        "outbox worker makes progress again",
        metadata: ["worker": "\(id)", "stalled_for": "\(StallWatch.shown(after))"]
      )
    }
  }

  /// A lease that could not be renewed for three quarters of its time is given up before it
  /// expires in the database.
  private func giveUpLateLines() {
    let now = ContinuousClock.now
    let late = state.withLock(announcingTo: self) { state in
      state.held.filter { !$0.value.lost && $0.value.deadline - settings.tick <= now }
        .mapValues(\.fence)
    }
    for (line, fence) in late { lose(line, fence: fence, why: "its renewal failed for too long") }
  }

  /// Stops the given lines before their next message or retry (they were paused on their own),
  /// and ends their retry waits at once.
  func linesPaused(_ lines: [String]) {
    state.withLock(announcingTo: self) { $0.pausedLines.formUnion(lines) }
    outbox.retryWaits.wakeAll()
  }

  /// Lets the given lines go on (they were resumed).
  func linesResumed(_ lines: [String]) {
    state.withLock(announcingTo: self) { $0.pausedLines.subtract(lines) }
  }

  /// Marks a line as lost and cancels its delivery; its task ends without acknowledging.
  func lose(_ line: String, fence: Int64, why: String) {
    let delivery = state.withLock(announcingTo: self) { state -> Task<Void, any Error>?? in
      guard let held = state.held[line], held.fence == fence, !held.lost else { return nil }
      state.held[line]?.lost = true
      return .some(held.delivery)
    }
    guard let delivery else { return }
    delivery?.cancel()
    logger.warning(
      "lost line: \(why)",
      metadata: ["worker": "\(id)", "partition": "\(Line.shown(line))", "fence": "\(fence)"]
    )
  }

  func isLive(_ line: String, fence: Int64) -> Bool {
    state.withLock(announcingTo: self) { state in
      guard let held = state.held[line], held.fence == fence else { return false }
      return !held.lost && ContinuousClock.now < held.deadline - settings.tick
    }
  }

  // MARK: Notifications

  /// How long one `LISTEN` session lasts before the worker listens again on a fresh
  /// connection.
  ///
  /// A session on a connection that died without a word (a cut network) hears nothing, and
  /// must not last for ever. Polling covers what a session misses.
  static var listenSession: Duration { .seconds(60) }

  private func listenLoop() async {
    let client = client
    let bell = bell
    while !Task.isCancelled {
      do {
        try await withDeadline(Self.listenSession) {
          try await client.withConnection { connection in
            try await connection.listen(on: PostgresSchema.channel) { notifications in
              // Something may have been appended while the listener was not there.
              bell.ring()
              for try await _ in notifications { bell.ring() }
            }
          }
        }
      } catch is QueryTimedOut {
        // The session's time is up: listen again at once.
        continue
      } catch {
        if Task.isCancelled { return }
        logger.debug(
          "listening stopped; polling until it is back",
          metadata: [
            "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
      }
      try? await Task.sleep(for: settings.pollInterval)
    }
  }

  // MARK: Delivering a line

  /// Why a line's task stops.
  enum Stop: Error { case lost, ending, paused }

  /// Delivers a line's messages in order while the lease holds, by the line runner
  /// (``LeasedLine``), then releases the line.
  ///
  /// - Parameters:
  ///   - line: The line.
  ///   - fence: Its lease's fence.
  ///   - batch: The messages taken with the lease (none if none was due).
  private func deliverLine(_ line: String, fence: Int64, batch: [ClaimedHead]) async {
    let end = await runner.run(
      LeasedLine(worker: self, line: line, fence: fence),
      taken: batch
    )
    // A line the last acknowledgement released, or one lost, is not released again.
    if end != .released, isLive(line, fence: fence) {
      do {
        try await release(line, fence: fence)
        logger.debug(
          "released line",
          metadata: ["worker": "\(id)", "partition": "\(Line.shown(line))", "fence": "\(fence)"]
        )
      } catch {
        logger.warning(
          "could not release a line; another worker takes it when its lease expires",
          metadata: [
            "worker": "\(id)", "partition": "\(Line.shown(line))",
            "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
      }
    }
    let idle = state.withLock(announcingTo: self) { state -> [CheckedContinuation<Void, Never>] in
      if state.held[line]?.fence == fence { state.held[line] = nil }
      guard state.held.isEmpty else { return [] }
      defer { state.idleWaiters = [:] }
      return Array(state.idleWaiters.values)
    }
    for waiter in idle { waiter.resume() }
    // A free slot, or a line with messages appended while it was being released.
    bell.ring()
  }

  /// Whether a line whose turn ended must make room for a line that waits.
  ///
  /// It must when this worker has no free slot and some line with a message due is held by no
  /// worker. A worker with a free slot takes such a line itself; giving a line up then would
  /// only move it.
  func othersWait() async -> Bool {
    let full = state.withLock(announcingTo: self) { $0.held.count >= settings.limit }
    guard full else { return false }
    do {
      return try await !oldestCandidates(limit: 1).isEmpty
    } catch {
      return false
    }
  }

  /// Whether the line's task must stop before it takes its next message, and why.
  func checkpoint(_ line: String, fence: Int64) -> Stop? {
    if Task.isCancelled { return .ending }
    let (ending, paused) = state.withLock(announcingTo: self) {
      ($0.ending || $0.draining, $0.paused || $0.pausedLines.contains(line))
    }
    if ending { return .ending }
    if paused { return .paused }
    if !isLive(line, fence: fence) { return .lost }
    return nil
  }

  /// Runs a delivery in a task of its own, which losing the line's lease or stopping cancels.
  func runHandler(
    line: String,
    fence: Int64,
    _ work: @escaping @Sendable () async throws -> Void
  ) async -> Result<Void, any Error> {
    let delivery = Task { try await work() }
    let cancelled = state.withLock(announcingTo: self) { state -> Bool in
      guard state.held[line]?.fence == fence else { return true }
      state.held[line]?.delivery = delivery
      return state.held[line]?.lost == true || state.ending
    }
    if cancelled { delivery.cancel() }
    let result = await delivery.result
    state.withLock(announcingTo: self) { state in
      if state.held[line]?.fence == fence { state.held[line]?.delivery = nil }
    }
    return result
  }

  /// Gives the line up without acknowledging: its lease is no longer certain (another worker
  /// may hold a higher fence), or the database refused the acknowledgement under the fence.
  func refused(_ line: String, fence: Int64) {
    count { $0.acknowledgementsRefused += 1 }
    lose(line, fence: fence, why: "its acknowledgement was refused (fence \(fence))")
  }
}

/// Wakes a waiting loop early: rung by notifications and freed slots.
final class Doorbell: Sendable {
  private struct Bell {
    var rung = false
    var waiter: CheckedContinuation<Void, Never>?
  }
  private let bell = OrderlyLock(Bell())

  func ring() {
    let waiter = bell.withLock(announcingTo: self) { bell in
      guard let waiter = bell.waiter else {
        bell.rung = true
        return CheckedContinuation<Void, Never>?.none
      }
      bell.waiter = nil
      return waiter
    }
    waiter?.resume()
  }

  /// Returns when the bell rings (or rang since the last wait), after `timeout`, or when the
  /// task is cancelled.
  ///
  /// One waiter at a time.
  func wait(upTo timeout: Duration) async {
    await withTaskGroup(of: Void.self) { group in
      group.addTask { await self.waitForRing() }
      group.addTask { try? await Task.sleep(for: timeout) }
      await group.next()
      group.cancelAll()
    }
  }

  private func waitForRing() async {
    await withTaskCancellationHandler {
      // resumed by: ring(), or the cancellation handler below (wait(upTo:) cancels it when its
      // timeout ends first).
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let now = bell.withLock(announcingTo: self) { bell -> Bool in
          if bell.rung || Task.isCancelled {
            bell.rung = false
            return true
          }
          bell.waiter = continuation
          return false
        }
        if now { continuation.resume() }
      }
    } onCancel: {
      let waiter = bell.withLock(announcingTo: self) { bell in
        defer { bell.waiter = nil }
        return bell.waiter
      }
      waiter?.resume()
    }
  }
}
#endif

#if Postgres
extension PostgresOutbox: DurableOutbox {}
#endif
