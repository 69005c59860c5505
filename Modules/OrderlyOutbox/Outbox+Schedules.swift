// Where a SQLite outbox keeps its recurring schedules: storage only (the rules and the loop are
// OrderlyOutboxCore's ScheduleTicks and ScheduleTicker).
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
package import Foundation
import GRDB
public import OrderlyOutboxCore

extension Outbox: ScheduleStore {
  /// The outbox's recurring schedules: kept in the file, so every process that delivers it
  /// sees them; ticked while the outbox is started.
  public var schedules: OutboxSchedules<Message> {
    OutboxSchedules(store: self, ticker: scheduleTicker)
  }

  package func readSchedules() async throws(OutboxError) -> [ScheduleRow] {
    try await use { db in
      try Row.fetchAll(db, sql: "SELECT * FROM \(OutboxSchema.scheduleTable)").map { row in
        ScheduleRow(
          name: row["name"],
          rule: row["rule"],
          zone: row["zone"],
          partition: row["partition"],
          payload: row["payload"],
          headers: row["headers"],
          missed: row["missed"],
          paused: row["paused"],
          anchor: row["anchor"],
          countFrom: row["countFrom"],
          lastTick: row["lastTick"]
        )
      }
    }
  }

  package func writeSchedule(_ row: ScheduleRow) async throws(OutboxError) {
    try await use(writing: true) { db in
      try db.execute(
        sql: """
          INSERT OR REPLACE INTO \(OutboxSchema.scheduleTable)
            (name, rule, zone, partition, payload, headers, missed, paused, anchor, countFrom,
             lastTick)
          VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
          """,
        arguments: [
          row.name, row.rule, row.zone, row.partition, row.payload, row.headers, row.missed,
          row.paused, row.anchor, row.countFrom, row.lastTick,
        ]
      )
    }
  }

  package func setSchedulePaused(named name: String, _ paused: Bool, countFrom: Int64?)
    async throws(OutboxError) -> Bool
  {
    try await use(writing: true) { db in
      // Resuming a schedule that is not paused changes nothing, its count included.
      try db.execute(
        sql: """
          UPDATE \(OutboxSchema.scheduleTable)
          SET paused = ?, countFrom = CASE WHEN paused = 1 AND ? IS NOT NULL THEN ? ELSE countFrom END
          WHERE name = ?
          """,
        arguments: [paused, countFrom, countFrom, name]
      )
      return try Bool.fetchOne(
        db,
        sql: "SELECT 1 FROM \(OutboxSchema.scheduleTable) WHERE name = ?",
        arguments: [name]
      ) ?? false
    }
  }

  package func deleteSchedule(named name: String) async throws(OutboxError) -> Bool {
    try await use(writing: true) { db in
      try db.execute(
        sql: "DELETE FROM \(OutboxSchema.scheduleTable) WHERE name = ?",
        arguments: [name]
      )
      return db.changesCount > 0
    }
  }

  package func takeTick(
    named name: String,
    rule: String,
    tick: Int64,
    appending message: PreparedMessage<Message>?
  ) async throws(OutboxError) -> (taken: Bool, appended: (id: UUID, sequence: Int64)?) {
    try await use(writing: true) { db in
      // The file's one writer decides: a tick at or before the last one taken is never taken
      // again, by this process or another.
      try db.execute(
        sql: """
          UPDATE \(OutboxSchema.scheduleTable) SET lastTick = ?
          WHERE name = ? AND rule = ? AND paused = 0 AND countFrom < ?
            AND (lastTick IS NULL OR lastTick < ?)
          """,
        arguments: [tick, name, rule, tick, tick]
      )
      guard db.changesCount > 0 else { return (false, nil) }
      guard let message, let result = try self.write([message], in: db).first else {
        return (true, nil)
      }
      let sequence = try Int64.fetchOne(
        db,
        sql: "SELECT sequence FROM \(OutboxSchema.messageTable) WHERE id = ?",
        arguments: [result.id.uuidString]
      )
      return (true, sequence.map { (result.id, $0) })
    }
  }

  /// Runs `body` on the database (in a write transaction when `writing`), as every call of the
  /// outbox does: refused once it is closed, its errors as `OutboxError`.
  private func use<T: Sendable>(
    writing: Bool = false,
    _ body: @escaping @Sendable (Database) throws -> T
  ) async throws(OutboxError) -> T {
    try enterDatabase()
    defer { leaveDatabase() }
    do {
      return writing ? try await database.write(body) : try await database.read(body)
    } catch {
      throw failure(error)
    }
  }
}
#endif
