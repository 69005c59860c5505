import Foundation
import OrderlyOutboxCore
import Synchronization
import Testing

/// The line runner's decisions against a store kept in memory: what it asks the store to do,
/// in which order, with no database.
@Suite("The line runner, on a store in memory")
struct LineRunnerTests {
  @Test(
    "a batch that fails part-way: the delivered prefix is acknowledged and the rest given back in one step, the failed one retried from a new claim"
  )
  func partialBatch() async throws {
    let store = MemoryLine(messages: ["a", "b", "c", "d"])
    let calls = Mutex(0)
    let runner = LineRunner<String>(
      rule: try MemoryLine.rule(),
      batch: 4,
      onDeadLetter: .stopLine,
      onBadCount: { _, _ in },
      deliver: { envelopes in
        let call = calls.withLock { count -> Int in
          count += 1
          return count
        }
        if call == 1 { throw BatchDeliveryError(delivered: 1, error: Failed()) }
      }
    )
    let end = await runner.run(store)
    #expect(end == .empty)
    #expect(
      store.log == [
        "claim 4: a#1 b#1 c#1 d#1",
        "ack a, back c d, nothing",
        "claim 4: b#2 c#1 d#1",
        "ack b c d, upTo(4)",
      ]
    )
  }

  @Test("a line that can no longer record anything (its lease is lost) records nothing more")
  func abandon() async throws {
    let store = MemoryLine(messages: ["a", "b"])
    store.halting = .abandon
    let runner = LineRunner<String>(
      rule: try MemoryLine.rule(),
      batch: 2,
      onDeadLetter: .stopLine,
      onBadCount: { _, _ in },
      deliver: { _ in throw BatchDeliveryError(delivered: 1, error: Failed()) }
    )
    let end = await runner.run(store, taken: store.claimNow(2))
    #expect(end == .stopped)
    #expect(store.log == ["claim 2: a#1 b#1"])
  }

  @Test(
    "a failed write waits the standard policy's delays on every store, capped at the store's longest wait"
  )
  func recordBackOff() async throws {
    for longest in [Duration?.none, .milliseconds(1_500)] {
      let store = MemoryLine(messages: ["a"])
      store.failingWrites = 3
      store.longestRecordWait = longest
      let rule = try MemoryLine.rule()
      let events = rule.hub.subscribe()
      let runner = LineRunner<String>(rule: rule, onDeadLetter: .stopLine) { _ in }
      _ = await runner.run(store)
      rule.hub.finish()
      var waits: [Duration] = []
      for await event in events {
        if case .recordFailed(_, _, _, let wait) = event { waits.append(wait) }
      }
      // RetryPolicy.standard: 1 s, 2 s, 4 s, each within 20 % jitter; capped at 1.5 s.
      let expected: [Duration] = [.seconds(1), .seconds(2), .seconds(4)]
      #expect(waits.count == 3)
      for (wait, base) in zip(waits, expected) {
        let bound = longest.map { min(base * 1.2, $0) } ?? base * 1.2
        #expect(wait <= bound, "\(wait) for \(base), cap \(String(describing: longest))")
        #expect(wait >= min(base * 0.8, longest ?? base), "\(wait) for \(base)")
      }
    }
  }

  @Test(
    "a failed write is reported (recordFailed) and tried again until it succeeds; the turn's end gives the line up"
  )
  func recordFailedAndYield() async throws {
    let store = MemoryLine(messages: ["a", "b"])
    store.failingWrites = 2
    // A turn with no time: spent before every delivery. Nobody waits at the first, so the line
    // goes on; somebody does at the second, so its acknowledgement gives the line up.
    store.turnTime = .zero
    store.othersWaitAnswers = [false, true]
    let rule = try MemoryLine.rule()
    let events = rule.hub.subscribe()
    let runner = LineRunner<String>(rule: rule, onDeadLetter: .stopLine) { _ in }
    let end = await runner.run(store)
    rule.hub.finish()
    var seen: [String] = []
    for await event in events {
      switch event {
      case .recordFailed(_, let sequence, _, _): seen.append("recordFailed \(sequence)")
      case .delivered(_, let sequence): seen.append("delivered \(sequence)")
      default: break
      }
    }
    #expect(end == .yielded)
    #expect(seen == ["recordFailed 1", "recordFailed 1", "delivered 1", "delivered 2"])
    #expect(store.log.last == "ack b, yield")
  }

  @Test(
    "a message that is not retried is set aside; the line stops there or goes on, by the policy"
  )
  func setAside() async throws {
    for policy in [DeadLetterPolicy.stopLine, .continueLine] {
      let store = MemoryLine(messages: ["poison", "after"])
      let rule = try MemoryLine.rule()
      let runner = LineRunner<String>(rule: rule, onDeadLetter: policy) { envelope in
        if envelope.message == "poison" { throw PermanentDeliveryFailure("never") }
      }
      let end = await runner.run(store)
      if policy == .stopLine {
        #expect(end == .stopped)
        #expect(store.log == ["claim 1: poison#1", "set aside poison after 1, stops"])
      } else {
        #expect(end == .empty)
        #expect(
          store.log == [
            "claim 1: poison#1", "set aside poison after 1, goes on", "claim 1: after#1",
            "ack after, upTo(1)",
          ]
        )
      }
    }
  }

  @Test(
    "quarantine: after N failed attempts at the head the line is paused with why, the message kept; a retry policy's dead letter comes first"
  )
  func quarantineAfterFailures() async throws {
    let store = MemoryLine(messages: ["poison", "after"])
    store.audits = true
    let rule = try MemoryLine.rule()
    let events = rule.hub.subscribe()
    let runner = LineRunner<String>(
      rule: rule,
      onDeadLetter: .stopLine,
      quarantine: QuarantinePolicy(afterFailedAttempts: 3)
    ) { envelope in
      if envelope.message == "poison" { throw Failed() }
    }
    let end = await runner.run(store)
    rule.hub.finish()
    var seen: [String] = []
    for await event in events {
      switch event {
      case .retrying(_, _, let attempt, _, _): seen.append("retrying \(attempt)")
      case .quarantined(_, let sequence, let partition, let reason):
        seen.append("quarantined \(partition ?? "-") #\(sequence): \(reason)")
      default: break
      }
    }
    let reason = "its first message failed 3 time(s) in a row; last error: Failed()"
    #expect(end == .stopped)
    #expect(
      store.log == [
        "claim 1: poison#1", "claim 1: poison#2", "claim 1: poison#3", "quarantine: \(reason)",
      ]
    )
    #expect(seen == ["retrying 1", "retrying 2", "quarantined k #1: \(reason)"])
    // The third attempt's row is written on its own, as retried: it is tried again on resume.
    #expect(store.trail.last == "alone: poison retried")

    // Attempts used up before the quarantine's count: a dead letter, as the retry policy says.
    let exhausted = MemoryLine(messages: ["poison"])
    let limited = LineRunner<String>(
      rule: DeliveryRule(
        retry: try RetryPolicy(
          initialDelay: .milliseconds(1),
          maximumDelay: .milliseconds(1),
          maximumAttempts: 2
        ),
        hub: OutboxEventHub(),
        waits: RetryWaits(),
        clock: ContinuousClock()
      ),
      onDeadLetter: .stopLine,
      quarantine: QuarantinePolicy(afterFailedAttempts: 3)
    ) { _ in throw Failed() }
    _ = await limited.run(exhausted)
    #expect(
      exhausted.log == [
        "claim 1: poison#1", "claim 1: poison#2", "set aside poison after 2, stops",
      ]
    )
  }

  @Test("quarantine on a dead letter under go-on: the line stops behind it, paused with why")
  func quarantineOnDeadLetter() async throws {
    for onDeadLetter in [true, false] {
      let store = MemoryLine(messages: ["poison", "after"])
      let runner = LineRunner<String>(
        rule: try MemoryLine.rule(),
        onDeadLetter: .continueLine,
        quarantine: QuarantinePolicy(afterFailedAttempts: 5, onDeadLetter: onDeadLetter)
      ) { envelope in
        if envelope.message == "poison" { throw PermanentDeliveryFailure("never") }
      }
      let end = await runner.run(store)
      if onDeadLetter {
        #expect(end == .stopped)
        #expect(store.log.count == 3)
        #expect(store.log.last?.hasPrefix("quarantine: its message ") == true)
        #expect(store.log.last?.hasSuffix(" became a dead letter: never") == true)
      } else {
        #expect(end == .empty)
        #expect(store.log.last == "ack after, upTo(1)")
      }
    }
  }

  @Test(
    "with the audit trail on, each attempt's row goes with the write that records its outcome: the acknowledgement, the claim that retries it, the move to the dead letters"
  )
  func auditRows() async throws {
    let store = MemoryLine(messages: ["a", "b", "c", "poison"])
    store.audits = true
    let calls = Mutex(0)
    let runner = LineRunner<String>(
      rule: try MemoryLine.rule(),
      batch: 2,
      onDeadLetter: .stopLine,
      onBadCount: { _, _ in },
      deliver: { envelopes in
        let call = calls.withLock { count -> Int in
          count += 1
          return count
        }
        if call == 1 { throw BatchDeliveryError(delivered: 1, error: Failed()) }
        if envelopes.first?.message == "poison" { throw PermanentDeliveryFailure("never") }
      }
    )
    let end = await runner.run(store)
    #expect(end == .stopped)
    // b's failed attempt goes with the step that settles its batch; poison's with its move.
    #expect(
      store.trail == [
        "ack: a delivered", "ack: b retried", "ack: b delivered", "ack: c delivered",
        "set aside: poison dead-lettered",
      ]
    )
  }

  @Test("a failed single attempt's row goes with the claim that retries it; a lost line's as cut")
  func auditRetryAndCut() async throws {
    let store = MemoryLine(messages: ["a"])
    store.audits = true
    let calls = Mutex(0)
    let runner = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in
      let call = calls.withLock { count -> Int in
        count += 1
        return count
      }
      if call == 1 { throw Failed() }
    }
    #expect(await runner.run(store) == .empty)
    #expect(store.trail == ["claim: a retried", "ack: a delivered"])

    let lost = MemoryLine(messages: ["x", "y"])
    lost.audits = true
    // The lease is lost while the handler runs.
    let failing = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in
      lost.halting = .abandon
      throw Failed()
    }
    #expect(await failing.run(lost, taken: lost.claimNow(1)) == .stopped)
    #expect(lost.trail == ["alone: x cut"])
  }

  @Test(
    "a line a rate limit counts claims what the limit grants, and ends held until its window ends"
  )
  func rateLimited() async throws {
    let store = MemoryLine(messages: ["a", "b", "c"])
    store.permitsLeft = 2
    var runner = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in }
    runner.rateLimits = [try RateLimit(2, per: .seconds(1), keys: .key("k"))]
    let end = await runner.run(store)
    #expect(end == .limited(until: Date(timeIntervalSince1970: 42)))
    #expect(
      store.log == [
        "permits 1: 1", "claim 1: a#1", "permits 1: 1", "ack a, upTo(1)", "claim 1: b#1",
        "permits 1: 0", "ack b, nothing",
      ]
    )
  }

  @Test("messages taken with the line beyond what the limit grants give their attempts back")
  func rateLimitedTaken() async throws {
    let store = MemoryLine(messages: ["a", "b", "c"])
    store.permitsLeft = 1
    var runner = LineRunner<String>(
      rule: try MemoryLine.rule(),
      batch: 3,
      onDeadLetter: .stopLine,
      onBadCount: { _, _ in },
      deliver: { _ in }
    )
    runner.rateLimits = [try RateLimit(1, per: .seconds(1), keys: .each)]
    let taken = store.claimNow(3)
    let end = await runner.run(store, taken: taken)
    #expect(end == .limited(until: Date(timeIntervalSince1970: 42)))
    #expect(
      store.log == [
        "claim 3: a#1 b#1 c#1", "permits 3: 1", "ack , back b c, nothing", "permits 3: 0",
        "ack a, nothing",
      ]
    )
  }

  @Test(
    "permits whose window ended before the delivery begins are taken again, in the window it begins in"
  )
  func rateLimitLapsed() async throws {
    let store = MemoryLine(messages: ["a", "b"])
    store.permitsLeft = 2
    // The first grant's window ended long ago: its delivery takes its permit again.
    store.lapses = [1]
    var runner = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in }
    runner.rateLimits = [try RateLimit(2, per: .seconds(1), keys: .each)]
    let end = await runner.run(store)
    #expect(end == .limited(until: Date(timeIntervalSince1970: 42)))
    #expect(
      store.log == [
        "permits 1: 1", "claim 1: a#1", "permits 1: 1", "permits 1: 0", "ack a, nothing",
      ]
    )
  }

  @Test("a limit that counts other keys changes nothing for this line")
  func rateLimitOfOthers() async throws {
    let store = MemoryLine(messages: ["a", "b"])
    store.permitsLeft = 0
    var runner = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in }
    runner.rateLimits = [try RateLimit(1, per: .seconds(1), keys: .prefix("tenant:"))]
    let end = await runner.run(store)
    #expect(end == .empty)
    #expect(!store.log.contains { $0.hasPrefix("permits") })
  }

  @Test("with the trail off, the runner hands no rows to any write")
  func auditOff() async throws {
    let store = MemoryLine(messages: ["a", "b"])
    let runner = LineRunner<String>(rule: try MemoryLine.rule(), onDeadLetter: .stopLine) { _ in }
    #expect(await runner.run(store) == .empty)
    #expect(store.trail.isEmpty)
  }
}

