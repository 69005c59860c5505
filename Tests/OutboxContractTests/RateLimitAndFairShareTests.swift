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

  @Test("while every group waits, slots follow the weights exactly, however many keys each has")
  func weights() throws {
    var shares = try FairShares([("big:", 1), ("small:", 3)], otherWeight: 1)
    #expect(shares.group(of: "big:42") == "big:" && shares.group(of: "small:1") == "small:")
    #expect(shares.group(of: "loose") == FairShares.otherKeys)
    #expect(shares.group(of: nil) == FairShares.otherKeys)
    var given: [String: Int] = [:]
    for _ in 0..<4_000 {
      let next = shares.next(among: ["big:", "small:"])
      let group = try #require(next)
      given[group, default: 0] += 1
    }
    // 1,000 keys behind big: and 10 behind small: change nothing: slots go to groups.
    #expect(given["small:"] == 3_000 && given["big:"] == 1_000)
  }

  @Test("a group that comes back after a while does not take a burst of the slots it missed")
  func noBurst() throws {
    var shares = try FairShares([("a:", 1), ("b:", 1)])
    for _ in 0..<1_000 { _ = shares.next(among: ["a:"]) }
    var given: [String: Int] = [:]
    for _ in 0..<100 {
      let next = shares.next(among: ["a:", "b:"])
      let group = try #require(next)
      given[group, default: 0] += 1
    }
    #expect(given["a:"] == 50 && given["b:"] == 50)
    let nothing = shares.next(among: [])
    #expect(nothing == nil)
  }

  @Test("groups that cannot be kept are refused")
  func badGroups() {
    let bad: [([(prefix: String, weight: Int)], Int, String)] = [
      ([("", 1)], 1, "not empty"),
      ([("a:", 1), ("a:", 2)], 1, "named twice"),
      ([("a:", 0)], 1, "1 to 1000"),
      ([("a:", 1_001)], 1, "1 to 1000"),
      ([("a:", 1)], 0, "1 to 1000"),
    ]
    for (groups, other, words) in bad {
      do {
        _ = try FairShares(groups, otherWeight: other)
        Issue.record("\(groups) was accepted")
      } catch {
        #expect(error.description.contains(words), "\(error.description)")
      }
    }
  }
}
