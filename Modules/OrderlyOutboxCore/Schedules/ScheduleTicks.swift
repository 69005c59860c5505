// When a recurring schedule ticks, and what it appends when it is looked at late: decisions in
// values, with no clock or store (issue "What every job queue has", item 2, groundwork).
package import Foundation

/// When a recurring schedule ticks: by a cron expression read in a time zone, or every fixed
/// interval from a start.
package enum ScheduleRule: Sendable, Equatable {
  /// The times a cron expression names, as wall-clock times in a time zone.
  case cron(CronExpression, TimeZone)
  /// `start`, `start + interval`, `start + 2 × interval`, and so on (no time zone: an
  /// interval is real time, whatever the clocks say).
  case every(Duration, from: Date)

  /// The first tick strictly after `instant`; `nil` if none comes (see
  /// ``CronExpression/next(after:in:)``).
  package func next(after instant: Date) -> Date? {
    switch self {
    case .cron(let expression, let zone):
      return expression.next(after: instant, in: zone)
    case .every(let interval, let start):
      let seconds = Self.seconds(interval)
      guard seconds > 0 else { return nil }
      guard instant >= start else { return start }
      let passed = (instant.timeIntervalSince(start) / seconds).rounded(.down) + 1
      let tick = start.addingTimeInterval(passed * seconds)
      // A fraction of a second rounded down in the division: the tick after is the next.
      return tick > instant ? tick : start.addingTimeInterval((passed + 1) * seconds)
    }
  }

  /// The latest tick at or before `instant` and after `floor`, found by walking on from
  /// `floor`; for a rule that ticks so often that a step stopped counting.
  func latest(atOrBefore instant: Date, after floor: Date) -> Date? {
    switch self {
    case .every(let interval, let start):
      let seconds = Self.seconds(interval)
      guard seconds > 0, instant >= start else { return nil }
      let tick = start.addingTimeInterval(
        (instant.timeIntervalSince(start) / seconds).rounded(.down) * seconds
      )
      return tick > floor ? tick : nil
    case .cron:
      var cursor = floor
      var found: Date?
      while let tick = next(after: cursor), tick <= instant {
        found = tick
        cursor = tick
      }
      return found
    }
  }

  /// A duration in seconds, attoseconds included.
  static func seconds(_ duration: Duration) -> Double {
    let parts = duration.components
    return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
  }
}

/// What a recurring schedule does with ticks that passed while no started outbox looked at it.
///
/// A tick is missed when every worker was down, or when it is looked at more than a minute
/// late; missed ticks are never appended in a burst. Ticks that pass while the schedule is paused are not missed: a resumed schedule goes
/// on from the next tick to come.
public enum MissedTicks: String, Sendable, Equatable, CaseIterable {
  /// Missed ticks are let go: the schedule goes on from the next tick to come.
  case skip = "skip"
  /// One message stands for every missed tick (the latest of them); then the schedule goes on.
  case catchUpOnce = "catch-up-once"
}

/// The decision when a schedule is looked at: which tick to append now, if any, and when to
/// look next.
package struct ScheduleTicks: Sendable, Equatable {
  /// When it ticks.
  package let rule: ScheduleRule
  /// What it does with missed ticks.
  package let missed: MissedTicks
  /// How late a tick may be looked at and still count as on time (a worker's poll interval,
  /// a slow database): a tick later than that was missed.
  package let lateness: Duration

  /// A schedule's rule and its policy for missed ticks.
  ///
  /// - Parameters:
  ///   - rule: When it ticks.
  ///   - missed: What it does with ticks that passed while nothing looked.
  ///   - lateness: How late a tick may be and still count as on time; a minute by default.
  package init(rule: ScheduleRule, missed: MissedTicks, lateness: Duration = .seconds(60)) {
    self.rule = rule
    self.missed = missed
    self.lateness = lateness
  }

  /// How many passed ticks a step counts at most (a schedule every second, down for a day,
  /// has 86,400).
  package static let countLimit = 100_000

  /// What to do when the schedule is looked at.
  package struct Step: Sendable, Equatable {
    /// The tick to append a message for now (its time is the message's tick), or `nil`.
    package var append: Date?
    /// How many ticks passed unappended and are let go (or stood for by ``append``); counted
    /// up to ``ScheduleTicks/countLimit``.
    package var missed: Int
    /// The tick after which to look again: the first one strictly after `now`, or `nil` if the
    /// rule has no more.
    package var next: Date?
  }

  /// The step at `now`, for a schedule whose last appended tick is `last` (`nil` when it has
  /// appended none: then ticks count from `since`, when it was created or resumed).
  ///
  /// Deterministic: two workers that look at the same schedule with the same `last` decide
  /// the same tick, so a store that appends a tick once (by a unique key of the schedule and
  /// the tick) appends it once across a fleet.
  ///
  /// - Parameters:
  ///   - last: The last tick appended, if any.
  ///   - since: When ticks start to count if none was appended.
  ///   - now: The time on the outbox's clock.
  /// - Returns: The tick to append, the ticks missed, and the next tick.
  package func step(last: Date?, since: Date, now: Date) -> Step {
    var cursor = last ?? since
    // The ticks in (last, now]: the decision needs only how many passed (counted up to
    // `countLimit`) and the latest of them.
    var latest: Date?
    var count = 0
    while count < Self.countLimit, let tick = rule.next(after: cursor), tick <= now {
      count += 1
      latest = tick
      cursor = tick
    }
    if count == Self.countLimit, let last = rule.latest(atOrBefore: now, after: cursor) {
      latest = last
    }
    let next = rule.next(after: max(cursor, now))
    guard let latest else { return Step(append: nil, missed: 0, next: next) }
    let onTime = now.timeIntervalSince(latest) <= ScheduleRule.seconds(lateness)
    switch (missed, onTime) {
    case (_, true):
      // The latest tick is due now; any before it were missed.
      return Step(append: latest, missed: count - 1, next: next)
    case (.skip, false):
      return Step(append: nil, missed: count, next: next)
    case (.catchUpOnce, false):
      return Step(append: latest, missed: count - 1, next: next)
    }
  }
}
