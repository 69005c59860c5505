import OrderlyOutboxCore
import Testing

/// The decisions under rate limits and fair shares, in values: no store, no clock.
@Suite("Rate limits and fair shares: the decisions")
struct RateLimitAndFairShareTests {
  @Test("a limit counts its keys: each key on its own, one key, or a prefix's keys together")
  func whichKeys() throws {
    let each = try RateLimit(5, per: .seconds(1), keys: .each)
    let one = try RateLimit(5, per: .seconds(1), keys: .key("order-7"))
    let tenant = try RateLimit(100, per: .seconds(60), keys: .prefix("acme:"))
    #expect(each.counts("a") && each.counts(nil))
    #expect(one.counts("order-7") && !one.counts("order-8") && !one.counts(nil))
    #expect(tenant.counts("acme:1") && !tenant.counts("other:1") && !tenant.counts(nil))
    // Each key its own counter; a prefix's keys one counter.
    #expect(each.bucket(for: "a") != each.bucket(for: "b"))
    #expect(tenant.bucket(for: "acme:1") == tenant.bucket(for: "acme:2"))
    // Two limits never share a counter.
    let other = try RateLimit(6, per: .seconds(1), keys: .each)
    #expect(each.bucket(for: "a") != other.bucket(for: "a"))
  }

  @Test("windows are fixed on the interval, so every worker counts in the same one")
  func windows() throws {
    let limits = [
      try RateLimit(5, per: .seconds(1), keys: .each),
      try RateLimit(100, per: .seconds(60), keys: .prefix("acme:")),
    ]
    let windows = RateLimits.windows(for: "acme:1", limits: limits, at: 1_700_000_061_250)
    #expect(windows.map(\.start) == [1_700_000_061_000, 1_700_000_040_000])
    #expect(windows.map(\.end) == [1_700_000_062_000, 1_700_000_100_000])
    #expect(windows.map(\.capacity) == [5, 100])
    let none = RateLimits.windows(for: "other", limits: [limits[1]], at: 0)
    #expect(none.isEmpty)
  }

