// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
@testable import OrderlyPostgres
import OrderlyOutboxCore
import PostgresNIO
import Testing

/// The store refuses what would break order: a worker made to acknowledge a line's second
/// message while its first is there, or to acknowledge under a fence that is no longer the
/// line's, is refused by the statement itself, and nothing changes.
@Suite("PostgreSQL refuses acknowledgements that would break order", .timeLimit(.minutes(2)))
struct OrderRefusalTests {
  /// Takes line `p:k` as `owner` with its first messages; returns the fence.
  private func take(_ client: PostgresClient, owner: String) async throws -> Int64 {
    try await client.checkedExecute(FreshLeasesStatement(lines: ["p:k"]), logger: TestServer.logger)
    {
      rows in for try await _ in rows {}
    }
    return try await client.checkedExecute(
      TakeLinesStatement(
        lines: ["p:k"],
        stopLine: true,
        limit: 1,
        owner: owner,
        leaseMilliseconds: 30_000,
        batch: 2
      ),
      logger: TestServer.logger
    ) { rows in
      var fence: Int64 = 0
      for try await row in rows { fence = row.fence }
      return fence
    }
  }

  private func acknowledge(
    _ client: PostgresClient,
    owner: String,
    fence: Int64,
    _ sequences: [Int64]
  ) async throws -> AcknowledgeStatement<Audited>.Row? {
    try await client.checkedExecute(
      AcknowledgeStatement<Audited>(
        line: "p:k",
        owner: owner,
        fence: fence,
        acked: sequences,
        givenBack: [],
        takeNext: false,
        last: sequences.last ?? 0,
        batch: 1,
        giveUp: false,
        trail: .attempts(sequences)
      ),
      logger: TestServer.logger
    ) { rows in
      var answer: AcknowledgeStatement<Audited>.Row?
      for try await row in rows { answer = row }
      return answer
    }
  }

  private func pending(_ client: PostgresClient) async throws -> [Int64] {
    try await client.checkedQuery(
      "SELECT sequence FROM orderly_outbox_message WHERE line = 'p:k' ORDER BY sequence",
      logger: TestServer.logger
    ) { rows in
      var sequences: [Int64] = []
      for try await sequence in rows.decode(Int64.self) { sequences.append(sequence) }
      return sequences
    }
  }

  @Test(
    "the second message acknowledged before the first is refused, as out of order; under a stale fence, as stale; the right one goes through"
  )
  func refusals() async throws {
    guard let database = try await TestDatabase.make() else { return }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["one", "two", "three"], partition: "k")
    let client = try database.client()
    let fence = try await take(client, owner: "worker-a")

    let skipping = try await acknowledge(client, owner: "worker-a", fence: fence, [2])
    #expect(skipping?.paused == nil)
    #expect(skipping?.ordered == false)
    #expect(skipping?.removed == 0)

    let stale = try await acknowledge(client, owner: "worker-a", fence: fence - 1, [1])
    #expect(stale?.paused == nil)
    #expect(stale?.ordered == true)
    #expect(try await pending(client) == [1, 2, 3])

    let right = try await acknowledge(client, owner: "worker-a", fence: fence, [1, 2])
    #expect(right?.paused == false)
    #expect(right?.removed == 2)
    #expect(try await pending(client) == [3])

    // The refused attempts are in the trail as cut; the right ones as delivered.
    let outcomes = try await client.checkedQuery(
      "SELECT sequence, outcome FROM orderly_outbox_audit ORDER BY number",
      logger: TestServer.logger
    ) { rows in
      var outcomes: [String] = []
      for try await (sequence, outcome) in rows.decode((Int64, String).self) {
        outcomes.append("\(sequence) \(outcome)")
      }
      return outcomes
    }
    #expect(outcomes == ["2 cut", "1 cut", "1 delivered", "2 delivered"])

    // An outcome this version does not know is reported with where it is, not read as cut.
    try await database.execute(
      "UPDATE orderly_outbox_audit SET outcome = 'teleported' WHERE outcome = 'delivered'"
    )
    // The trail is read once a worker with audit on has begun it; these statements ran alone.
    try await database.execute(
      """
      INSERT INTO orderly_outbox_audit_start (line, first_sequence) VALUES ('#begun', 0)
      ON CONFLICT (line) DO NOTHING
      """
    )
    do {
      let trail = try await outbox.auditTrail()
      Issue.record("an unknown outcome was read as \(trail?.records.map(\.outcome) ?? [])")
    } catch {
      let text = "\(error)"
      #expect(text.contains("outcome is \"teleported\""), "\(text)")
      #expect(text.contains("orderly_outbox_audit, row number"), "\(text)")
    }
    await outbox.close()
    await database.drop()
  }

  @Test(
    "rows written on their own: a delivered one is always cut (only a removal records a delivery); others keep their outcome while the lease holds, and are cut under a stale fence"
  )
  func rowsOnTheirOwn() async throws {
    guard let database = try await TestDatabase.make() else { return }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["one", "two"], partition: "k")
    let client = try database.client()
    let fence = try await take(client, owner: "worker-a")
    func write(_ outcome: OutboxAuditOutcome, fence: Int64) async throws {
      try await client.checkedExecute(
        AuditStatement(
          line: "p:k",
          owner: "worker-a",
          fence: fence,
          columns: .attempts([1], outcome: outcome)
        ),
        logger: TestServer.logger
      ) { rows in for try await _ in rows {} }
    }
    try await write(.delivered, fence: fence)
    try await write(.retried, fence: fence)
    try await write(.retried, fence: fence - 1)
    let outcomes = try await client.checkedQuery(
      "SELECT outcome FROM orderly_outbox_audit ORDER BY number",
      logger: TestServer.logger
    ) { rows in
      var outcomes: [String] = []
      for try await outcome in rows.decode(String.self) { outcomes.append(outcome) }
      return outcomes
    }
    #expect(outcomes == ["cut", "retried", "cut"])
    #expect(try await pending(client) == [1, 2])
    await outbox.close()
    await database.drop()
  }

  @Test("a message set aside while one before it is there is refused, and stays")
  func deadLetterOutOfOrder() async throws {
    guard let database = try await TestDatabase.make() else { return }
    let outbox = try await database.outbox(of: String.self)
    try await outbox.append(contentsOf: ["one", "two"], partition: "k")
    let client = try database.client()
    let fence = try await take(client, owner: "worker-a")
    let moved = try await client.checkedExecute(
      DeadLetterStatement<Unaudited>(
        line: "p:k",
        owner: "worker-a",
        fence: fence,
        sequence: 2,
        attempts: 1,
        reason: "test",
        trail: AuditColumns()
      ),
      logger: TestServer.logger
    ) { rows in
      var moved = false
      for try await _ in rows { moved = true }
      return moved
    }
    #expect(!moved)
    #expect(try await pending(client) == [1, 2])
    await outbox.close()
    await database.drop()
  }
}
#endif
