// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
@testable import OrderlyPostgres
import OrderlyOutboxCore
import PostgresNIO
import Testing

/// The worker's statements are planned once per connection, not at every call.
///
/// PostgreSQL plans a prepared statement's first five executions for their parameters, then
/// keeps one generic plan if its estimated cost is no higher than theirs; if it is higher, it
/// plans every execution again. Planning the acknowledgement cost more than running it: a
/// profile of one worker delivering one message at a time spent 40 % of the machine in the
/// planner, and throughput doubled once the generic plan was kept. The statements are written
/// so that their generic plans cost no more than planning them each time (an `= ANY(array)`
/// probe is bounded by the array's least and greatest values, which a generic plan cannot
/// otherwise estimate; the lines a take looks at, likewise). Checked with PostgreSQL's own counters (`pg_prepared_statements`) on
/// one connection, with the tables as a worker first meets them and after `ANALYZE`.
@Suite("PostgreSQL keeps one plan for the worker's statements", .timeLimit(.minutes(2)))
struct PlanCacheTests {
  /// Runs `make(n)` for n in 0..<8 on `connection` and returns how many of the executions were
  /// planned generically and how many for their parameters.
  private func plans<Statement: PostgresPreparedStatement>(
    on connection: PostgresConnection,
    _ make: (Int) -> Statement
  ) async throws -> (generic: Int, custom: Int) {
    for n in 0..<8 {
      for try await _ in try await connection.execute(make(n), logger: TestServer.logger) {}
    }
    let rows = try await connection.query(
      "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = \(Statement.name)",
      logger: TestServer.logger
    )
    var counts = (generic: 0, custom: 0)
    for try await (generic, custom) in rows.decode((Int, Int).self) { counts = (generic, custom) }
    return counts
  }

  /// The acknowledgement of `acked` on line `k<n>`, taking the next `batch`, by a worker that
  /// does not hold the line (refused, so the table stays as it is; planned all the same).
  private func acknowledgement<Trail: AuditVariant>(
    _: Trail.Type,
    line n: Int,
    acked: [Int64],
    batch: Int
  ) -> AcknowledgeStatement<Trail> {
    AcknowledgeStatement<Trail>(
      line: LineKey.key("k\(n)"),
      owner: "plan-test",
      fence: 1,
      acked: acked,
      givenBack: [],
      takeNext: true,
      last: acked.last ?? 0,
      batch: batch,
      giveUp: false,
      trail: .attempts(acked)
    )
  }

  /// Every statement a worker runs for each message and each line, on a new connection.
  private func check(_ database: TestDatabase, when: String) async throws {
    let client = try database.client(maximumConnections: 1)
    try await client.withConnection { connection in
      // PostgreSQL's own choice, as on a client configured without Orderly's URL (which asks
      // for one plan per statement outright): the statements must keep one plan even so.
      try await connection.query("SET plan_cache_mode = auto", logger: TestServer.logger)
      // Each line's messages, in order.
      var stored: [Int: [Int64]] = [:]
      let rows = try await connection.query(
        "SELECT line, sequence FROM orderly_outbox_message ORDER BY line, sequence",
        logger: TestServer.logger
      )
      for try await (line, sequence) in rows.decode((String, Int64).self) {
        if let n = Int(line.dropFirst(3)) { stored[n, default: []].append(sequence) }
      }
      var found: [String: (generic: Int, custom: Int)] = [:]
      found["acknowledge one"] = try await plans(on: connection) { n in
        acknowledgement(
          Unaudited.self,
          line: n,
          acked: Array(stored[n, default: []].prefix(1)),
          batch: 1
        )
      }
      found["acknowledge one, audited"] = try await plans(on: connection) { n in
        acknowledgement(
          Audited.self,
          line: n,
          acked: Array(stored[n, default: []].prefix(1)),
          batch: 1
        )
      }
      found["acknowledge 16"] = try await plans(on: connection) { n in
        acknowledgement(
          Unaudited.self,
          line: n,
          acked: Array(stored[n, default: []].prefix(16)),
          batch: 16
        )
      }
      found["acknowledge 16, audited"] = try await plans(on: connection) { n in
        acknowledgement(
          Audited.self,
          line: n,
          acked: Array(stored[n, default: []].prefix(16)),
          batch: 16
        )
      }
      let lines = (0..<16).map { LineKey.key("k\($0)") }
      found["fresh leases"] = try await plans(on: connection) { n in
        FreshLeasesStatement(lines: Array(lines[n...]))
      }
      found["oldest lines"] = try await plans(on: connection) { _ in
        OldestLinesStatement(window: 2_048, stopLine: true, limit: 16)
      }
      found["take lines"] = try await plans(on: connection) { n in
        TakeLinesStatement(
          lines: [lines[n]],
          stopLine: true,
          limit: 1,
          owner: "plan-test",
          leaseMilliseconds: 1,
          batch: 1
        )
      }
      found["claim"] = try await plans(on: connection) { n in
        ClaimBatchStatement(line: LineKey.key("k\(n)"), batch: 1)
      }
      found["release"] = try await plans(on: connection) { n in
        ReleaseStatement(line: LineKey.key("k\(n)"), owner: "plan-test", fence: 1)
      }
      for (statement, counts) in found.sorted(by: { $0.key < $1.key }) {
        #expect(
          counts.generic >= 1,
          "\(statement) (\(when)): \(counts.custom) executions planned for their parameters, \(counts.generic) generic"
        )
      }
    }
  }

  @Test(
    "after five executions, each statement a worker runs for every message and every line keeps a generic plan, before and after ANALYZE"
  )
  func genericPlans() async throws {
    guard let database = try await TestDatabase.make() else { return }
    let outbox = try await database.outbox(of: String.self)
    for key in 0..<16 {
      try await outbox.append(contentsOf: (0..<40).map { "\($0)" }, partition: "k\(key)")
    }
    try await check(database, when: "tables never analyzed")
    // This test's tables only: a database-wide ANALYZE would refresh the statistics that
    // StaleStatisticsTests, running beside it, keeps stale on purpose.
    try await database.execute(
      "ANALYZE orderly_outbox_line, orderly_outbox_lease, orderly_outbox_message, orderly_outbox_dead_letter"
    )
    try await check(database, when: "after ANALYZE")
    await outbox.close()
    await database.drop()
  }
}
/// Test rows for the audit trail.
extension AuditColumns {
  /// Attempts at `sequences` of key `k`, one each, started and ended now, with `outcome`.
  static func attempts(
    _ sequences: [Int64],
    outcome: OutboxAuditOutcome = .delivered
  ) -> AuditColumns {
    AuditColumns(
      sequences.map { sequence in
        AuditAttempt(
          ClaimedHead(
            id: UUID(),
            sequence: sequence,
            partition: "k",
            payload: Data(),
            attempt: 1,
            appendedAt: Date(),
            headers: [:]
          ),
          startedAt: Date(),
          endedAt: Date(),
          outcome: outcome
        )
      }
    )
  }
}
#endif