private struct Failed: Error {}

/// A line kept in memory, which logs each step the runner asks of it.
private final class MemoryLine: LineStore, Sendable {
  typealias Message = String

  private struct State {
    var messages: [(sequence: Int64, text: String, attempts: Int)]
    var log: [String] = []
    var halting: LineHalt?
    var failingWrites = 0
    /// What each question "do other lines wait?" is answered, in turn; then `false`.
    var othersWaitAnswers: [Bool] = []
    var turnTime: Duration?
    var audits = false
    var trail: [String] = []
    var longestRecordWait: Duration? = .zero
    /// Permits left in the window, for a runner with a rate limit.
    var permitsLeft = Int.max
    /// When each grant's permits stop counting, in turn (then `nil`).
    var lapses: [Int64] = []
  }

  private let state: Mutex<State>

  init(messages: [String]) {
    state = Mutex(
      State(messages: messages.enumerated().map { (Int64($0.offset + 1), $0.element, 0) })
    )
  }

  static func rule() throws -> DeliveryRule<String> {
    DeliveryRule(
      retry: try RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1)),
      hub: OutboxEventHub(),
      waits: RetryWaits(),
      clock: ContinuousClock()
    )
  }

  var log: [String] { state.withLock { $0.log } }
  var halting: LineHalt? {
    get { state.withLock { $0.halting } }
    set { state.withLock { $0.halting = newValue } }
  }
  var failingWrites: Int {
    get { state.withLock { $0.failingWrites } }
    set { state.withLock { $0.failingWrites = newValue } }
  }
  var othersWaitAnswers: [Bool] {
    get { state.withLock { $0.othersWaitAnswers } }
    set { state.withLock { $0.othersWaitAnswers = newValue } }
  }
  var turnTime: Duration? {
    get { state.withLock { $0.turnTime } }
    set { state.withLock { $0.turnTime = newValue } }
  }

  var fence: Int64? { nil }

  var partition: String? { "k" }

  /// A clock long after 1970: a grant with `lapses` has lapsed.
  var permitClock: Int64 { 1_000_000 }

  var permitsLeft: Int {
    get { state.withLock { $0.permitsLeft } }
    set { state.withLock { $0.permitsLeft = newValue } }
  }

  var lapses: [Int64] {
    get { state.withLock { $0.lapses } }
    set { state.withLock { $0.lapses = newValue } }
  }

  /// Grants what is left in the window, which ends at 42 s after 1970.
  func takePermits(_ limits: [RateLimit], wanting: Int) async throws -> RateGrant {
    state.withLock { state in
      let granted = min(wanting, state.permitsLeft)
      state.permitsLeft -= granted
      state.log.append("permits \(wanting): \(granted)")
      let lapses = state.lapses.isEmpty ? nil : state.lapses.removeFirst()
      return RateGrant(granted: granted, until: granted < wanting ? 42_000 : nil, lapses: lapses)
    }
  }

  var audits: Bool {
    get { state.withLock { $0.audits } }
    set { state.withLock { $0.audits = newValue } }
  }

  /// The audit rows written, each as `step: message outcome`.
  var trail: [String] { state.withLock { $0.trail } }

  private func write(_ step: String, _ attempts: [AuditAttempt]) {
    let rows = attempts.map { "\(step): \(text($0.sequence)) \($0.outcome.rawValue)" }
    state.withLock { $0.trail += rows }
  }

  func recordAudit(_ attempts: [AuditAttempt]) async { write("alone", attempts) }

  func quarantine(reason: String) async throws {
    state.withLock { $0.log.append("quarantine: \(reason)") }
  }

  func halt() -> LineHalt? { halting }

  func haltAfterFailure(_ error: any Error) -> LineHalt? { halting }

  func othersWait() async -> Bool {
    state.withLock { state in
      state.log.append("others wait?")
      return state.othersWaitAnswers.isEmpty ? false : state.othersWaitAnswers.removeFirst()
    }
  }

  /// Claims now, as a lease taken with its first messages would.
  func claimNow(_ limit: Int) -> [ClaimedHead] {
    state.withLock { state in
      let count = min(limit, state.messages.count)
      var claimed: [ClaimedHead] = []
      for index in 0..<count {
        state.messages[index].attempts += 1
        let message = state.messages[index]
        claimed.append(
          ClaimedHead(
            id: UUID(),
            sequence: message.sequence,
            partition: "k",
            payload: Data("\"\(message.text)\"".utf8),
            attempt: message.attempts,
            appendedAt: Date(),
            headers: [:]
          )
        )
      }
      let shown = state.messages.prefix(count).map { "\($0.text)#\($0.attempts)" }
      state.log.append("claim \(limit): " + shown.joined(separator: " "))
      return claimed
    }
  }

  func claim(upTo limit: Int, recording attempts: [AuditAttempt]) async -> LineStep {
    write("claim", attempts)
    let claimed = claimNow(limit)
    return claimed.isEmpty ? .end(.empty) : .deliver(claimed)
  }

  func run(_ work: @escaping @Sendable () async throws -> Void) async -> Result<Void, any Error> {
    do {
      try await work()
      return .success(())
    } catch {
      return .failure(error)
    }
  }

  private func text(_ sequence: Int64) -> String {
    state.withLock { state in
      state.messages.first { $0.sequence == sequence }?.text ?? "?"
    }
  }

  func acknowledge(
    _ delivered: [ClaimedHead],
    givingBack: [ClaimedHead],
    then next: NextTake,
    recording attempts: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    let failing = state.withLock { state -> Bool in
      guard state.failingWrites > 0 else { return false }
      state.failingWrites -= 1
      return true
    }
    if failing { throw Failed() }
    write("ack", attempts)
    var entry = "ack " + delivered.map { text($0.sequence) }.joined(separator: " ")
    if !givingBack.isEmpty {
      entry += ", back " + givingBack.map { text($0.sequence) }.joined(separator: " ")
    }
    entry += ", \(next)"
    state.withLock { state in
      state.log.append(entry)
      let gone = Set(delivered.map(\.sequence))
      let back = Set(givingBack.map(\.sequence))
      state.messages.removeAll { gone.contains($0.sequence) }
      for index in state.messages.indices where back.contains(state.messages[index].sequence) {
        state.messages[index].attempts -= 1
      }
    }
    announce()
    switch next {
    case .upTo(let limit): return await claimIfAny(limit)
    case .yield: return .end(.yielded)
    case .nothing: return .again
    }
  }

  /// Takes the next messages after an acknowledgement, without logging a claim of its own.
  private func claimIfAny(_ limit: Int) async -> LineStep {
    let any = state.withLock { !$0.messages.isEmpty }
    return any ? .deliver(claimNow(limit)) : .end(.empty)
  }

  func setAside(
    _ message: ClaimedHead,
    attempts: Int,
    reason: String,
    stopsLine: Bool,
    recording: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    write("set aside", recording)
    let name = text(message.sequence)
    state.withLock { state in
      state.log.append(
        "set aside \(name) after \(attempts), " + (stopsLine ? "stops" : "goes on")
      )
      state.messages.removeAll { $0.sequence == message.sequence }
    }
    announce()
    return stopsLine ? .end(.stopped) : .again
  }

  func recordFailed(_ error: any Error, failures: Int) -> Bool { true }

  var longestRecordWait: Duration? {
    get { state.withLock { $0.longestRecordWait } }
    set { state.withLock { $0.longestRecordWait = newValue } }
  }

  func waitToRecordAgain(_ delay: Duration, after error: any Error) async -> Bool { true }
}
