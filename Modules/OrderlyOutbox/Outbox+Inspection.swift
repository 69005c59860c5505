// What an operator reads of a SQLite outbox: counts, keys, one stored message.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
public import Foundation
import GRDB
public import OrderlyOutboxCore

extension Outbox {
  /// Every key with pending messages, dead letters or a pause of its own.
  ///
  /// Read in one transaction. `holder` is always `nil`: one process delivers a file, without leases.
  ///
  /// - Returns: The keys, in no set order.
  /// - Throws: `OutboxError.busy(path:waited:)` or `OutboxError.closed(path:)`.
  public func keys() async throws(OutboxError) -> [OutboxKey] {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      let now = scheduleTicker.wall.milliseconds()
      return try await database.read { db in try OutboxStore.keys(db, now: now) }
    } catch {
      throw failure(error)
    }
  }

  /// One stored message, pending or dead, with its payload and headers as stored.
  ///
  /// - Parameter id: The message's identifier.
  /// - Returns: The message, or `nil` if the file holds none with that identifier.
  /// - Throws: `OutboxError.busy(path:waited:)` or `OutboxError.closed(path:)`.
  public func storedMessage(id: UUID) async throws(OutboxError) -> OutboxStoredMessage? {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db in try OutboxStore.storedMessage(db, id: id) }
    } catch {
      throw failure(error)
    }
  }
}

extension Outbox {
  /// The audit trail, with the messages held and the numbers handed out, read in one
  /// transaction: what `OutboxAuditTrail.audit(key:)` checks.
  ///
  /// - Returns: The trail, or `nil` if no delivery of this file ever started with
  ///   `OutboxDeliveryOptions.audit` on.
  /// - Throws: `OutboxError.busy(path:waited:)` or `OutboxError.closed(path:)`.
  public func auditTrail() async throws(OutboxError) -> OutboxAuditTrail? {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return try await database.read { db in try OutboxAuditStore.trail(db) }
    } catch {
      throw failure(error)
    }
  }
}

extension OutboxStore {
  /// Every key that has pending messages, dead letters or a pause; rate limits' windows are
  /// judged at `now` (milliseconds since 1970, the outbox's clock).
  static func keys(_ db: Database, now: Int64) throws -> [OutboxKey] {
    var keys: [String?: OutboxKey] = [:]
    func key(_ partition: String?) -> OutboxKey {
      keys[partition] ?? OutboxKey(partition: partition, pending: 0, deadLetters: 0, paused: false)
    }
    for row in try Row.fetchAll(
      db,
      sql: """
        SELECT g.partition, g.pending, g.oldest, m.id, m.attempts, n.notBefore FROM (
          SELECT partition, COUNT(*) AS pending, MIN(appendedAt) AS oldest,
            MIN(sequence) AS head
          FROM \(messages) GROUP BY partition
        ) g JOIN \(messages) m ON m.sequence = g.head
        LEFT JOIN \(notBefore) n ON n.sequence = g.head
        """
    ) {
      let partition: String? = row["partition"]
      var entry = key(partition)
      entry.pending = row["pending"]
      entry.oldestPendingAppendedAt = Date(timeIntervalSince1970: row["oldest"])
      entry.head = UUID(uuidString: row["id"])
      entry.headAttempts = row["attempts"]
      entry.headNotBefore = (row["notBefore"] as Double?).map(Date.init(timeIntervalSince1970:))
      keys[partition] = entry
    }
    for row in try Row.fetchAll(
      db,
      sql: """
        SELECT partition, COUNT(*) AS dead, MIN(failedAt) AS failed
        FROM \(deadLetters) GROUP BY partition
        """
    ) {
      let partition: String? = row["partition"]
      var entry = key(partition)
      entry.deadLetters = row["dead"]
      entry.oldestDeadLetterFailedAt = Date(timeIntervalSince1970: row["failed"])
      keys[partition] = entry
    }
    let quarantines = try OutboxStore.quarantines(db)
    for partition in try pausedPartitions(db) {
      var entry = key(partition)
      entry.paused = true
      entry.quarantine = quarantines[partition]
      keys[partition] = entry
    }
    // The counters whose current window is full: the keys they count wait for its end.
    let full = try Row.fetchAll(
      db,
      sql: """
        SELECT bucket, until FROM \(OutboxSchema.rateWindowTable)
        WHERE used >= capacity AND until > ?
        """,
      arguments: [now]
    ).map { (bucket: $0["bucket"] as String, until: $0["until"] as Int64) }
    if !full.isEmpty {
      for (partition, entry) in keys where entry.pending > 0 {
        keys[partition]?.rateLimitedUntil = RateLimits.heldUntil(partition, full: full)
      }
    }
    return Array(keys.values)
  }

  /// The pending message or dead letter with this identifier, with its headers.
  static func storedMessage(_ db: Database, id: UUID) throws -> OutboxStoredMessage? {
    if let row = try Row.fetchOne(
      db,
      sql: """
        SELECT m.*, h.headers, n.notBefore FROM \(messages) m
        LEFT JOIN \(headers) h USING (sequence) LEFT JOIN \(notBefore) n USING (sequence)
        WHERE m.id = ?
        """,
      arguments: [id.uuidString]
    ) {
      return try record(row, deadLetter: nil)
    }
    guard
      let row = try Row.fetchOne(
        db,
        sql: """
          SELECT d.*, h.headers FROM \(deadLetters) d LEFT JOIN \(headers) h USING (sequence)
          WHERE d.id = ?
          """,
        arguments: [id.uuidString]
      )
    else { return nil }
    return try record(
      row,
      deadLetter: (Date(timeIntervalSince1970: row["failedAt"]), row["reason"])
    )
  }

  private static func record(_ row: Row, deadLetter: (failedAt: Date, reason: String)?) throws
    -> OutboxStoredMessage
  {
    let table = deadLetter == nil ? OutboxSchema.messageTable : OutboxSchema.deadLetterTable
    return OutboxStoredMessage(
      id: try UnreadableRow.id(of: row, in: table),
      sequence: row["sequence"],
      partition: row["partition"],
      payload: row["payload"],
      headers: StoredHeaders.decode(row["headers"]),
      attempts: row["attempts"],
      appendedAt: Date(timeIntervalSince1970: row["appendedAt"]),
      notBefore: (row["notBefore"] as Double?).map(Date.init(timeIntervalSince1970:)),
      deadLetter: deadLetter,
      uniqueKey: deadLetter == nil ? row["uniqueKey"] : nil
    )
  }
}
#endif
