// The cron expression a recurring schedule will tick by: read, refused, and asked for its next
// time, with no clock and no store.
import Foundation
import Testing

@testable import OrderlyOutboxCore

@Suite("A cron expression: fields, refusals, and the next time in a time zone")
struct CronExpressionTests {
  private let utc = TimeZone(identifier: "UTC") ?? .current
  private let berlin = TimeZone(identifier: "Europe/Berlin") ?? .current

  /// A wall-clock time in `zone`.
  private func at(
    _ year: Int,
    _ month: Int,
    _ day: Int,
    _ hour: Int,
    _ minute: Int,
    in zone: TimeZone
  ) -> Date {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = zone
    let components = DateComponents(
      year: year,
      month: month,
      day: day,
      hour: hour,
      minute: minute
    )
    return calendar.date(from: components) ?? .distantPast
  }

  /// The next `count` times after `start`.
  private func times(_ text: String, after start: Date, count: Int, in zone: TimeZone) throws
    -> [Date]
  {
    let expression = try CronExpression(text)
    var found: [Date] = []
    var last = start
    for _ in 0..<count {
      guard let next = expression.next(after: last, in: zone) else { break }
      found.append(next)
      last = next
    }
    return found
  }

  @Test(
    "every field form: a number, a range, a step, a list, names; the next time is strictly after"
  )
  func forms() throws {
    let start = at(2026, 12, 7, 10, 0, in: utc)
    let everyMinute = try times("* * * * *", after: start, count: 2, in: utc)
    #expect(everyMinute == [at(2026, 12, 7, 10, 1, in: utc), at(2026, 12, 7, 10, 2, in: utc)])
    let quarters = try times("*/15 * * * *", after: start, count: 3, in: utc)
    #expect(
      quarters == [
        at(2026, 12, 7, 10, 15, in: utc), at(2026, 12, 7, 10, 30, in: utc),
        at(2026, 12, 7, 10, 45, in: utc),
      ]
    )
    let workdays = try times("30 9 * * mon-FRI", after: start, count: 3, in: utc)
    // 2026-12-07 is a Monday: 9:30 has passed, so Tuesday, Wednesday, Thursday.
    #expect(
      workdays == [
        at(2026, 12, 8, 9, 30, in: utc), at(2026, 12, 9, 9, 30, in: utc),
        at(2026, 12, 10, 9, 30, in: utc),
      ]
    )
    let list = try times("0 8,12-14/2 * * *", after: start, count: 3, in: utc)
    #expect(
      list == [
        at(2026, 12, 7, 12, 0, in: utc), at(2026, 12, 7, 14, 0, in: utc),
        at(2026, 12, 8, 8, 0, in: utc),
      ]
    )
    let fromFifty = try times("50/5 10 * * *", after: start, count: 3, in: utc)
    #expect(
      fromFifty == [
        at(2026, 12, 7, 10, 50, in: utc), at(2026, 12, 7, 10, 55, in: utc),
        at(2026, 12, 8, 10, 50, in: utc),
      ]
    )
    let sundays = try times("0 0 * * 7", after: start, count: 1, in: utc)
    let sundaysAsZero = try times("0 0 * * 0", after: start, count: 1, in: utc)
    #expect(sundays == [at(2026, 12, 13, 0, 0, in: utc)] && sundays == sundaysAsZero)
    let onTheTick = try CronExpression("0 10 * * *").next(after: start, in: utc)
    #expect(onTheTick == at(2026, 12, 8, 10, 0, in: utc), "a time equal to the start is not next")
  }

  @Test("months and the two day fields: either day field matches when both are restricted")
  func days() throws {
    let start = at(2026, 12, 7, 10, 0, in: utc)
    // The 1st of each month, and every Friday.
    let either = try times("0 9 1 * FRI", after: start, count: 4, in: utc)
    #expect(
      either == [
        at(2026, 12, 11, 9, 0, in: utc), at(2026, 12, 18, 9, 0, in: utc),
        at(2026, 12, 25, 9, 0, in: utc), at(2027, 1, 1, 9, 0, in: utc),
      ]
    )
    let monthly = try times("0 0 31 * *", after: start, count: 3, in: utc)
    #expect(
      monthly == [
        at(2026, 12, 31, 0, 0, in: utc), at(2027, 1, 31, 0, 0, in: utc),
        at(2027, 3, 31, 0, 0, in: utc),
      ],
      "a month without a 31st is passed over"
    )
    let leapDay = try times("0 0 29 feb *", after: start, count: 2, in: utc)
    #expect(leapDay == [at(2028, 2, 29, 0, 0, in: utc), at(2032, 2, 29, 0, 0, in: utc)])
    let newYear = try times("0 0 1 1 *", after: start, count: 1, in: utc)
    #expect(newYear == [at(2027, 1, 1, 0, 0, in: utc)])
  }

  @Test("in a time zone: a time the clocks skip is passed over; one they repeat is named once")
  func daylightSaving() throws {
    // Berlin: 2027-03-28 02:00 becomes 03:00; 2027-10-31 03:00 becomes 02:00 again.
    let march = try times(
      "30 2 * * *",
      after: at(2027, 3, 27, 12, 0, in: berlin),
      count: 2,
      in: berlin
    )
    #expect(march == [at(2027, 3, 29, 2, 30, in: berlin), at(2027, 3, 30, 2, 30, in: berlin)])
    let october = try times(
      "30 2 * * *",
      after: at(2027, 10, 30, 12, 0, in: berlin),
      count: 2,
      in: berlin
    )
    let gap = october.count == 2 ? october[1].timeIntervalSince(october[0]) : 0
    #expect(october.first == at(2027, 10, 31, 2, 30, in: berlin))
    #expect(gap == 25 * 3600, "the repeated 2:30 is named once: the next is a day and an hour on")
    let nine = try times(
      "0 9 * * *",
      after: at(2027, 3, 27, 6, 0, in: berlin),
      count: 2,
      in: berlin
    )
    #expect(nine[1].timeIntervalSince(nine[0]) == 23 * 3600, "9:00 Berlin time, across the change")
  }

  @Test(
    "refused, saying which field and what is wrong in it",
    arguments: [
      ("0 9 * *", "has 4 fields; it needs 5"),
      ("0 9 * * * *", "has 6 fields; it needs 5"),
      ("60 * * * *", "minute field 60 is out of range 0-59"),
      ("0 24 * * *", "hour field 24 is out of range 0-23"),
      ("0 0 0 * *", "day-of-month field 0 is out of range 1-31"),
      ("0 0 * 13 *", "month field 13 is out of range 1-12"),
      ("0 0 * * 8", "day-of-week field 8 is out of range 0-7"),
      ("0 0 * * FUN", "day-of-week field \"FUN\" is not a number 0-7 or a name SUN-SAT"),
      ("x * * * *", "minute field \"x\" is not a number 0-59"),
      ("*/0 * * * *", "a step must be 1 or more"),
      ("5-1 * * * *", "the range 5-1 runs backwards"),
      ("1,,2 * * * *", "has an empty item in its list"),
      ("0 0 30 2 *", "names no day: day-of-month 30 never comes in month 2"),
    ]
  )
  func refused(text: String, words: String) {
    let refusal = Self.refusal(text)
    #expect(refusal?.contains(words) == true, "\(refusal ?? "accepted")")
    #expect(refusal?.contains(text) == true, "the refusal quotes the expression")
  }

  /// What reading `text` throws, in words; `nil` if it is read.
  private static func refusal(_ text: String) -> String? {
    do {
      _ = try CronExpression(text)
      return nil
    } catch {
      return "\(error)"
    }
  }

  @Test("the weekday and month lengths the search uses, against the calendar")
  func calendarArithmetic() {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = utc
    for year in [1900, 2000, 2024, 2026, 2100] {
      for month in 1...12 {
        let first = at(year, month, 1, 12, 0, in: utc)
        let weekday = calendar.component(.weekday, from: first) - 1
        #expect(CronExpression.weekday(year: year, month: month, day: 1) == weekday)
        let length = calendar.range(of: .day, in: .month, for: first)?.count
        #expect(CronExpression.daysIn(month, of: year) == length)
      }
    }
  }
}
