// The SQLite outbox's SQL, one statement group per operation.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyOutboxCore

/// A row whose identifier does not read as one: reported, never replaced by an invented one
/// (the audit trail, say, then misses an attempt rather than making one up).
struct UnreadableRow: Error, CustomStringConvertible {
  let table: String
  let sequence: Int64?
  let value: String?
  /// The column that cannot be read; `id` unless said.
  var column = "id"

  /// `the row of sequence 7 of outbox_message has an unreadable id ("x") ...`.
  var description: String {
    let shown = value.map { "\"\($0)\"" } ?? "none"
    let which = sequence.map { "the row of sequence \($0)" } ?? "a row"
    return "\(which) of \(table) has an unreadable \(column) (\(shown)): the file was changed "
      + "outside Orderly (or by a newer version of it); restore it from a backup, or drop that "
      + "row with sqlite3"
  }

  /// The row's `id` column as a `UUID`.
  ///
  /// - Throws: ``UnreadableRow`` when it is missing or is not a UUID.
  static func id(of row: Row, in table: String) throws -> UUID {
    let text: String? = row["id"]
    guard let text, let id = UUID(uuidString: text) else {
      throw UnreadableRow(table: table, sequence: row["sequence"], value: text)
    }
    return id
  }
}

/// A message row, as read for delivery or merging.
struct StoredMessage: Sendable {
  let sequence: Int64
  let id: UUID
  let partition: String?
  let entity: String?
  let payload: Data
  let attempts: Int
  let appendedAt: Date
  /// The message's headers; empty when it has none (or they were not read).
  let headers: [String: String]
  /// The earliest time it may be delivered; `nil` when it has none (or it was not read).
  let notBefore: Date?

  init(row: Row) throws {
    sequence = row["sequence"]
    id = try UnreadableRow.id(of: row, in: OutboxSchema.messageTable)
    partition = row["partition"]
    entity = row["entity"]
    payload = row["payload"]
    attempts = row["attempts"]
    appendedAt = Date(timeIntervalSince1970: row["appendedAt"])
    headers = StoredHeaders.decode(row["headers"])
    notBefore = (row["notBefore"] as Double?).map(Date.init(timeIntervalSince1970:))
  }
}

