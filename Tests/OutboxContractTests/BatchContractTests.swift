import Foundation
import OrderlyCore
import OrderlyOutboxCore
import OrderlyTestSupport
import Synchronization
import Testing

#if Server
import InMemoryTracing
import OrderlyServer
import Tracing
#endif

/// Ordered batches, as `start(limit:batchesOf:...)` states them, on every store: one line
/// runner delivers both, so each case must hold on each.
@Suite("Ordered batches, on every store", .timeLimit(.minutes(3)))
struct BatchContractTests {
  @Test(
    "each call gets up to N consecutive messages of one key, in order; never two batches of a key at once; an event per message",
    arguments: Store.all
  )
  func batches(store: Store) async throws {
    guard let subject = try await store.open(Int.self) else { return }
    let events = subject.outbox.events
    let counted = Recorder<String>()
    let listening = Task {
      for await event in events {
        if case .delivering = event { counted.record("delivering") }
        if case .delivered = event { counted.record("delivered") }
      }
    }
    defer { listening.cancel() }
    for key in ["a", "b", "c"] {
      try await subject.outbox.append(contentsOf: Array(0..<25), partition: key, headers: [:])
    }
    let calls = Recorder<[String]>()
    let inDelivery = KeysInDelivery()
    let overlaps = Atomic<Int>(0)
    try subject.start(limit: 3, batchesOf: 10) { envelopes in
      let keys = Set(envelopes.map { $0.partition ?? "-" })
      let overlapping = inDelivery.enter(keys)
      if overlapping { overlaps.add(1, ordering: .relaxed) }
      calls.record(envelopes.map { "\($0.partition ?? "-") \($0.message)#\($0.attempt)" })
      await Task.yield()
      inDelivery.leave(keys)
    }
    try await subject.outbox.waitUntilDelivered()
    let heard = await eventually { counted.all.count == 150 }
    await subject.finish()
    let all = calls.all
    #expect(overlaps.load(ordering: .relaxed) == 0)
    #expect(all.allSatisfy { (1...10).contains($0.count) })
    #expect(all.allSatisfy { Set($0.map { $0.prefix(1) }).count == 1 })
    for key in ["a", "b", "c"] {
      let line = all.joined().filter { $0.hasPrefix("\(key) ") }
      #expect(line == (0..<25).map { "\(key) \($0)#1" })
    }
    // 3 keys of 25 in batches of up to 10: at least 9 calls, and far fewer than 75.
    #expect(all.count >= 9 && all.count < 30)
    #expect(heard)
    let delivering = counted.all.count { $0 == "delivering" }
    #expect(delivering == 75)
  }

