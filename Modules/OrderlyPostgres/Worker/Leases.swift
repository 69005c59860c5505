// How a PostgreSQL worker keeps its lines: renewing their leases, watching for progress, and losing
// a line it can no longer be sure of.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

extension FleetWorker {
  // MARK: Keeping lines

  func renewLoop() async {
    while !Task.isCancelled {
      // Safe as library code: the renewal period, on real time as the leases it keeps (the
      // database counts them in real time); cancelled by end().
      try? await Task.sleep(for: settings.tick)
      if Task.isCancelled { return }
      await renew()
    }
  }

  /// Renews every lease held, and gives up (cancelling its delivery) every line whose lease was
  /// taken by another worker or is no longer certain.
  private func renew() async {
    let held = state.withLock(announcingTo: self) { $0.renewable }
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
            UPDATE \(Table.lease)
            SET expires_at = now() + interval '1 millisecond' * \(leaseMilliseconds)
            WHERE owner = \(id) AND line = ANY(\(lines)) AND expires_at > now()
            RETURNING line, fence, paused
            """,
            logger: logger
          ) { rows in
            var renewed: [String: Int64] = [:]
            var pausedNow: [String] = []
            for try await row in rows {
              let row = NamedColumns(row)
              let line: String = try row("line")
              renewed[line] = try row("fence")
              if try row("paused", as: Bool.self) { pausedNow.append(line) }
            }
            paused.withLock { [pausedNow] in $0 = pausedNow }
            return renewed
          }
        }
        // A line paused by another process: its retry wait ends, and it stops.
        let pausedNow = paused.withLock { $0 }
        if !pausedNow.isEmpty { linesPaused(pausedNow) }
        let notRenewed = state.withLock(announcingTo: self) { state in
          state.applyRenewal(sent: held, renewed: renewed, sentAt: sent, lease: settings.lease)
        }
        for (line, fence) in notRenewed {
          count { $0.leaseRenewalsFailed += 1 }
          lose(line, fence: fence, why: "another worker took it, or it expired")
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
  func watchLoop() async {
    while !Task.isCancelled {
      // Safe as library code: how often the stall watch looks, on real time as the leases it
      // measures against; cancelled by end().
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
    let (keysHeld, taking) = state.withLock(announcingTo: self) { ($0.keysHeld, $0.isTaking) }
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
      state.lateLines(now: now, margin: settings.tick)
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
    let delivery = state.withLock(announcingTo: self) { $0.lose(line, fence: fence) }
    guard let delivery else { return }
    delivery?.cancel()
    logger.warning(
      "lost line: \(why)",
      metadata: ["worker": "\(id)", "partition": "\(Line.shown(line))", "fence": "\(fence)"]
    )
  }

  func isLive(_ line: String, fence: Int64) -> Bool {
    state.withLock(announcingTo: self) { state in
      state.isLive(line, fence: fence, now: .now, margin: settings.tick)
    }
  }
}
#endif
