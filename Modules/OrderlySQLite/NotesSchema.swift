// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import GRDB
import OrderlyDatabaseFile

/// The notes database's schema: its one table, created by the first migration.
///
/// The file check and the migrations are ``DatabaseSchema``'s, shared with the outbox: the check
/// and every migration run in one `IMMEDIATE` transaction, recorded in `grdb_migrations` as
/// GRDB's `DatabaseMigrator` records them, so files written by earlier versions open unchanged.
enum NotesSchema {
  static let noteTable = "note"

  /// The notes tables, alone in their file.
  static let schema = DatabaseSchema(
    kind: "an Orderly notes database",
    migrations: [
      DatabaseSchema.Migration("create notes", tables: [noteTable]) { db in
        try db.create(table: noteTable) { table in
          table.autoIncrementedPrimaryKey("id")
          table.column("title", .text).notNull()
          table.column("body", .text).notNull()
          table.column("createdAt", .double).notNull()
          table.column("updatedAt", .double).notNull()
        }
      }
    ]
  )
}
#endif
