// The code the OrderlyServer documentation shows, compiled by `swift build` with the Server
// trait (.ci/run builds with it); docs-gen copies each sample into its `orderly:sample` region.
#if Server && SQLite
import Foundation
// sample: server-service-group, server-queue-observer
import Logging
// end sample
// sample: server-queue-observer
import OrderlyCore
// end sample
// sample: server-service-group, server-append-traced
import OrderlyOutbox
// end sample
// sample: server-service-group, server-queue-observer, server-append-traced
import OrderlyServer
// end sample
// sample: server-service-group, server-queue-observer
import ServiceLifecycle
// end sample
// sample: server-service-group
import UnixSignals
// end sample

/// A message the samples deliver.
struct OrderPlaced: Codable, Sendable {
  var orderID: Int
  var total: Int
}

/// Where the samples deliver to.
struct Broker: Sendable {
  func publish(_ message: OrderPlaced, idempotencyKey: UUID) async throws {}
}

func serverServiceGroup(httpServer: some Service, broker: Broker) async throws {
  // sample: server-service-group
  var logger = Logger(label: "orders")
  logger.logLevel = .info  // quiet: only start and stop, retries and dead letters

  let outbox = try Outbox<OrderPlaced>(path: "/var/lib/orders/outbox.sqlite")
  let delivery = OutboxService(
    outbox: outbox,
    name: "orders",
    shutdownGracePeriod: .seconds(10),
    logger: logger,
    metrics: OutboxMetrics(outboxName: "orders")  // the process's MetricsSystem backend
  ) { envelope in
    try await broker.publish(envelope.message, idempotencyKey: envelope.id)
  }

  let group = ServiceGroup(
    services: [httpServer, delivery],
    gracefulShutdownSignals: [.sigterm, .sigint],
    logger: logger
  )
  try await group.run()  // returns after SIGTERM, once the delivery in flight is recorded
  try await outbox.close()
  // end sample
}

func serverAppendTraced(outbox: Outbox<OrderPlaced>, order: OrderPlaced) async throws {
  // sample: server-append-traced
  // In a request handler: the request's span is the current trace context.
  try await outbox.appendTraced(order, partition: "order-\(order.orderID)")
  // end sample
}

func serverQueueObserver(httpServer: some Service, logger: Logger) async throws {
  // sample: server-queue-observer
  let saves = SerialQueue(name: "saves")
  let observer = QueueObserver(saves.events, logger: logger, metrics: QueueMetrics())
  let group = ServiceGroup(services: [httpServer, observer], logger: logger)
  // end sample
  _ = group
}
#endif
