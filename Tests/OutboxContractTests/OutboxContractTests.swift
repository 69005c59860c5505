import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Synchronization
import Testing

/// The outbox's contract, as its articles state it, run against every store this build has:
/// SQLite in memory and in a file, and PostgreSQL (with the Postgres trait and a server).
///
/// Each test is written against `DurableOutbox` only; the stores differ in how delivery is
/// started, nothing else.
@Suite("The outbox contract, on every store", .timeLimit(.minutes(3)))
struct OutboxContractTests {
  @Test("each line is delivered in append order; lines go side by side", arguments: Store.all)
  func orderPerKey(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let keys = ["a", "b", "c"]
    for round in 0..<10 {
      for key in keys {
        try await subject.outbox.append("\(key)\(round)", partition: key, headers: [:])
      }
      try await subject.outbox.append("-\(round)", partition: nil, headers: [:])
    }
    let seen = Recorder<String>()
    try subject.start(limit: 3) { envelope in
      seen.record("\(envelope.partition ?? "-") \(envelope.message)")
    }
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    let all = seen.all
    for key in keys + ["-"] {
      let line = all.filter { $0.hasPrefix("\(key) ") }
      let expected = (0..<10).map { "\(key) \(key)\($0)" }
      #expect(line == expected, "\(key): \(line)")
    }
  }

  @Test(
    "with one slot, a busy line gives way to a waiting line within 16 deliveries, and stays in order",
    arguments: Store.all
  )
  func turnGivesWay(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    // "a" never runs out while it is delivered: each delivery appends its next message, so the
    // message "b" gets waits longer than any of "a"'s left (the line the slot goes to next).
    try await subject.outbox.append("a1", partition: "a", headers: [:])
    let seen = Recorder<String>()
    let first = Gate()
    let appended = Gate()
    let outbox = subject.outbox
    try subject.start(limit: 1) { envelope in
      seen.record(envelope.message)
      if envelope.message == "a1" {
        first.open()
        try await appended.wait()
      }
      if envelope.partition == "a", let number = Int(envelope.message.dropFirst()), number < 40 {
        try await outbox.append("a\(number + 1)", partition: "a", headers: [:])
      }
    }
    // "b" is appended while "a" holds the only slot: it waits for "a"'s turn to end.
    try await first.wait()
    try await subject.outbox.append("b1", partition: "b", headers: [:])
    appended.open()
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    let all = seen.all
    let before = all.prefix { $0 != "b1" }.count
    #expect(all.contains("b1"))
    #expect(before <= LineTurn.standardDeliveries, "\(all)")
    let line = all.filter { $0.hasPrefix("a") }
    #expect(line == (1...40).map { "a\($0)" })
  }

