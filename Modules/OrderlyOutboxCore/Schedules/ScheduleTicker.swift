// The loop that appends recurring schedules' ticks while an outbox is started: written once, for
// every store, over ScheduleStore; what to append and when comes from ScheduleTicks.
package import Foundation
import OrderlyCore

/// Wall-clock time read on an outbox's clock.
///
/// The time when the outbox was created (whole milliseconds), advanced by what the clock
/// measured since. A test that drives the outbox's
/// clock by hand drives its schedules' ticks.
package struct WallTime: Sendable {
  /// The wall-clock time, in milliseconds since 1970, when the outbox was created.
  let anchor: Int64
  /// What the clock measured since.
  let elapsed: @Sendable () -> Duration
  /// Sleeps on the clock until a wall-clock time (milliseconds since 1970): a deadline fixed
  /// on the clock, so time that passes before the sleep begins is not added to it.
  package let sleepUntil: @Sendable (Int64) async throws -> Void

  /// Wall time on `clock`, from now.
  ///
  /// - Parameters:
  ///   - clock: The outbox's clock.
  ///   - now: The wall-clock time it starts from.
  package init(clock: any Clock<Duration>, now: Date = Date()) {
    self.init(opening: clock, now: now)
  }

  private init<C: Clock<Duration>>(opening clock: C, now: Date) {
    let start = clock.now
    let anchor = Int64((now.timeIntervalSince1970 * 1000).rounded(.down))
    self.anchor = anchor
    elapsed = { start.duration(to: clock.now) }
    sleepUntil = { target in
      try await clock.sleep(
        until: start.advanced(by: .milliseconds(target - anchor)),
        tolerance: nil
      )
    }
  }

  /// The time now, in whole milliseconds since 1970 (rounded down).
  package func milliseconds() -> Int64 {
    let parts = elapsed().components
    return anchor + parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
  }
}

