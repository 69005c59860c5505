// A 5-field cron expression and the wall-clock times it names: the decision under recurring
// schedules (issue "What every job queue has"), a value with no clock, store or I/O.
package import Foundation

/// A 5-field cron expression (`minute hour day-of-month month day-of-week`), read once and
/// asked for the next time it names after a given instant, in a given time zone.
///
/// Each field is `*`, a number, a range `a-b`, a step `*/n`, `a-b/n` or `a/n` (from `a` to the
/// field's end), or a list of those separated by commas. Months may be written `JAN`-`DEC` and
/// days of the week `SUN`-`SAT` (either case); a day of the week is 0-7, Sunday being 0 and 7.
/// As in every cron since Vixie's, when both day fields are restricted a day matches if
/// *either* does (`0 9 1 * MON` is the 1st of each month and every Monday); when one is `*`,
/// the other alone decides.
///
/// Times are wall-clock times in the time zone given to ``next(after:in:)``: a time that does
/// not exist on a day the clocks go forward is skipped, and a time that comes twice on a day
/// they go back is named once, the first time.
package struct CronExpression: Sendable, Equatable, CustomStringConvertible {
  /// The expression as it was written, trimmed.
  package let description: String
  let minutes: Set<Int>
  let hours: Set<Int>
  let days: Set<Int>
  let months: Set<Int>
  /// 0 (Sunday) to 6; a 7 is read as 0.
  let weekdays: Set<Int>
  let daysRestricted: Bool
  let weekdaysRestricted: Bool

  /// What is wrong with an expression, in words that say where and what to write instead.
  package struct Invalid: Error, Equatable, CustomStringConvertible {
    /// The expression, and what is wrong in it.
    package let description: String
  }

  /// The fields, in order, with their ranges and names.
  private static let fields: [(name: String, range: ClosedRange<Int>, names: [String])] = [
    ("minute", 0...59, []),
    ("hour", 0...23, []),
    ("day-of-month", 1...31, []),
    (
      "month", 1...12,
      ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]
    ),
    ("day-of-week", 0...7, ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"]),
  ]

  /// Reads an expression.
  ///
  /// - Parameter text: Five fields separated by spaces or tabs.
  /// - Throws: ``Invalid`` naming the field and the part of it that is wrong (a value out of
  ///   its range, a range that runs backwards, a step below 1, a word that is not a number or
  ///   a name, a field count other than 5), or saying that the expression names no day at all
  ///   (`0 0 30 2 *`).
  package init(_ text: String) throws(Invalid) {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    description = trimmed
    let parts = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
    guard parts.count == 5 else {
      throw Invalid(
        description:
          "cron expression \"\(trimmed)\" has \(parts.count) field\(parts.count == 1 ? "" : "s"); "
          + "it needs 5: minute hour day-of-month month day-of-week (\"0 9 * * MON-FRI\")"
      )
    }
    var sets: [Set<Int>] = []
    for (index, part) in parts.enumerated() {
      sets.append(try Self.read(part, field: Self.fields[index], in: trimmed))
    }
    minutes = sets[0]
    hours = sets[1]
    days = sets[2]
    months = sets[3]
    weekdays = Set(sets[4].map { $0 == 7 ? 0 : $0 })
    daysRestricted = parts[2] != "*"
    weekdaysRestricted = parts[4] != "*"
    // Only the day of the month alone can rule out every day: 30 or 31 in February, say.
    let longest = months.map { Self.longestMonth[$0 - 1] }.max() ?? 31
    if daysRestricted, !weekdaysRestricted, (days.min() ?? 1) > longest {
      throw Invalid(
        description:
          "cron expression \"\(trimmed)\" names no day: day-of-month \(parts[2]) never comes in "
          + "month \(parts[3])"
      )
    }
  }

  /// The most days each month has (February in a leap year).
  private static let longestMonth = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

  /// One field's values.
  private static func read(
    _ part: String,
    field: (name: String, range: ClosedRange<Int>, names: [String]),
    in expression: String
  ) throws(Invalid) -> Set<Int> {
    func invalid(_ what: String) -> Invalid {
      Invalid(description: "cron expression \"\(expression)\": \(field.name) field \(what)")
    }
    func number(_ word: Substring) throws(Invalid) -> Int {
      if let value = Int(word) {
        guard field.range.contains(value) else {
          throw invalid(
            "\(value) is out of range \(field.range.lowerBound)-\(field.range.upperBound)"
          )
        }
        return value
      }
      if let index = field.names.firstIndex(of: word.uppercased()) {
        return field.range.lowerBound + index
      }
      let names =
        field.names.isEmpty
        ? "" : " or a name \(field.names.first ?? "")-\(field.names.last ?? "")"
      throw invalid(
        "\"\(word)\" is not a number \(field.range.lowerBound)-\(field.range.upperBound)\(names)"
      )
    }
    var values = Set<Int>()
    for item in part.split(separator: ",", omittingEmptySubsequences: false) {
      guard !item.isEmpty else { throw invalid("\"\(part)\" has an empty item in its list") }
      let pieces = item.split(separator: "/", omittingEmptySubsequences: false)
      guard pieces.count <= 2 else { throw invalid("\"\(item)\" has more than one step") }
      var step = 1
      if pieces.count == 2 {
        guard let given = Int(pieces[1]) else {
          throw invalid("\"\(item)\": the step \"\(pieces[1])\" is not a number")
        }
        guard given >= 1 else { throw invalid("\"\(item)\": a step must be 1 or more") }
        step = given
      }
      let span = pieces[0]
      var low: Int
      var high: Int
      if span == "*" {
        (low, high) = (field.range.lowerBound, field.range.upperBound)
      } else if let dash = span.firstIndex(of: "-") {
        low = try number(span[..<dash])
        high = try number(span[span.index(after: dash)...])
        guard low <= high else {
          throw invalid("\"\(item)\": the range \(low)-\(high) runs backwards")
        }
      } else {
        low = try number(span)
        // `a/n` runs from `a` to the field's end.
        high = pieces.count == 2 ? field.range.upperBound : low
      }
      values.formUnion(stride(from: low, through: high, by: step))
    }
    return values
  }

  /// The first wall-clock time the expression names strictly after `instant`, in `timeZone`.
  ///
  /// - Parameters:
  ///   - instant: The time to look after (the last tick, or now).
  ///   - timeZone: Where the fields are read: `0 9 * * *` is 9:00 there.
  /// - Returns: The time, or `nil` if none comes within 8 years (an expression such as
  ///   `0 0 29 2 *` comes at least every 8).
  package func next(after instant: Date, in timeZone: TimeZone) -> Date? {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = timeZone
    let start = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: instant)
    guard var year = start.year, var month = start.month, var day = start.day,
      var hour = start.hour, var minute = start.minute
    else { return nil }
    minute += 1
    let lastYear = year + 8
    while year <= lastYear {
      if minute > 59 { (minute, hour) = (0, hour + 1) }
      if hour > 23 { (hour, day) = (0, day + 1) }
      if month > 12 { (month, year) = (1, year + 1) }
      if day > Self.daysIn(month, of: year) {
        (day, month) = (1, month + 1)
        if month > 12 { (month, year) = (1, year + 1) }
      }
      guard months.contains(month) else {
        (minute, hour, day, month) = (0, 0, 1, month + 1)
        continue
      }
      guard matchesDay(year: year, month: month, day: day) else {
        (minute, hour, day) = (0, 0, day + 1)
        continue
      }
      guard hours.contains(hour) else {
        (minute, hour) = (0, hour + 1)
        continue
      }
      guard minutes.contains(minute) else {
        minute += 1
        continue
      }
      let wall = DateComponents(year: year, month: month, day: day, hour: hour, minute: minute)
      if let date = calendar.date(from: wall), date > instant {
        let back = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: date)
        // A time the clocks skip comes back as another: it does not exist that day.
        if back.year == year, back.month == month, back.day == day, back.hour == hour,
          back.minute == minute
        {
          return date
        }
      }
      minute += 1
    }
    return nil
  }

  /// Whether a day matches the two day fields (either, when both are restricted).
  private func matchesDay(year: Int, month: Int, day: Int) -> Bool {
    let byDate = days.contains(day)
    let byWeekday = weekdays.contains(Self.weekday(year: year, month: month, day: day))
    switch (daysRestricted, weekdaysRestricted) {
    case (true, true): return byDate || byWeekday
    case (true, false): return byDate
    case (false, true): return byWeekday
    case (false, false): return true
    }
  }

  /// 0 (Sunday) to 6, for a date of the proleptic Gregorian calendar (Sakamoto's method).
  static func weekday(year: Int, month: Int, day: Int) -> Int {
    let offsets = [0, 3, 2, 5, 0, 3, 5, 1, 4, 6, 2, 4]
    let y = month < 3 ? year - 1 : year
    return (y + y / 4 - y / 100 + y / 400 + offsets[month - 1] + day) % 7
  }

  /// How many days `month` has in `year`.
  static func daysIn(_ month: Int, of year: Int) -> Int {
    guard month == 2 else { return longestMonth[month - 1] }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
    return leap ? 29 : 28
  }
}
