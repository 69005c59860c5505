// Recurring schedules: what a user declares, what a store keeps, and the public face every store
// shares (issue "What every job queue has", item 2). The decisions are in ScheduleTicks; the
// loop that acts on them is ScheduleTicker; a store only stores (ScheduleStore).
public import Foundation

/// When a recurring schedule ticks.
public enum ScheduleTiming: Sendable, Equatable, CustomStringConvertible {
  /// The wall-clock times a 5-field cron expression names (`minute hour day-of-month month
  /// day-of-week`), read in `timeZone` (UTC by default): `"0 9 * * MON-FRI"` is 9:00 every
  /// weekday. Each field is `*`, a number, a range `a-b`, a step `*/n` or `a-b/n`, or a list of
  /// those; months may be `JAN`-`DEC` and days `SUN`-`SAT`. As in every cron, when both day
  /// fields are restricted a day matches if either does. On a day the clocks go forward, a time
  /// that does not exist is skipped; on a day they go back, a time that comes twice ticks once.
  case cron(String, timeZone: TimeZone = .gmt)
  /// Every `interval` from when the schedule was set: whole milliseconds, from 1 second to 366
  /// days. Real time, whatever the wall clocks say.
  case every(Duration)

  /// `cron 0 9 * * MON-FRI (Europe/Paris)`, `every 1 hour` or `every 90 seconds`.
  public var description: String {
    switch self {
    case .cron(let expression, let zone):
      return "cron \(expression.trimmingCharacters(in: .whitespaces)) (\(zone.identifier))"
    case .every(let interval):
      let parts = interval.components
      let milliseconds = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
      // The largest unit the interval is a whole number of.
      let units: [(Int64, String)] = [
        (86_400_000, "day"), (3_600_000, "hour"), (60_000, "minute"), (1000, "second"),
      ]
      for (size, unit) in units where milliseconds % size == 0 {
        let count = milliseconds / size
        return "every \(count) \(unit)" + (count == 1 ? "" : "s")
      }
      return "every \(milliseconds) milliseconds"
    }
  }
}

/// A recurring schedule: a message appended to a key on every tick.
///
/// Each tick is appended once across every process that delivers the outbox. Set it with
/// ``OutboxSchedules/set(_:)``.
///
/// ```swift
/// try await outbox.schedules.set(
///   OutboxSchedule(
///     "nightly-digest", .cron("0 2 * * *", timeZone: paris),
///     partition: "digests", message: .sendDigest)
/// )
/// ```
///
/// See <doc:RecurringSchedules>.
public struct OutboxSchedule<Message: Codable & Sendable>: Sendable {
  /// The schedule's name: what it is paused, resumed and removed by; 1 to 200 UTF-8 bytes,
  /// no control characters.
  public var name: String
  /// When it ticks.
  public var timing: ScheduleTiming
  /// The key (line) each tick's message joins; `nil` asks the outbox's `partition` closure.
  public var partition: String?
  /// The message appended on each tick.
  public var message: Message
  /// Strings stored with each tick's message, besides the two the schedule adds:
  /// `orderly-schedule` (its name) and `orderly-tick` (the tick, ISO 8601 in UTC, milliseconds).
  public var headers: [String: String]
  /// What it does with ticks that passed while no started outbox looked at it.
  public var missedTicks: MissedTicks

  /// A schedule.
  ///
  /// - Parameters:
  ///   - name: What it is paused, resumed and removed by.
  ///   - timing: When it ticks.
  ///   - partition: The key each tick's message joins.
  ///   - message: The message appended on each tick.
  ///   - headers: Strings stored with each tick's message.
  ///   - missedTicks: What it does with missed ticks; ``MissedTicks/skip`` by default.
  public init(
    _ name: String,
    _ timing: ScheduleTiming,
    partition: String?,
    message: Message,
    headers: [String: String] = [:],
    missedTicks: MissedTicks = .skip
  ) {
    self.name = name
    self.timing = timing
    self.partition = partition
    self.message = message
    self.headers = headers
    self.missedTicks = missedTicks
  }
}

