import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Synchronization
import Testing

/// The operator's policy table, one test per row, on every store.
///
/// The table is in the article "Operating an outbox" (`OrderlyOutboxCore`'s catalog). Each test
/// checks what happens to a key, what the operator sees (``DurableOutbox/keys()`` and
/// ``DurableOutbox/counts()``), what fixes it, and that the other keys go on.
@Suite("The operator's policy table, on every store", .timeLimit(.minutes(3)))
struct PolicyTableTests {
  @Test(
    "a failing message is retried: its key waits and says so; the other keys go on",
    arguments: Store.all
  )
  func retrying(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["flaky", "behind"], partition: "k", headers: [:])
    try await subject.outbox.append(contentsOf: ["o1", "o2"], partition: "other", headers: [:])
    let failing = Switch(on: true)
    let seen = Recorder<String>()
    // Long enough waits that the key is seen waiting between attempts.
    let retry = try RetryPolicy(initialDelay: .seconds(30), maximumDelay: .seconds(30), jitter: 0)
    try subject.start(retry: retry) { envelope in
      if envelope.message == "flaky", failing.isOn { throw Refused() }
      seen.record(envelope.message)
    }
    let waiting = await eventually {
      // The other key's deliveries recorded too (a handler returns before its acknowledgement).
      let keys = try await subject.outbox.keys()
      let key = keys.first { $0.partition == "k" }
      return key?.headAttempts == 1 && seen.all == ["o1", "o2"]
        && !keys.contains { $0.partition == "other" }
    }
    #expect(waiting)
    let keys = try await subject.outbox.keys()
    let key = try #require(keys.first { $0.partition == "k" })
    #expect(key.pending == 2 && key.deadLetters == 0 && !key.paused)
    #expect(key.stuck() == [.retrying(attempts: 1)])
    #expect(keys.first { $0.partition == "other" } == nil)
    // The fix: the receiver answers again; a pause and resume ends the wait at once.
    failing.set(false)
    subject.outbox.pause()
    subject.outbox.resume()
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(seen.all == ["o1", "o2", "flaky", "behind"])
  }

  @Test(
    "a dead letter under stop-the-line blocks its key, visibly, until it is retried or dropped",
    arguments: Store.all
  )
  func deadLetterStops(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(
      contentsOf: ["poison", "b1", "b2"],
      partition: "k",
      headers: [:]
    )
    try await subject.outbox.append("other", partition: "j", headers: [:])
    let poisoned = Switch(on: true)
    let seen = Recorder<String>()
    try subject.start(onDeadLetter: .stopLine) { envelope in
      if envelope.message == "poison", poisoned.isOn { throw PermanentDeliveryFailure("no") }
      seen.record(envelope.message)
    }
    let blocked = await eventually {
      try await subject.outbox.counts().deadLetters == 1 && seen.all == ["other"]
    }
    #expect(blocked)
    let keys = try await subject.outbox.keys()
    let key = try #require(keys.first { $0.partition == "k" })
    #expect(key.pending == 2 && key.deadLetters == 1)
    #expect(key.stuck() == [.atDeadLetter])
    let counts = try await subject.outbox.counts()
    #expect(counts.blockedKeys == 1 && counts.worstBlockedPartition == "k")
    // Nothing behind the dead letter moved.
    #expect(seen.all == ["other"])
    let letter = try #require(try await subject.outbox.deadLetters().first)
    let stored = try #require(try await subject.outbox.storedMessage(id: letter.id))
    #expect(stored.deadLetter?.reason == "no" && stored.partition == "k")
    poisoned.set(false)
    try await subject.outbox.retryDeadLetter(id: letter.id)
    try await subject.outbox.waitUntilDelivered()
    let after = try await subject.outbox.keys()
    await subject.finish()
    #expect(seen.all == ["other", "poison", "b1", "b2"])
    #expect(after.isEmpty)
  }

  @Test(
    "a dead letter under go-on: the key moves on, the dead letter stays for the operator",
    arguments: Store.all
  )
  func deadLetterGoesOn(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(
      contentsOf: ["poison", "b1", "b2"],
      partition: "k",
      headers: [:]
    )
    let seen = Recorder<String>()
    try subject.start(onDeadLetter: .continueLine) { envelope in
      if envelope.message == "poison" { throw PermanentDeliveryFailure("no") }
      seen.record(envelope.message)
    }
    try await subject.outbox.waitUntilDelivered()
    #expect(seen.all == ["b1", "b2"])
    let keys = try await subject.outbox.keys()
    let key = try #require(keys.first { $0.partition == "k" })
    #expect(key.pending == 0 && key.deadLetters == 1)
    #expect(key.stuck(onDeadLetter: .continueLine).isEmpty)
    let letter = try #require(try await subject.outbox.deadLetters().first)
    try await subject.outbox.dropDeadLetter(id: letter.id)
    let after = try await subject.outbox.keys()
    await subject.finish()
    #expect(after.isEmpty)
  }

  @Test(
    "a paused key waits, visibly; resumed, it delivers from its oldest message; others go on",
    arguments: Store.all
  )
  func paused(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["p1", "p2"], partition: "p", headers: [:])
    try await subject.outbox.append(contentsOf: ["o1", "o2"], partition: "o", headers: [:])
    try await subject.outbox.pause(partition: "p")
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    let othersDone = await eventually { seen.all == ["o1", "o2"] }
    #expect(othersDone)
    let keys = try await subject.outbox.keys()
    let key = try #require(keys.first { $0.partition == "p" })
    #expect(key.paused && key.pending == 2 && key.stuck() == [.paused])
    #expect(try await subject.outbox.counts().blockedKeys == 1)
    try await subject.outbox.resume(partition: "p")
    try await subject.outbox.waitUntilDelivered()
    let after = try await subject.outbox.keys()
    await subject.finish()
    #expect(seen.all == ["o1", "o2", "p1", "p2"])
    #expect(after.isEmpty)
  }

  @Test(
    "a message appended with a not-before time: its key waits for it in order, visibly; others go on",
    arguments: Store.all
  )
  func scheduled(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let far = Date().addingTimeInterval(3_600)
    let soon = Date().addingTimeInterval(0.3)
    try await subject.outbox.append(
      contentsOf: ["f1"],
      partition: "far",
      headers: [:],
      deliverAfter: far
    )
    try await subject.outbox.append(contentsOf: ["f2"], partition: "far", headers: [:])
    try await subject.outbox.append(
      contentsOf: ["s1"],
      partition: "soon",
      headers: [:],
      deliverAfter: soon
    )
    try await subject.outbox.append(contentsOf: ["s2"], partition: "soon", headers: [:])
    try await subject.outbox.append(contentsOf: ["o1"], partition: "other", headers: [:])
    let seen = Recorder<(String, Date)>()
    try subject.start { envelope in seen.record((envelope.message, Date())) }
    let delivered = await eventually {
      let keys = try await subject.outbox.keys()
      return seen.all.count == 3
        && !keys.contains { $0.partition == "soon" || $0.partition == "other" }
    }
    #expect(delivered)
    let keys = try await subject.outbox.keys()
    await subject.finish()
    let order = seen.all.map(\.0)
    #expect(order.filter { $0.hasPrefix("s") } == ["s1", "s2"])
    #expect(order.contains("o1") && !order.contains("f1") && !order.contains("f2"))
    // Never before its time (stores keep microseconds, or a double of seconds).
    let s1 = try #require(seen.all.first { $0.0 == "s1" })
    #expect(s1.1 >= soon.addingTimeInterval(-0.001), "\(s1.1) < \(soon)")
    // The far key waits, and says until when.
    let key = try #require(keys.first { $0.partition == "far" })
    #expect(key.pending == 2)
    let until = try #require(key.headNotBefore)
    #expect(abs(until.timeIntervalSince(far)) < 0.001)
    #expect(key.stuck() == [.scheduled(until: until)])
  }

  @Test(
    "an append whose unique key is held stores nothing and names the holder; its line and others go on",
    arguments: Store.all
  )
  func uniqueKeyHeld(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let holder = try await outbox.append("charge", uniqueKey: "invoice-7", partition: "k")
    let duplicate = try await outbox.append("charge again", uniqueKey: "invoice-7", partition: "k")
    try await outbox.append("o1", partition: "o", headers: [:])
    #expect(duplicate == .duplicate(of: holder.id))
    // What the operator sees: the holder, by the id the duplicate returned; no stuck key.
    let stored = try await outbox.storedMessage(id: duplicate.id)
    #expect(stored?.payload == Data("\"charge\"".utf8))
    #expect(stored?.uniqueKey == "invoice-7")
    let keys = try await outbox.keys()
    #expect(keys.allSatisfy { $0.stuck().isEmpty })
    #expect(keys.first { $0.partition == "k" }?.pending == 1)
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    try await outbox.waitUntilDelivered()
    // The fix is time: once the holder is delivered, the key is free.
    let later = try await outbox.append("next charge", uniqueKey: "invoice-7", partition: "k")
    try await outbox.waitUntilDelivered()
    await subject.finish()
    #expect(later.wasAppended)
    #expect(seen.all.sorted() == ["charge", "next charge", "o1"])
  }

  @Test(
    "a poison key is quarantined after 3 failed attempts: paused with why, listed first, others go on; resumed, it delivers in order",
    arguments: Store.all
  )
  func quarantined(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await outbox.append(contentsOf: ["poison", "behind"], partition: "p", headers: [:])
    try await outbox.append(contentsOf: ["o1", "o2"], partition: "o", headers: [:])
    let events = outbox.events
    let fixed = Mutex(false)
    let seen = Recorder<String>()
    let retry = try RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
    try subject.startConfigured(
      { options in
        options.retry = retry
        options.quarantine = QuarantinePolicy(afterFailedAttempts: 3)
      },
      .each { envelope in
        if envelope.message == "poison", !fixed.withLock({ $0 }) { throw Refused() }
        seen.record(envelope.message)
      }
    )
    var quarantine: (partition: String?, reason: String)?
    for await event in events {
      if case .quarantined(_, _, let partition, let reason) = event {
        quarantine = (partition, reason)
        break
      }
    }
    #expect(quarantine?.partition == "p")
    let othersDone = await eventually { seen.all == ["o1", "o2"] }
    #expect(othersDone)
    // What the operator sees: the key first, paused with why, its message at its head.
    let keys = try await outbox.keys().sortedForOperator()
    let first = try #require(keys.first)
    let reason = "its first message failed 3 time(s) in a row; last error: refused by the receiver"
    #expect(first.partition == "p" && first.paused && first.pending == 2)
    #expect(first.quarantine == reason && first.headAttempts == 3)
    #expect(first.stuck().first == .quarantined(reason: reason))
    let blocked = try await outbox.counts().blockedKeys
    #expect(blocked == 1)
    // The fix, then `resume KEY`: delivered from the same message, in order.
    fixed.withLock { $0 = true }
    try await outbox.resume(partition: "p")
    try await outbox.waitUntilDelivered()
    let after = try await outbox.keys()
    await subject.finish()
    #expect(seen.all == ["o1", "o2", "poison", "behind"])
    #expect(after.isEmpty)
  }

  @Test("a quarantine policy of 0 attempts is refused, and nothing starts", arguments: Store.all)
  func quarantineRefused(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let message = refusal {
      try subject.startConfigured(
        { $0.quarantine = QuarantinePolicy(afterFailedAttempts: 0) },
        .each { _ in }
      )
    }
    #expect(message.contains("quarantine.afterFailedAttempts must be 1 or more (got 0)"))
    try subject.start { _ in }
    await subject.finish()
  }

  @Test(
    "a handler that keeps timing out: retried with attempts counted, then a dead letter saying so",
    arguments: Store.all
  )
  func timingOut(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["slow", "behind"], partition: "t", headers: [:])
    try await subject.outbox.append("other", partition: "o", headers: [:])
    let seen = Recorder<String>()
    try subject.start(retry: quickRetry(maximumAttempts: 3)) { envelope in
      if envelope.message == "slow" { throw TimedOut(attempt: envelope.attempt) }
      seen.record(envelope.message)
    }
    let dead = await eventually { try await subject.outbox.counts().deadLetters == 1 }
    #expect(dead)
    let letter = try #require(try await subject.outbox.deadLetters().first)
    #expect(letter.attempts == 3)
    #expect(letter.reason.contains("timed out"))
    let key = try #require(try await subject.outbox.keys().first { $0.partition == "t" })
    #expect(key.stuck() == [.atDeadLetter] && key.pending == 1)
    let othersDone = await eventually { seen.all == ["other"] }
    await subject.finish()
    #expect(othersDone)
  }
}