/// Appends recurring schedules' ticks while an outbox is started.
///
/// Looks at the schedules when started, when one is set, paused, resumed or removed in this
/// process, at each next tick (a sleep on the outbox's clock), and every poll interval but at
/// most once a second (real time, for what other processes changed: one read of the schedules'
/// table, however often delivery polls). A look that fails is tried again a poll interval
/// later; the failure is kept for ``lastFailure``.
package final class ScheduleTicker<Message: Codable & Sendable>: Sendable {
  private struct State {
    var task: Task<Void, Never>?
    var rung = false
    var bell: CheckedContinuation<Void, Never>?
    var lastFailure: OutboxError?
  }

  /// The time ticks are read on.
  package let wall: WallTime
  private let codec: MessageCodec<Message>
  private let hub: OutboxEventHub
  private let state = OrderlyLock(State())

  /// A ticker for an outbox.
  ///
  /// - Parameters:
  ///   - clock: The outbox's clock.
  ///   - codec: How the outbox prepares messages (its `partition` closure).
  ///   - hub: Where ``OutboxEvent/ticked(id:sequence:schedule:tick:)`` goes.
  package init(clock: any Clock<Duration>, codec: MessageCodec<Message>, hub: OutboxEventHub) {
    self.wall = WallTime(clock: clock)
    self.codec = codec
    self.hub = hub
  }

  /// Why the last look at the schedules failed, or `nil` if it did not.
  package var lastFailure: OutboxError? {
    state.withLock(announcingTo: self) { $0.lastFailure }
  }

  /// Starts looking at `store`'s schedules, unless it does already.
  ///
  /// - Parameters:
  ///   - store: Where the schedules are kept.
  ///   - pollInterval: How often to look for other processes' changes (a second at least).
  ///   - report: Told when looks begin to fail (with the error) and when they succeed again
  ///     (with `nil`): the store logs it, so a ticker that makes no progress says so.
  package func start(
    _ store: any ScheduleStore<Message>,
    pollInterval: Duration,
    report: @escaping @Sendable (OutboxError?) -> Void = { _ in }
  ) {
    let poll = max(pollInterval, .seconds(1))
    state.withLock(announcingTo: self) { state in
      guard state.task == nil else { return }
      state.task = Task.detached { [self] in
        while !Task.isCancelled {
          let failedBefore = lastFailure != nil
          let next = await look(store)
          let failure = lastFailure
          if (failure != nil) != failedBefore { report(failure) }
          if Task.isCancelled { return }
          await sleep(untilTick: next, poll: poll)
        }
      }
    }
  }

  /// Stops looking, and waits for a look under way to end.
  package func stop() async {
    let task = state.withLock(announcingTo: self) { state in
      defer { state.task = nil }
      return state.task
    }
    task?.cancel()
    await task?.value
  }

  /// Makes the loop look again now: a schedule changed in this process.
  package func ring() {
    let bell = state.withLock(announcingTo: self) { state in
      defer { state.bell = nil }
      if state.bell == nil { state.rung = true }
      return state.bell
    }
    bell?.resume()
  }

  /// Looks at every schedule once: takes each due tick (or lets missed ones go).
  ///
  /// - Returns: The next tick of any schedule that is not paused (milliseconds since 1970), or
  ///   `nil` if none has one (or the look failed).
  func look(_ store: any ScheduleStore<Message>) async -> Int64? {
    do {
      let rows = try await store.readSchedules()
      var soonest: Int64?
      let now = wall.milliseconds()
      for row in rows where !row.paused {
        guard case .success(let plan) = row.plan() else { continue }
        let missed = MissedTicks(rawValue: row.missed) ?? .skip
        // Half a millisecond past the cursor: a tick at the cursor (stored rounded to the
        // millisecond) is never found again.
        let cursor = ScheduleRow.date(row.cursor).addingTimeInterval(0.0005)
        let step = ScheduleTicks(rule: plan.rule, missed: missed)
          .step(last: cursor, since: cursor, now: ScheduleRow.date(now))
        if let tick = step.append.map(ScheduleRow.milliseconds), tick > row.cursor {
          try await take(tick, of: row, store: store)
        } else if step.missed > 0,
          let latest = plan.rule.latest(atOrBefore: ScheduleRow.date(now), after: cursor)
        {
          // Missed ticks let go: the last of them taken without a message, so they are not
          // counted again on every look.
          _ = try await store.takeTick(
            named: row.name,
            rule: row.rule,
            tick: ScheduleRow.milliseconds(latest),
            appending: nil
          )
        }
        if let next = step.next.map(ScheduleRow.milliseconds) {
          soonest = min(soonest ?? next, next)
        }
      }
      state.withLock(announcingTo: self) { $0.lastFailure = nil }
      return soonest
    } catch {
      state.withLock(announcingTo: self) { $0.lastFailure = error }
      return nil
    }
  }

  /// Takes one tick of a schedule, with its message.
  private func take(_ tick: Int64, of row: ScheduleRow, store: any ScheduleStore<Message>)
    async throws(OutboxError)
  {
    // A message that no longer decodes (the type changed since it was set) is not appended:
    // `list()` says why the schedule does not tick.
    guard case .success(let message) = MessageCodec<Message>.decode(row.payload) else { return }
    var headers = StoredHeaders.decode(row.headers)
    headers["orderly-schedule"] = row.name
    headers["orderly-tick"] = Self.iso8601(tick)
    guard
      let prepared = try codec.prepare([message], partition: row.partition, headers: headers)
        .first
    else { return }
    let taken = try await store.takeTick(
      named: row.name,
      rule: row.rule,
      tick: tick,
      appending: prepared
    )
    if let appended = taken.appended {
      hub.emit(
        .ticked(
          id: appended.id,
          sequence: appended.sequence,
          schedule: row.name,
          tick: ScheduleRow.date(tick)
        )
      )
    }
  }

  /// A tick as `2026-12-07T09:00:00.000Z`.
  static func iso8601(_ milliseconds: Int64) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    return formatter.string(from: ScheduleRow.date(milliseconds))
  }

  /// Sleeps until the next tick (on the outbox's clock), the poll interval (real time: other
  /// processes' changes happen in real time, and tests that drive the outbox's clock see this
  /// ticker as a sleeper only while a schedule waits for a tick), a ring, or cancellation.
  private func sleep(untilTick next: Int64?, poll: Duration) async {
    let wall = self.wall
    await withTaskGroup(of: Void.self) { group in
      if let next { group.addTask { try? await wall.sleepUntil(next) } }
      // Real time on purpose (other processes change schedules in real time), and bounded:
      // a poll interval of a second or more, ended early by a ring, the next tick, or
      // cancellation (`stop()` cancels the loop and waits for it).
      group.addTask { try? await Task.sleep(for: poll) }
      group.addTask { await self.waitForRing() }
      await group.next()
      group.cancelAll()
    }
  }

  /// Returns when ``ring()`` is called (or was, since the last look), or on cancellation.
  private func waitForRing() async {
    await withTaskCancellationHandler {
      await withCheckedContinuation { (bell: CheckedContinuation<Void, Never>) in
        // Cancellation is checked under the lock `onCancel` takes: a cancel that came first
        // is seen here, one that comes later finds the bell hung.
        let now = state.withLock(announcingTo: self) { state -> Bool in
          if state.rung || Task.isCancelled {
            state.rung = false
            return true
          }
          state.bell = bell
          return false
        }
        if now { bell.resume() }
      }
    } onCancel: {
      let bell = state.withLock(announcingTo: self) { state in
        defer { state.bell = nil }
        return state.bell
      }
      bell?.resume()
    }
  }
}
