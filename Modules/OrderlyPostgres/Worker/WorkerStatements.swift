// The worker's SQL: taking lines, renewing leases, acknowledging, dead letters, releasing.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutboxCore
import PostgresNIO

// The statements a worker runs for every line and every message, prepared once per connection:
// PostgreSQL then parses and plans each once (or keeps a generic plan), instead of at every call,
// which cost about as much as running them.

extension ClaimedHead {
  /// The message a row took, read by the columns' names (`sequence, id, partition, payload,
  /// attempts, appended_at, headers`); `nil` when the row took none (a row of a statement that
  /// took a line but no message has `NULL` in each).
  fileprivate static func taken(_ row: NamedColumns) throws -> ClaimedHead? {
    guard let sequence = try row("sequence", as: Int64?.self) else { return nil }
    return try stored(row, sequence: sequence)
  }

  /// The message of a row that took one, read by the columns' names.
  fileprivate static func stored(_ row: NamedColumns, sequence: Int64? = nil) throws -> ClaimedHead
  {
    ClaimedHead(
      id: try row("id"),
      sequence: try sequence ?? row("sequence"),
      partition: try row("partition"),
      payload: try row("payload"),
      attempt: try row("attempts"),
      appendedAt: try row("appended_at"),
      headers: StoredHeaders.decode(try row("headers", as: String?.self))
    )
  }
}

/// Up to `limit` lines with messages and no live lease whose first message is among the
/// `window` oldest messages, the line whose first message is oldest first; with whether each
/// line has no lease row yet.
///
/// The window is read through the age index (the append time alone) and the lines are found
/// in its order, so the look stops as soon as it has `limit`: no sort of the window. Every
/// check on a message of the window is a probe by its line, written as a scalar subquery, which
/// PostgreSQL runs as one probe per message whatever its estimates: a message is its line's
/// first when it is the line's lowest sequence (one probe of the primary key); a line is free
/// when its lease row (one probe) is not paused and not held. As joins, PostgreSQL planned
/// them from the estimated rows of the window, which it cannot know: an estimate of one row
/// put a scan of every lease under each message (40-85 ms a look with a queue 4,000 deep).
/// `fresh` is a count, not an EXISTS, for the same reason.
///
/// With fair shares, a look reads one group's messages only (``LineGroupFilter``): its lines
/// whose key starts with `$4` (any, when `NULL`) and with none of `$5`.
struct OldestLinesStatement: PostgresPreparedStatement {
  static let name = "orderly_oldest_lines_v4"
  static let sql = """
    SELECT m.line,
      (SELECT count(*) FROM \(Table.lease) f WHERE f.line = m.line) = 0 AS fresh
    FROM (
      SELECT line, sequence, appended_at, not_before FROM \(Table.message)
      WHERE ($4::text IS NULL OR line ^@ $4) AND NOT (line ^@ ANY($5::text[]))
      ORDER BY appended_at LIMIT $1
    ) m
    WHERE m.sequence = (
        SELECT e.sequence FROM \(Table.message) e
        WHERE e.line = m.line ORDER BY e.sequence LIMIT 1)
      AND (m.not_before IS NULL OR m.not_before <= now())
      AND coalesce((
        SELECT NOT l.paused AND (l.owner IS NULL OR l.expires_at <= now())
        FROM \(Table.lease) l WHERE l.line = m.line), true)
      AND (NOT $2 OR NOT EXISTS (
        SELECT 1 FROM \(Table.deadLetter) d WHERE d.line = m.line))
    ORDER BY m.appended_at
    LIMIT $3
    """
  /// A line, and whether it has no lease row yet.
  typealias Row = (line: String, fresh: Bool)

  let window: Int
  let stopLine: Bool
  let limit: Int
  /// Which lines: every one, or a fair-share group's.
  var group = LineGroupFilter.every

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(window)
    bindings.append(stopLine)
    bindings.append(limit)
    bindings.append(group.within)
    bindings.append(group.outside)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let row = NamedColumns(row)
    return (try row("line"), try row("fresh"))
  }
}

/// The lines of one fair-share group, as line keys: those that start with `within` (every line,
/// when `nil`) and with none of `outside` (the groups of longer prefixes).
struct LineGroupFilter: Sendable, Equatable {
  /// The group's line-key prefix, or `nil` for every line.
  let within: String?
  /// Line-key prefixes whose lines belong to other groups.
  let outside: [String]