  @Test(
    "a failed message is retried before the rest of its line; attempts count 1, 2, 3",
    arguments: Store.all
  )
  func retriesKeepTheirPlace(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["flaky", "after"], partition: "k", headers: [:])
    let seen = Recorder<String>()
    try subject.start(retry: quickRetry(maximumAttempts: 5)) { envelope in
      seen.record("\(envelope.message)#\(envelope.attempt)")
      if envelope.message == "flaky" && envelope.attempt < 3 { throw Refused() }
    }
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(seen.all == ["flaky#1", "flaky#2", "flaky#3", "after#1"])
  }

  @Test(
    "stop the line: a dead letter holds its line, others go on; retried, it keeps its place and counts from 1",
    arguments: Store.all
  )
  func deadLetterStopsItsLine(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let poisoned = Switch(on: true)
    try await subject.outbox.append(contentsOf: ["poison", "behind"], partition: "k", headers: [:])
    try await subject.outbox.append("other", partition: "j", headers: [:])
    let seen = Recorder<String>()
    try subject.start(onDeadLetter: .stopLine) { envelope in
      if envelope.message == "poison" && poisoned.isOn {
        throw PermanentDeliveryFailure("refused for good")
      }
      seen.record("\(envelope.message)#\(envelope.attempt)")
    }
    let ready = await eventually {
      let letters = try await subject.outbox.deadLetters()
      return letters.count == 1 && seen.all.contains("other#1")
    }
    #expect(ready)
    let letters = try await subject.outbox.deadLetters()
    let letter = try #require(letters.first)
    #expect(letter.message == "poison" && letter.partition == "k")
    #expect(letter.reason.contains("refused for good"))
    await #expect(throws: OutboxError.lineStopped(partition: "k", deadLetter: letter.id)) {
      try await subject.outbox.waitUntilDelivered()
    }
    #expect(!seen.all.contains("behind#1"))
    poisoned.set(false)
    try await subject.outbox.retryDeadLetter(id: letter.id)
    try await subject.outbox.waitUntilDelivered()
    let counts = try await subject.outbox.counts()
    await subject.finish()
    #expect(seen.all.filter { !$0.hasPrefix("other") } == ["poison#1", "behind#1"])
    #expect(counts.pending == 0 && counts.deadLetters == 0)
  }

  @Test(
    "go on: a message that fails every allowed attempt is set aside with its reason; its line goes on",
    arguments: Store.all
  )
  func deadLetterLetsItsLineGoOn(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["bad", "after"], partition: "k", headers: [:])
    let seen = Recorder<String>()
    try subject.start(retry: quickRetry(maximumAttempts: 2), onDeadLetter: .continueLine) {
      envelope in
      seen.record("\(envelope.message)#\(envelope.attempt)")
      if envelope.message == "bad" { throw Refused() }
    }
    try await subject.outbox.waitUntilDelivered()
    let letters = try await subject.outbox.deadLetters()
    #expect(seen.all == ["bad#1", "bad#2", "after#1"])
    let letter = try #require(letters.first)
    #expect(letters.count == 1)
    #expect(letter.message == "bad" && letter.attempts == 2 && letter.reason.contains("refused"))
    try await subject.outbox.dropDeadLetter(id: letter.id)
    let remaining = try await subject.outbox.deadLetters()
    #expect(remaining.isEmpty)
    await #expect(throws: OutboxError.noSuchDeadLetter(letter.id)) {
      try await subject.outbox.dropDeadLetter(id: letter.id)
    }
    await subject.finish()
  }

  @Test(
    "paused, nothing starts and appends go on; resumed, every line delivers in order",
    arguments: Store.all
  )
  func pauseAndResume(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    subject.outbox.pause()
    #expect(subject.outbox.isPaused)
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    try await subject.outbox.append(contentsOf: ["1", "2", "3"], partition: "k", headers: [:])
    // Several poll intervals: a paused outbox starts nothing however long it waits.
    try await Task.sleep(for: .milliseconds(300))
    #expect(seen.all.isEmpty)
    subject.outbox.resume()
    #expect(!subject.outbox.isPaused)
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(seen.all == ["1", "2", "3"])
  }

  @Test(
    "pause() and resume() back to back end a retry wait: the message is tried again at once",
    arguments: Store.all
  )
  func pauseResumeEndsRetryWait(store: Store) async throws {
    try await retryWaitEnds(on: store) { outbox in
      outbox.pause()
      outbox.resume()
    }
  }

  @Test(
    "a delivery that fails while its key is paused is left at the head for a retry, never set aside",
    arguments: Store.all
  )
  func pauseDuringFailure(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append("m", partition: "k", headers: [:])
    let attempts = Recorder<Int>()
    let failing = Gate()
    let paused = Gate()
    // One attempt only: a failure outside a pause makes the message a dead letter at once.
    try subject.start(retry: quickRetry(maximumAttempts: 1), onDeadLetter: .continueLine) {
      envelope in
      attempts.record(envelope.attempt)
      failing.open()
      try await paused.wait()
      throw Refused()
    }
    try await failing.wait()
    try await subject.outbox.pause(partition: "k")
    paused.open()
    // The line settles the failure, made while its key is paused, and gives the key up.
    let deadline = ContinuousClock.now + .seconds(30)
    while subject.outbox.delivererStatistics.keysHeld > 0, ContinuousClock.now < deadline {
      await Task.yield()
    }
    await subject.outbox.stop()
    let counts = try await subject.outbox.counts()
    #expect(counts.deadLetters == 0)
    #expect(counts.pending == 1)
    #expect(attempts.all == [1])
    // Resumed and started again, the message is delivered.
    try await subject.outbox.resume(partition: "k")
    let delivered = Recorder<Int>()
    try subject.start(retry: quickRetry(maximumAttempts: 1), onDeadLetter: .continueLine) {
      envelope in delivered.record(envelope.attempt)
    }
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(delivered.all.count == 1)
  }

  @Test("resume() alone ends a retry wait", arguments: Store.all)
  func resumeEndsRetryWait(store: Store) async throws {
    try await retryWaitEnds(on: store) { outbox in outbox.resume() }
  }

  /// A message fails once and waits an hour (on a clock nobody advances) to be retried;
  /// `wake` must make it be tried again at once.
  private func retryWaitEnds(
    on store: Store,
    _ wake: (any DurableOutbox<String>) -> Void
  ) async throws {
    let clock = ManualClock()
    guard let subject = try await store.open(String.self, clock: clock) else { return }
    try await subject.outbox.append("m", partition: "k", headers: [:])
    var events = subject.outbox.events.makeAsyncIterator()
    let retry = try RetryPolicy(
      initialDelay: .seconds(3600),
      maximumDelay: .seconds(3600),
      jitter: 0
    )
    let attempts = Recorder<Int>()
    try subject.start(retry: retry) { envelope in
      attempts.record(envelope.attempt)
      if envelope.attempt == 1 { throw Refused() }
    }
    while let event = await events.next() {
      if case .retrying = event { break }
    }
    wake(subject.outbox)
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(attempts.all == [1, 2])
    #expect(clock.now == ManualClock.Instant(offset: .zero))
  }

  @Test(
    "merging folds a new message into a pending one, never into one whose delivery began",
    arguments: Store.all
  )
  func merging(store: Store) async throws {
    let coalescing = Coalescing<String>(
      entity: { String($0.prefix { $0 != ":" }) },
      merge: { _, new in new }
    )
    guard let subject = try await store.open(String.self, coalescing: coalescing) else { return }
    let first = try await subject.outbox.append("n1:a", partition: "k", headers: [:])
    let merged = try await subject.outbox.append("n1:b", partition: "k", headers: [:])
    #expect(merged == first)
    let inDelivery = Gate()
    let answer = Gate()
    let seen = Recorder<String>()
    try subject.start { envelope in
      seen.record(envelope.message)
      if envelope.message == "n1:b" {
        inDelivery.open()
        try await answer.wait()
      }
    }
    try await inDelivery.wait()
    let late = try await subject.outbox.append("n1:c", partition: "k", headers: [:])
    answer.open()
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(late != first)
    #expect(seen.all == ["n1:b", "n1:c"])
  }

  @Test(
    "events tell what happened: appended, delivering, retrying, delivered, dead-lettered",
    arguments: Store.all
  )
  func events(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let events = subject.outbox.events
    let x = try await subject.outbox.append("x", partition: nil, headers: [:])
    let y = try await subject.outbox.append("y", partition: nil, headers: [:])
    let names = [x: "x", y: "y"]
    try subject.start(retry: quickRetry(maximumAttempts: 5), onDeadLetter: .continueLine) {
      envelope in
      if envelope.message == "x" && envelope.attempt == 1 { throw Refused() }
      if envelope.message == "y" { throw PermanentDeliveryFailure("never") }
    }
    var story: [String] = []
    for await event in events {
      let name = names[event.id] ?? "?"
      switch event {
      case .appended: story.append("appended \(name)")
      case .delivering(_, _, let attempt): story.append("delivering \(name) #\(attempt)")
      case .retrying(_, _, let attempt, _, _): story.append("retrying \(name) #\(attempt)")
      case .delivered: story.append("delivered \(name)")
      case .deadLettered(_, _, _, let stopped): story.append("dead \(name) stopped:\(stopped)")
      case .merged, .recordFailed, .quarantined, .duplicate, .ticked:
        story.append("unexpected \(event)")
      }
      if story.last?.hasPrefix("dead") == true { break }
    }
    await subject.finish()
    #expect(
      story == [
        "appended x", "appended y", "delivering x #1", "retrying x #1", "delivering x #2",
        "delivered x", "delivering y #1", "dead y stopped:false",
      ]
    )
  }

  @Test("bad input is refused with what to do, and changes nothing", arguments: Store.all)
  func badInput(store: Store) async throws {
    guard let subject = try await store.open(Unencodable.self) else { return }
    #expect(throws: OutboxError.self) { try subject.start(limit: 0) { _ in } }
    #expect(throws: OutboxError.self) { try subject.start(pollInterval: .zero) { _ in } }
    await #expect {
      try await subject.outbox.append(Unencodable(text: "broken"), partition: nil, headers: [:])
    } throws: { error in
      guard case .cannotEncode(let reason) = error as? OutboxError else { return false }
      return reason.contains("cannot be written")
    }
    let unknown = UUID()
    await #expect(throws: OutboxError.noSuchDeadLetter(unknown)) {
      try await subject.outbox.retryDeadLetter(id: unknown)
    }
    await #expect(throws: OutboxError.noSuchDeadLetter(unknown)) {
      try await subject.outbox.dropDeadLetter(id: unknown)
    }
    let counts = try await subject.outbox.counts()
    #expect(counts.pending == 0 && counts.deadLetters == 0)
    try subject.start { _ in }
    #expect(throws: OutboxError.alreadyStarted) { try subject.start { _ in } }
    let error = OutboxError.alreadyStarted.description
    #expect(error.contains("stop()"))
    await subject.finish()
  }

  @Test(
    "cancellation: a cancelled append stores nothing; a cancelled wait throws cancelled and the outbox goes on",
    arguments: Store.all
  )
  func cancellation(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let outbox = subject.outbox
    let cancelledAppend = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await outbox.append("never", partition: nil, headers: [:])
    }
    await #expect(throws: OutboxError.cancelled) { try await cancelledAppend.value }
    try await outbox.append("kept", partition: nil, headers: [:])
    // Not started: the wait goes on until it is cancelled.
    let waiting = Task { try await outbox.waitUntilDelivered() }
    waiting.cancel()
    await #expect(throws: OutboxError.cancelled) { try await waiting.value }
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    try await outbox.waitUntilDelivered()
    await subject.finish()
    #expect(seen.all == ["kept"])
  }

  @Test("counts: pending, dead letters, and the oldest pending message's age", arguments: Store.all)
  func counts(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let empty = try await subject.outbox.counts()
    #expect(empty == OutboxCounts(pending: 0, deadLetters: 0, oldestPendingAppendedAt: nil))
    let before = Date()
    try await subject.outbox.append(contentsOf: ["1", "2"], partition: "k", headers: [:])
    let two = try await subject.outbox.counts()
    #expect(two.pending == 2 && two.deadLetters == 0)
    let oldest = try #require(two.oldestPendingAppendedAt)
    #expect(abs(oldest.timeIntervalSince(before)) < 60)
    #expect(two.oldestPendingAge(at: oldest.addingTimeInterval(90)) == 90)
    #expect(two.blockedKeys == 0 && two.worstBlockedSince == nil)
    await subject.finish()
  }

  @Test(
    "counts: a line waiting at a dead letter is a blocked key, named with its age; retried, it is not",
    arguments: Store.all
  )
  func blockedKeys(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let poisoned = Switch(on: true)
    try await subject.outbox.append(contentsOf: ["poison", "behind"], partition: "k", headers: [:])
    let before = Date()
    try await subject.outbox.append("other", partition: "j", headers: [:])
    let seen = Recorder<String>()
    try subject.start(onDeadLetter: .stopLine) { envelope in
      if envelope.message == "poison" && poisoned.isOn {
        throw PermanentDeliveryFailure("refused for good")
      }
      seen.record(envelope.message)
    }
    let stopped = await eventually {
      let counts = try await subject.outbox.counts()
      // "other" delivered and acknowledged; "behind" waits behind the dead letter.
      return counts.blockedKeys == 1 && seen.all.contains("other") && counts.pending == 1
    }
    #expect(stopped)
    let counts = try await subject.outbox.counts()
    #expect(counts.worstBlockedPartition == "k")
    let since = try #require(counts.worstBlockedSince)
    #expect(since <= before)
    #expect(counts.worstBlockedAge(at: since.addingTimeInterval(30)) == 30)
    #expect(counts.pending == 1 && counts.deadLetters == 1)
    poisoned.set(false)
    let letters = try await subject.outbox.deadLetters()
    try await subject.outbox.retryDeadLetter(id: try #require(letters.first).id)
    try await subject.outbox.waitUntilDelivered()
    let after = try await subject.outbox.counts()
    await subject.finish()
    #expect(after.blockedKeys == 0 && after.worstBlockedPartition == nil)
    #expect(after.worstBlockedSince == nil && after.worstBlockedAge() == 0)
  }

  @Test(
    "a paused key waits (a blocked key) while the others flow; resumed, it delivers in order",
    arguments: Store.all
  )
  func pausedKey(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.pause(partition: "held")
    let paused = try await subject.outbox.pausedPartitions()
    #expect(paused == ["held"])
    try await subject.outbox.append(contentsOf: ["h1", "h2"], partition: "held", headers: [:])
    try await subject.outbox.append(contentsOf: ["f1", "f2"], partition: "free", headers: [:])
    let seen = Recorder<String>()
    try subject.start { envelope in seen.record(envelope.message) }
    // The free line's two messages delivered and acknowledged; the paused line's two wait.
    let flowed = await eventually {
      let counts = try await subject.outbox.counts()
      return seen.all.contains("f2") && counts.pending == 2
    }
    #expect(flowed)
    let blocked = try await subject.outbox.counts()
    #expect(blocked.pending == 2 && blocked.blockedKeys == 1)
    #expect(blocked.worstBlockedPartition == "held" && blocked.worstBlockedSince != nil)
    #expect(!seen.all.contains("h1"))
    try await subject.outbox.resume(partition: "held")
    try await subject.outbox.waitUntilDelivered()
    let after = try await subject.outbox.pausedPartitions()
    let counts = try await subject.outbox.counts()
    await subject.finish()
    #expect(seen.all.filter { $0.hasPrefix("h") } == ["h1", "h2"])
    #expect(after.isEmpty && counts.blockedKeys == 0)
  }

  @Test(
    "pausing a key ends its retry wait; the message waits, first in its line, for resume(partition:)",
    arguments: Store.all
  )
  func pausedKeyEndsRetryWait(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["m1", "m2"], partition: "k", headers: [:])
    let failing = Switch(on: true)
    let seen = Recorder<String>()
    let retry = try RetryPolicy(
      initialDelay: .seconds(3_600),
      maximumDelay: .seconds(3_600),
      jitter: 0,
      maximumAttempts: 5
    )
    try subject.start(retry: retry) { envelope in
      seen.record("\(envelope.message)#\(envelope.attempt)")
      if failing.isOn { throw Refused() }
    }
    let waiting = await eventually { seen.all == ["m1#1"] }
    #expect(waiting)
    try await subject.outbox.pause(partition: "k")
    failing.set(false)
    try await subject.outbox.resume(partition: "k")
    // Within the hour's wait: the pause ended it, and the resume took the line up again.
    try await subject.outbox.waitUntilDelivered()
    await subject.finish()
    #expect(seen.all == ["m1#1", "m1#2", "m2#1"])
  }

  @Test(
    "counts: under continueLine a dead letter blocks no key",
    arguments: Store.all
  )
  func deadLetterThatBlocksNothing(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(contentsOf: ["bad", "after"], partition: "k", headers: [:])
    try subject.start(retry: quickRetry(maximumAttempts: 1), onDeadLetter: .continueLine) {
      envelope in
      if envelope.message == "bad" { throw Refused() }
    }
    try await subject.outbox.waitUntilDelivered()
    let counts = try await subject.outbox.counts()
    await subject.finish()
    #expect(counts.deadLetters == 1 && counts.blockedKeys == 0 && counts.worstBlockedSince == nil)
  }

  @Test(
    "deliverer statistics: the keys being delivered are held; when idle, none is",
    arguments: Store.all
  )
  func keysHeld(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    let release = Switch(on: false)
    let started = Recorder<String>()
    try await subject.outbox.append("a", partition: "a", headers: [:])
    try await subject.outbox.append("b", partition: "b", headers: [:])
    try subject.start(limit: 4) { envelope in
      started.record(envelope.message)
      while !release.isOn { try await Task.sleep(for: .milliseconds(5)) }
    }
    let both = await eventually { started.all.count == 2 }
    #expect(both)
    let busy = subject.outbox.delivererStatistics
    release.set(true)
    try await subject.outbox.waitUntilDelivered()
    // A line is let go just after its last delivery is recorded.
    let idle = await eventually { subject.outbox.delivererStatistics.keysHeld == 0 }
    let statistics = subject.outbox.delivererStatistics
    await subject.finish()
    #expect(busy.keysHeld == 2)
    #expect(idle)
    #expect(statistics.acknowledgementsRefused == 0)
  }
}

