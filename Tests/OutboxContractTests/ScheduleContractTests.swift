import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// Recurring schedules (`DurableOutbox.schedules`), as `OutboxSchedules` states them, on every
/// store, with ticks driven by a manual clock.
@Suite("Recurring schedules, on every store", .timeLimit(.minutes(3)))
struct ScheduleContractTests {
  /// A delivered tick: the message, its key, and the schedule's headers.
  struct Tick: Sendable, Equatable {
    let message: String
    let partition: String?
    let schedule: String?
    let tick: String?
  }

  /// Starts `subject`, recording each delivered message as a tick.
  static func startRecording(_ subject: Subject<String>) throws -> OrderedRecorder<Tick> {
    let ticks = OrderedRecorder<Tick>()
    try subject.start { envelope in
      ticks.record(
        Tick(
          message: envelope.message,
          partition: envelope.partition,
          schedule: envelope.headers["orderly-schedule"],
          tick: envelope.headers["orderly-tick"]
        )
      )
    }
    return ticks
  }

  /// A wall-clock time of the outbox's schedules, `seconds` after they were set at `anchor`.
  static func iso(_ anchor: Date, plus seconds: Double) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: anchor.addingTimeInterval(seconds))
  }

  @Test(
    "an interval schedule appends one message per tick, in tick order, on its key, with its headers",
    arguments: Store.all
  )
  func intervalTicks(store: Store) async throws {
    let clock = ManualClock()
    guard let subject = try await store.open(String.self, clock: clock) else { return }
    let outbox = subject.outbox
    try await outbox.schedules.set(
      OutboxSchedule(
        "heartbeat",
        .every(.seconds(60)),
        partition: "beats",
        message: "beat",
        headers: ["team": "ops"]
      )
    )
    let listed = try await outbox.schedules.list()
    let set = try #require(listed.first)
    #expect(listed.count == 1 && set.name == "heartbeat" && set.timing == .every(.seconds(60)))
    #expect(set.lastTick == nil && !set.isPaused && set.problem == nil)
    let first = try #require(set.nextTick)
    let anchor = first.addingTimeInterval(-60)

    let ticks = try Self.startRecording(subject)
    for round in 1...3 {
      // The ticker sleeps on the clock until the next tick: advance to it.
      try await clock.waitForSleepers(1)
      clock.advance(by: .seconds(60))
      try await ticks.waitForCount(round)
    }
    try await outbox.waitUntilDelivered()
    let expected = (1...3).map {
      Tick(
        message: "beat",
        partition: "beats",
        schedule: "heartbeat",
        tick: Self.iso(anchor, plus: Double($0) * 60)
      )
    }
    #expect(ticks.values == expected)
    let after = try await outbox.schedules.list()
    #expect(after.first?.lastTick == anchor.addingTimeInterval(180))
    #expect(after.first?.nextTick == anchor.addingTimeInterval(240))
    await subject.finish()
  }

  @Test("a cron schedule ticks at the minutes it names, in its time zone", arguments: Store.all)
  func cronTicks(store: Store) async throws {
    let clock = ManualClock()
    guard let subject = try await store.open(String.self, clock: clock) else { return }
    let outbox = subject.outbox
    let zone = try #require(TimeZone(identifier: "Asia/Kolkata"))
    try await outbox.schedules.set(
      OutboxSchedule(
        "every-minute",
        .cron("* * * * *", timeZone: zone),
        partition: "m",
        message: "tick"
      )
    )
    let info = try #require(try await outbox.schedules.list().first)
    #expect(info.timing == .cron("* * * * *", timeZone: zone))
    let next = try #require(info.nextTick)
    let seconds = Calendar(identifier: .gregorian).dateComponents(in: zone, from: next).second
    #expect(seconds == 0)
    let ticks = try Self.startRecording(subject)
    try await clock.waitForSleepers(1)
    // A minute from now always holds exactly one whole minute.
    clock.advance(by: .seconds(60))
    try await ticks.waitForCount(1)
    try await outbox.waitUntilDelivered()
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    #expect(ticks.values.map(\.tick) == [formatter.string(from: next)])
    await subject.finish()
  }

  @Test(
    "ticks missed while no outbox was started: skip lets them go, catch-up-once appends one",
    arguments: Store.all
  )
  func missedTicks(store: Store) async throws {
    let clock = ManualClock()
    guard let subject = try await store.open(String.self, clock: clock) else { return }
    let outbox = subject.outbox
    try await outbox.schedules.set(
      OutboxSchedule("skipping", .every(.seconds(3_600)), partition: "s", message: "skip")
    )
    try await outbox.schedules.set(
      OutboxSchedule(
        "catching-up",
        .every(.seconds(3_600)),
        partition: "c",
        message: "catch up",
        missedTicks: .catchUpOnce
      )
    )
    let anchor = try #require(try await outbox.schedules.list().first?.nextTick)
      .addingTimeInterval(-3_600)
    // Five and a half hours with nothing started: ticks at 1 h to 5 h were missed, the last
    // of them by half an hour (more than the minute a tick may be late).
    clock.advance(by: .seconds(5 * 3_600 + 1_800))
    let ticks = try Self.startRecording(subject)
    try await ticks.waitForCount(1)
    // The look that appended the catch-up let the skipped ticks go in the same pass, and the
    // ticker then sleeps until 6 h.
    try await clock.waitForSleepers(1)
    let listed = try await outbox.schedules.list()
    #expect(listed.map(\.name) == ["catching-up", "skipping"])
    #expect(
      listed.map(\.lastTick) == [
        anchor.addingTimeInterval(5 * 3_600), anchor.addingTimeInterval(5 * 3_600),
      ]
    )
    #expect(
      listed.map(\.nextTick) == [
        anchor.addingTimeInterval(6 * 3_600), anchor.addingTimeInterval(6 * 3_600),
      ]
    )
    #expect(ticks.values.map(\.message) == ["catch up"])
    #expect(ticks.values.first?.tick == Self.iso(anchor, plus: 5 * 3_600))

    // From then on, both tick on time.
    clock.advance(by: .seconds(1_800))
    try await ticks.waitForCount(3)
    try await outbox.waitUntilDelivered()
    let last = ticks.values.dropFirst().map(\.message).sorted()
    #expect(last == ["catch up", "skip"])
    await subject.finish()
  }

  @Test(
    "pause, resume and remove: a paused schedule appends nothing, and resumes from the next tick",
    arguments: Store.all
  )
  func pauseResumeRemove(store: Store) async throws {
    let clock = ManualClock()
    guard let subject = try await store.open(String.self, clock: clock) else { return }
    let outbox = subject.outbox
    try await outbox.schedules.set(
      OutboxSchedule("report", .every(.seconds(60)), partition: "r", message: "report")
    )
    let anchor = try #require(try await outbox.schedules.list().first?.nextTick)
      .addingTimeInterval(-60)
    try await outbox.schedules.pause(named: "report")
    try await outbox.schedules.pause(named: "report")
    let paused = try #require(try await outbox.schedules.list().first)
    #expect(paused.isPaused && paused.nextTick == nil)

    let ticks = try Self.startRecording(subject)
    // Paused through the ticks at 1 and 2 minutes.
    clock.advance(by: .seconds(150))
    try await outbox.schedules.resume(named: "report")
    let resumed = try #require(try await outbox.schedules.list().first)
    #expect(!resumed.isPaused && resumed.nextTick == anchor.addingTimeInterval(180))
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(30))
    try await ticks.waitForCount(1)
    try await outbox.waitUntilDelivered()
    #expect(ticks.values.map(\.tick) == [Self.iso(anchor, plus: 180)])

    // Set again with the same timing: it goes on from its last tick.
    try await outbox.schedules.set(
      OutboxSchedule("report", .every(.seconds(60)), partition: "r", message: "report v2")
    )
    let replaced = try #require(try await outbox.schedules.list().first)
    #expect(replaced.lastTick == anchor.addingTimeInterval(180))

    try await outbox.schedules.remove(named: "report")
    let none = try await outbox.schedules.list()
    #expect(none.isEmpty)
    for action in ["pause", "resume", "remove"] {
      do {
        switch action {
        case "pause": try await outbox.schedules.pause(named: "report")
        case "resume": try await outbox.schedules.resume(named: "report")
        default: try await outbox.schedules.remove(named: "report")
        }
        Issue.record("\(action) of a removed schedule was accepted")
      } catch {
        #expect(error == .noSuchSchedule("report"))
      }
    }
    // Nothing ticks once removed: the store takes no tick of a schedule it does not have.
    let prepared = try MessageCodec<String>(partition: nil, coalescing: nil)
      .prepare(["late"], partition: "r", headers: [:])[0]
    let taken = try await outbox.schedules.store.takeTick(
      named: "report",
      rule: "every 60000",
      tick: ScheduleRow.milliseconds(anchor) + 240_000,
      appending: prepared
    )
    #expect(!taken.taken && taken.appended == nil)
    #expect(ticks.count == 1)
    await subject.finish()
  }

  @Test("a bad schedule is refused with what is wrong, and changes nothing", arguments: Store.all)
  func refusals(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let bad: [(OutboxSchedule<String>, String)] = [
      (OutboxSchedule("", .every(.seconds(60)), partition: nil, message: "x"), "needs a name"),
      (
        OutboxSchedule(
          String(repeating: "n", count: 201),
          .every(.seconds(60)),
          partition: nil,
          message: "x"
        ),
        "at most 200"
      ),
      (OutboxSchedule("a\nb", .every(.seconds(60)), partition: nil, message: "x"), "control"),
      (OutboxSchedule("m", .cron("61 * * * *"), partition: nil, message: "x"), "minute"),
      (OutboxSchedule("f", .cron("* * * *"), partition: nil, message: "x"), "5"),
      (OutboxSchedule("d", .cron("0 0 30 2 *"), partition: nil, message: "x"), "day"),
      (OutboxSchedule("s", .every(.milliseconds(500)), partition: nil, message: "x"), "1 second"),
      (
        OutboxSchedule("u", .every(.microseconds(1_000_500)), partition: nil, message: "x"),
        "whole milliseconds"
      ),
      (
        OutboxSchedule("y", .every(.seconds(400 * 86_400)), partition: nil, message: "x"),
        "366 days"
      ),
    ]
    for (schedule, words) in bad {
      do {
        try await outbox.schedules.set(schedule)
        Issue.record("\(schedule.timing) named '\(schedule.name)' was accepted")
      } catch {
        guard case .invalidSchedule(let problem) = error else {
          Issue.record("\(error) is not invalidSchedule")
          continue
        }
        #expect(problem.contains(words), "\(problem)")
        #expect(error.description.contains("nothing was changed"))
      }
    }
    let none = try await outbox.schedules.list()
    #expect(none.isEmpty)
    await subject.finish()
  }

  @Test(
    "a tick is taken once however many takers race for it, and never after a later one",
    arguments: Store.all
  )
  func tickTakenOnce(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await outbox.schedules.set(
      OutboxSchedule("raced", .every(.seconds(60)), partition: "r", message: "once")
    )
    let row = try #require(try await outbox.schedules.store.readSchedules().first)
    let schedules = outbox.schedules
    for round in Int64(1)...5 {
      let tick = row.anchor + round * 60_000
      let prepared = try MessageCodec<String>(partition: nil, coalescing: nil)
        .prepare(["tick \(round)"], partition: "r", headers: [:])[0]
      let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
        for _ in 0..<8 {
          group.addTask {
            try await schedules.store.takeTick(
              named: "raced",
              rule: row.rule,
              tick: tick,
              appending: prepared
            ).appended != nil
          }
        }
        var count = 0
        for try await appended in group where appended { count += 1 }
        return count
      }
      #expect(taken == 1, "round \(round): \(taken) takers appended")
    }
    // An earlier tick than the last taken is refused.
    let late = try await schedules.store.takeTick(
      named: "raced",
      rule: row.rule,
      tick: row.anchor + 2 * 60_000,
      appending: nil
    )
    #expect(!late.taken)
    let pending = try await outbox.counts().pending
    #expect(pending == 5)
    await subject.finish()
  }
}