  /// Every line.
  static let every = LineGroupFilter(within: nil, outside: [])

  /// The lines that start with `within` (every line, when `nil`) and with none of `outside`.
  init(within: String?, outside: [String]) {
    self.within = within
    self.outside = outside
  }

  /// The lines of a group of `shares` (a prefix, or ``FairShares/otherKeysName``).
  ///
  /// - Parameters:
  ///   - group: The group's name.
  ///   - shares: The groups.
  init(group: String, of shares: FairShares) {
    let prefixes = shares.groups.map(\.prefix)
    if group == FairShares.otherKeysName {
      self.init(within: nil, outside: prefixes.map(LineKey.key))
    } else {
      // A key belongs to its longest prefix: a longer prefix inside this one is another group.
      let longer = prefixes.filter { $0 != group && $0.hasPrefix(group) }
      self.init(within: LineKey.key(group), outside: longer.map(LineKey.key))
    }
  }

  /// Whether the line `key` is in the group.
  func contains(_ key: String) -> Bool {
    (within.map { key.hasPrefix($0) } ?? true) && !outside.contains { key.hasPrefix($0) }
  }
}

/// Takes the leases of up to `limit` of `lines` (in their order) that are still free or
/// expired, skipping those another worker is taking (`SKIP LOCKED`) and, under stopLine, those
/// waiting at a dead letter; with each line's first `batch` messages up to the first that is
/// not due (`due`: true while every message so far is due), their attempts counted.
///
/// A row per message taken, a line's rows together and in order; a line with none due has one
/// row with `NULL` message columns.
///
/// The lines' `= ANY` probe is bounded by the least and greatest of them, for the reason the
/// acknowledgement's is (see ``AcknowledgeStatement``): PostgreSQL then keeps one plan.
struct TakeLinesStatement: PostgresPreparedStatement {
  static let name = "orderly_take_lines_v2"
  static let sql = """
    WITH free AS (
      SELECT line FROM \(Table.lease) f
      WHERE line = ANY($1::text[]) AND NOT paused AND (owner IS NULL OR expires_at <= now())
        AND line BETWEEN (SELECT min(c) FROM unnest($1::text[]) c)
          AND (SELECT max(c) FROM unnest($1::text[]) c)
        AND (NOT $2 OR NOT EXISTS (
          SELECT 1 FROM \(Table.deadLetter) d WHERE d.line = f.line))
      ORDER BY array_position($1::text[], line)
      LIMIT $3
      FOR UPDATE SKIP LOCKED
    ), taken AS (
      UPDATE \(Table.lease) l
      SET owner = $4, expires_at = now() + interval '1 millisecond' * $5, fence = l.fence + 1
      FROM free WHERE l.line = free.line
      RETURNING l.line, l.fence
    ), due AS (
      SELECT t.line, w.sequence FROM taken t CROSS JOIN LATERAL (
        SELECT h.sequence,
          bool_and(h.not_before IS NULL OR h.not_before <= now())
            OVER (ORDER BY h.sequence) AS due
        FROM (SELECT sequence, not_before FROM \(Table.message)
              WHERE line = t.line ORDER BY sequence LIMIT $6) h
      ) w WHERE w.due
    ), heads AS (
      UPDATE \(Table.message) m SET attempts = m.attempts + 1
      WHERE m.line = ANY(ARRAY(SELECT line FROM due))
        AND m.sequence BETWEEN (SELECT min(sequence) FROM due) AND (SELECT max(sequence) FROM due)
        AND ((m.line, m.sequence) IN (SELECT line, sequence FROM due) OR false)
      RETURNING m.line, m.sequence, m.id, m.partition, m.payload, m.attempts, m.appended_at,
        m.headers
    )
    SELECT t.line, t.fence, h.sequence, h.id, h.partition, h.payload, h.attempts,
      h.appended_at, h.headers
    FROM taken t LEFT JOIN heads h ON h.line = t.line
    ORDER BY t.line, h.sequence
    """
  /// A line taken, and one of the messages taken with it (`nil` when none was due).
  struct Row {
    let line: String
    let fence: Int64
    let message: ClaimedHead?
  }