  @Test(
    "a failure in the middle: those before it are acknowledged, the failed one is retried first with its attempt counted, those after it are not counted as tried",
    arguments: Store.all
  )
  func failureMidBatch(store: Store) async throws {
    guard let subject = try await store.open(Int.self) else { return }
    let outbox = subject.outbox
    try await outbox.append(contentsOf: Array(0..<6), partition: "k", headers: [:])
    let calls = Recorder<[String]>()
    let pendingAtRetry = Mutex<Int?>(nil)
    try subject.start(batchesOf: 6, retry: quickRetry(maximumAttempts: 5)) { envelopes in
      calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
      if calls.all.count == 1 {
        throw BatchDeliveryError(delivered: 2, error: Refused())
      }
      if calls.all.count == 2 {
        let pending = try await outbox.counts().pending
        pendingAtRetry.withLock { $0 = pending }
      }
    }
    try await outbox.waitUntilDelivered()
    let pending = try await outbox.counts().pending
    await subject.finish()
    #expect(
      calls.all == [["0#1", "1#1", "2#1", "3#1", "4#1", "5#1"], ["2#2", "3#1", "4#1", "5#1"]]
    )
    // 0 and 1 were acknowledged before the retry began.
    #expect(pendingAtRetry.withLock { $0 } == 4)
    #expect(pending == 0)
  }

  @Test(
    "any other error fails the batch's first message; spent, it is a dead letter, and the line stops there (stopLine) or goes on (continueLine)",
    arguments: Store.all,
    [DeadLetterPolicy.stopLine, .continueLine]
  )
  func deadLetters(store: Store, policy: DeadLetterPolicy) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    try await outbox.append(contentsOf: ["ok", "poison", "after"], partition: "k", headers: [:])
    let calls = Recorder<[String]>()
    try subject.start(batchesOf: 3, retry: quickRetry(maximumAttempts: 2), onDeadLetter: policy) {
      envelopes in
      calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
      if let bad = envelopes.firstIndex(where: { $0.message == "poison" }) {
        // Said by index for a batch that starts before it, by a plain error once it is first.
        if bad == 0 { throw Refused() }
        throw BatchDeliveryError(delivered: bad, error: Refused())
      }
    }
    let settled = await eventually { try await outbox.counts().deadLetters == 1 }
    #expect(settled)
    let letters = try await outbox.deadLetters()
    #expect(letters.map(\.message) == ["poison"])
    #expect(letters.first?.attempts == 2)
    #expect(letters.first?.reason == "refused by the receiver")
    if policy == .stopLine {
      // "after" waits behind the dead letter.
      let pending = try await outbox.counts().pending
      #expect(pending == 1)
      #expect(calls.all == [["ok#1", "poison#1", "after#1"], ["poison#2", "after#1"]])
    } else {
      try await outbox.waitUntilDelivered()
      #expect(
        calls.all == [["ok#1", "poison#1", "after#1"], ["poison#2", "after#1"], ["after#1"]]
      )
    }
    await subject.finish()
  }

  @Test(
    "a batch stops before a message appended for later; the line waits for it in order",
    arguments: Store.all
  )
  func notBefore(store: Store) async throws {
    guard let subject = try await store.open(Int.self) else { return }
    let outbox = subject.outbox
    // "k" waits an hour at 2: its batch is [0, 1], and 4 waits behind 2 and 3, however slow
    // the machine. "j" waits a second at 2: its messages come in order, in whatever batches.
    for (key, wait) in [("k", 3_600.0), ("j", 1.0)] {
      try await outbox.append(contentsOf: [0, 1], partition: key, headers: [:])
      try await outbox.append(
        contentsOf: [2, 3],
        partition: key,
        headers: [:],
        deliverAfter: Date().addingTimeInterval(wait)
      )
      try await outbox.append(4, partition: key, headers: [:])
    }
    let calls = Recorder<String>()
    try subject.start(batchesOf: 10) { envelopes in
      let key = envelopes.first?.partition ?? "-"
      calls.record("\(key) " + envelopes.map { "\($0.message)" }.joined(separator: ","))
    }
    let delivered = await eventually {
      let joined = calls.all.filter { $0.hasPrefix("j ") }.map { $0.dropFirst(2) }
      let pending = try await outbox.counts().pending
      return joined.joined(separator: ",") == "0,1,2,3,4" && pending == 3
    }
    await subject.finish()
    #expect(delivered)
    #expect(calls.all.filter { $0.hasPrefix("k ") } == ["k 0,1"])
  }

  @Test(
    "a message that no longer decodes ends the batch before it, and is set aside once it is first",
    arguments: Store.all
  )
  func undecodable(store: Store) async throws {
    guard let subject = try await store.open(Fragile.self) else { return }
    let outbox = subject.outbox
    try await outbox.append(
      contentsOf: ["a", "unreadable", "b"].map(Fragile.init(text:)),
      partition: "k",
      headers: [:]
    )
    let calls = Recorder<[String]>()
    try subject.start(batchesOf: 3, onDeadLetter: .continueLine) { envelopes in
      calls.record(envelopes.map { "\($0.message.text)#\($0.attempt)" })
    }
    try await outbox.waitUntilDelivered()
    let letters = try await outbox.deadLetters()
    await subject.finish()
    // "b" was claimed with the first batch but not handed: its attempt was given back.
    #expect(calls.all == [["a#1"], ["b#1"]])
    #expect(letters.count == 1)
    #expect(letters.first?.attempts == 1)
    #expect(letters.first?.reason.contains("no longer decodes") == true)
  }

  @Test(
    "a batch size below 1 is refused, saying what to give; a handler's count outside its batch fails the first message",
    arguments: Store.all
  )
  func badInput(store: Store) async throws {
    guard let subject = try await store.open(Int.self) else { return }
    let outbox = subject.outbox
    #expect(throws: OutboxError.invalidOption("batchSize must be 1 or more (got 0)")) {
      try subject.start(batchesOf: 0) { _ in }
    }
    let eachOfTwo =
      "batchSize 2 needs a batch handler (.batches); .each gets one message a call"
    #expect(throws: OutboxError.invalidOption(eachOfTwo)) {
      try subject.startHandler(2, .each { _ in })
    }
    try await outbox.append(contentsOf: [0, 1], partition: "k", headers: [:])
    let calls = Recorder<[String]>()
    try subject.start(batchesOf: 2, retry: quickRetry(maximumAttempts: 5)) { envelopes in
      calls.record(envelopes.map { "\($0.message)#\($0.attempt)" })
      if calls.all.count == 1 { throw BatchDeliveryError(delivered: 7, error: Refused()) }
    }
    try await outbox.waitUntilDelivered()
    await subject.finish()
    #expect(calls.all == [["0#1", "1#1"], ["0#2", "1#1"]])
  }

  #if Server
  @Test(
    "OutboxService serves a batched outbox: each key's messages in order, in batches of up to N, one span a call",
    arguments: Store.all
  )
  func serviceServesBatches(store: Store) async throws {
    guard let subject = try await store.open(Int.self) else { return }
    for key in ["a", "b", "c"] {
      try await subject.outbox.append(contentsOf: Array(0..<20), partition: key, headers: [:])
    }
    let calls = Recorder<[String]>()
    let tracer = InMemoryTracer()
    let service = subject.service("batched", 8, tracer) { envelopes in
      calls.record(envelopes.map { "\($0.partition ?? "-") \($0.message)#\($0.attempt)" })
    }
    let running = Task { try await service.run() }
    try await subject.outbox.waitUntilDelivered()
    running.cancel()
    try await running.value
    await subject.finish()
    let all = calls.all
    #expect(all.allSatisfy { (1...8).contains($0.count) })
    #expect(all.allSatisfy { Set($0.map { $0.prefix(1) }).count == 1 })
    for key in ["a", "b", "c"] {
      let line = all.joined().filter { $0.hasPrefix("\(key) ") }
      #expect(line == (0..<20).map { "\(key) \($0)#1" })
    }
    // 3 keys of 20 in batches of up to 8: 9 calls at least, far fewer than 60.
    #expect(all.count >= 9 && all.count < 30)
    let spans = tracer.finishedSpans.filter { $0.operationName == "orderly.outbox.deliver" }
    let spanSizes = spans.compactMap { span -> Int? in
      guard case .int64(let size) = span.attributes["orderly.outbox.batch_size"]?.toSpanAttribute()
      else { return nil }
      return Int(size)
    }
    let callSizes = all.map(\.count)
    #expect(spanSizes.sorted() == callSizes.sorted())
  }
  #endif
}