  @Test("a grant is what the fullest window leaves, and says until when the line waits")
  func grants() throws {
    let limits = [
      try RateLimit(5, per: .seconds(1), keys: .each),
      try RateLimit(100, per: .seconds(60), keys: .prefix("acme:")),
    ]
    let windows = RateLimits.windows(for: "acme:1", limits: limits, at: 1_700_000_061_250)
    let free = RateLimits.grant(wanting: 4, windows: windows, used: [0, 10])
    #expect(free == RateGrant(granted: 4, until: nil, lapses: 1_700_000_062_000))
    let partly = RateLimits.grant(wanting: 4, windows: windows, used: [3, 10])
    #expect(partly == RateGrant(granted: 2, until: 1_700_000_062_000, lapses: 1_700_000_062_000))
    let tenantFull = RateLimits.grant(wanting: 1, windows: windows, used: [0, 100])
    #expect(
      tenantFull == RateGrant(granted: 0, until: 1_700_000_100_000, lapses: 1_700_000_062_000)
    )
    let bothFull = RateLimits.grant(wanting: 1, windows: windows, used: [5, 100])
    #expect(
      bothFull == RateGrant(granted: 0, until: 1_700_000_100_000, lapses: 1_700_000_062_000)
    )
    let unlimited = RateLimits.grant(wanting: 16, windows: [], used: [])
    #expect(unlimited == RateGrant(granted: 16, until: nil))
  }

  @Test("a limit that cannot be kept is refused with what is wrong")
  func refusals() {
    let bad: [(Int, Duration, RateLimit.Keys, String)] = [
      (0, .seconds(1), .each, "1 delivery or more"),
      (-3, .seconds(1), .each, "1 delivery or more"),
      (5, .microseconds(1_500), .each, "whole milliseconds"),
      (5, .zero, .each, "from 1 millisecond"),
      (5, .seconds(90_000), .each, "to 1 day"),
      (5, .seconds(1), .prefix(""), "prefix is not empty"),
    ]
    for (count, interval, keys, words) in bad {
      do {
        _ = try RateLimit(count, per: interval, keys: keys)
        Issue.record("\(count) per \(interval) was accepted")
      } catch {
        #expect(error.description.contains(words), "\(error.description)")
      }
    }
  }

  @Test("while every group waits, turns follow the weights exactly, however many keys each has")
  func weights() throws {
    let shares = try FairShares([
      FairShares.Group(prefix: "big:", weight: 1), FairShares.Group(prefix: "small:", weight: 3),
    ])
    #expect(shares.group(of: "big:42") == "big:" && shares.group(of: "small:1") == "small:")
    #expect(shares.group(of: "loose") == FairShares.otherKeysName)
    #expect(shares.group(of: nil) == FairShares.otherKeysName)
    var turns = FairShareTurns(shares)
    var given: [String: Int] = [:]
    for _ in 0..<4_000 {
      let next = turns.next(among: ["big:", "small:"])
      let group = try #require(next)
      given[group, default: 0] += 1
    }
    // 1,000 keys behind big: and 10 behind small: change nothing: turns go to groups.
    #expect(given["small:"] == 3_000 && given["big:"] == 1_000)
  }

  @Test("a key belongs to its longest prefix")
  func longestPrefix() throws {
    let shares = try FairShares([
      FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "a:vip:", weight: 5),
    ])
    #expect(shares.group(of: "a:vip:1") == "a:vip:")
    #expect(shares.group(of: "a:1") == "a:")
    #expect(shares.weight(of: "a:vip:") == 5 && shares.weight(of: FairShares.otherKeysName) == 1)
  }

  @Test("a group that comes back after a while does not take a burst of the turns it missed")
  func noBurst() throws {
    var turns = FairShareTurns(
      try FairShares([
        FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "b:", weight: 1),
      ])
    )
    for _ in 0..<1_000 { _ = turns.next(among: ["a:"]) }
    var given: [String: Int] = [:]
    for _ in 0..<100 {
      let next = turns.next(among: ["a:", "b:"])
      let group = try #require(next)
      given[group, default: 0] += 1
    }
    #expect(given["a:"] == 50 && given["b:"] == 50)
    let nothing = turns.next(among: [])
    #expect(nothing == nil)
  }

  @Test("a line's turn is charged for the deliveries it made, so long turns count as long")
  func chargedByDeliveries() throws {
    let shares = try FairShares([
      FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "b:", weight: 1),
    ])
    var admission = FairAdmission<String>(shares, limit: 1)
    // a:1 begins at once; b:1 and a:2 wait.
    #expect(admission.arrive("a:1", group: "a:") == ["a:1"])
    #expect(admission.arrive("b:1", group: "b:").isEmpty)
    #expect(admission.arrive("a:2", group: "a:").isEmpty)
    // a:1 made 16 deliveries: b:1 goes next, and keeps its slot's turns until b: has had 16.
    admission.handing("a:1", 16)
    #expect(admission.finished("a:1") == ["b:1"])
    // b:1 yields after each turn and comes to wait again; it goes on while b: has had fewer.
    #expect(admission.arrive("b:1", group: "b:").isEmpty)
    admission.handing("b:1", 4)
    #expect(admission.finished("b:1") == ["b:1"])
    #expect(admission.arrive("b:1", group: "b:").isEmpty)
    admission.handing("b:1", 4)
    #expect(admission.finished("b:1") == ["b:1"])
    #expect(admission.arrive("b:1", group: "b:").isEmpty)
    // 16 each: a:2's turn.
    admission.handing("b:1", 8)
    #expect(admission.finished("b:1") == ["a:2"])
    #expect(admission.waitingCount == 1)
  }

  @Test("a line that comes to wait while it delivers waits for its own turn to end, not a slot")
  func lineWaitsForItself() throws {
    let shares = try FairShares([FairShares.Group(prefix: "a:", weight: 1)])
    var admission = FairAdmission<String?>(shares, limit: 2)
    #expect(admission.arrive("a:1", group: "a:") == ["a:1"])
    #expect(admission.arrive("a:1", group: "a:").isEmpty)
    // The second slot is free for another line meanwhile.
    #expect(admission.arrive(nil, group: FairShares.otherKeysName) == [nil])
    #expect(admission.finished("a:1") == ["a:1"])
  }

  @Test("turns a worker took count as chosen: a group whose lines were all held comes back level")
  func takenTurnsCatchUp() throws {
    var turns = FairShareTurns(
      try FairShares([
        FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "b:", weight: 1),
      ])
    )
    // Other workers held every line of b: for a while: this one took a:'s lines only.
    for _ in 0..<100 { turns.chose("a:", among: ["a:"]) }
    turns.chose("b:", among: ["a:", "b:"])
    // b: starts level with a:, not 99 turns behind: the two alternate.
    let order = turns.order(["a:": ["a1", "a2"], "b:": ["b1", "b2"]], upTo: 4)
    #expect(order == ["a1", "b1", "a2", "b2"])
  }

  @Test("turns taken by a worker, and charged when each run ends, keep the weights")
  func takenTurnsKeepWeights() throws {
    var turns = FairShareTurns(
      try FairShares([
        FairShares.Group(prefix: "a:", weight: 3), FairShares.Group(prefix: "b:", weight: 1),
      ])
    )
    var given: [String: Int] = [:]
    for round in 0..<400 {
      // The look orders what it found; the worker takes the first, or, every fifth look, the
      // other group's (the first was taken by another worker a moment before).
      let order = turns.order(["a:": ["a"], "b:": ["b"]], upTo: 2)
      let taken = round % 5 == 4 ? order[1] : order[0]
      let group = taken == "a" ? "a:" : "b:"
      turns.chose(group, among: ["a:", "b:"])
      // Its run made 16 deliveries.
      var prepaid = FairShareTurns.turnCharge
      turns.handing(group, 16, prepaid: &prepaid)
      turns.ended(group, prepaid: prepaid)
      given[group, default: 0] += 16
    }
    let share = Double(given["a:", default: 0]) / Double(400 * 16)
    #expect(share >= 0.72 && share <= 0.78, "a:'s share: \(share)")
  }

  @Test("a delivering line's group is asked whether another waiting group's turn comes first")
  func comesBefore() throws {
    var state = WorkerState(
      paused: false,
      fairShares: try FairShares([
        FairShares.Group(prefix: "a:", weight: 1), FairShares.Group(prefix: "b:", weight: 1),
      ])
    )
    state.groupsWaiting = ["a:", "b:"]
    state.took(LineKey.key("b:1"), among: ["a:", "b:"])
    state.handing(LineKey.key("b:1"), 20)
    // b: has had a turn and more; a: none: a line of b: gives way, a line of a: would not.
    #expect(state.othersGroupsFirst(besides: LineKey.key("b:1")))
    #expect(!state.othersGroupsFirst(besides: LineKey.key("a:1")))
    // Nothing of a: waits: b:'s line goes on.
    state.groupsWaiting = ["b:"]
    #expect(!state.othersGroupsFirst(besides: LineKey.key("b:1")))
    // Without groups, never.
    let plain = WorkerState(paused: false)
    #expect(!plain.othersGroupsFirst(besides: LineKey.key("b:1")))
  }

  @Test("a worker's look orders the lines it found group by group, as the turns come")
  func ordersCandidates() throws {
    let shares = try FairShares([
      FairShares.Group(prefix: "a:", weight: 2), FairShares.Group(prefix: "b:", weight: 1),
    ])
    let turns = FairShareTurns(shares)
    let order = turns.order(["a:": ["a1", "a2", "a3", "a4"], "b:": ["b1", "b2"]], upTo: 5)
    #expect(order == ["a1", "b1", "a2", "a3", "b2"])
    // Ordering charges nothing: the same look orders the same way.
    #expect(turns.order(["a:": ["a1"], "b:": ["b1"]], upTo: 2) == ["a1", "b1"])
  }
}