/// The policy table's first rule, at scale: a stuck key never slows the others.
///
/// A suite of its own for its time limit (2,000 synced deliveries, slow under ThreadSanitizer on a busy
/// machine); the rate itself is a `ratios` row.
@Suite("The policy table at scale, on every store", .timeLimit(.minutes(10)))
struct PolicyTableScaleTests {
  @Test(
    "1,000 healthy keys and 10 blocked ones: the blocked are tried once, each healthy key delivered",
    arguments: Store.all
  )
  func blockedKeysCostNothing(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let healthy = (0..<1_000).map { "h\($0)" }
    let blocked = (0..<10).map { "x\($0)" }
    for key in blocked {
      try await subject.outbox.append(
        contentsOf: ["poison", "behind"],
        partition: key,
        headers: [:]
      )
    }
    for key in healthy {
      try await subject.outbox.append(contentsOf: ["1", "2"], partition: key, headers: [:])
    }
    let attempts = Recorder<String>()
    try subject.start(limit: 8, onDeadLetter: .stopLine) { envelope in
      attempts.record("\(envelope.partition ?? "-") \(envelope.message)")
      if envelope.message == "poison" { throw PermanentDeliveryFailure("no") }
    }
    let done = await eventually {
      let counts = try await subject.outbox.counts()
      return counts.deadLetters == 10 && counts.pending == 10
    }
    #expect(done)
    let keys = try await subject.outbox.keys()
    await subject.finish()
    let all = attempts.all
    // Each blocked key was tried once, and nothing behind its dead letter.
    for key in blocked {
      let tried = all.filter { $0.hasPrefix("\(key) ") }
      #expect(tried == ["\(key) poison"])
    }
    // Every healthy key's two messages, once each, in order.
    var perKey: [String: [String]] = [:]
    for line in all {
      let parts = line.split(separator: " ")
      perKey[String(parts[0]), default: []].append(String(parts[1]))
    }
    let wrong = healthy.filter { perKey[$0] != ["1", "2"] }
    #expect(wrong.isEmpty, "\(wrong.prefix(5))")
    #expect(Set(keys.compactMap(\.partition)) == Set(blocked))
  }
}

/// A handler's own timeout, as a network client throws it.
struct TimedOut: Error, CustomStringConvertible {
  let attempt: Int
  var description: String { "the request timed out (attempt \(attempt))" }
}

/// What `call` threw, as its description, or `no error`.
private func refusal(of call: () throws -> Void) -> String {
  do {
    try call()
    return "no error"
  } catch {
    return "\(error)"
  }
}
