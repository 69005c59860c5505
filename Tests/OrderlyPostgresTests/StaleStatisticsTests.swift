// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
@testable import OrderlyPostgres
import OrderlyOutboxCore
import PostgresNIO
import Testing

/// The plan PostgreSQL keeps for `statement` on `connection` (planned for any parameters),
/// one line of `EXPLAIN` per element.
private func genericPlan<Statement: PostgresPreparedStatement>(
  of statement: Statement,
  arguments: String,
  on connection: PostgresConnection
) async throws -> [String] {
  // Prepared by running it once, in a transaction rolled back: the table stays as it is.
  try await connection.query("BEGIN", logger: TestServer.logger)
  for try await _ in try await connection.execute(statement, logger: TestServer.logger) {}
  try await connection.query("ROLLBACK", logger: TestServer.logger)
  var plan: [String] = []
  let rows = try await connection.query(
    PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE \(Statement.name)(\(arguments))"),
    logger: TestServer.logger
  )
  for try await line in rows.decode(String.self) { plan.append(line) }
  return plan
}

/// What in `plan` reads `table` other than by key: a sequential scan, a read of its primary key
/// without a condition on the line, or a read through `index` (an index not to be used here).
private func wholeReads(of table: String, in plan: [String], through index: String? = nil)
  -> [String]
{
  var found: [String] = []
  for (position, line) in plan.enumerated() {
    guard line.contains(" \(table)") else { continue }
    if line.contains("Seq Scan on \(table) ") {
      found.append(line)
    } else if line.contains("\(table)_pkey") {
      let next = plan.dropFirst(position + 1).first ?? ""
      if !(next.contains("Index Cond:") && next.contains("line =")) { found.append(line) }
    } else if let index, line.contains(index) {
      found.append(line)
    }
  }
  return found
}

/// The worker's statements when the messages table's statistics call it empty.
///
/// An autovacuum that runs the moment the queue has drained sees no live row; until the next
/// `ANALYZE`, PostgreSQL takes the messages table for one row, whatever it holds, and costs a
/// read of a whole index like one probe. Found by the harness's crash-recovery cell: looks took
/// 150-550 ms and every acknowledgement read the age index from its start. Here the tables are
/// put in that state on purpose (autovacuum off for the test's table, a `VACUUM` of the drained
/// table, then 4,000 messages over 200 keys).
@Suite(
  "The worker's statements on statistics that call the messages empty",
  .timeLimit(.minutes(3))
)
struct StaleStatisticsTests {
  /// The keys the messages are appended under.
  private static let keys = (0..<200).map { "k\($0)" }

