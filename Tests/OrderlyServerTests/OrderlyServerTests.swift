// Built with the Server trait only: `swift test --traits SQLite,Server --filter OrderlyServerTests`
// (.ci/run runs it).
#if Server && SQLite
import BuiltProducts
import CoreMetrics
import Foundation
import GRDB
import InMemoryLogging
import InMemoryTracing
import Logging
import Metrics
import MetricsTestKit
import OrderlyCore
import OrderlyOutbox
import OrderlyServer
import OrderlyTestSupport
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing
import Tracing

/// A receiver that fails a message's first attempt with a retryable error, refuses one message
/// for good, and records what it applied.
private final class Receiver: Sendable {
  private let state = Mutex<(applied: [String], failedOnce: Set<String>)>(([], []))

  var applied: [String] { state.withLock(announcingTo: self) { $0.applied } }

  /// Deliveries of several keys run at once: the lock is announced to ThreadSanitizer, which
  /// cannot see `Mutex`'s own on Linux.
  @Sendable func deliver(_ envelope: Envelope<String>) async throws {
    try state.withLock(announcingTo: self) { state in
      if envelope.message.hasPrefix("flaky"), state.failedOnce.insert(envelope.message).inserted {
        throw Unreachable()
      }
      if envelope.message.hasPrefix("poison") { throw PermanentDeliveryFailure("refused") }
      state.applied.append(envelope.message)
    }
  }
}

/// The messages that failed once, touched by the deliveries of several keys at once, behind a
/// lock announced to ThreadSanitizer (which cannot see `Mutex`'s own on Linux).
private final class FailedOnce: Sendable {
  private let messages = Mutex(Set<String>())

  /// Whether this is the message's first attempt (it is recorded as failed).
  func isFirst(_ message: String) -> Bool {
    messages.withLock(announcingTo: self) { $0.insert(message).inserted }
  }
}

private struct Unreachable: Error, CustomStringConvertible {
  var description: String { "the receiver is unreachable" }
}

private func exactRetry() throws -> RetryPolicy {
  try RetryPolicy(jitter: 0, isRetryable: { !($0 is PermanentDeliveryFailure) })
}

@Suite("OrderlyServer: the outbox as a service, logs, metrics, traces")
struct OrderlyServerTests {
  // MARK: - Lifecycle, in a real process

