// The turn rule of every store, decided without I/O.

import OrderlyOutboxCore
import Testing

@Suite("A line's turn: 16 deliveries or the store's time, then it gives way if others wait")
struct LineTurnRuleTests {
  /// Runs `count` deliveries through `turn`, answering "others wait?" with `othersWait`, and
  /// returns the deliveries (1-based) whose acknowledgement gives the line up.
  private func givesWay(
    _ turn: inout LineTurn,
    deliveries count: Int,
    at now: ContinuousClock.Instant,
    othersWait: Bool
  ) async -> [Int] {
    var given: [Int] = []
    for delivery in 1...count {
      let over = await turn.beforeDelivery(at: now) { othersWait }
      if over { given.append(delivery) }
    }
    return given
  }

  @Test("with others waiting, the 16th delivery of a turn is its last")
  func sixteenDeliveries() async {
    let now = ContinuousClock.now
    var turn = LineTurn(timeLimit: nil, at: now)
    let given = await givesWay(&turn, deliveries: 16, at: now, othersWait: true)
    #expect(given == [16])
  }

  @Test("with nobody waiting, the line goes on, turn after turn, and is asked once a turn")
  func goesOnAlone() async {
    let now = ContinuousClock.now
    var turn = LineTurn(timeLimit: nil, at: now)
    var asked = 0
    for _ in 1...48 {
      let over = await turn.beforeDelivery(at: now) {
        asked += 1
        return false
      }
      #expect(!over)
    }
    #expect(asked == 3)
  }

  @Test("the store's time ends a turn before its deliveries do")
  func timeFirst() async {
    let start = ContinuousClock.now
    var turn = LineTurn(timeLimit: .milliseconds(250), at: start)
    let early = await turn.beforeDelivery(at: start + .milliseconds(100)) { true }
    let late = await turn.beforeDelivery(at: start + .milliseconds(250)) { true }
    #expect(!early)
    #expect(late)
  }

  @Test("a turn renewed when nobody waits starts its time and its count again")
  func renewed() async {
    let start = ContinuousClock.now
    var turn = LineTurn(timeLimit: .milliseconds(250), at: start)
    let alone = await turn.beforeDelivery(at: start + .milliseconds(300)) { false }
    #expect(!alone)
    #expect(turn.began == start + .milliseconds(300))
    #expect(turn.deliveries == 1)
    let soon = await turn.beforeDelivery(at: start + .milliseconds(400)) { true }
    #expect(!soon)
  }

  @Test("a delivery limit below 1 counts as 1: every delivery may give way")
  func limitFloor() async {
    let now = ContinuousClock.now
    var turn = LineTurn(deliveryLimit: 0, timeLimit: nil, at: now)
    #expect(turn.deliveryLimit == 1)
    let given = await givesWay(&turn, deliveries: 3, at: now, othersWait: true)
    #expect(given == [1, 2, 3])
  }
}
