// The SQLite outbox's audit trail: rows written in the delivery's own transactions, pruned
// there, and read back for `orderly outbox audit`.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyOutboxCore

/// The audit trail's SQL.
///
/// Every function runs inside a transaction the caller opened.
enum OutboxAuditStore {
  static let table = OutboxSchema.auditTable
  static let start = OutboxSchema.auditStartTable

  /// Marks the trail as begun, once: numbers handed out from now on are checked for vanishing.
  static func begin(_ db: Database) throws {
    try db.execute(
      sql: """
        INSERT OR IGNORE INTO \(start) (id, first, since)
        VALUES (1, COALESCE(
          (SELECT seq FROM sqlite_sequence WHERE name = '\(OutboxSchema.messageTable)'), 0) + 1, ?)
        """,
      arguments: [Date().timeIntervalSince1970]
    )
  }

  /// Whether the trail ever began in this file.
  static func begun(_ db: Database) throws -> Bool {
    try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(start)") ?? 0 > 0
  }

  /// Writes attempts.
  ///
  /// A `delivered` row only for a message `removed` holds (one removed by this very
  /// transaction).
  static func write(
    _ db: Database,
    _ attempts: [AuditAttempt],
    removed: Set<Int64> = [],
    worker: String
  ) throws {
    let insert = try db.cachedStatement(
      sql: """
        INSERT INTO \(table)
          (partition, sequence, id, attempt, worker, startedAt, endedAt, outcome)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?)
        """
    )
    for attempt in attempts {
      if attempt.outcome == .delivered, !removed.contains(attempt.sequence) { continue }
      try insert.execute(
        arguments: [
          attempt.partition, attempt.sequence, attempt.id.uuidString, attempt.attempt, worker,
          attempt.startedAt.timeIntervalSince1970, attempt.endedAt.timeIntervalSince1970,
          attempt.outcome.rawValue,
        ]
      )
    }
  }

  /// Records an operator's drop of a dead letter, when the trail has begun.
  static func dropped(_ db: Database, id: UUID) throws {
    guard try begun(db) else { return }
    let now = Date().timeIntervalSince1970
    try db.execute(
      sql: """
        INSERT INTO \(table)
          (partition, sequence, id, attempt, worker, startedAt, endedAt, outcome)
        SELECT partition, sequence, id, attempts, ?, ?, ?, 'dropped'
        FROM \(OutboxSchema.deadLetterTable) WHERE id = ?
        """,
      arguments: ["operator", now, now, id.uuidString]
    )
  }

  /// Removes up to `AuditPruning.batch` rows recorded before `cutoff`, oldest first, and moves
  /// the first number the trail answers for past them.
  ///
  /// - Returns: How many rows it removed.
  static func prune(_ db: Database, before cutoff: Date) throws -> Int {
    let last = try Int64.fetchOne(
      db,
      sql: """
        SELECT MAX(sequence) FROM (
          SELECT sequence FROM \(table) WHERE endedAt < ? ORDER BY number LIMIT ?)
        """,
      arguments: [cutoff.timeIntervalSince1970, AuditPruning.batch]
    )
    guard let last else { return 0 }
    try db.execute(
      sql: """
        DELETE FROM \(table) WHERE number IN (
          SELECT number FROM \(table) WHERE endedAt < ? ORDER BY number LIMIT ?)
        """,
      arguments: [cutoff.timeIntervalSince1970, AuditPruning.batch]
    )
    let removed = db.changesCount
    try db.execute(
      sql: "UPDATE \(start) SET first = MAX(first, ?) WHERE id = 1",
      arguments: [last + 1]
    )
    return removed
  }

  /// The trail, the messages held and the numbers handed out, in one read.
  static func trail(_ db: Database) throws -> OutboxAuditTrail? {
    guard
      let begun = try Row.fetchOne(db, sql: "SELECT first FROM \(start) WHERE id = 1")
    else { return nil }
    let first: Int64 = begun["first"]
    let records = try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY number").map { row in
      let outcome: String? = row["outcome"]
      guard let known = outcome.flatMap(OutboxAuditOutcome.init(rawValue:)) else {
        // Reported, not replaced: the trail misses attempts, it never invents them.
        throw UnreadableRow(
          table: table,
          sequence: row["sequence"],
          value: outcome,
          column: "outcome"
        )
      }
      return OutboxAuditRecord(
        number: row["number"],
        partition: row["partition"],
        sequence: row["sequence"],
        messageID: try UnreadableRow.id(of: row, in: table),
        attempt: row["attempt"],
        fence: nil,
        worker: row["worker"],
        startedAt: Date(timeIntervalSince1970: row["startedAt"]),
        endedAt: Date(timeIntervalSince1970: row["endedAt"]),
        outcome: known
      )
    }
    var held: [OutboxAuditHeld] = []
    for (table, dead) in [(OutboxSchema.messageTable, false), (OutboxSchema.deadLetterTable, true)]
    {
      for row in try Row.fetchAll(db, sql: "SELECT partition, sequence FROM \(table)") {
        held.append(
          OutboxAuditHeld(partition: row["partition"], sequence: row["sequence"], deadLetter: dead)
        )
      }
    }
    let last =
      try Int64.fetchOne(
        db,
        sql: "SELECT seq FROM sqlite_sequence WHERE name = '\(OutboxSchema.messageTable)'"
      ) ?? 0
    return OutboxAuditTrail(
      records: records,
      held: held,
      numbers: [
        OutboxAuditNumbers(partition: nil, sharedByAllKeys: true, first: first, last: last)
      ],
      readAt: Date()
    )
  }
}
#endif