/// A recurring schedule as ``OutboxSchedules/list()`` reads it from the store.
public struct OutboxScheduleInfo: Sendable, Equatable {
  /// Its name.
  public let name: String
  /// When it ticks; `nil` if the stored rule cannot be read here (see ``problem``).
  public let timing: ScheduleTiming?
  /// The key its messages join.
  public let partition: String?
  /// What it does with missed ticks.
  public let missedTicks: MissedTicks
  /// Whether it is paused: it appends nothing until resumed.
  public let isPaused: Bool
  /// The last tick a message was appended for (or let go as missed); `nil` before the first.
  public let lastTick: Date?
  /// The next tick, on the outbox's clock; `nil` while paused, or if the rule names no more.
  public let nextTick: Date?
  /// Why the schedule cannot tick (its stored rule or message cannot be read by this process),
  /// or `nil`.
  public let problem: String?
}

/// The recurring schedules of an outbox (``DurableOutbox/schedules``): set, pause, resume,
/// remove, list.
///
/// A schedule is kept in the store, so every process that delivers the outbox sees it. While
/// the outbox is started, each tick appends one message to the schedule's key: once across
/// every process (the tick is taken and the message appended in one transaction, and a tick at
/// or before the last one taken is never appended), in tick order. A tick is appended on time
/// when a started outbox looks at it within a minute; ticks that passed while no outbox was
/// started follow the schedule's ``MissedTicks``. Ticks are read on the outbox's clock (the
/// clock it was created with), so a test drives them with a manual clock.
///
/// Each tick's message carries the headers `orderly-schedule` (the name) and `orderly-tick`
/// (the tick, ISO 8601 in UTC).
public struct OutboxSchedules<Message: Codable & Sendable>: Sendable {
  /// The store the schedules are kept in.
  package let store: any ScheduleStore<Message>
  /// The loop that appends ticks, and the time it reads.
  package let ticker: ScheduleTicker<Message>

  /// The schedules of a store, ticked by `ticker`.
  ///
  /// - Parameters:
  ///   - store: Where they are kept.
  ///   - ticker: The outbox's ticker.
  package init(store: any ScheduleStore<Message>, ticker: ScheduleTicker<Message>) {
    self.store = store
    self.ticker = ticker
  }

  /// Sets a schedule: adds it, or replaces the one with its name.
  ///
  /// A replacement is not paused; with the same timing it goes on from its last tick, with
  /// another timing it starts from now.
  ///
  /// - Parameter schedule: The schedule.
  /// - Throws: ``OutboxError/invalidSchedule(_:)`` for a bad name, a cron expression with what
  ///   is wrong in it, an interval out of range or an unknown time zone;
  ///   ``OutboxError/cannotEncode(reason:)``; the store's errors. Nothing is changed then.
  public func set(_ schedule: OutboxSchedule<Message>) async throws(OutboxError) {
    try ScheduleRow.check(name: schedule.name)
    let rule = try ScheduleRow.rule(of: schedule.timing, name: schedule.name)
    let payload: Data
    do {
      payload = try MessageCodec<Message>.encoder().encode(schedule.message)
    } catch {
      throw .cannotEncode(reason: "\(error)")
    }
    let now = ticker.wall.milliseconds()
    let existing = try await store.readSchedules().first { $0.name == schedule.name }
    let keeps = existing.map { $0.rule == rule.text && $0.zone == rule.zone } ?? false
    try await store.writeSchedule(
      ScheduleRow(
        name: schedule.name,
        rule: rule.text,
        zone: rule.zone,
        partition: schedule.partition,
        payload: payload,
        headers: StoredHeaders.encode(schedule.headers),
        missed: schedule.missedTicks.rawValue,
        paused: false,
        anchor: keeps ? existing?.anchor ?? now : now,
        countFrom: keeps ? existing?.countFrom ?? now : now,
        lastTick: keeps ? existing?.lastTick : nil
      )
    )
    ticker.ring()
  }

  /// Pauses a schedule: it appends nothing until resumed.
  ///
  /// Pausing a paused schedule does nothing; ``resume(named:)`` lets it go on.
  ///
  /// - Parameter name: The schedule's name.
  /// - Throws: ``OutboxError/noSuchSchedule(_:)``; the store's errors.
  public func pause(named name: String) async throws(OutboxError) {
    guard try await store.setSchedulePaused(named: name, true, countFrom: nil) else {
      throw .noSuchSchedule(name)
    }
    ticker.ring()
  }

