import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// Rate limits (`DeliveryOptions.rateLimits`), on every store.
///
/// Windows are fixed on the store's clock (this machine's for SQLite, the database server's for PostgreSQL, here the same), so
/// the tests bound what a limit allows from below by elapsed time, which load only lengthens.
@Suite("Rate limits, on every store", .timeLimit(.minutes(3)))
struct RateLimitContractTests {
  @Test(
    "a key over its limit waits, in order, for the next window; a key it does not count goes on",
    arguments: Store.all
  )
  func waitsForWindow(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await outbox.append(contentsOf: ["a1", "a2", "a3"], partition: "a")
    try await outbox.append(contentsOf: ["b1", "b2", "b3"], partition: "b")
    let limit = try RateLimit(1, per: .seconds(1), keys: .key("a"))
    let seen = OrderedRecorder<String>()
    let began = Date()
    try subject.startConfigured(
      { options in options.rateLimits = [limit] },
      .each { envelope in seen.record(envelope.message) }
    )
    try await outbox.waitUntilDelivered()
    let elapsed = Date().timeIntervalSince(began)
    // One of a's messages per window: the third begins two windows after the first, so at
    // least one whole second after delivery started.
    #expect(elapsed >= 1, "\(elapsed) s")
    let order = seen.values
    #expect(order.filter { $0.hasPrefix("a") } == ["a1", "a2", "a3"])
    #expect(order.filter { $0.hasPrefix("b") } == ["b1", "b2", "b3"])
    await subject.finish()
  }

  @Test(
    "a prefix's keys share one limit; each key under .each has its own",
    arguments: Store.all
  )
  func groupsAndEach(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    // A day's window: what it allows is all that is delivered while the test runs (unless the
    // test runs across midnight UTC, when the window ends: then it says so and checks less).
    let day = Duration.seconds(86_400)
    let limits = [
      try RateLimit(3, per: day, keys: .prefix("acme:")),
      try RateLimit(2, per: day, keys: .each),
    ]
    for key in ["acme:1", "acme:2", "acme:3", "solo"] {
      try await outbox.append(
        contentsOf: (1...3).map { "\(key)#\($0)" },
        partition: key
      )
    }
    let seen = OrderedRecorder<String>()
    let events = outbox.events
    let dayBefore = Int(Date().timeIntervalSince1970 / 86_400)
    try subject.startConfigured(
      { options in options.rateLimits = limits },
      .each { envelope in seen.record(envelope.message) }
    )
    // acme's keys share 3 (each key also at most 2); solo has 2 of its own: five deliveries,
    // each told once it is recorded.
    var delivered = 0
    for await event in events {
      if case .delivered = event { delivered += 1 }
      if delivered == 5 { break }
    }
    let dayAfter = Int(Date().timeIntervalSince1970 / 86_400)
    guard dayBefore == dayAfter else {
      Issue.record("the test ran across midnight UTC: a new window began; not checked")
      await subject.finish()
      return
    }
    let keys = try await outbox.keys()
    let pending = try await outbox.counts().pending
    #expect(pending == 12 - 5)
    let handed = seen.values
    #expect(handed.filter { $0.hasPrefix("acme:") }.count == 3)
    #expect(handed.filter { $0.hasPrefix("solo") } == ["solo#1", "solo#2"])
    for key in ["acme:1", "acme:2", "acme:3"] {
      let mine = handed.filter { $0.hasPrefix(key + "#") }
      #expect(mine == Array(["\(key)#1", "\(key)#2"].prefix(mine.count)), "\(mine)")
    }
    #expect(keys.count == 4)
    // Every key with messages left waits for the day's window to end, and says so.
    let midnight = Date(timeIntervalSince1970: Double(dayAfter + 1) * 86_400)
    for key in keys where key.pending > 0 {
      #expect(key.rateLimitedUntil == midnight, "\(key.partition ?? "-")")
      let reasons = key.stuck()
      #expect(reasons.contains(.rateLimited(until: midnight)), "\(reasons)")
    }
    await subject.finish()
  }

  @Test("a limit that cannot be kept is refused when it is made, saying what is wrong")
  func refusedLimits() throws {
    let refused = Result { () throws(OutboxError) in try RateLimit(0, per: .seconds(1), keys: .each)
    }
    guard case .failure(let error) = refused else {
      Issue.record("a limit of 0 was accepted")
      return
    }
    #expect(error.description.contains("1 delivery or more"))
  }
}
