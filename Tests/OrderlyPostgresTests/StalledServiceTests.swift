// Built with the Postgres and Server traits only; see Package.swift.
#if Postgres && Server
import Foundation
import InMemoryLogging
import Logging
import MetricsTestKit
import OrderlyPostgres
import OrderlyServer
import Testing

/// A stalled worker run as a service ends the service with an error, so that the process's
/// supervisor restarts it, and its gauge says so.
@Suite("OutboxService: a stalled worker fails the service", .timeLimit(.minutes(3)))
struct StalledServiceTests {
  @Test(
    "a worker whose statements get no answer: run() logs it, sets orderly_outbox_worker_stalled to 1, stops delivery and throws OutboxWorkerStalled"
  )
  func serviceFails() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append("k0", partition: "k")
    outbox.stallAfter = .seconds(2)
    outbox.withholdAnswers(true)
    let metrics = TestMetrics()
    let handler = InMemoryLogHandler()
    let logger = Logger(label: "service") { _ in handler }
    let service = OutboxService(
      outbox: outbox,
      name: "stalling",
      lease: .seconds(1),
      pollInterval: .milliseconds(100),
      logger: logger,
      metrics: OutboxMetrics(outboxName: "stalling", factory: metrics)
    ) { _ in }
    let outcome = await Task { () -> (any Error)? in
      do {
        try await service.run()
        return nil
      } catch {
        return error
      }
    }.value
    let stalled = try #require(outcome as? OutboxWorkerStalled)
    #expect(stalled.outboxName == "stalling")
    #expect(stalled.waitingOn.first?.contains("looking for") == true, "\(stalled.waitingOn)")
    #expect(stalled.description.contains("restart the process"))
    let gauge = try metrics.expectGauge("orderly_outbox_worker_stalled", [("outbox", "stalling")])
    #expect(gauge.values.contains(1))
    let messages = handler.entries.map(\.message.description)
    #expect(messages.contains { $0.hasPrefix("outbox delivery stopping: the worker is stalled") })
    #expect(!outbox.delivererStatistics.isStalled)
    outbox.withholdAnswers(false)
    #expect(try await outbox.pendingCount() == 1)
  }
}
#endif