/// A retry policy with millisecond waits, for tests that retry on the real clock.
func quickRetry(maximumAttempts: Int) throws -> RetryPolicy {
  try RetryPolicy(
    initialDelay: .milliseconds(1),
    maximumDelay: .milliseconds(2),
    jitter: 0,
    maximumAttempts: maximumAttempts
  )
}

/// A delivery failure the default policy retries.
struct Refused: Error, CustomStringConvertible {
  var description: String { "refused by the receiver" }
}

/// A message whose text `broken` cannot be encoded.
struct Unencodable: Codable, Sendable {
  let text: String

  init(text: String) { self.text = text }

  init(from decoder: any Decoder) throws {
    text = try decoder.singleValueContainer().decode(String.self)
  }

  func encode(to encoder: any Encoder) throws {
    if text == "broken" {
      throw EncodingError.invalidValue(
        text,
        .init(codingPath: [], debugDescription: "this text cannot be written")
      )
    }
    var container = encoder.singleValueContainer()
    try container.encode(text)
  }
}

/// What deliveries saw, in order.
final class Recorder<Value: Sendable>: Sendable {
  // OrderedRecorder's lock is one ThreadSanitizer sees (Mutex's is not, on Linux): with many
  // deliveries recording at once (the policy table's 1,000 keys), a Mutex here was reported
  // as a race.
  private let values = OrderedRecorder<Value>()
  func record(_ value: Value) { values.record(value) }
  var all: [Value] { values.values }
}

/// A flag a test flips while deliveries read it.
final class Switch: Sendable {
  private let value: Mutex<Bool>
  init(on: Bool) { value = Mutex(on) }
  var isOn: Bool { value.withLock { $0 } }
  func set(_ on: Bool) { value.withLock { $0 = on } }
}

/// Whether `condition` holds, looking every 10 ms for up to a minute: for state the outbox
/// reaches in its own time (a dead letter written), never for a duration.
func eventually(_ condition: () async throws -> Bool) async -> Bool {
  let deadline = ContinuousClock.now + .seconds(60)
  while ContinuousClock.now < deadline {
    if (try? await condition()) == true { return true }
    try? await Task.sleep(for: .milliseconds(10))
  }
  return false
}
