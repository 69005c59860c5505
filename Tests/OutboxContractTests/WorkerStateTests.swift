import Foundation
import OrderlyOutboxCore
import Testing

/// The PostgreSQL worker's decisions about its lines (in the outbox's rules, so this runs in a
/// plain `swift test`), on instants the test gives them (no server, no waiting), with a lease of
/// 40 s renewed every 10 s (the margin a lease is given up by).
@Suite("WorkerState: a worker's decisions about its lines, without a server")
struct WorkerStateTests {
  private let start = ContinuousClock.now
  private let lease = Duration.seconds(40)
  private let margin = Duration.seconds(10)

  private func at(_ seconds: Int) -> ContinuousClock.Instant { start + .seconds(seconds) }

  /// A worker holding `lines` (name: fence), each taken at `start`.
  private func holding(_ lines: [String: Int64]) -> WorkerState {
    var state = WorkerState(paused: false)
    for (line, fence) in lines {
      state.held[line] = HeldLine(fence: fence, deadline: start + lease)
    }
    return state
  }

  @Test("free slots: the limit less the lines held; none while paused, draining or ending")
  func freeSlots() {
    var state = holding(["a": 1, "b": 1])
    #expect(state.freeSlots(limit: 4) == 2)
    #expect(state.freeSlots(limit: 2) == 0)
    #expect(state.freeSlots(limit: 1) == 0)
    #expect(!state.isFull(limit: 4))
    #expect(state.isFull(limit: 2))
    for stop in ["paused", "draining", "ending"] {
      var stopped = state
      switch stop {
      case "paused": stopped.paused = true
      case "draining": stopped.draining = true
      default: stopped.ending = true
      }
      #expect(stopped.freeSlots(limit: 4) == 0, "\(stop)")
      #expect(!stopped.isTaking, "\(stop)")
    }
    state.held["b"]?.lost = true
    // A lost line still takes its slot until its task ends; it no longer counts as held.
    #expect(state.freeSlots(limit: 4) == 2)
    #expect(state.keysHeld == 1)
  }

  @Test("a line stops for the worker's end first, then a pause, then a lease no longer certain")
  func checkpointOrder() {
    var state = holding(["a": 3])
    #expect(state.checkpoint("a", fence: 3, now: at(1), margin: margin) == nil)
    // Its lease was taken at 0 for 40 s: certain until 30 s (one renewal period before 40).
    #expect(state.checkpoint("a", fence: 3, now: at(29), margin: margin) == nil)
    #expect(state.checkpoint("a", fence: 3, now: at(30), margin: margin) == .lost)
    // Another fence is another holder's lease.
    #expect(state.checkpoint("a", fence: 2, now: at(1), margin: margin) == .lost)
    #expect(state.checkpoint("z", fence: 1, now: at(1), margin: margin) == .lost)
    state.pausedLines = ["a"]
    #expect(state.checkpoint("a", fence: 3, now: at(30), margin: margin) == .paused)
    state.pausedLines = []
    state.paused = true
    #expect(state.checkpoint("a", fence: 3, now: at(1), margin: margin) == .paused)
    state.draining = true
    #expect(state.checkpoint("a", fence: 3, now: at(30), margin: margin) == .ending)
    state = holding(["a": 3])
    let cancelled = state.checkpoint("a", fence: 3, now: at(1), margin: margin, cancelled: true)
    #expect(cancelled == .ending)
  }

  @Test("a renewal under the same fence moves the deadline one lease past its sending")
  func renewal() {
    var state = holding(["a": 1, "b": 1, "c": 5])
    let sent = state.renewable
    #expect(sent == ["a": 1, "b": 1, "c": 5])
    // The database renewed a and c; b was taken by another worker (fence 2 there now).
    let notRenewed = state.applyRenewal(
      sent: sent,
      renewed: ["a": 1, "b": 2, "c": 5],
      sentAt: at(20),
      lease: lease
    )
    #expect(notRenewed == ["b": 1])
    #expect(state.held["a"]?.deadline == at(60))
    #expect(state.held["c"]?.deadline == at(60))
    #expect(state.held["b"]?.deadline == at(40))
    // Now live until 50 s, one renewal period before the new deadline.
    #expect(state.isLive("a", fence: 1, now: at(49), margin: margin))
    #expect(!state.isLive("a", fence: 1, now: at(50), margin: margin))
  }

  @Test("a line retaken while its renewal was in flight keeps the new lease's deadline")
  func renewalOfARetakenLine() {
    var state = holding(["a": 1])
    let sent = state.renewable
    // Meanwhile the line was released and taken again, under fence 2, with a later deadline.
    state.held["a"] = HeldLine(fence: 2, deadline: at(70))
    let notRenewed = state.applyRenewal(
      sent: sent,
      renewed: ["a": 1],
      sentAt: at(20),
      lease: lease
    )
    #expect(notRenewed.isEmpty)
    #expect(state.held["a"]?.deadline == at(70))
  }

  @Test("late lines: those with less than the margin left, not lost already")
  func lateLines() {
    var state = holding(["a": 1, "b": 1])
    state.held["b"]?.deadline = at(80)
    #expect(state.lateLines(now: at(29), margin: margin).isEmpty)
    #expect(state.lateLines(now: at(30), margin: margin) == ["a": 1])
    _ = state.lose("a", fence: 1)
    #expect(state.lateLines(now: at(30), margin: margin).isEmpty)
    #expect(state.lateLines(now: at(70), margin: margin) == ["b": 1])
  }

  @Test("losing a line: once, under its fence only; its delivery is handed back to cancel")
  func lose() async throws {
    var state = holding(["a": 1])
    let delivery = Task<Void, any Error> {}
    state.held["a"]?.delivery = delivery
    #expect(state.lose("a", fence: 2) == nil)
    #expect(state.held["a"]?.lost == false)
    let first = state.lose("a", fence: 1)
    #expect(first != nil)
    #expect((first ?? nil) == delivery)
    #expect(state.held["a"]?.lost == true)
    // Lost already: nothing to do a second time.
    #expect(state.lose("a", fence: 1) == nil)
    #expect(state.lose("z", fence: 1) == nil)
    // A line held with no delivery running: lost, with nothing to cancel.
    var idle = holding(["b": 4])
    let none = idle.lose("b", fence: 4)
    #expect(none != nil)
    #expect((none ?? nil) == nil)
    try await delivery.value
  }
}