/// A message whose text `unreadable` is written but cannot be read back: a stored payload that
/// no longer decodes (the type changed since it was appended).
struct Fragile: Codable, Sendable {
  let text: String

  init(text: String) { self.text = text }

  init(from decoder: any Decoder) throws {
    let text = try decoder.singleValueContainer().decode(String.self)
    if text == "unreadable" {
      throw DecodingError.dataCorrupted(
        .init(codingPath: [], debugDescription: "this text can no longer be read")
      )
    }
    self.text = text
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    try container.encode(text)
  }
}

/// The keys whose batches are being delivered, touched by several keys' deliveries at once,
/// behind a lock announced to ThreadSanitizer (which cannot see `Mutex`'s own on Linux).
private final class KeysInDelivery: Sendable {
  private let keys = Mutex<Set<String>>([])

  /// Marks `entering` as in delivery; returns whether any of them already was.
  func enter(_ entering: Set<String>) -> Bool {
    keys.withLock(announcingTo: self) { busy in
      defer { busy.formUnion(entering) }
      return !busy.isDisjoint(with: entering)
    }
  }

  /// Marks `leaving` as no longer in delivery.
  func leave(_ leaving: Set<String>) {
    keys.withLock(announcingTo: self) { $0.subtract(leaving) }
  }
}