  /// Resumes a paused schedule from the next tick to come.
  ///
  /// Ticks that passed while it was paused are not appended. Resuming a schedule that is not
  /// paused does nothing.
  ///
  /// - Parameter name: The schedule's name.
  /// - Throws: ``OutboxError/noSuchSchedule(_:)``; the store's errors.
  public func resume(named name: String) async throws(OutboxError) {
    let now = ticker.wall.milliseconds()
    guard try await store.setSchedulePaused(named: name, false, countFrom: now) else {
      throw .noSuchSchedule(name)
    }
    ticker.ring()
  }

  /// Removes a schedule; messages it appended stay.
  ///
  /// - Parameter name: The schedule's name.
  /// - Throws: ``OutboxError/noSuchSchedule(_:)``; the store's errors.
  public func remove(named name: String) async throws(OutboxError) {
    guard try await store.deleteSchedule(named: name) else { throw .noSuchSchedule(name) }
    ticker.ring()
  }

  /// Every schedule, by name, with its last and next tick.
  ///
  /// - Returns: The schedules.
  /// - Throws: The store's errors.
  public func list() async throws(OutboxError) -> [OutboxScheduleInfo] {
    let now = ticker.wall.milliseconds()
    return try await store.readSchedules().sorted { $0.name < $1.name }.map { row in
      let plan = row.plan()
      var problem: String?
      var next: Date?
      switch plan {
      case .failure(let invalid): problem = invalid.description
      case .success(let plan):
        if !row.paused {
          next = plan.rule.next(after: ScheduleRow.date(max(row.cursor, now)))
        }
        if case .failure(let failure) = MessageCodec<Message>.decode(row.payload) {
          problem = "its message no longer decodes as \(Message.self): \(failure.reason)"
        }
      }
      return OutboxScheduleInfo(
        name: row.name,
        timing: try? plan.get().timing,
        partition: row.partition,
        missedTicks: MissedTicks(rawValue: row.missed) ?? .skip,
        isPaused: row.paused,
        lastTick: row.lastTick.map(ScheduleRow.date),
        nextTick: next.map { ScheduleRow.date(ScheduleRow.milliseconds($0)) },
        problem: problem
      )
    }
  }
}

