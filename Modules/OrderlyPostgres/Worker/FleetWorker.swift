// A PostgreSQL worker: its state, its loops begun and ended, and the deadline and stall watch every
// wait of it runs under.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

/// One start-to-stop run of delivery: the loop that takes lines, the loop that renews their
/// leases, the listener for notifications, the watch on the messages table's statistics, and
/// one task per line held.
final class FleetWorker<Message: Codable & Sendable>: Sendable {
  let outbox: PostgresOutbox<Message>
  let settings: FleetSettings<Message>
  let id: String
  /// The loop each held line runs.
  let runner: LineRunner<Message>
  let bell = Doorbell()
  let state: OrderlyLock<WorkerState>
  /// Whether this worker makes progress (see ``StallWatch``), checked by the watch loop.
  let stall: OrderlyLock<StallWatch>

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
    self.runner = LineRunner(
      rule: rule,
      options: settings.options,
      handler: settings.handler,
      onBadCount: { error, batch in
        logger.warning(
          "a batch handler threw BatchDeliveryError with a count outside its batch; counted as a failure of the batch's first message",
          metadata: [
            "delivered": "\(error.delivered)", "batch": "\(batch)", "error": "\(error.error)",
          ]
        )
      }
    )
    self.id = "\(ProcessInfo.processInfo.hostName)/\(getpid())/\(UUID().uuidString.prefix(8))"
    self.state = OrderlyLock(
      WorkerState(paused: paused, fairShares: settings.options.fairShares)
    )
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
    state.withLock(announcingTo: self) { $0.keysHeld }
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
    let audits = settings.options.audit.isOn
    var loops = [
      Task {
        // Said before the first line is taken, so a delivery means the check has been made.
        await self.checkPlanCacheMode()
        // The trail begins before the first line is taken: what is appended from now on is
        // checked.
        if audits { await self.beginAudit() }
        await self.claimLoop()
      },
      Task { await self.renewLoop() },
      Task { await self.watchLoop() },
      Task { await self.listenLoop() },
      Task { await self.statisticsLoop() },
    ]
    if audits { loops.append(Task { await self.auditLoop() }) }
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
          UPDATE \(Table.lease) SET owner = NULL, expires_at = now()
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

  /// Says once, as the worker starts, when its connections plan prepared statements for their
  /// parameters: `plan_cache_mode` other than `force_generic_plan` (see
  /// `PostgresClient.Configuration.init(orderlyURL:)`), where a connection can go over to
  /// planning every acknowledgement again after the tables' first `ANALYZE`.
  func checkPlanCacheMode() async {
    let (client, logger) = (client, logger)
    do {
      let mode = try await bounded("reading plan_cache_mode") {
        try await client.checkedQuery("SHOW plan_cache_mode", logger: logger) { rows in
          var mode = ""
          for try await value in rows.decode(String.self) { mode = value }
          return mode
        }
      }
      guard mode != "force_generic_plan" else { return }
      logger.notice(
        "the worker's connections may plan every acknowledgement again (plan_cache_mode is not force_generic_plan), which costs more than running it under load: configure the client with PostgresClient.Configuration(orderlyURL:), add the startup parameter plan_cache_mode=force_generic_plan, or ALTER ROLE ... SET plan_cache_mode = force_generic_plan",
        metadata: ["worker": "\(id)", "plan_cache_mode": "\(mode)"]
      )
    } catch {
      // Not a failure of delivery: the other loops report a server that does not answer.
      logger.debug(
        "could not read plan_cache_mode",
        metadata: ["worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))"]
      )
    }
  }

  /// With the audit trail on: marks it begun (once for the database), before the worker takes
  /// its first line.
  func beginAudit() async {
    let (client, logger) = (client, logger)
    do {
      try await bounded("beginning the audit trail") {
        try await PostgresAudit.markBegun(client, logger: logger)
      }
    } catch {
      logger.error(
        "could not begin the audit trail: its tables are missing (open the outbox with creatingTables: true once) or the database refused; attempts are not recorded",
        metadata: ["worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))"]
      )
    }
  }

  /// With the audit trail on: prunes rows past the retention when `AuditPruning` says a prune
  /// is due (every 10 minutes, and at once again while a prune comes back full).
  func auditLoop() async {
    let (client, logger) = (client, logger)
    let retention = settings.options.audit.retentionSeconds
    var pruning = AuditPruning()
    while !Task.isCancelled {
      // Rows age in the database's real time, not on the outbox's clock.
      if pruning.begin(at: Date(), retentionSeconds: retention) != nil {
        do {
          let removed = try await bounded("pruning the audit trail") {
            try await PostgresAudit.pruneRows(client, retentionSeconds: retention, logger: logger)
          }
          pruning.finished(removed: removed)
        } catch {
          pruning.finished(removed: 0)
          logger.warning(
            "could not prune the audit trail; trying again in 10 minutes",
            metadata: [
              "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
            ]
          )
        }
      }
      let wait = pruning.wait(at: Date())
      // Safe as library code: a housekeeping period on real time (rows age in the database's
      // real time, not on the outbox's clock, so no injected clock applies); nothing waits on
      // it, it ends at once when end() cancels the loop, and each prune is bounded above.
      if wait > .zero { try? await Task.sleep(for: wait) }
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
}
#endif
