// A recurring schedule's decisions: when it ticks and what it appends when looked at late, on
// times given by the test (no clock, no store).
import Foundation
import Testing

@testable import OrderlyOutboxCore

@Suite("A schedule's ticks: on time, missed, skipped or caught up once")
struct ScheduleTicksTests {
  private let start = Date(timeIntervalSince1970: 1_800_000_000)

  private func minutes(_ count: Double) -> Date { start.addingTimeInterval(count * 60) }

  @Test("an interval ticks from its start; the next tick is strictly after the instant")
  func interval() {
    let rule = ScheduleRule.every(.seconds(600), from: start)
    #expect(rule.next(after: start.addingTimeInterval(-1)) == start)
    #expect(rule.next(after: start) == minutes(10))
    #expect(rule.next(after: minutes(25)) == minutes(30))
    #expect(ScheduleRule.every(.zero, from: start).next(after: start) == nil)
    // A tenth of a second, which a Double cannot hold: each next tick is still strictly later.
    let tenths = ScheduleRule.every(.milliseconds(100), from: start)
    var cursor = start
    var later = 0
    for _ in 0..<1_000 {
      guard let tick = tenths.next(after: cursor) else { break }
      if tick > cursor { later += 1 }
      cursor = tick
    }
    #expect(later == 1_000)
    #expect(abs(cursor.timeIntervalSince(start) - 100) < 0.001)
  }

  @Test("looked at on time: the tick is appended, none missed, and the next is the one after")
  func onTime() {
    let ticks = ScheduleTicks(
      rule: .every(.seconds(600), from: start),
      missed: .skip,
      lateness: .seconds(30)
    )
    let early = ticks.step(last: nil, since: start, now: minutes(5))
    #expect(early == .init(append: nil, missed: 0, next: minutes(10)))
    let due = ticks.step(last: nil, since: start, now: minutes(10).addingTimeInterval(20))
    #expect(due == .init(append: minutes(10), missed: 0, next: minutes(20)))
    let again = ticks.step(last: minutes(10), since: start, now: minutes(10).addingTimeInterval(25))
    #expect(again == .init(append: nil, missed: 0, next: minutes(20)), "a tick is appended once")
  }

  @Test("missed ticks: skip lets them go; catch up once appends the latest for all of them")
  func missed() {
    let rule = ScheduleRule.every(.seconds(600), from: start)
    // Last appended at 10; looked at again at 55: ticks 20, 30, 40 and 50 passed.
    let skip = ScheduleTicks(rule: rule, missed: .skip, lateness: .seconds(60))
    let skipped = skip.step(last: minutes(10), since: start, now: minutes(55))
    #expect(skipped == .init(append: nil, missed: 4, next: minutes(60)))
    let catchUp = ScheduleTicks(rule: rule, missed: .catchUpOnce, lateness: .seconds(60))
    let caught = catchUp.step(last: minutes(10), since: start, now: minutes(55))
    #expect(caught == .init(append: minutes(50), missed: 3, next: minutes(60)))
    // Looked at just after a tick: that tick is on time under either policy; those before it
    // were missed.
    let justAfter = skip.step(
      last: minutes(10),
      since: start,
      now: minutes(50).addingTimeInterval(10)
    )
    #expect(justAfter == .init(append: minutes(50), missed: 3, next: minutes(60)))
  }

  @Test("a cron rule decides the same way, on wall-clock ticks in its time zone")
  func cron() throws {
    let utc = try #require(TimeZone(identifier: "UTC"))
    let hourly = ScheduleTicks(
      rule: .cron(try CronExpression("0 * * * *"), utc),
      missed: .catchUpOnce
    )
    let midnight = Date(timeIntervalSince1970: 1_798_761_600)  // 2027-01-01 00:00 UTC
    let hours = { (count: Double) in midnight.addingTimeInterval(count * 3600) }
    let step = hourly.step(last: hours(1), since: midnight, now: hours(5).addingTimeInterval(900))
    #expect(step == .init(append: hours(5), missed: 3, next: hours(6)))
  }

  @Test("two workers that look with the same last tick decide the same tick")
  func deterministic() {
    let ticks = ScheduleTicks(rule: .every(.seconds(60), from: start), missed: .catchUpOnce)
    let one = ticks.step(last: minutes(3), since: start, now: minutes(7).addingTimeInterval(5))
    let other = ticks.step(last: minutes(3), since: start, now: minutes(7).addingTimeInterval(40))
    #expect(one.append == other.append && one.append == minutes(7))
  }

  @Test("a schedule not looked at for longer than the count limit still finds its latest tick")
  func longAbsence() {
    let ticks = ScheduleTicks(rule: .every(.seconds(1), from: start), missed: .catchUpOnce)
    let now = start.addingTimeInterval(200_000.5)
    let step = ticks.step(last: nil, since: start, now: now)
    #expect(step.append == start.addingTimeInterval(200_000))
    #expect(step.missed == ScheduleTicks.countLimit - 1)
    #expect(step.next == start.addingTimeInterval(200_001))
  }
}
