// How a PostgreSQL worker delivers a line it holds: the line runner on a leased line, the handler's
// task, and the line released after.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

extension FleetWorker {
  // MARK: Delivering a line

  /// Delivers a line's messages in order while the lease holds, by the line runner
  /// (``LeasedLine``), then releases the line.
  ///
  /// - Parameters:
  ///   - line: The line.
  ///   - fence: Its lease's fence.
  ///   - batch: The messages taken with the lease (none if none was due).
  func deliverLine(_ line: String, fence: Int64, batch: [ClaimedHead]) async {
    let end = await runner.run(
      LeasedLine(worker: self, line: line, fence: fence),
      taken: batch
    )
    // Charged a whole turn when taken (``take``), then as it delivered.
    state.withLock(announcingTo: self) { $0.ended(line) }
    if case .limited(let until) = end, isLive(line, fence: fence) {
      // Its rate limit is reached: the lease is kept, unrenewed, until the window ends, so no
      // worker takes the line before then (nor this one: the slot is free for other lines);
      // any worker takes it once the lease ends.
      do {
        try await park(line, fence: fence, until: until)
      } catch {
        logger.warning(
          "could not hold a rate-limited line until its window ends; releasing it",
          metadata: [
            "worker": "\(id)", "partition": "\(Line.shown(line))",
            "error": "\(outboxError(error, database: outbox.database))",
          ]
        )
        try? await release(line, fence: fence)
      }
    } else if end != .released, isLive(line, fence: fence) {
      // A line the last acknowledgement released, or one lost, is not released again.
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
  /// only move it. With fair shares it must also when another group, whose turn comes before
  /// the line's group's, had lines waiting at the last look: the slot goes to that group.
  func othersWait(besides line: String) async -> Bool {
    let (full, behind) = state.withLock(announcingTo: self) { state in
      (state.isFull(limit: settings.limit), state.othersGroupsFirst(besides: line))
    }
    if behind { return true }
    guard full else { return false }
    do {
      return try await !oldestCandidates(limit: 1).isEmpty
    } catch {
      return false
    }
  }

  /// Whether the line's task must stop before it takes its next message, and why.
  func checkpoint(_ line: String, fence: Int64) -> LineStop? {
    let cancelled = Task.isCancelled
    return state.withLock(announcingTo: self) { state in
      state.checkpoint(
        line,
        fence: fence,
        now: .now,
        margin: settings.tick,
        cancelled: cancelled
      )
    }
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

  /// What the worker does after the database's own statement refused an acknowledgement or a
  /// move to the dead letters: under a stale fence, or (never expected: a defect kept from
  /// committing, logged as an error) for messages that were not the line's first.
  ///
  /// The rule, the same on every store: a stale fence means another worker holds the line, so
  /// this one gives it up (counted in `acknowledgementsRefused` and
  /// `orderRefusals.staleFence`), and the next holder delivers the message again. An
  /// out-of-order refusal leaves this worker the line's holder: counted in
  /// `orderRefusals.outOfOrder` only, it keeps the line and delivers it again at once from its
  /// first message.
  ///
  /// - Returns: Whether the worker keeps the line (an out-of-order refusal).
  func refusedByStore(_ line: String, fence: Int64, outOfOrder: Bool) -> Bool {
    count { statistics in
      if outOfOrder {
        statistics.orderRefusals.outOfOrder += 1
      } else {
        statistics.acknowledgementsRefused += 1
        statistics.orderRefusals.staleFence += 1
      }
    }
    if outOfOrder {
      logger.error(
        "the database refused an acknowledgement that would have broken its key's order; nothing was recorded, and the key is delivered again from its first message",
        metadata: ["worker": "\(id)", "partition": "\(Line.shown(line))", "fence": "\(fence)"]
      )
      return true
    }
    lose(line, fence: fence, why: "its acknowledgement was refused (fence \(fence))")
    return false
  }
}
#endif
