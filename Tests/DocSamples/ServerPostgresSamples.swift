// The code the server documentation shows for a PostgreSQL worker, compiled by `swift build`
// with the Server and Postgres traits (.ci/run builds with them); docs-gen copies each sample
// into its `orderly:sample` region.
#if Server && Postgres
import Foundation
// sample: server-postgres-worker
import Logging
import OrderlyPostgres
import OrderlyServer
import ServiceLifecycle
import UnixSignals
// end sample

func serverPostgresWorker(httpServer: some Service, ledger: Ledger) async throws {
  // sample: server-postgres-worker
  var logger = Logger(label: "ledger-worker")
  logger.logLevel = .info

  // A client of the outbox's own, run until close(); or pass a running PostgresClient.
  let outbox = try await PostgresOutbox<AccountChange>(
    url: "postgresql://app@db:5432/app",
    logger: logger
  ) { $0.accountID }
  let delivery = OutboxService(
    outbox: outbox,
    name: "ledger",
    limit: 16,
    lease: .seconds(30),
    shutdownGracePeriod: .seconds(10),  // SIGTERM: finish, then hand the keys over at once
    logger: logger,
    metrics: OutboxMetrics(outboxName: "ledger")  // the fleet's pending count, dead letters, age
  ) { envelope in
    try await ledger.apply(envelope.message, id: envelope.id, fence: envelope.fence)
  }

  let group = ServiceGroup(
    services: [httpServer, delivery],
    gracefulShutdownSignals: [.sigterm, .sigint],
    logger: logger
  )
  try await group.run()  // after SIGTERM: deliveries acknowledged, keys released
  await outbox.close()
  // end sample
}
#endif
