// The SQLite outbox's tables and their migrations.
//
// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import GRDB
package import OrderlyDatabaseFile

/// The outbox's two tables: the messages waiting for delivery, and the dead letters.
///
/// `outbox_message.sequence` is an `AUTOINCREMENT` key, so numbers are never reused even after
/// the newest messages were delivered: a line's order is its sequence order. A dead letter
/// keeps its sequence, and a retried one goes back to the same place.
///
/// Every index is paid for on each append and each delivery (pages written and synced), so
/// there are few: the default line is read in key order, partitions and merge entities through
/// partial indexes that hold only the rows that have one, and identifiers (random UUIDs) are not
/// indexed in the message table.
package enum OutboxSchema {
  static let messageTable = "outbox_message"
  static let deadLetterTable = "outbox_dead_letter"
  /// Headers of the messages that have any (a trace context, say), by sequence: a table of its
  /// own, so that an outbox written before headers existed gains it by a migration, and
  /// messages without headers cost nothing.
  static let headerTable = "outbox_header"
  /// The lines paused on their own (`Outbox.pause(partition:)`), by line key (`LineKey`): kept
  /// in the file, so that a pause outlives the process and holds for every process.
  static let pausedTable = "outbox_paused_line"
  /// The not-before times of the messages appended with one (`deliverAfter:`), by sequence: a
  /// table of its own, as the headers, so that older files gain it by a migration and messages
  /// without one cost nothing.
  static let notBeforeTable = "outbox_not_before"
  /// The audit trail (`OutboxDeliveryOptions.audit`): a row per delivery attempt, and per dead
  /// letter dropped, numbered in the order they were written.
  static let auditTable = "outbox_audit"
  /// When the audit trail began, and the first message number it answers for.
  static let auditStartTable = "outbox_audit_start"
  /// The unique keys held for a window after their append (`append(_:uniqueKey:uniqueFor:)`),
  /// delivered or not; a key held while its message is pending is the message row's own
  /// `uniqueKey`, under a unique index.
  static let uniqueWindowTable = "outbox_unique_window"
  /// Why delivery quarantined a paused line (`QuarantinePolicy`), by line key: a table of its
  /// own beside the paused lines, so that older files gain it by a migration.
  static let quarantineTable = "outbox_quarantine"
  /// The recurring schedules (`OutboxSchedules`), by name: times in whole milliseconds since
  /// 1970.
  static let scheduleTable = "outbox_schedule"
  /// The rate limits' counters (`RateLimit`), one row each: its current window (a newer one
  /// replaces it), the deliveries begun in it, its capacity and end, so `keys` can say until
  /// when a key waits.
  static let rateWindowTable = "outbox_rate_window"

  package static let migrations = [
    DatabaseSchema.Migration(
      "orderly outbox 1: messages and dead letters",
      tables: [messageTable, deadLetterTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(messageTable) (
            sequence INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            partition TEXT,
            entity TEXT,
            payload BLOB NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            appendedAt DOUBLE NOT NULL
          );
          CREATE INDEX \(messageTable)_partition ON \(messageTable) (partition, sequence)
            WHERE partition IS NOT NULL;
          CREATE INDEX \(messageTable)_entity ON \(messageTable) (entity, sequence)
            WHERE entity IS NOT NULL;
          CREATE TABLE \(deadLetterTable) (
            sequence INTEGER PRIMARY KEY,
            id TEXT NOT NULL UNIQUE,
            partition TEXT,
            entity TEXT,
            payload BLOB NOT NULL,
            attempts INTEGER NOT NULL,
            appendedAt DOUBLE NOT NULL,
            failedAt DOUBLE NOT NULL,
            reason TEXT NOT NULL
          );
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 2: message headers",
      tables: [headerTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(headerTable) (
            sequence INTEGER PRIMARY KEY,
            headers TEXT NOT NULL
          );
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 3: paused lines",
      tables: [pausedTable]
    ) { db in
      try db.execute(sql: "CREATE TABLE \(pausedTable) (line TEXT PRIMARY KEY NOT NULL)")
    },
    DatabaseSchema.Migration(
      "orderly outbox 4: not-before times",
      tables: [notBeforeTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(notBeforeTable) (
            sequence INTEGER PRIMARY KEY,
            notBefore DOUBLE NOT NULL
          )
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 5: audit trail",
      tables: [auditTable, auditStartTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(auditTable) (
            number INTEGER PRIMARY KEY AUTOINCREMENT,
            partition TEXT,
            sequence INTEGER NOT NULL,
            id TEXT NOT NULL,
            attempt INTEGER NOT NULL,
            worker TEXT NOT NULL,
            startedAt DOUBLE NOT NULL,
            endedAt DOUBLE NOT NULL,
            outcome TEXT NOT NULL
          );
          CREATE TABLE \(auditStartTable) (
            id INTEGER PRIMARY KEY,
            first INTEGER NOT NULL,
            since DOUBLE NOT NULL
          );
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 6: unique keys",
      tables: [uniqueWindowTable]
    ) { db in
      // A new column of NULLs costs nothing to add, and the partial index holds only the
      // messages that have a key: a message without one pays nothing for it.
      try db.execute(
        sql: """
          ALTER TABLE \(messageTable) ADD COLUMN uniqueKey TEXT;
          CREATE UNIQUE INDEX \(messageTable)_unique ON \(messageTable) (uniqueKey)
            WHERE uniqueKey IS NOT NULL;
          CREATE TABLE \(uniqueWindowTable) (
            key TEXT PRIMARY KEY NOT NULL,
            id TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            until DOUBLE NOT NULL
          );
          CREATE INDEX \(uniqueWindowTable)_until ON \(uniqueWindowTable) (until);
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 7: quarantined lines",
      tables: [quarantineTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(quarantineTable) (
            line TEXT PRIMARY KEY NOT NULL,
            reason TEXT NOT NULL,
            since DOUBLE NOT NULL
          )
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 8: recurring schedules",
      tables: [scheduleTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(scheduleTable) (
            name TEXT PRIMARY KEY NOT NULL,
            rule TEXT NOT NULL,
            zone TEXT NOT NULL,
            partition TEXT,
            payload BLOB NOT NULL,
            headers TEXT,
            missed TEXT NOT NULL,
            paused INTEGER NOT NULL DEFAULT 0,
            anchor INTEGER NOT NULL,
            countFrom INTEGER NOT NULL,
            lastTick INTEGER
          )
          """
      )
    },
    DatabaseSchema.Migration(
      "orderly outbox 9: rate limits",
      tables: [rateWindowTable]
    ) { db in
      try db.execute(
        sql: """
          CREATE TABLE \(rateWindowTable) (
            bucket TEXT PRIMARY KEY NOT NULL,
            start INTEGER NOT NULL,
            until INTEGER NOT NULL,
            capacity INTEGER NOT NULL,
            used INTEGER NOT NULL
          )
          """
      )
    },
  ]

  /// An outbox alone in its file (`Outbox(path:)`).
  package static let alone = DatabaseSchema(
    kind: "an Orderly outbox",
    migrations: migrations,
    identifierPrefix: "orderly outbox"
  )

  /// An outbox in a database that holds other tables (`Outbox(database:)`).
  package static let shared = DatabaseSchema(
    kind: "an Orderly outbox",
    migrations: migrations,
    identifierPrefix: "orderly outbox",
    sharesDatabase: true
  )
}
#endif
