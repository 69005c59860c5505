import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// Unique keys (`append(_:uniqueKey:uniqueFor:...)`), as `DurableOutbox` states them, on every
/// store.
@Suite("Unique keys, on every store", .timeLimit(.minutes(3)))
struct UniqueKeyContractTests {
  @Test(
    "a key is held while its message is pending: a second append stores nothing and names the first",
    arguments: Store.all
  )
  func heldWhilePending(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let events = outbox.events
    let first = try await outbox.append("charge 1", uniqueKey: "invoice-7", partition: "a")
    let second = try await outbox.append("charge 2", uniqueKey: "invoice-7", partition: "a")
    // The key is the outbox's, not the line's: another line's append is a duplicate too.
    let third = try await outbox.append("charge 3", uniqueKey: "invoice-7", partition: "b")
    let other = try await outbox.append("refund", uniqueKey: "invoice-8", partition: "a")
    #expect(first.wasAppended)
    #expect(second == .duplicate(of: first.id))
    #expect(third == .duplicate(of: first.id))
    #expect(other.wasAppended && other.id != first.id)
    // Each duplicate is told, naming the holder and the key.
    var told: [String] = []
    for await event in events {
      if case .duplicate(let id, _, let key) = event {
        told.append("\(id == first.id ? "first" : "\(id)") \(key)")
        if told.count == 2 { break }
      }
    }
    #expect(told == ["first invoice-7", "first invoice-7"])
    let pending = try await outbox.counts().pending
    #expect(pending == 2)

    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    try await outbox.waitUntilDelivered()
    #expect(seen.all.sorted() == ["charge 1", "refund"])

    // Delivered: the key is free again.
    let again = try await outbox.append("charge 4", uniqueKey: "invoice-7", partition: "a")
    #expect(again.wasAppended && again.id != first.id)
    try await outbox.waitUntilDelivered()
    #expect(seen.all.sorted() == ["charge 1", "charge 4", "refund"])
    await subject.finish()
  }

  @Test(
    "with a window, a key stays held after its message was delivered, until the window passes",
    arguments: Store.all
  )
  func heldForWindow(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let long = try await outbox.append(
      "daily report",
      uniqueKey: "report",
      uniqueFor: .seconds(3_600)
    )
    let started = ContinuousClock.now
    let short = try await outbox.append("ping", uniqueKey: "ping", uniqueFor: .milliseconds(300))
    try subject.start { _ in }
    try await outbox.waitUntilDelivered()
    let counts = try await outbox.counts()
    #expect(counts.pending == 0)

    let repeated = try await outbox.append(
      "daily report",
      uniqueKey: "report",
      uniqueFor: .seconds(3_600)
    )
    #expect(repeated == .duplicate(of: long.id))
    // Without a window of its own, an append still finds the key held by the window.
    let plain = try await outbox.append("daily report", uniqueKey: "report")
    #expect(plain == .duplicate(of: long.id))

    // Real time, not the outbox's clock: a window is the wall clock's. Waiting longer than the
    // window only makes the test surer on a busy machine.
    try await Task.sleep(until: started + .milliseconds(600))
    let later = try await outbox.append("ping", uniqueKey: "ping", uniqueFor: .milliseconds(300))
    #expect(later.wasAppended && later.id != short.id)
    try await outbox.waitUntilDelivered()
    await subject.finish()
  }

  @Test(
    "in one batch, a repeated key is a duplicate of its first message, and order is kept",
    arguments: Store.all
  )
  func inBatch(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let results = try await outbox.append(
      contentsOf: ["a", "b", "a again", "c"],
      uniqueKey: { $0 == "b" ? nil : String($0.prefix(1)) },
      partition: "line"
    )
    #expect(results.count == 4)
    #expect(results[0].wasAppended && results[1].wasAppended && results[3].wasAppended)
    #expect(results[2] == .duplicate(of: results[0].id))
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    try await outbox.waitUntilDelivered()
    #expect(seen.all == ["a", "b", "c"])
    await subject.finish()
  }

  @Test(
    "appenders racing on one key: exactly one stores its message, every other names it",
    arguments: Store.all
  )
  func racingAppenders(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    for round in 0..<5 {
      let key = "race-\(round)"
      let results = try await withThrowingTaskGroup(of: UniqueAppend.self) { group in
        for appender in 0..<12 {
          group.addTask {
            try await outbox.append(
              "\(key) by \(appender)",
              uniqueKey: key,
              partition: "p\(appender % 3)"
            )
          }
        }
        var all: [UniqueAppend] = []
        for try await result in group { all.append(result) }
        return all
      }
      let appended = results.filter(\.wasAppended)
      #expect(appended.count == 1, "\(key): \(results)")
      let holders = Set(results.map(\.id))
      #expect(holders.count == 1, "\(key): \(results)")
    }
    let pending = try await outbox.counts().pending
    #expect(pending == 5)
    await subject.finish()
  }

  @Test(
    "a dead letter no longer holds its key, and a retried one does not take it back",
    arguments: Store.all
  )
  func deadLetterFreesKey(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let failing = try await outbox.append("bad", uniqueKey: "k")
    try subject.start(onDeadLetter: .continueLine) { envelope in
      if envelope.message == "bad" { throw PermanentDeliveryFailure("refused") }
    }
    try await outbox.waitUntilDelivered()
    let dead = try await outbox.deadLetters().map(\.id)
    #expect(dead == [failing.id])
    await outbox.stop()
    let next = try await outbox.append("good", uniqueKey: "k")
    #expect(next.wasAppended)
    try await outbox.retryDeadLetter(id: failing.id)
    let after = try await outbox.append("good again", uniqueKey: "k")
    #expect(after == .duplicate(of: next.id))
    let pending = try await outbox.counts().pending
    #expect(pending == 2)
    await subject.finish()
  }

  @Test(
    "bad keys and windows are refused with what is wrong, and store nothing",
    arguments: Store.all
  )
  func badInput(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let long = String(repeating: "é", count: 101)
    let refusals: [(String, @Sendable () async throws -> Void)] = [
      ("empty", { try await outbox.append("m", uniqueKey: "") }),
      ("202 bytes", { try await outbox.append("m", uniqueKey: long) }),
      ("not longer than zero", { try await outbox.append("m", uniqueKey: "k", uniqueFor: .zero) }),
      (
        "not longer than zero",
        { try await outbox.append("m", uniqueKey: "k", uniqueFor: .seconds(-1)) }
      ),
      (
        "2 unique keys were given for 3 messages",
        {
          try await outbox.append(
            contentsOf: ["a", "b", "c"],
            uniqueKeys: ["a", nil],
            uniqueFor: nil,
            partition: nil,
            headers: [:],
            deliverAfter: nil
          )
        }
      ),
      // A batch with one bad key stores none of its messages.
      (
        "empty",
        { try await outbox.append(contentsOf: ["a", "b"], uniqueKey: { $0 == "a" ? "a" : "" }) }
      ),
    ]
    for (expected, call) in refusals {
      let message = await refusal(of: call)
      #expect(message.contains("invalid unique key") && message.contains(expected), "\(message)")
    }
    let counts = try await outbox.counts()
    #expect(counts.pending == 0)
    // The key "a" of the refused batch was not taken.
    let free = try await outbox.append("a", uniqueKey: "a")
    #expect(free.wasAppended)
    await subject.finish()
  }

  /// What `call` threw, as its description, or `no error`.
  private func refusal(of call: @Sendable () async throws -> Void) async -> String {
    do {
      try await call()
      return "no error"
    } catch {
      return "\(error)"
    }
  }
}