/// The outbox's SQL, one statement group per operation.
///
/// Every function runs inside a
/// transaction the caller opened.
package enum OutboxStore {
  static let messages = OutboxSchema.messageTable
  static let deadLetters = OutboxSchema.deadLetterTable
  static let headers = OutboxSchema.headerTable
  static let paused = OutboxSchema.pausedTable
  static let notBefore = OutboxSchema.notBeforeTable
  static let uniqueWindow = OutboxSchema.uniqueWindowTable
  static let quarantine = OutboxSchema.quarantineTable

  static func counts(_ db: Database) throws -> (pending: Int, deadLetters: Int) {
    (
      try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(messages)") ?? 0,
      try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(deadLetters)") ?? 0
    )
  }

  /// The blocked lines: those with a dead letter (each waits there under `stopLine`) and those
  /// paused on their own; and the one whose oldest message was appended first.
  static func blockedLines(_ db: Database, deadLettersStop: Bool) throws -> (
    count: Int, worst: (partition: String?, since: Date)?
  ) {
    var since: [String?: Date?] = [:]
    if deadLettersStop {
      for row in try Row.fetchAll(
        db,
        sql: "SELECT partition, MIN(appendedAt) AS since FROM \(deadLetters) GROUP BY partition"
      ) {
        since[row["partition"] as String?] = Date(timeIntervalSince1970: row["since"])
      }
    }
    for (partition, oldest) in try pausedSince(db) {
      let known = since[partition] ?? nil
      since[partition] = [known, oldest].compactMap { $0 }.min()
    }
    let worst = since.compactMap { line -> (partition: String?, since: Date)? in
      line.value.map { (line.key, $0) }
    }.min { $0.since < $1.since }
    return (since.count, worst)
  }

  /// Writes a new message at the end of its line; `nil` when its unique key is held by a
  /// pending message (nothing is written then).
  ///
  /// The unique index on the pending messages' keys decides, in the insert itself: no look-up
  /// before it.
  static func insert(
    _ db: Database,
    id: UUID,
    partition: String?,
    entity: String?,
    payload: Data,
    appendedAt: Date,
    headers: String? = nil,
    notBefore: Date? = nil,
    uniqueKey: String? = nil
  ) throws -> Int64? {
    if let uniqueKey {
      try db.cachedStatement(
        sql: """
          INSERT INTO \(messages) (id, partition, entity, payload, attempts, appendedAt, uniqueKey)
          VALUES (?, ?, ?, ?, 0, ?, ?)
          ON CONFLICT (uniqueKey) WHERE uniqueKey IS NOT NULL DO NOTHING
          """
      ).execute(
        arguments: [
          id.uuidString, partition, entity, payload, appendedAt.timeIntervalSince1970, uniqueKey,
        ]
      )
      guard db.changesCount > 0 else { return nil }
    } else {
      try db.cachedStatement(
        sql: """
          INSERT INTO \(messages) (id, partition, entity, payload, attempts, appendedAt)
          VALUES (?, ?, ?, ?, 0, ?)
          """
      ).execute(
        arguments: [id.uuidString, partition, entity, payload, appendedAt.timeIntervalSince1970]
      )
    }
    let sequence = db.lastInsertedRowID
    if let text = headers {
      try db.cachedStatement(sql: "INSERT INTO \(Self.headers) (sequence, headers) VALUES (?, ?)")
        .execute(arguments: [sequence, text])
    }
    if let notBefore {
      try db.cachedStatement(
        sql: "INSERT INTO \(Self.notBefore) (sequence, notBefore) VALUES (?, ?)"
      ).execute(arguments: [sequence, notBefore.timeIntervalSince1970])
    }
    return sequence
  }

  /// The pending message that holds a unique key, if one does: its identifier and place.
  static func pendingHolder(_ db: Database, key: String) throws -> (id: UUID, sequence: Int64)? {
    guard
      let row = try Row.fetchOne(
        db.cachedStatement(sql: "SELECT id, sequence FROM \(messages) WHERE uniqueKey = ?"),
        arguments: [key]
      )
    else { return nil }
    return (try UnreadableRow.id(of: row, in: messages), row["sequence"])
  }

  /// Whether any key is held for a window (passed or not): when none is, an append need not
  /// look a key up there.
  static func holdsWindows(_ db: Database) throws -> Bool {
    try Bool.fetchOne(
      db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM \(uniqueWindow))")
    ) ?? false
  }

  /// The message that holds a unique key for a window still running at `now`, if one does.
  ///
  /// Read and then written in one write transaction: SQLite has one writer, so no other
  /// append can take the key in between.
  static func windowHolder(_ db: Database, key: String, now: Date) throws
    -> (id: UUID, sequence: Int64)?
  {
    guard
      let row = try Row.fetchOne(
        db.cachedStatement(
          sql: "SELECT id, sequence FROM \(uniqueWindow) WHERE key = ? AND until > ?"
        ),
        arguments: [key, now.timeIntervalSince1970]
      )
    else { return nil }
    return (try UnreadableRow.id(of: row, in: uniqueWindow), row["sequence"])
  }

  /// Holds a unique key for `seconds` after `now`, for the message `id`, and forgets the keys
  /// whose windows have passed.
  static func holdUniqueKey(
    _ db: Database,
    key: String,
    id: UUID,
    sequence: Int64,
    now: Date,
    seconds: Double
  ) throws {
    try db.cachedStatement(sql: "DELETE FROM \(uniqueWindow) WHERE until <= ?")
      .execute(arguments: [now.timeIntervalSince1970])
    try db.cachedStatement(
      sql: "INSERT OR REPLACE INTO \(uniqueWindow) (key, id, sequence, until) VALUES (?, ?, ?, ?)"
    ).execute(arguments: [key, id.uuidString, sequence, now.timeIntervalSince1970 + seconds])
  }

  /// The newest message for an entity, if it is still waiting (in any line).
  static func newest(_ db: Database, entity: String) throws -> StoredMessage? {
    try Row.fetchOne(
      db,
      sql: "SELECT * FROM \(messages) WHERE entity = ? ORDER BY sequence DESC LIMIT 1",
      arguments: [entity]
    ).map { try StoredMessage(row: $0) }
  }

  static func replacePayload(_ db: Database, sequence: Int64, payload: Data) throws {
    try db.execute(
      sql: "UPDATE \(messages) SET payload = ? WHERE sequence = ?",
      arguments: [payload, sequence]
    )
  }

  /// The first message of a line.
  static func head(_ db: Database, partition: String?) throws -> StoredMessage? {
    try heads(db, partition: partition, limit: 1).first
  }

  /// The first messages of a line, up to `limit`, in order.
  static func heads(_ db: Database, partition: String?, limit: Int) throws -> [StoredMessage] {
    let statement =
      partition == nil
      ? try db.cachedStatement(
        sql: """
          SELECT m.*, h.headers, n.notBefore FROM \(messages) m
          LEFT JOIN \(headers) h USING (sequence) LEFT JOIN \(notBefore) n USING (sequence)
          WHERE m.partition IS NULL ORDER BY m.sequence LIMIT ?
          """
      )
      : try db.cachedStatement(
        sql: """
          SELECT m.*, h.headers, n.notBefore FROM \(messages) m
          LEFT JOIN \(headers) h USING (sequence) LEFT JOIN \(notBefore) n USING (sequence)
          WHERE m.partition = ? ORDER BY m.sequence LIMIT ?
          """
      )
    let arguments: StatementArguments = partition.map { [$0, limit] } ?? [limit]
    return try Row.fetchAll(statement, arguments: arguments).map { try StoredMessage(row: $0) }
  }

  /// Every line that has messages, the one whose first message is oldest first.
  static func busyPartitions(_ db: Database) throws -> [String?] {
    try Row.fetchAll(
      db,
      sql: """
        SELECT partition, MIN(sequence) AS first FROM \(messages)
        GROUP BY partition ORDER BY first
        """
    ).map { $0["partition"] }
  }

  /// How many rows of `table` (the messages by default, or the dead letters) a line has.
  static func count(_ db: Database, in table: String = messages, partition: String?) throws -> Int {
    try Int.fetchOne(
      db,
      sql: "SELECT COUNT(*) FROM \(table) WHERE partition IS ?",
      arguments: [partition]
    ) ?? 0
  }

  /// Removes a delivered message; returns whether it was there.
  @discardableResult
  static func delete(_ db: Database, sequence: Int64) throws -> Bool {
    try db.cachedStatement(sql: "DELETE FROM \(messages) WHERE sequence = ?")
      .execute(arguments: [sequence])
    let removed = db.changesCount > 0
    try db.cachedStatement(sql: "DELETE FROM \(headers) WHERE sequence = ?")
      .execute(arguments: [sequence])
    try db.cachedStatement(sql: "DELETE FROM \(notBefore) WHERE sequence = ?")
      .execute(arguments: [sequence])
    return removed
  }

  /// Whether `sequences` (ascending) are the first messages of `partition`'s line: no other
  /// message of the line comes before the last of them.
  static func areFirst(_ db: Database, _ sequences: [Int64], of partition: String?) throws -> Bool {
    guard let last = sequences.last else { return true }
    let before =
      try Int.fetchOne(
        db,
        sql: "SELECT COUNT(*) FROM \(messages) WHERE partition IS ? AND sequence < ?",
        arguments: [partition, last]
      ) ?? 0
    return before == sequences.count - 1
  }

  /// When the oldest pending message was appended, or `nil` if none is pending.
  static func oldestAppendedAt(_ db: Database) throws -> Date? {
    try Double.fetchOne(db, sql: "SELECT MIN(appendedAt) FROM \(messages)")
      .map(Date.init(timeIntervalSince1970:))
  }

  static func recordAttempts(_ db: Database, sequence: Int64, attempts: Int) throws {
    try db.cachedStatement(sql: "UPDATE \(messages) SET attempts = ? WHERE sequence = ?")
      .execute(arguments: [attempts, sequence])
  }

  /// Moves a message to the dead letters, keeping its sequence.
  static func kill(_ db: Database, sequence: Int64, attempts: Int, reason: String) throws {
    try db.execute(
      sql: """
        INSERT INTO \(deadLetters)
          (sequence, id, partition, entity, payload, attempts, appendedAt, failedAt, reason)
        SELECT sequence, id, partition, entity, payload, ?, appendedAt, ?, ?
        FROM \(messages) WHERE sequence = ?
        """,
      arguments: [attempts, Date().timeIntervalSince1970, reason, sequence]
    )
    // Its headers stay, under the same sequence, for a retry of the dead letter; its
    // not-before time is past, and a retried dead letter is due at once.
    try db.cachedStatement(sql: "DELETE FROM \(messages) WHERE sequence = ?")
      .execute(arguments: [sequence])
    try db.cachedStatement(sql: "DELETE FROM \(notBefore) WHERE sequence = ?")
      .execute(arguments: [sequence])
  }

  /// The partitions that have dead letters.
  static func deadPartitions(_ db: Database) throws -> [String?] {
    try Row.fetchAll(db, sql: "SELECT DISTINCT partition FROM \(deadLetters)").map {
      $0["partition"]
    }
  }

  /// The lines paused on their own, in key order.
  static func pausedPartitions(_ db: Database) throws -> [String?] {
    try String.fetchAll(db, sql: "SELECT line FROM \(paused) ORDER BY line").map(LineKey.partition)
  }

  /// Takes up to `wanting` permits of `limits` for `partition`'s line.
  ///
  /// Each counter's window is read (a counter whose window ended counts from zero in the new
  /// one), the grant decided (``RateLimits``), and added, at `now` (milliseconds since 1970):
  /// in the file's one write transaction.
  static func takePermits(
    _ db: Database,
    limits: [RateLimit],
    partition: String?,
    wanting: Int,
    now: Int64
  ) throws -> RateGrant {
    let windows = RateLimits.windows(for: partition, limits: limits, at: now)
    var used: [Int] = []
    for window in windows {
      let row = try Row.fetchOne(
        db.cachedStatement(
          sql: "SELECT start, used FROM \(OutboxSchema.rateWindowTable) WHERE bucket = ?"
        ),
        arguments: [window.bucket]
      )
      let start: Int64? = row?["start"]
      used.append(start == window.start ? row?["used"] ?? 0 : 0)
    }
    let grant = RateLimits.grant(wanting: wanting, windows: windows, used: used)
    for (window, count) in zip(windows, used) {
      try db.cachedStatement(
        sql: """
          INSERT OR REPLACE INTO \(OutboxSchema.rateWindowTable)
            (bucket, start, until, capacity, used)
          VALUES (?, ?, ?, ?, ?)
          """
      ).execute(
        arguments: [
          window.bucket, window.start, window.end, window.capacity, count + grant.granted,
        ]
      )
    }
    return grant
  }

  /// Pauses a line with the reason delivery quarantined it.
  static func quarantine(_ db: Database, partition: String?, reason: String) throws {
    let key = LineKey.key(partition)
    try db.execute(sql: "INSERT OR IGNORE INTO \(paused) (line) VALUES (?)", arguments: [key])
    try db.execute(
      sql: "INSERT OR REPLACE INTO \(quarantine) (line, reason, since) VALUES (?, ?, ?)",
      arguments: [key, reason, Date().timeIntervalSince1970]
    )
  }

  /// Why each quarantined line was, by partition key.
  static func quarantines(_ db: Database) throws -> [String?: String] {
    var reasons: [String?: String] = [:]
    for row in try Row.fetchAll(db, sql: "SELECT line, reason FROM \(quarantine)") {
      reasons[LineKey.partition(row["line"])] = row["reason"]
    }
    return reasons
  }

  /// Pauses or resumes a line; returns whether that changed anything.
  ///
  /// A resume also ends the line's quarantine.
  static func setPaused(_ db: Database, partition: String?, _ on: Bool) throws -> Bool {
    let key = LineKey.key(partition)
    if !on {
      try db.execute(sql: "DELETE FROM \(quarantine) WHERE line = ?", arguments: [key])
    }
    try db.execute(
      sql: on
        ? "INSERT OR IGNORE INTO \(paused) (line) VALUES (?)"
        : "DELETE FROM \(paused) WHERE line = ?",
      arguments: [key]
    )
    return db.changesCount > 0
  }

  /// When the oldest message of each paused line was appended (`nil` for one with none).
  static func pausedSince(_ db: Database) throws -> [(partition: String?, since: Date?)] {
    try pausedPartitions(db).map { partition in
      let since = try Double.fetchOne(
        db,
        sql: "SELECT MIN(appendedAt) FROM \(messages) WHERE partition IS ?",
        arguments: [partition]
      )
      return (partition, since.map(Date.init(timeIntervalSince1970:)))
    }
  }

  static func deadLetterRows(_ db: Database) throws -> [Row] {
    try Row.fetchAll(db, sql: "SELECT * FROM \(deadLetters) ORDER BY sequence")
  }

  static func deadLetterPartition(_ db: Database, id: UUID) throws -> String?? {
    guard
      let row = try Row.fetchOne(
        db,
        sql: "SELECT partition FROM \(deadLetters) WHERE id = ?",
        arguments: [id.uuidString]
      )
    else { return nil }
    let partition: String? = row["partition"]
    return .some(partition)
  }

  /// Puts a dead letter back at its place in its line, with its attempts reset.
  static func revive(_ db: Database, id: UUID) throws {
    try db.execute(
      sql: """
        INSERT INTO \(messages) (sequence, id, partition, entity, payload, attempts, appendedAt)
        SELECT sequence, id, partition, entity, payload, 0, appendedAt
        FROM \(deadLetters) WHERE id = ?
        """,
      arguments: [id.uuidString]
    )
    try db.execute(sql: "DELETE FROM \(deadLetters) WHERE id = ?", arguments: [id.uuidString])
  }

  static func drop(_ db: Database, id: UUID) throws {
    try OutboxAuditStore.dropped(db, id: id)
    try db.execute(
      sql: """
        DELETE FROM \(headers)
        WHERE sequence IN (SELECT sequence FROM \(deadLetters) WHERE id = ?)
        """,
      arguments: [id.uuidString]
    )
    try db.execute(sql: "DELETE FROM \(deadLetters) WHERE id = ?", arguments: [id.uuidString])
  }
}
#endif
