// Starting and stopping a PostgreSQL worker of the fleet, and its settings.
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
    try start(
      FleetDeliveryOptions(
        limit: limit,
        retry: retry,
        onDeadLetter: onDeadLetter,
        lease: lease,
        pollInterval: pollInterval
      ),
      deliver: .each(deliver)
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
    try start(
      FleetDeliveryOptions(
        limit: limit,
        batchSize: batch,
        retry: retry,
        onDeadLetter: onDeadLetter,
        lease: lease,
        pollInterval: pollInterval
      ),
      deliver: .batches(deliver)
    )
  }

  /// Starts delivering as one worker of the fleet with options as one value: what
  /// ``start(limit:retry:onDeadLetter:lease:pollInterval:deliver:)`` (for
  /// `DeliveryHandler.each`) and
  /// ``start(limit:batchesOf:retry:onDeadLetter:lease:pollInterval:deliver:)`` (for
  /// `DeliveryHandler.batches`, with `options.batchSize`) do, and what code written for any
  /// store calls (`DurableOutbox`, `OutboxService`).
  ///
  /// - Parameters:
  ///   - options: The options.
  ///   - deliver: The handler.
  /// - Throws: As the two methods above; `OutboxError.invalidOption(_:)` for a batch size
  ///   above 1 with an `.each` handler.
  public func start(
    _ options: FleetDeliveryOptions,
    deliver: DeliveryHandler<Message>
  ) throws(OutboxError) {
    try options.check(for: deliver)
    guard options.lease >= .milliseconds(400) else {
      throw .invalidOption("lease must be 400 milliseconds or longer (got \(options.lease))")
    }
    try begin(FleetSettings(options: options, handler: deliver))
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
    // Recurring schedules tick on every worker: a tick is taken once across the fleet, by the
    // first transaction to move the schedule's last tick past it.
    let logger = self.logger
    scheduleTicker.start(self, pollInterval: settings.options.pollInterval) { failure in
      if let failure {
        logger.error(
          "recurring schedules: looking at them failed; trying again within a poll interval",
          metadata: ["orderly.reason": "\(failure)"]
        )
      } else {
        logger.notice("recurring schedules: looking at them works again")
      }
    }
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
    await scheduleTicker.stop()
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
  /// The options `start` was given.
  let options: FleetDeliveryOptions
  /// The handler.
  let handler: DeliveryHandler<Message>
  /// How long the worker may have work and make no progress before it says it is stalled
  /// (see ``StallWatch``): two leases unless ``PostgresOutbox/stallAfter`` says otherwise.
  var stallAfter: Duration

  init(options: FleetDeliveryOptions, handler: DeliveryHandler<Message>) {
    self.options = options
    self.handler = handler
    self.stallAfter = options.lease * 2
  }

  var limit: Int { options.limit }
  var retry: RetryPolicy { options.retry }
  var onDeadLetter: DeadLetterPolicy { options.onDeadLetter }
  var lease: Duration { options.lease }
  var pollInterval: Duration { options.pollInterval }
  /// Up to how many consecutive messages of a line one delivery gets (1 for `.each`).
  var batch: Int { options.batchSize }

  /// How often leases are renewed and checked: a quarter of the lease.
  var tick: Duration { lease / 4 }
  /// How long a turn lasts at most, besides its 16 deliveries (see `LineTurn`).
  ///
  /// Once a turn is spent, a worker with no free slot gives the line up to the line that waits
  /// longest (maybe this one again). A quarter of the lease, so that a line whose holder died
  /// waits for no more than lines that wait for a free slot.
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

extension PostgresOutbox: DurableOutbox {}
#endif