  /// An outbox whose messages table holds 4,000 messages while its statistics say it holds
  /// none (checked: the test fails at once when the premise does not hold).
  private func staleOutbox(_ database: TestDatabase) async throws -> PostgresOutbox<String> {
    let outbox = try await database.outbox(of: String.self)
    try await database.execute(
      "ALTER TABLE orderly_outbox_message SET (autovacuum_enabled = false)"
    )
    // On one connection: the server adds a session's counts of inserted and deleted rows to its
    // count of live rows when that session sends them (up to a minute later when it is busy),
    // while the vacuum sets the count outright. Deletes sent by another session after the
    // appends' counts would take the appended rows off again.
    try await database.admin.withConnection { connection in
      for sql in [
        "SET search_path TO \(database.schema)",
        """
        INSERT INTO orderly_outbox_message (line, sequence, id, payload, appended_at)
        SELECT 'old' || (i % 100), i, gen_random_uuid(), '\\x00', now()
        FROM generate_series(1, 4000) i
        """,
        "DELETE FROM orderly_outbox_message",
        // What an autovacuum does as the queue drains while appends go on at the table's end
        // (so that it cannot cut the emptied pages off).
        "VACUUM (TRUNCATE false) orderly_outbox_message",
      ] {
        try await connection.query(PostgresQuery(unsafeSQL: sql), logger: TestServer.logger)
      }
    }
    for key in Self.keys {
      try await outbox.append(contentsOf: (0..<20).map { "\(key)-\($0)" }, partition: key)
    }
    let estimate = try await database.fleetCount(
      """
      SELECT reltuples::bigint FROM pg_class
      WHERE oid = to_regclass('orderly_outbox_message') AND relpages > 0
      """
    )
    try #require(
      estimate == 0,
      "the statistics should call the table empty; they count \(estimate)"
    )
    return outbox
  }

  @Test("every statement a worker runs reads the messages by key, not the whole table")
  func plansProbeByKey() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await staleOutbox(database)
    let client = try database.client(maximumConnections: 1)
    var found: [String: (plan: [String], whole: [String])] = [:]
    try await client.withConnection { connection in
      try await connection.query(
        "SET plan_cache_mode = force_generic_plan",
        logger: TestServer.logger
      )
      var first = 0 as Int64
      for try await sequence in try await connection.query(
        "SELECT min(sequence) FROM orderly_outbox_message WHERE line = 'p:k7'",
        logger: TestServer.logger
      ).decode(Int64.self) {
        first = sequence
      }
      let lines = Self.keys.prefix(36).map { LineKey.key($0) }
      let array = "'{" + lines.joined(separator: ",") + "}'::text[]"
      let statements: [(String, Bool, () async throws -> [String])] = [
        (
          "oldest lines", true,
          {
            try await genericPlan(
              of: OldestLinesStatement(window: 2_048, stopLine: true, limit: 36),
              arguments: "2048, true, 36, NULL, '{}'::text[]",
              on: connection
            )
          }
        ),
        (
          "take lines", false,
          {
            try await genericPlan(
              of: TakeLinesStatement(
                lines: Array(lines),
                stopLine: true,
                limit: 16,
                owner: "plan-test",
                leaseMilliseconds: 30_000,
                batch: 16
              ),
              arguments: "\(array), true, 16, 'plan-test', 30000, 16",
              on: connection
            )
          }
        ),
        (
          "claim", false,
          {
            try await genericPlan(
              of: ClaimBatchStatement(line: "p:k7", batch: 16),
              arguments: "'p:k7', 16",
              on: connection
            )
          }
        ),
        (
          "acknowledge", false,
          {
            try await genericPlan(
              of: AcknowledgeStatement<Unaudited>(
                line: "p:k7",
                owner: "plan-test",
                fence: 1,
                acked: [first],
                givenBack: [],
                takeNext: true,
                last: first,
                batch: 16,
                giveUp: false,
                trail: .attempts([first])
              ),
              arguments:
                "'p:k7', 'plan-test', 1, '{\(first)}'::int8[], '{}'::int8[], true, \(first), 16, false",
              on: connection
            )
          }
        ),
        (
          "dead letter", false,
          {
            try await genericPlan(
              of: DeadLetterStatement<Unaudited>(
                line: "p:k7",
                owner: "plan-test",
                fence: 1,
                sequence: first,
                attempts: 1,
                reason: "plan-test",
                trail: .attempts([first])
              ),
              arguments: "'p:k7', 'plan-test', 1, \(first), 1, 'plan-test'",
              on: connection
            )
          }
        ),
      ]
      for (name, age, plan) in statements {
        let lines = try await plan()
        found[name] = (
          lines,
          wholeReads(
            of: "orderly_outbox_message",
            in: lines,
            through: age ? nil : "orderly_outbox_message_appended"
          )
        )
      }
    }
    #expect(found.count == 5)
    for (name, result) in found.sorted(by: { $0.key < $1.key }) {
      #expect(!result.plan.isEmpty, "\(name): no plan")
      #expect(
        result.whole.isEmpty,
        "\(name) reads the messages other than by key: \(result.whole)\n\(result.plan.joined(separator: "\n"))"
      )
    }
    await outbox.close()
  }

  @Test("a worker analyzes the messages table when its statistics call it empty")
  func workerAnalyzes() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await staleOutbox(database)
    // The count of live rows the worker compares with is kept by the server's statistics,
    // which a session sends at most every second (later when it goes idle, and up to a minute
    // later on a busy server: once in a full run beside a documentation build it took longer
    // than 60 s). The server's own pace, not the worker's: it may take up to three minutes.
    let counted = await eventually(upTo: .seconds(180)) {
      let live = try await database.fleetCount(
        """
        SELECT coalesce(n_live_tup, 0) FROM pg_stat_user_tables
        WHERE relid = to_regclass('orderly_outbox_message')
        """
      )
      return live >= 4_000
    }
    try #require(counted, "the server never counted the appended rows")
    let finish = AsyncGate()
    try outbox.start(pollInterval: .milliseconds(100)) { _ in await finish.wait() }
    let analyzed = await eventually(every: .milliseconds(100)) {
      let estimate = try await database.fleetCount(
        "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('orderly_outbox_message')"
      )
      return estimate >= 1_000
    }
    await finish.open()
    await outbox.stop()
    #expect(analyzed, "the worker did not analyze the table within a minute")
  }
}

