// The audit trail on PostgreSQL: the rows a worker's statements write, the statement that writes
// them on their own, pruning, and the read for `orderly outbox audit`.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyOutboxCore
import PostgresNIO

/// Attempts for the audit trail as a statement binds them: one array per column, so that any
/// number of rows costs one statement (none when the trail is off: the arrays are empty).
struct AuditColumns: Sendable {
  var sequences: [Int64] = []
  var ids: [UUID] = []
  var attempts: [Int64] = []
  var started: [Date] = []
  var ended: [Date] = []
  var outcomes: [String] = []

  init(_ rows: [AuditAttempt] = []) {
    for row in rows {
      sequences.append(row.sequence)
      ids.append(row.id)
      attempts.append(Int64(row.attempt))
      started.append(row.startedAt)
      ended.append(row.endedAt)
      outcomes.append(row.outcome.rawValue)
    }
  }

  /// Appends the six arrays, in the order ``rows(from:)`` reads them.
  func bind(_ bindings: inout PostgresBindings) {
    bindings.append(sequences)
    bindings.append(ids)
    bindings.append(attempts)
    bindings.append(started)
    bindings.append(ended)
    bindings.append(outcomes)
  }

  /// The rows of the six arrays bound from `$first`, as a `FROM` item named `a` with columns
  /// `sequence, id, attempt, started, ended, outcome`.
  static func rows(from first: Int) -> String {
    let n = (first..<first + 6).map { "$\($0)" }
    return """
      unnest(\(n[0])::int8[], \(n[1])::uuid[], \(n[2])::int8[], \(n[3])::timestamptz[],
        \(n[4])::timestamptz[], \(n[5])::text[]) AS a(sequence, id, attempt, started, ended, outcome)
      """
  }

  /// The columns of the trail an insert names, in order.
  static let insertColumns =
    "(line, partition, sequence, id, attempt, fence, worker, started_at, ended_at, outcome)"
}

/// Writes attempts on their own (a line that ended before a step could carry them), each as
/// cut unless the worker still holds the line under its fence; a delivered one always as cut
/// (only the statement that removes a message records its delivery).
struct AuditStatement: PostgresPreparedStatement {
  static let name = "orderly_audit_v1"
  static let sql = """
    INSERT INTO \(Table.audit) \(AuditColumns.insertColumns)
    SELECT $1, $2, a.sequence, a.id, a.attempt, $4, $3, a.started, a.ended,
      CASE WHEN a.outcome <> 'delivered' AND EXISTS (
        SELECT 1 FROM \(Table.lease)
        WHERE line = $1 AND owner = $3 AND fence = $4 AND expires_at > now()
      ) THEN a.outcome ELSE 'cut' END
    FROM \(AuditColumns.rows(from: 5))
    """
  typealias Row = ()

  let line: String
  let owner: String
  let fence: Int64
  let columns: AuditColumns

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(line)
    bindings.append(LineKey.partition(line))
    bindings.append(owner)
    bindings.append(fence)
    columns.bind(&bindings)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {}
}

/// The SQL of the trail on PostgreSQL: its tables, marking it begun, pruning, reading.
enum PostgresAudit {
  static let table = Table.audit.description
  static let startTable = Table.auditStart.description
  /// The row of ``startTable`` that says the trail has begun (no line key looks like it: keys
  /// are empty, for the default line, or begin with `p:`).
  static let begunRow = "#begun"

  /// The trail's tables, created in place by the first worker that opens an outbox without
  /// them, as the age index is: they change no table an earlier worker reads.
  static let create: [PostgresQuery] = [
    """
    CREATE TABLE IF NOT EXISTS \(Table.audit) (
      number bigserial PRIMARY KEY,
      line text NOT NULL,
      partition text,
      sequence bigint NOT NULL,
      id uuid NOT NULL,
      attempt integer NOT NULL,
      fence bigint,
      worker text NOT NULL,
      started_at timestamptz NOT NULL,
      ended_at timestamptz NOT NULL,
      outcome text NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS \(Table.auditStart) (
      line text PRIMARY KEY,
      first_sequence bigint NOT NULL
    )
    """,
  ]

  // deadline: the caller's
  /// Marks the trail begun, once for the database: each line numbered already answers from its
  /// first message still pending (every worker records its deliveries from its start, so a
  /// message appended while the trail begins is answered for), or from its next number.
  static func markBegun(_ client: PostgresClient, logger: Logger) async throws {
    try await client.query(
      """
      WITH fresh AS (
        SELECT NOT EXISTS (SELECT 1 FROM \(Table.auditStart)) AS yes
      ), lines AS (
        INSERT INTO \(Table.auditStart) (line, first_sequence)
        SELECT l.line, coalesce(
          (SELECT min(m.sequence) FROM \(Table.message) m WHERE m.line = l.line),
          l.last_sequence + 1)
        FROM \(Table.line) l
        WHERE (SELECT yes FROM fresh)
        ON CONFLICT (line) DO NOTHING
      )
      INSERT INTO \(Table.auditStart) (line, first_sequence)
      VALUES (\(begunRow), 0) ON CONFLICT (line) DO NOTHING
      """,
      logger: logger
    )
  }

