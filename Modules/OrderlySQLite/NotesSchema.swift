import GRDB

/// The notes database's schema, and what a file must hold to be taken as a notes database.
///
/// Migrations are recorded in GRDB's `grdb_migrations` table, as `DatabaseMigrator` records
/// them, so files written by earlier versions open unchanged. They are not run by
/// `DatabaseMigrator`, for two reasons: it creates `grdb_migrations` outside the first
/// migration's transaction (a process killed in between leaves a file holding only that table),
/// and it reads which migrations are applied before it takes the write lock (two processes
/// opening a new file at once both run the first migration, and one fails). Here the check and
/// every migration run in one `IMMEDIATE` transaction: another process waits for it, then sees
/// its result.
enum NotesSchema {
  static let noteTable = "note"
  static let migrationsTable = "grdb_migrations"

  /// Every migration, oldest first; identifiers never change once released.
  static let migrations: [(identifier: String, apply: @Sendable (Database) throws -> Void)] = [
    (
      "create notes",
      { db in
        try db.create(table: noteTable) { table in
          table.autoIncrementedPrimaryKey("id")
          table.column("title", .text).notNull()
          table.column("body", .text).notNull()
          table.column("createdAt", .double).notNull()
          table.column("updatedAt", .double).notNull()
        }
      }
    )
  ]

  /// Says why a database with these tables and applied migrations is not a notes database this
  /// version can open.
  ///
  /// - Parameters:
  ///   - tables: The names of its tables, SQLite's own excluded.
  ///   - applied: The identifiers in `grdb_migrations`, if the table exists.
  /// - Returns: The reason, or `nil` if it is a notes database (possibly empty or half-created).
  static func problem(tables: Set<String>, applied: Set<String>) -> String? {
    let known = Set(migrations.map(\.identifier))
    let ours: Set<String> = [noteTable, migrationsTable]
    let foreign = tables.subtracting(ours)
    if !foreign.isEmpty || (tables.contains(noteTable) && !tables.contains(migrationsTable)) {
      return "it is another program's SQLite database (tables: "
        + tables.sorted().joined(separator: ", ") + ")"
    }
    let unknown = applied.subtracting(known)
    if !unknown.isEmpty {
      return "it was written by a newer version of Orderly (unknown migrations: "
        + unknown.sorted().joined(separator: ", ") + ")"
    }
    // The note table and its migration are created in one transaction: one without the other
    // is not a file this code wrote.
    if tables.contains(noteTable) != applied.contains(migrations[0].identifier) {
      return "its notes table does not match its recorded migrations"
    }
    return nil
  }

  /// Reads a database's tables and applied migrations.
  static func contents(of db: Database) throws -> (tables: Set<String>, applied: Set<String>) {
    let tables = Set(
      try String.fetchAll(
        db,
        sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
      )
    )
    guard tables.contains(migrationsTable) else { return (tables, []) }
    let applied = Set(try String.fetchAll(db, sql: "SELECT identifier FROM \(migrationsTable)"))
    return (tables, applied)
  }

  /// Checks the database and applies the missing migrations, in one transaction.
  ///
  /// - Returns: Why the database is refused, or `nil` once it is up to date.
  static func migrate(_ writer: some DatabaseWriter) throws -> String? {
    try writer.writeWithoutTransaction { db in
      var problem: String?
      try db.inTransaction(.immediate) {
        let (tables, applied) = try contents(of: db)
        problem = Self.problem(tables: tables, applied: applied)
        if problem != nil { return .rollback }
        try db.execute(
          sql:
            "CREATE TABLE IF NOT EXISTS \(migrationsTable) (identifier TEXT NOT NULL PRIMARY KEY)"
        )
        for migration in migrations where !applied.contains(migration.identifier) {
          try migration.apply(db)
          try db.execute(
            sql: "INSERT INTO \(migrationsTable) (identifier) VALUES (?)",
            arguments: [migration.identifier]
          )
        }
        return .commit
      }
      return problem
    }
  }
}