  let lines: [String]
  let stopLine: Bool
  let limit: Int
  let owner: String
  let leaseMilliseconds: Double
  let batch: Int

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(lines)
    bindings.append(stopLine)
    bindings.append(limit)
    bindings.append(owner)
    bindings.append(leaseMilliseconds)
    bindings.append(batch)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let row = NamedColumns(row)
    return Row(line: try row("line"), fence: try row("fence"), message: try .taken(row))
  }
}

/// The first lease rows of lines no worker held yet: free (fence 0, so their first holder gets
/// fence 1).
struct FreshLeasesStatement: PostgresPreparedStatement {
  static let name = "orderly_fresh_leases_v1"
  static let sql = """
    INSERT INTO \(Table.lease) (line, owner, expires_at, fence, paused)
    SELECT line, NULL, now(), 0, false FROM unnest($1::text[]) AS fresh(line)
    ON CONFLICT (line) DO NOTHING
    """
  typealias Row = ()

  let lines: [String]

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(lines)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {}
}

/// Gives a line's lease back, if it still is `owner`'s under `fence`.
struct ReleaseStatement: PostgresPreparedStatement {
  static let name = "orderly_release_v1"
  static let sql = """
    UPDATE \(Table.lease) SET owner = NULL, expires_at = now()
    WHERE line = $1 AND owner = $2 AND fence = $3
    """
  typealias Row = ()

  let line: String
  let owner: String
  let fence: Int64

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(line)
    bindings.append(owner)
    bindings.append(fence)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {}
}

/// Moves a line's message to the dead letters, if the lease holds and it is the line's first.
///
/// The lease row is locked under the fence, as an acknowledgement locks it. A row when it
/// moved, none when refused. With the audit trail on, writes the attempts of `trail` (each as
/// cut when refused).
struct DeadLetterStatement<Trail: AuditVariant>: PostgresPreparedStatement {
  static var name: String { Trail.isOn ? "orderly_dead_letter_v2_audit" : "orderly_dead_letter_v2" }
  static var sql: String {
    """
    WITH held AS (
      SELECT 1 FROM \(Table.lease)
      WHERE line = $1 AND owner = $2 AND fence = $3 AND expires_at > now()
        AND NOT EXISTS (
          SELECT 1 FROM \(Table.message) e WHERE e.line = $1 AND e.sequence < $4)
      FOR UPDATE
    ), moved AS (
      DELETE FROM \(Table.message)
      WHERE line = $1 AND sequence = $4 AND EXISTS (SELECT 1 FROM held)
      RETURNING *
    )\(Trail.isOn ? audited : "")
    INSERT INTO \(Table.deadLetter)
      (line, sequence, id, partition, entity, payload, attempts, appended_at, headers,
       failed_at, reason)
    SELECT line, sequence, id, partition, entity, payload, $5, appended_at, headers, now(), $6
    FROM moved
    RETURNING sequence
    """
  }
  /// The trail's rows: parameters 7 (the partition) to 13.
  private static var audited: String {
    """
    , audited AS (
      INSERT INTO \(Table.audit) \(AuditColumns.insertColumns)
      SELECT $1, $7, a.sequence, a.id, a.attempt, $3, $2, a.started, a.ended,
        CASE WHEN EXISTS (SELECT 1 FROM moved) THEN a.outcome ELSE 'cut' END
      FROM \(AuditColumns.rows(from: 8))
    )
    """
  }
  typealias Row = Int64

  let line: String
  let owner: String
  let fence: Int64
  let sequence: Int64
  let attempts: Int
  let reason: String
  /// The attempts for the trail (bound only when it is on).
  let trail: AuditColumns

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(line)
    bindings.append(owner)
    bindings.append(fence)
    bindings.append(sequence)
    bindings.append(attempts)
    bindings.append(reason)
    if Trail.isOn {
      bindings.append(LineKey.partition(line))
      trail.bind(&bindings)
    }
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int64.self) }
}