  // deadline: the caller's
  /// Removes up to `AuditPruning.batch` rows that ended before the retention, oldest first,
  /// and moves each line's first number checked past them; returns how many were removed.
  static func pruneRows(
    _ client: PostgresClient,
    retentionSeconds: Double,
    logger: Logger
  ) async throws -> Int {
    var removed = 0
    for try await count in try await client.query(
      """
      WITH pruned AS (
        DELETE FROM \(Table.audit) WHERE number IN (
          SELECT number FROM \(Table.audit)
          WHERE ended_at < now() - interval '1 second' * \(retentionSeconds)
          ORDER BY number LIMIT \(AuditPruning.batch))
        RETURNING line, sequence
      ), moved AS (
        INSERT INTO \(Table.auditStart) (line, first_sequence)
        SELECT line, max(sequence) + 1 FROM pruned GROUP BY line
        ON CONFLICT (line) DO UPDATE SET first_sequence =
          greatest(\(Table.auditStart).first_sequence, excluded.first_sequence)
      )
      SELECT count(*)::bigint FROM pruned
      """,
      logger: logger
    ).decode(Int64.self) {
      removed = Int(count)
    }
    return removed
  }

  /// Records an operator's drop of a dead letter, in the drop's transaction, when the trail
  /// has begun.
  static func dropped(id: UUID) -> PostgresQuery {
    """
    INSERT INTO \(Table.audit) \(unescaped: AuditColumns.insertColumns)
    SELECT d.line, d.partition, d.sequence, d.id, d.attempts, NULL, 'operator', now(), now(),
      'dropped'
    FROM \(Table.deadLetter) d
    WHERE d.id = \(id) AND EXISTS (SELECT 1 FROM \(Table.auditStart))
    """
  }

  // deadline: the caller's
  /// The trail, the messages held and the numbers handed out, in one repeatable-read
  /// transaction; `nil` when it never began (or the outbox has no trail tables yet).
  static func trail(_ client: PostgresClient, logger: Logger) async throws -> OutboxAuditTrail? {
    try await client.transaction(logger: logger) { connection in
      try await connection.checkedQuery(
        "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        logger: logger
      )
      return try await readTrail(connection, logger: logger)
    }
  }

  // deadline: the caller's
  /// Whether the trail's tables exist (an outbox opened only by workers older than the trail
  /// has none).
  static func trailExists(_ connection: PostgresConnection, logger: Logger) async throws -> Bool {
    var exists = false
    for try await present in try await connection.checkedQuery(
      "SELECT to_regclass('\(Table.auditStart)') IS NOT NULL",
      logger: logger
    ).decode(Bool.self) {
      exists = present
    }
    return exists
  }

  // deadline: the caller's
  private static func readTrail(
    _ connection: PostgresConnection,
    logger: Logger
  ) async throws -> OutboxAuditTrail? {
    guard try await trailExists(connection, logger: logger) else { return nil }
    var begun = false
    for try await _ in try await connection.checkedQuery(
      "SELECT 1 FROM \(Table.auditStart) WHERE line = \(begunRow)",
      logger: logger
    ) {
      begun = true
    }
    guard begun else { return nil }
    var records: [OutboxAuditRecord] = []
    for try await row in try await connection.checkedQuery(
      """
      SELECT number, partition, sequence, id, attempt, fence, worker, started_at, ended_at,
        outcome
      FROM \(Table.audit) ORDER BY number
      """,
      logger: logger
    ) {
      let row = NamedColumns(row)
      let number: Int64 = try row("number")
      let outcome: String = try row("outcome")
      guard let known = OutboxAuditOutcome(rawValue: outcome) else {
        // Reported, not replaced: the trail misses attempts, it never invents them.
        throw UnreadableValue(
          table: "\(Table.audit)",
          row: "number \(number)",
          column: "outcome",
          value: outcome
        )
      }
      records.append(
        OutboxAuditRecord(
          number: number,
          partition: try row("partition"),
          sequence: try row("sequence"),
          messageID: try row("id"),
          attempt: try row("attempt"),
          fence: try row("fence"),
          worker: try row("worker"),
          startedAt: try row("started_at"),
          endedAt: try row("ended_at"),
          outcome: known
        )
      )
    }
    var held: [OutboxAuditHeld] = []
    for try await row in try await connection.checkedQuery(
      """
      SELECT line, sequence, false AS dead FROM \(Table.message)
      UNION ALL SELECT line, sequence, true FROM \(Table.deadLetter)
      """,
      logger: logger
    ) {
      let row = NamedColumns(row)
      held.append(
        OutboxAuditHeld(
          partition: LineKey.partition(try row("line")),
          sequence: try row("sequence"),
          deadLetter: try row("dead")
        )
      )
    }
    var numbers: [OutboxAuditNumbers] = []
    for try await row in try await connection.checkedQuery(
      """
      SELECT l.line, coalesce(s.first_sequence, 1) AS first_sequence, l.last_sequence
      FROM \(Table.line) l LEFT JOIN \(Table.auditStart) s ON s.line = l.line
      """,
      logger: logger
    ) {
      let row = NamedColumns(row)
      numbers.append(
        OutboxAuditNumbers(
          partition: LineKey.partition(try row("line")),
          sharedByAllKeys: false,
          first: try row("first_sequence"),
          last: try row("last_sequence")
        )
      )
    }
    return OutboxAuditTrail(records: records, held: held, numbers: numbers, readAt: Date())
  }
}
#endif