/// The look on a fleet's tables: fresh statistics, a lease row for each of 1,000 lines, a third
/// of them held, a backlog of 4 messages per line.
///
/// Found by the harness's throughput cells: a look that checked the leases with `NOT EXISTS`
/// was planned as a join that read every lease row under each message of its window (the
/// planner expected a handful of window messages), 40-85 ms a look, and the fleet's throughput
/// halved. The look checks each message's lease by its key instead.
@Suite("The look on a fleet's leases", .timeLimit(.minutes(3)))
struct LeaseProbeTests {
  /// Leases (and lines) as a fleet leaves them: one row per line delivered so far, a third held
  /// by another worker for an hour; 4 messages per line appended in turn; statistics taken.
  private func fleetTables(_ database: TestDatabase) async throws -> PostgresOutbox<String> {
    let outbox = try await database.outbox(of: String.self)
    try await database.execute(
      """
      INSERT INTO orderly_outbox_line (line, last_sequence)
      SELECT 'p:k' || i, 4 FROM generate_series(1, 1000) i
      """
    )
    try await database.execute(
      """
      INSERT INTO orderly_outbox_lease (line, owner, expires_at, fence, paused)
      SELECT 'p:k' || i,
        CASE WHEN i % 3 = 1 THEN 'other-worker' END,
        CASE WHEN i % 3 = 1 THEN now() + interval '1 hour' ELSE now() END,
        CASE WHEN i % 3 = 1 THEN 1 ELSE 0 END,
        false
      FROM generate_series(1, 1000) i
      """
    )
    try await database.execute(
      """
      INSERT INTO orderly_outbox_message (line, sequence, id, payload, appended_at)
      SELECT 'p:k' || (i % 1000 + 1), i / 1000 + 1, gen_random_uuid(), '\\x00',
        now() + (i / 100) * interval '1 millisecond'
      FROM generate_series(0, 3999) i
      """
    )
    try await database.execute(
      "ANALYZE orderly_outbox_line, orderly_outbox_lease, orderly_outbox_message"
    )
    return outbox
  }

  @Test("the look reads each window message's lease by its line, never the whole lease table")
  func lookProbesLeases() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let outbox = try await fleetTables(database)
    let leases = try await database.fleetCount(
      "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass('orderly_outbox_lease')"
    )
    try #require(
      leases >= 900,
      "the statistics should count the 1,000 leases; they count \(leases)"
    )
    let client = try database.client(maximumConnections: 1)
    var plan: [String] = []
    try await client.withConnection { connection in
      try await connection.query(
        "SET plan_cache_mode = force_generic_plan",
        logger: TestServer.logger
      )
      plan = try await genericPlan(
        of: OldestLinesStatement(window: 2_048, stopLine: true, limit: 36),
        arguments: "2048, true, 36, NULL, '{}'::text[]",
        on: connection
      )
    }
    let whole = wholeReads(of: "orderly_outbox_lease", in: plan)
    let probes = plan.filter { $0.contains("orderly_outbox_lease_pkey") }.count
    #expect(!plan.isEmpty, "no plan")
    #expect(probes > 0, "the look reads no lease by key:\n\(plan.joined(separator: "\n"))")
    #expect(
      whole.isEmpty,
      "the look reads the leases other than by key: \(whole)\n\(plan.joined(separator: "\n"))"
    )
    await outbox.close()
  }
}
#endif