/// A line's first `batch` messages up to the first that is not due, their attempts counted.
struct ClaimBatchStatement: PostgresPreparedStatement {
  static let name = "orderly_claim_batch_v2"
  static let sql = """
    WITH due AS (
      SELECT w.sequence FROM (
        SELECT h.sequence,
          bool_and(h.not_before IS NULL OR h.not_before <= now())
            OVER (ORDER BY h.sequence) AS due
        FROM (SELECT sequence, not_before FROM \(Table.message)
              WHERE line = $1 ORDER BY sequence LIMIT $2) h
      ) w WHERE w.due
    ), taken AS (
      UPDATE \(Table.message) m SET attempts = m.attempts + 1
      WHERE m.line = $1 AND m.sequence = ANY(ARRAY(SELECT sequence FROM due))
        AND m.sequence BETWEEN (SELECT min(sequence) FROM due) AND (SELECT max(sequence) FROM due)
      RETURNING m.sequence, m.id, m.partition, m.payload, m.attempts, m.appended_at, m.headers
    )
    SELECT * FROM taken ORDER BY sequence
    """
  typealias Row = ClaimedHead

  let line: String
  let batch: Int

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(line)
    bindings.append(batch)
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    try .stored(NamedColumns(row))
  }
}

/// Acknowledges: removes delivered messages and takes the line's next ones, in one statement.
///
/// Removes `acked` if the lease still holds and they are the line's first, gives the attempts of
/// `givenBack` back, and takes the line's next `batch` messages after `last` that are due (when
/// `takeNext`); releases the line when it took none, or when `giveUp` (its turn ended). With
/// the audit trail on, writes the attempts of `trail` too (a delivered one only if this
/// statement removed it; each as cut when the lease does not hold).
///
/// The lease row is locked `FOR SHARE`: a worker taking the line over waits for this
/// statement, and then finds the messages gone. An acknowledgement of messages that are not the
/// line's first (one before them is still there) is refused, whatever the lease: it would
/// break the line's order. One row per message taken (one with `NULL` message columns when
/// none was), each with the lease's `paused` (`NULL` if the lease no longer holds or the
/// statement was refused), how many messages were removed, how many leases were released, and
/// whether the acknowledgement kept the line's order.
///
/// The removal and the give-back bound their `= ANY` probe by the array's least and greatest
/// sequence. A generic plan takes an array parameter for 10 elements; without the bound its
/// estimated cost was more than twice a plan made for one message, so PostgreSQL planned every
/// acknowledgement again, which cost more than running it (see `PlanCacheTests`).
struct AcknowledgeStatement<Trail: AuditVariant>: PostgresPreparedStatement {
  static var name: String { Trail.isOn ? "orderly_acknowledge_v4_audit" : "orderly_acknowledge_v4" }
  static var sql: String {
    """
    WITH ordered AS (
      SELECT NOT EXISTS (
        SELECT 1 FROM \(Table.message) e
        WHERE e.line = $1 AND e.sequence < (SELECT max(s) FROM unnest($4::int8[]) s)
          AND NOT (e.sequence = ANY($4::int8[]))
      ) AS ok
    ), held AS (
      SELECT paused FROM \(Table.lease)
      WHERE line = $1 AND owner = $2 AND fence = $3 AND expires_at > now()
        AND (SELECT ok FROM ordered)
      FOR SHARE
    ), gone AS (
      DELETE FROM \(Table.message)
      WHERE line = $1 AND sequence = ANY($4::int8[]) AND EXISTS (SELECT 1 FROM held)
        AND sequence BETWEEN (SELECT min(s) FROM unnest($4::int8[]) s)
          AND (SELECT max(s) FROM unnest($4::int8[]) s)
      RETURNING sequence
    ), due AS (
      SELECT w.sequence FROM (
        SELECT h.sequence,
          bool_and(h.not_before IS NULL OR h.not_before <= now())
            OVER (ORDER BY h.sequence) AS due
        FROM (SELECT sequence, not_before FROM \(Table.message)
              WHERE $6 AND line = $1 AND sequence > $7
              ORDER BY sequence LIMIT $8) h
      ) w
      WHERE w.due AND EXISTS (SELECT 1 FROM held WHERE NOT paused)
    ), back AS (
      UPDATE \(Table.message) SET attempts = greatest(attempts - 1, 0)
      WHERE line = $1 AND sequence = ANY($5::int8[]) AND EXISTS (SELECT 1 FROM held)
        AND sequence BETWEEN (SELECT min(s) FROM unnest($5::int8[]) s)
          AND (SELECT max(s) FROM unnest($5::int8[]) s)
        AND sequence NOT IN (SELECT sequence FROM due)
      RETURNING sequence
    ), next AS (
      -- A message given back and taken again in one statement keeps its count: one row is
      -- updated once per statement.
      UPDATE \(Table.message) m
      SET attempts = m.attempts + CASE WHEN m.sequence = ANY($5::int8[]) THEN 0 ELSE 1 END
      WHERE m.line = $1 AND m.sequence = ANY(ARRAY(SELECT sequence FROM due))
        AND m.sequence BETWEEN (SELECT min(sequence) FROM due) AND (SELECT max(sequence) FROM due)
      RETURNING m.sequence, m.id, m.partition, m.payload, m.attempts, m.appended_at, m.headers
    ), released AS (
      UPDATE \(Table.lease) SET owner = NULL, expires_at = now()
      WHERE line = $1 AND owner = $2 AND fence = $3
        AND EXISTS (SELECT 1 FROM held WHERE NOT paused)
        AND (($6 AND NOT EXISTS (SELECT 1 FROM next)) OR $9)
      RETURNING fence
    )\(Trail.isOn ? audited : "")
    SELECT (SELECT paused FROM held) AS paused, (SELECT count(*)::bigint FROM gone) AS removed,
      next.sequence, next.id, next.partition, next.payload, next.attempts,
      next.appended_at, next.headers, (SELECT count(*)::bigint FROM released) AS released,
      (SELECT ok FROM ordered) AS ordered
    FROM (SELECT 1) one LEFT JOIN next ON true
    ORDER BY next.sequence
    """
  }
  /// The trail's rows: parameters 10 (the partition) to 16.
  private static var audited: String {
    """
    , audited AS (
      INSERT INTO \(Table.audit) \(AuditColumns.insertColumns)
      SELECT $1, $10, a.sequence, a.id, a.attempt, $3, $2, a.started, a.ended,
        CASE WHEN EXISTS (SELECT 1 FROM held) THEN a.outcome ELSE 'cut' END
      FROM \(AuditColumns.rows(from: 11))
      WHERE a.outcome <> 'delivered' OR a.sequence IN (SELECT sequence FROM gone)
        OR NOT EXISTS (SELECT 1 FROM held)
    )
    """
  }
  /// The acknowledgement's answer, and one of the next messages taken with it.
  struct Row {
    /// Whether the line is paused; `nil` when the fence (or the line's order) refused the
    /// acknowledgement.
    let paused: Bool?
    /// How many messages it removed.
    let removed: Int64
    /// A next message taken, or `nil`.
    let message: ClaimedHead?
    /// How many lease rows it released (the line given up).
    let released: Int64
    /// Whether the messages acknowledged were the line's first; `false` when the statement
    /// refused them for that.
    let ordered: Bool
  }