/// A schedule as a store keeps it: one row, every time in whole milliseconds since 1970.
package struct ScheduleRow: Sendable, Equatable {
  /// Its name, the row's key.
  package var name: String
  /// `cron EXPRESSION` or `every MILLISECONDS`.
  package var rule: String
  /// The time zone's identifier (`UTC` for an interval).
  package var zone: String
  /// The key its messages join.
  package var partition: String?
  /// The message's JSON.
  package var payload: Data
  /// The headers, as ``StoredHeaders`` keeps them.
  package var headers: String?
  /// ``MissedTicks``'s raw value.
  package var missed: String
  /// Whether it is paused.
  package var paused: Bool
  /// When it was set: an interval ticks from here.
  package var anchor: Int64
  /// Ticks at or before this are not appended (when it was set or last resumed).
  package var countFrom: Int64
  /// The last tick taken; `nil` before the first.
  package var lastTick: Int64?

  /// A row.
  package init(
    name: String,
    rule: String,
    zone: String,
    partition: String?,
    payload: Data,
    headers: String?,
    missed: String,
    paused: Bool,
    anchor: Int64,
    countFrom: Int64,
    lastTick: Int64?
  ) {
    self.name = name
    self.rule = rule
    self.zone = zone
    self.partition = partition
    self.payload = payload
    self.headers = headers
    self.missed = missed
    self.paused = paused
    self.anchor = anchor
    self.countFrom = countFrom
    self.lastTick = lastTick
  }

  /// The time after which ticks count: the last tick taken, or when it was set or resumed,
  /// whichever is later.
  var cursor: Int64 { max(lastTick ?? countFrom, countFrom) }

  /// The schedule's rule and timing, read from the row.
  struct Plan {
    let rule: ScheduleRule
    let timing: ScheduleTiming
  }

  /// Reads the row's rule.
  func plan() -> Result<Plan, CronExpression.Invalid> {
    if rule.hasPrefix("every "), let interval = Int64(rule.dropFirst(6)), interval > 0 {
      let duration = Duration.milliseconds(interval)
      return .success(
        Plan(rule: .every(duration, from: Self.date(anchor)), timing: .every(duration))
      )
    }
    guard rule.hasPrefix("cron ") else {
      return .failure(CronExpression.Invalid(description: "unknown stored rule '\(rule)'"))
    }
    guard let timeZone = TimeZone(identifier: zone) else {
      return .failure(
        CronExpression.Invalid(description: "time zone '\(zone)' is unknown on this machine")
      )
    }
    let text = String(rule.dropFirst(5))
    do {
      return .success(
        Plan(
          rule: .cron(try CronExpression(text), timeZone),
          timing: .cron(text, timeZone: timeZone)
        )
      )
    } catch {
      return .failure(error)
    }
  }

  /// Refuses an empty name, one over 200 UTF-8 bytes, or one with control characters.
  static func check(name: String) throws(OutboxError) {
    guard !name.isEmpty else {
      throw .invalidSchedule("a schedule needs a name (got an empty one)")
    }
    guard name.utf8.count <= 200 else {
      throw .invalidSchedule(
        "a schedule's name is at most 200 UTF-8 bytes (got \(name.utf8.count))"
      )
    }
    guard !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
    else {
      throw .invalidSchedule("a schedule's name has no control characters (got '\(name)')")
    }
  }

  /// The stored rule and zone of a timing, checked.
  static func rule(of timing: ScheduleTiming, name: String) throws(OutboxError) -> (
    text: String, zone: String
  ) {
    switch timing {
    case .cron(let expression, let zone):
      let cron: CronExpression
      do {
        cron = try CronExpression(expression)
      } catch {
        throw .invalidSchedule("schedule '\(name)': \(error.description)")
      }
      guard TimeZone(identifier: zone.identifier) != nil else {
        throw .invalidSchedule(
          "schedule '\(name)': time zone '\(zone.identifier)' has no identifier this machine "
            + "knows; use one such as Europe/Paris or UTC"
        )
      }
      return ("cron \(cron.description)", zone.identifier)
    case .every(let interval):
      let parts = interval.components
      guard interval >= .seconds(1), interval <= .seconds(366 * 86_400) else {
        throw .invalidSchedule(
          "schedule '\(name)': an interval is from 1 second to 366 days (got \(interval))"
        )
      }
      guard parts.attoseconds % 1_000_000_000_000_000 == 0 else {
        throw .invalidSchedule(
          "schedule '\(name)': an interval is whole milliseconds (got \(interval))"
        )
      }
      let milliseconds = parts.seconds * 1000 + parts.attoseconds / 1_000_000_000_000_000
      return ("every \(milliseconds)", "UTC")
    }
  }

  /// A time in whole milliseconds as a date.
  package static func date(_ milliseconds: Int64) -> Date {
    Date(timeIntervalSince1970: Double(milliseconds) / 1000)
  }

  /// A date in whole milliseconds, rounded to the nearest.
  package static func milliseconds(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
  }
}

/// Where a store keeps schedules: what it must answer, not what it decides.
package protocol ScheduleStore<Message>: Sendable {
  /// What the outbox carries.
  associatedtype Message: Codable & Sendable

  /// Every schedule row; none when the store has no schedules table yet (an older outbox read
  /// by a tool that changes no table).
  func readSchedules() async throws(OutboxError) -> [ScheduleRow]

  /// Writes a row, replacing the one with its name.
  func writeSchedule(_ row: ScheduleRow) async throws(OutboxError)

  /// Sets whether a schedule is paused (and, when given, where its ticks count from).
  ///
  /// - Returns: Whether a schedule has that name.
  func setSchedulePaused(named name: String, _ paused: Bool, countFrom: Int64?)
    async throws(OutboxError) -> Bool

  /// Deletes a schedule.
  ///
  /// - Returns: Whether a schedule had that name.
  func deleteSchedule(named name: String) async throws(OutboxError) -> Bool

  /// Takes a tick, in one transaction: if the schedule `name` is not paused, its rule is still
  /// `rule` and its last tick is before `tick` (or it has none), sets its last tick to `tick`
  /// and appends `message` (when given, for a tick let go as missed it is not); otherwise
  /// changes nothing.
  ///
  /// - Returns: Whether the tick was taken, and the appended message's identifier and
  ///   sequence.
  func takeTick(
    named name: String,
    rule: String,
    tick: Int64,
    appending message: PreparedMessage<Message>?
  ) async throws(OutboxError) -> (taken: Bool, appended: (id: UUID, sequence: Int64)?)
}