  @Test(
    "SIGTERM: the delivery in flight finishes within the grace period; nothing lost or repeated"
  )
  func sigtermLetsDeliveryFinish() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let gate = folder.path("gate")
    try await Self.fill(path, with: ["1", "2", "slow", "4", "5"])
    let child = try BuiltProducts.Running(
      "outbox-service-probe",
      arguments: ["serve", path, gate, "60000"]
    )
    let first = await child.readLines(5)
    #expect(first == ["begin 1 1", "end 1", "begin 2 1", "end 2", "begin slow 1"])
    child.send(SIGTERM)
    // Once the service says so, no new message is taken; only then does the receiver answer.
    let log = await child.readErrors(until: "no new messages taken")
    #expect(log.contains("no new messages taken"))
    #expect(FileManager.default.createFile(atPath: gate, contents: nil))
    let result = await child.finish()
    #expect(result.status == 0, "stderr: \(result.stderr)")
    #expect(result.stdout.split(separator: "\n") == ["end slow", "exited"])
    // The three acknowledged messages are gone; the two never begun wait, in order.
    #expect(try await Self.drain(path) == ["4 1", "5 1"])
  }

  @Test(
    "SIGTERM: a delivery still running when the grace period ends is cancelled, kept, sent again"
  )
  func sigtermCancelsLateDelivery() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let gate = folder.path("gate")
    try await Self.fill(path, with: ["1", "slow", "3"])
    let child = try BuiltProducts.Running(
      "outbox-service-probe",
      arguments: ["serve", path, gate, "200"]
    )
    #expect(await child.readLines(3) == ["begin 1 1", "end 1", "begin slow 1"])
    let signalled = ContinuousClock.now
    child.send(SIGTERM)
    let result = await child.finish()
    let took = ContinuousClock.now - signalled
    #expect(result.status == 0, "stderr: \(result.stderr)")
    #expect(result.stdout.split(separator: "\n") == ["cancelled slow", "exited"])
    // At least the grace period: it was waited for. (The upper bound only catches a hang.)
    #expect(took >= .milliseconds(200) && took < .seconds(60))
    #expect(try await Self.drain(path) == ["slow 2", "3 1"])
  }

  @Test("graceful shutdown in process: run() returns once the delivery in flight is recorded")
  func gracefulShutdownInProcess() async throws {
    let outbox = try Outbox<String>()
    try await outbox.append(contentsOf: ["a", "b"])
    let gate = Gate()
    let seen = Mutex<[String]>([])
    let service = OutboxService(outbox: outbox, shutdownGracePeriod: .seconds(3_600)) {
      envelope in
      seen.withLock { $0.append(envelope.message) }
      try await gate.wait()
    }
    try await testGracefulShutdown { trigger in
      let running = Task { try await service.run() }
      try await gate.waitForWaiters(1)
      trigger.triggerGracefulShutdown()
      // The service pauses the outbox first, synchronously, then waits out the delivery.
      while !outbox.isPaused { await Task.yield() }
      gate.open()
      try await running.value
    }
    #expect(seen.withLock { $0 } == ["a"])
    #expect(outbox.pendingCount == 1)
  }

  @Test("a service that cannot start throws the outbox's error")
  func startFailureIsThrown() async throws {
    let outbox = try Outbox<String>()
    try await outbox.close()
    let service = OutboxService(outbox: outbox) { _ in }
    await #expect(throws: OutboxError.closed(path: ":memory:")) { try await service.run() }
  }

  // MARK: - Metrics

  @Test("outbox metrics: an append its unique key refused, and a key quarantined, are counted")
  func outboxMetricsDuplicatesAndQuarantine() async throws {
    struct Down: Error {}
    let metrics = TestMetrics()
    let recorder = OutboxMetrics(outboxName: "orders", factory: metrics)
    let outbox = try Outbox<String>()
    var events = outbox.events.makeAsyncIterator()
    try await outbox.append("charge", uniqueKey: "order-1")
    try await outbox.append("charge again", uniqueKey: "order-1")
    var options = OutboxDeliveryOptions(
      retry: try RetryPolicy(initialDelay: .zero, maximumDelay: .zero)
    )
    options.quarantine = QuarantinePolicy(afterFailedAttempts: 2)
    try outbox.start(options, deliver: .each { _ in throw Down() })
    while let event = await events.next() {
      recorder.record(event)
      if case .quarantined = event { break }
    }
    await outbox.stop()
    let orders = [("outbox", "orders")]
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_appended_total", orders).totalValue == 1
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_appends_deduplicated_total", orders).totalValue
        == 1
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_keys_quarantined_total", orders).totalValue == 1
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_retried_total", orders).totalValue == 1
    )
  }

  @Test("outbox metrics: appended, delivered, retried, dead-lettered, timers and gauges")
  func outboxMetrics() async throws {
    let metrics = TestMetrics()
    let clock = ManualClock()
    let outbox = try Outbox<String>(clock: clock)
    let receiver = Receiver()
    let service = OutboxService(
      outbox: outbox,
      name: "orders",
      retry: try exactRetry(),
      onDeadLetter: .continueLine,
      metrics: OutboxMetrics(outboxName: "orders", factory: metrics),
      deliver: receiver.deliver
    )
    var events = outbox.events.makeAsyncIterator()
    let running = Task { try await service.run() }
    try await outbox.append(contentsOf: ["flaky", "poison", "ok"])
    while let event = await events.next() {
      if case .retrying = event { break }
    }
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(1))
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value

    let orders = [("outbox", "orders")]
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_appended_total", orders).totalValue == 3
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_delivered_total", orders).totalValue == 2
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_retried_total", orders).totalValue == 1
    )
    #expect(
      try metrics.expectCounter("orderly_outbox_messages_dead_lettered_total", orders).totalValue
        == 1
    )
    let delivered = try metrics.expectTimer(
      "orderly_outbox_delivery_duration",
      orders + [("result", "delivered")]
    )
    let failed = try metrics.expectTimer(
      "orderly_outbox_delivery_duration",
      orders + [("result", "failed")]
    )
    #expect(delivered.values.count == 2)
    #expect(failed.values.count == 2)
    let sinceAppend = try metrics.expectTimer("orderly_outbox_append_to_delivery_duration", orders)
    #expect(sinceAppend.values.count == 2)
    #expect(sinceAppend.values.allSatisfy { $0 >= 0 })
    #expect(try metrics.expectGauge("orderly_outbox_pending_messages", orders).lastValue == 0)
    #expect(
      try metrics.expectGauge("orderly_outbox_oldest_pending_age_seconds", orders).lastValue == 0
    )
  }

  @Test("the age gauge reads the oldest pending message's append time")
  func ageGauge() async throws {
    let metrics = TestMetrics()
    let outbox = try Outbox<String>()
    try await outbox.append("waiting")
    let appended = try #require(try await outbox.oldestPendingAppendedAt())
    let gauges = OutboxMetrics(outboxName: "o", factory: metrics)
    try await gauges.recordGauges(of: outbox, now: appended.addingTimeInterval(90))
    let age = try metrics.expectGauge(
      "orderly_outbox_oldest_pending_age_seconds",
      [("outbox", "o")]
    )
    #expect(age.lastValue.map { abs($0 - 90) < 0.001 } == true)
    #expect(
      try metrics.expectGauge("orderly_outbox_pending_messages", [("outbox", "o")]).lastValue == 1
    )
  }

  @Test(
    "the blocked-key gauges: a line at a dead letter is one blocked key, aged from its dead letter"
  )
  func blockedKeyGauges() async throws {
    let metrics = TestMetrics()
    let outbox = try Outbox<String>()
    try await outbox.append("poison", partition: "k")
    try await outbox.append("behind", partition: "k")
    let events = outbox.events
    try outbox.start(onDeadLetter: .stopLine) { envelope in
      if envelope.message == "poison" { throw PermanentDeliveryFailure("refused") }
    }
    for await event in events {
      if case .deadLettered = event { break }
    }
    let letter = try #require(try await outbox.deadLetters().first)
    let appended = letter.appendedAt
    let gauges = OutboxMetrics(outboxName: "o", factory: metrics)
    let counts = try await gauges.recordGauges(of: outbox, now: appended.addingTimeInterval(40))
    await outbox.stop()
    #expect(counts.worstBlockedPartition == "k")
    let o = [("outbox", "o")]
    #expect(try metrics.expectGauge("orderly_outbox_blocked_keys", o).lastValue == 1)
    let age = try metrics.expectGauge("orderly_outbox_worst_blocked_key_age_seconds", o)
    #expect(age.lastValue.map { abs($0 - 40) < 0.001 } == true)
    #expect(try metrics.expectGauge("orderly_outbox_keys_held", o).lastValue == 0)
  }

  @Test("the deliverer's counts become counters: each read adds what is new since the last")
  func delivererCounters() throws {
    let metrics = TestMetrics()
    let gauges = OutboxMetrics(outboxName: "o", factory: metrics)
    gauges.record(
      DelivererStatistics(keysHeld: 3, leaseRenewalsFailed: 2, acknowledgementsRefused: 1)
    )
    gauges.record(
      DelivererStatistics(keysHeld: 1, leaseRenewalsFailed: 5, acknowledgementsRefused: 1)
    )
    let o = [("outbox", "o")]
    #expect(try metrics.expectGauge("orderly_outbox_keys_held", o).lastValue == 1)
    let renewals = try metrics.expectCounter("orderly_outbox_lease_renewals_failed_total", o)
    #expect(renewals.totalValue == 5)
    let refused = try metrics.expectCounter("orderly_outbox_acknowledgements_refused_total", o)
    #expect(refused.totalValue == 1)
  }

  @Test("queue metrics: enqueued, started, ended by outcome, cancelled, wait, pending")
  func queueMetrics() async throws {
    let metrics = TestMetrics()
    let queue = SerialQueue(name: "saves")
    let observer = QueueObserver(queue.events, metrics: QueueMetrics(factory: metrics))
    let observing = Task { await observer.run() }
    let gate = Gate()
    let first = queue.enqueue { try await gate.wait() }
    let second = queue.enqueue { throw Unreachable() }
    let third = queue.enqueue {}
    third.cancel()
    let fourth = queue.enqueue {}
    try await gate.waitForWaiters(1)
    gate.open()
    for job in [first, second, third, fourth] { _ = await job.result }
    // Every event is emitted by then; the observer reads those already emitted before it ends.
    try await queue.waitUntilIdle()
    observing.cancel()
    await observing.value

    let saves = [("queue", "saves")]
    #expect(try metrics.expectCounter("orderly_queue_jobs_enqueued_total", saves).totalValue == 4)
    #expect(try metrics.expectCounter("orderly_queue_jobs_started_total", saves).totalValue == 3)
    let ended = "orderly_queue_jobs_ended_total"
    #expect(try metrics.expectCounter(ended, saves + [("outcome", "finished")]).totalValue == 2)
    #expect(try metrics.expectCounter(ended, saves + [("outcome", "failed")]).totalValue == 1)
    #expect(try metrics.expectCounter("orderly_queue_jobs_cancelled_total", saves).totalValue == 1)
    // A job cancelled before it started never ended: no "cancelled" outcome was counted.
    let cancelledAfterStart = metrics.counters(
      label: ended,
      dimensions: saves + [("outcome", "cancelled")]
    )
    #expect(cancelledAfterStart.allSatisfy { $0.totalValue == 0 })
    #expect(try metrics.expectTimer("orderly_queue_wait_duration", saves).values.count == 3)
    #expect(try metrics.expectGauge("orderly_queue_pending_jobs", saves).lastValue == 0)
  }

  // MARK: - Logs

  @Test("logs: quiet at info while things go well; warnings and errors name the message")
  func logs() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "test") { _ in handler }
    logger.logLevel = .info
    let clock = ManualClock()
    let outbox = try Outbox<String>(clock: clock)
    let service = OutboxService(
      outbox: outbox,
      name: "orders",
      retry: try exactRetry(),
      onDeadLetter: .continueLine,
      logger: logger,
      deliver: Receiver().deliver
    )
    var events = outbox.events.makeAsyncIterator()
    let running = Task { try await service.run() }
    let ids = try await outbox.append(contentsOf: ["flaky", "ok", "poison", "fine"])
    while let event = await events.next() {
      if case .retrying = event { break }
    }
    try await clock.waitForSleepers(1)
    clock.advance(by: .seconds(1))
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value

    let entries = handler.entries
    #expect(
      entries.map { "\($0.level) \($0.message)" } == [
        "info outbox delivery started",
        "warning delivery failed; will retry",
        "error message moved to the dead letters",
        "info outbox delivery stopped",
      ]
    )
    #expect(entries.allSatisfy { $0.metadata["orderly.outbox"] == "orders" })
    #expect(entries[1].metadata["orderly.message_id"] == "\(ids[0])")
    #expect(entries[1].metadata["orderly.attempt"] == "1")
    #expect(entries[1].metadata["orderly.reason"] == "the receiver is unreachable")
    #expect(entries[2].metadata["orderly.message_id"] == "\(ids[2])")
    #expect(entries[2].metadata["orderly.line_stopped"] == "false")
  }

  @Test("logs at debug: each delivery, with message id, partition and attempt")
  func debugLogs() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "test") { _ in handler }
    logger.logLevel = .debug
    let outbox = try Outbox<String>()
    let service = OutboxService(outbox: outbox, logger: logger) { _ in }
    let id = try await outbox.append("m", partition: "p")
    let running = Task { try await service.run() }
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value
    let delivering = try #require(handler.entries.first { $0.message == "delivering" })
    #expect(delivering.level == .debug)
    #expect(delivering.metadata["orderly.message_id"] == "\(id)")
    #expect(delivering.metadata["orderly.partition"] == "p")
    #expect(delivering.metadata["orderly.attempt"] == "1")
    #expect(handler.entries.contains { $0.message == "delivered" && $0.level == .debug })
  }

  @Test("each event's line names its message's key: numbers alone repeat across keys")
  func eventsNameTheKey() async throws {
    let handler = InMemoryLogHandler()
    var logger = Logger(label: "test") { _ in handler }
    logger.logLevel = .debug
    let clock = ManualClock()
    let outbox = try Outbox<String>(clock: clock)
    let failed = FailedOnce()
    let service = OutboxService(outbox: outbox, retry: try exactRetry(), logger: logger) {
      envelope in
      // Each key's first attempt fails once; the second delivers.
      if failed.isFirst(envelope.message) { throw Unreachable() }
    }
    for customer in ["alice", "bob", "carol"] {
      try await outbox.append(customer, partition: customer)
    }
    let running = Task { try await service.run() }
    try await clock.waitForSleepers(3)
    clock.advance(by: .seconds(1))
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value
    for message in ["delivery failed; will retry", "delivered"] {
      let lines = handler.entries.filter { "\($0.message)" == message }
      let keys = Set(lines.compactMap { $0.metadata["orderly.partition"].map { "\($0)" } })
      #expect(lines.count == 3, "\(message)")
      #expect(keys == ["alice", "bob", "carol"], "\(message)")
    }
  }

  // MARK: - Traces

  @Test("traces: an append in one process, its delivery in another, linked by the stored context")
  func traceAcrossProcesses() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let appender = try BuiltProducts.Running(
      "outbox-service-probe",
      arguments: ["append-traced", path, "traced"]
    )
    let appended = await appender.finish()
    #expect(appended.status == 0, "stderr: \(appended.stderr)")
    let words = appended.stdout.split(whereSeparator: \.isWhitespace).map(String.init)
    try #require(words.count == 3 && words[0] == "trace")
    let (traceID, spanID) = (words[1], words[2])

    // This process was never part of that trace: it only reads the context from the file.
    let tracer = InMemoryTracer()
    let outbox = try Outbox<String>(path: path)
    let service = OutboxService(outbox: outbox, name: "orders", tracer: tracer) { _ in }
    let running = Task { try await service.run() }
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value
    try await outbox.close()

    let span = try #require(
      tracer.finishedSpans.first { $0.operationName == "orderly.outbox.deliver" }
    )
    #expect(span.kind == .consumer)
    #expect(traceID.hasPrefix("appender-") && spanID.hasPrefix("appender-"))
    #expect(span.parentSpanID == nil, "the delivery starts a trace of its own")
    #expect(span.traceID != traceID)
    let link = try #require(span.links.first?.context.inMemorySpanContext)
    #expect(link.traceID == traceID)
    #expect(link.spanID == spanID)
    #expect(span.attributes["orderly.outbox.attempt"]?.toSpanAttribute() == .int64(1))
    #expect(span.attributes["orderly.outbox"]?.toSpanAttribute() == .string("orders"))
    guard case .string(let id) = span.attributes["orderly.outbox.message_id"]?.toSpanAttribute()
    else {
      Issue.record("no message id attribute")
      return
    }
    #expect(UUID(uuidString: id) != nil)
  }

  @Test("traces: a message appended with no trace context is delivered in a span with no link")
  func noContextNoLink() async throws {
    let tracer = InMemoryTracer()
    let outbox = try Outbox<String>()
    try await outbox.appendTraced("plain", context: nil, instrument: tracer)
    let service = OutboxService(outbox: outbox, tracer: tracer) { _ in }
    let running = Task { try await service.run() }
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value
    let span = try #require(tracer.finishedSpans.first)
    #expect(span.links.isEmpty)
  }

  @Test(
    "traces: a message appended in the app's own transaction with OutboxTraceHeaders links its delivery"
  )
  func traceHeadersInOwnTransaction() async throws {
    let tracer = InMemoryTracer()
    let database = try DatabaseQueue()
    try await database.write { db in
      try db.execute(sql: "CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    }
    let outbox = try Outbox<String>(database: database)
    let request = tracer.startSpan("request", context: .topLevel, ofKind: .server)
    let context = request.context
    try await database.write { db in
      try db.execute(sql: "INSERT INTO orders (id) VALUES (7)")
      let headers = OutboxTraceHeaders.current(
        adding: ["tenant": "acme"],
        context: context,
        instrument: tracer
      )
      try outbox.append("order 7 placed", partition: "order-7", headers: headers, in: db)
    }
    request.end()
    let untraced = OutboxTraceHeaders.current(adding: ["tenant": "acme"], context: nil)
    #expect(untraced == ["tenant": "acme"], "with no context, the headers are left as they are")

    let received = Mutex<[String: String]>([:])
    let service = OutboxService(outbox: outbox, name: "orders", tracer: tracer) { envelope in
      received.withLock { $0 = envelope.headers }
    }
    let running = Task { try await service.run() }
    try await outbox.waitUntilDelivered()
    running.cancel()
    try await running.value

    let headers = received.withLock { $0 }
    #expect(headers["tenant"] == "acme")
    let requestContext = try #require(request.context.inMemorySpanContext)
    let span = try #require(
      tracer.finishedSpans.first { $0.operationName == "orderly.outbox.deliver" }
    )
    let link = try #require(span.links.first?.context.inMemorySpanContext)
    #expect(link.traceID == requestContext.traceID)
    #expect(link.spanID == requestContext.spanID)
  }

  @Test("the service's default name is the outbox's: the file's name, or outbox in memory")
  func defaultName() async throws {
    let folder = try ScratchFolder()
    let onFile = try Outbox<String>(path: folder.path("orders.sqlite"))
    let inMemory = try Outbox<String>()
    let named = OutboxService(outbox: onFile) { _ in }
    let unnamed = OutboxService(outbox: inMemory) { _ in }
    #expect(named.name == "orders")
    #expect(unnamed.name == "outbox")
    try await onFile.close()
    try await inMemory.close()
  }

  // MARK: - Helpers

  /// Appends messages to a new outbox file, and closes it.
  private static func fill(_ path: String, with messages: [String]) async throws {
    let outbox = try Outbox<String>(path: path)
    try await outbox.append(contentsOf: messages)
    try await outbox.close()
  }

  /// Delivers what is left in the file, as `message attempt`.
  private static func drain(_ path: String) async throws -> [String] {
    let outbox = try Outbox<String>(path: path)
    let seen = Mutex<[String]>([])
    try outbox.start { envelope in
      seen.withLock { $0.append("\(envelope.message) \(envelope.attempt)") }
    }
    try await outbox.waitUntilDelivered()
    try await outbox.close()
    return seen.withLock { $0 }
  }
}
#endif