  let line: String
  let owner: String
  let fence: Int64
  let acked: [Int64]
  let givenBack: [Int64]
  let takeNext: Bool
  let last: Int64
  let batch: Int
  let giveUp: Bool
  /// The attempts for the trail (bound only when it is on).
  let trail: AuditColumns

  func makeBindings() -> PostgresBindings {
    var bindings = PostgresBindings()
    bindings.append(line)
    bindings.append(owner)
    bindings.append(fence)
    bindings.append(acked)
    bindings.append(givenBack)
    bindings.append(takeNext)
    bindings.append(last)
    bindings.append(batch)
    bindings.append(giveUp)
    if Trail.isOn {
      bindings.append(LineKey.partition(line))
      trail.bind(&bindings)
    }
    return bindings
  }

  func decodeRow(_ row: PostgresRow) throws -> Row {
    let row = NamedColumns(row)
    return Row(
      paused: try row("paused"),
      removed: try row("removed"),
      message: try .taken(row),
      released: try row("released"),
      ordered: try row("ordered")
    )
  }
}

/// Whether a worker's statements write the audit trail: two prepared variants of each, so that
/// an outbox without the trail's tables (or with it off) runs the statements it always ran.
protocol AuditVariant: Sendable {
  /// Whether the variant writes the trail.
  static var isOn: Bool { get }
}

/// The variant that writes the audit trail.
enum Audited: AuditVariant {
  static var isOn: Bool { true }
}

/// The variant that does not.
enum Unaudited: AuditVariant {
  static var isOn: Bool { false }
}
#endif
