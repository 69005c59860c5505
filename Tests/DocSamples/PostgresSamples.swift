// The code the OrderlyPostgres documentation shows, compiled by `swift build` with the Postgres
// trait (.ci/run builds with it); docs-gen copies each sample into its `orderly:sample` region.
#if Postgres
import Foundation
import OrderlyOutbox
// sample: postgres-outbox, postgres-batches, postgres-fenced-write
import OrderlyPostgres
// end sample
// sample: postgres-outbox, postgres-fenced-write
import PostgresNIO
// end sample
import Logging

/// A change to one account: the samples' message.
struct AccountChange: Codable, Sendable {
  var accountID: String
  var amount: Int
}

/// Where the samples deliver to: applies each change once, by its id.
struct Ledger: Sendable {
  func apply(_ change: AccountChange, id: UUID, fence: Int64?) async throws {}
}

func postgresOutbox(ledger: Ledger) async throws {
  // sample: postgres-outbox
  let client = PostgresClient(configuration: try .init(orderlyURL: "postgresql://app@db:5432/app"))
  let running = Task { await client.run() }
  let outbox = try await PostgresOutbox<AccountChange>(client: client) { $0.accountID }
  try outbox.start(limit: 16, lease: .seconds(30)) { envelope in
    try await ledger.apply(envelope.message, id: envelope.id, fence: envelope.fence)
  }
  // end sample
  await outbox.stop()
  running.cancel()
}

func postgresBatches(outbox: PostgresOutbox<AccountChange>, ledger: Ledger) throws {
  // sample: postgres-batches
  try outbox.start(limit: 16, batchesOf: 50) { envelopes in
    for (index, envelope) in envelopes.enumerated() {
      do {
        try await ledger.apply(envelope.message, id: envelope.id, fence: envelope.fence)
      } catch {
        throw BatchDeliveryError(delivered: index, error: error)
      }
    }
  }
  // end sample
}

func fencedWrites(
  outbox: PostgresOutbox<AccountChange>,
  client: PostgresClient,
  logger: Logger
) async throws {
  // sample: postgres-fenced-write
  let fences = try PostgresFences()
  try await fences.createTable(client, logger: logger)
  try outbox.start(limit: 16, lease: .seconds(30)) { envelope in
    let change = envelope.message
    try await client.withTransaction(logger: logger) { connection in
      // First in the transaction: refused (StaleFence) if the key's next holder wrote since.
      try await fences.admit(envelope, on: connection, logger: logger)
      try await connection.query(
        """
        UPDATE account SET balance = balance + \(change.amount) WHERE id = \(change.accountID)
        """,
        logger: logger
      )
    }
  }
  // end sample
}
#endif
