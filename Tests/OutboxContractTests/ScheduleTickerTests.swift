import Foundation
import OrderlyCore
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// The schedule ticker over a store held in memory, with no database.
///
/// What it takes, when, and how it reports a store that fails.
@Suite("The schedule ticker", .timeLimit(.minutes(1)))
struct ScheduleTickerTests {
  /// A schedule store in memory that can be made to fail.
  final class MemoryStore: ScheduleStore, Sendable {
    typealias Message = String
    struct State {
      var rows: [String: ScheduleRow] = [:]
      var failing = false
      var taken: [(name: String, tick: Int64, appended: Bool)] = []
    }
    let state = OrderlyLock(State())
    /// Each tick taken, as it is taken.
    let ticks = OrderedRecorder<Int64>()

    func readSchedules() async throws(OutboxError) -> [ScheduleRow] {
      try state.withLock { (state) throws(OutboxError) -> [ScheduleRow] in
        if state.failing { throw .storageFailed(path: "memory", reason: "unplugged") }
        return Array(state.rows.values)
      }
    }

    func writeSchedule(_ row: ScheduleRow) async throws(OutboxError) {
      state.withLock { $0.rows[row.name] = row }
    }

    func setSchedulePaused(named name: String, _ paused: Bool, countFrom: Int64?)
      async throws(OutboxError) -> Bool
    {
      state.withLock { state in
        guard var row = state.rows[name] else { return false }
        if row.paused, !paused, let countFrom { row.countFrom = countFrom }
        row.paused = paused
        state.rows[name] = row
        return true
      }
    }

    func deleteSchedule(named name: String) async throws(OutboxError) -> Bool {
      state.withLock { $0.rows.removeValue(forKey: name) != nil }
    }

    func takeTick(
      named name: String,
      rule: String,
      tick: Int64,
      appending message: PreparedMessage<String>?
    ) async throws(OutboxError) -> (taken: Bool, appended: (id: UUID, sequence: Int64)?) {
      state.withLock { state in
        guard var row = state.rows[name], row.rule == rule, !row.paused, row.countFrom < tick,
          (row.lastTick ?? .min) < tick
        else { return (false, nil) }
        row.lastTick = tick
        state.rows[name] = row
        state.taken.append((name, tick, message != nil))
        ticks.record(tick)
        return (true, message.map { _ in (UUID(), Int64(state.taken.count)) })
      }
    }
  }

  @Test("takes each tick when the clock reaches it, once, and says when looks fail and recover")
  func ticksAndReports() async throws {
    let clock = ManualClock()
    let store = MemoryStore()
    let ticker = ScheduleTicker<String>(
      clock: clock,
      codec: MessageCodec(partition: nil, coalescing: nil),
      hub: OutboxEventHub()
    )
    let schedules = OutboxSchedules(store: store, ticker: ticker)
    try await schedules.set(
      OutboxSchedule("beat", .every(.seconds(10)), partition: "k", message: "b")
    )
    let anchor = try #require(store.state.withLock { $0.rows["beat"]?.anchor })
    let reports = OrderedRecorder<String>()
    ticker.start(store, pollInterval: .milliseconds(10)) { failure in
      reports.record(failure.map { _ in "failing" } ?? "recovered")
    }
    for round in 1...3 {
      try await clock.waitForSleepers(1)
      clock.advance(by: .seconds(10))
      try await store.ticks.waitForCount(round)
    }
    #expect(store.ticks.values == [anchor + 10_000, anchor + 20_000, anchor + 30_000])

    // The store fails: reported once, however many looks fail; then once when it works again.
    store.state.withLock { $0.failing = true }
    ticker.ring()
    try await reports.waitForCount(1)
    store.state.withLock { $0.failing = false }
    ticker.ring()
    try await reports.waitForCount(2)
    #expect(reports.values == ["failing", "recovered"])
    await ticker.stop()
    #expect(ticker.lastFailure == nil)
  }
}
