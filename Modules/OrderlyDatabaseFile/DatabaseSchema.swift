// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
package import GRDB

/// The tables a database of Orderly's holds, how they are created, and what a file must hold to
/// be taken as such a database.
///
/// Migrations are recorded in GRDB's `grdb_migrations` table, as `DatabaseMigrator` records
/// them, so files written by earlier versions open unchanged. They are not run by
/// `DatabaseMigrator`, for two reasons: it creates `grdb_migrations` outside the first
/// migration's transaction (a process killed in between leaves a file holding only that table),
/// and it reads which migrations are applied before it takes the write lock (two processes
/// opening a new file at once both run the first migration, and one fails). Here the check and
/// every migration run in one `IMMEDIATE` transaction: another process waits for it, then sees
/// its result.
package struct DatabaseSchema: Sendable {
  /// One migration: the tables it creates, and how.
  package struct Migration: Sendable {
    /// Its identifier in `grdb_migrations`; never changes once released.
    package let identifier: String
    /// The tables it creates; a migration is applied exactly when its tables exist.
    package let tables: [String]
    /// Creates the tables, inside the schema's transaction.
    package let apply: @Sendable (Database) throws -> Void

    package init(
      _ identifier: String,
      tables: [String],
      apply: @escaping @Sendable (Database) throws -> Void
    ) {
      self.identifier = identifier
      self.tables = tables
      self.apply = apply
    }
  }

  /// GRDB's table of applied migrations.
  package static let migrationsTable = "grdb_migrations"

  /// What the database is, for messages: "an Orderly notes database".
  package let kind: String
  /// Every migration, oldest first.
  package let migrations: [Migration]
  /// The prefix of every identifier this schema's migrations have, now and in later versions;
  /// with ``sharesDatabase``, only identifiers with it are this schema's.
  package let identifierPrefix: String
  /// Whether the schema's tables live beside other tables (an app's own database): other
  /// tables and other migrations are then not a reason to refuse the file.
  package let sharesDatabase: Bool

  package init(
    kind: String,
    migrations: [Migration],
    identifierPrefix: String = "",
    sharesDatabase: Bool = false
  ) {
    self.kind = kind
    self.migrations = migrations
    self.identifierPrefix = identifierPrefix
    self.sharesDatabase = sharesDatabase
  }

  /// The two schemas' migrations in one database (notes and their outbox).
  package func combined(with other: DatabaseSchema) -> DatabaseSchema {
    DatabaseSchema(kind: kind, migrations: migrations + other.migrations)
  }

  /// Every table the schema creates.
  package var tables: Set<String> { Set(migrations.flatMap(\.tables)) }

  /// Says why a database with these tables and applied migrations cannot be opened as this
  /// schema's.
  ///
  /// - Parameters:
  ///   - tables: The names of its tables, SQLite's own excluded.
  ///   - applied: The identifiers in `grdb_migrations`, if the table exists.
  /// - Returns: The reason, or `nil` if the schema can open it (possibly empty or half-created:
  ///   each migration's tables are created in one transaction with its record).
  package func problem(tables: Set<String>, applied: Set<String>) -> String? {
    let ours = self.tables
    let known = Set(migrations.map(\.identifier))
    let foreign = tables.subtracting(ours).subtracting([Self.migrationsTable])
    let hasOwnTable = !tables.isDisjoint(with: ours)
    if (!sharesDatabase && !foreign.isEmpty)
      || (hasOwnTable && !tables.contains(Self.migrationsTable))
    {
      return "it is another program's SQLite database (tables: "
        + tables.sorted().joined(separator: ", ") + ")"
    }
    let unknown = applied.subtracting(known).filter {
      !sharesDatabase || $0.hasPrefix(identifierPrefix)
    }
    if !unknown.isEmpty {
      return "it was written by a newer version of Orderly (unknown migrations: "
        + unknown.sorted().joined(separator: ", ") + ")"
    }
    for migration in migrations
    where !tables.isDisjoint(with: migration.tables) != applied.contains(migration.identifier) {
      return "its tables do not match its recorded migrations (\(migration.identifier))"
    }
    return nil
  }

  /// Reads a database's tables and applied migrations.
  package static func contents(of db: Database) throws -> (
    tables: Set<String>, applied: Set<String>
  ) {
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
  package func migrate(_ writer: some DatabaseWriter) throws -> String? {
    try writer.writeWithoutTransaction { db in
      var problem: String?
      try db.inTransaction(.immediate) {
        let (tables, applied) = try Self.contents(of: db)
        problem = self.problem(tables: tables, applied: applied)
        if problem != nil { return .rollback }
        try db.execute(
          sql: "CREATE TABLE IF NOT EXISTS \(Self.migrationsTable) "
            + "(identifier TEXT NOT NULL PRIMARY KEY)"
        )
        for migration in migrations where !applied.contains(migration.identifier) {
          try migration.apply(db)
          try db.execute(
            sql: "INSERT INTO \(Self.migrationsTable) (identifier) VALUES (?)",
            arguments: [migration.identifier]
          )
        }
        return .commit
      }
      return problem
    }
  }
}
#endif
