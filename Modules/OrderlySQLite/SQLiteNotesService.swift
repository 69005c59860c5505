import Foundation
import GRDB
public import OrderlyRepository

/// A `NotesService` on an SQLite file (or in memory), through GRDB.
///
/// The schema is created and upgraded by GRDB's `DatabaseMigrator`. A file database runs in WAL
/// mode with `synchronous = FULL`: once a write has returned, it is on disk, and survives the
/// process being killed right after (and a power cut).
///
/// Opening checks the file before anything writes to it: a path that cannot be opened, a file
/// that is not SQLite, another program's database, or a database from a newer Orderly gives a
/// ``SQLiteNotesError`` naming the path and the cause, and the file is left as it was.
///
/// ```swift
/// let service = try SQLiteNotesService(path: "/path/to/notes.sqlite")
/// let repository = NotesRepository(service: service)
/// ```
public final class SQLiteNotesService: NotesService {
  /// The database file, or `nil` for an in-memory database.
  public let path: String?

  private let database: any DatabaseWriter

  /// Opens the notes database at `path`, creating it if there is no file there yet.
  ///
  /// - Parameter path: The database file. Its folder must exist.
  /// - Throws: ``SQLiteNotesError`` if the file cannot be opened or is not a notes database.
  public init(path: String) throws(SQLiteNotesError) {
    self.path = path
    try Self.checkExistingFile(at: path)
    var configuration = Configuration()
    configuration.prepareDatabase { db in
      try db.execute(sql: "PRAGMA synchronous = FULL")
    }
    let pool: DatabasePool
    do {
      pool = try DatabasePool(path: path, configuration: configuration)
    } catch {
      throw .cannotOpen(path: path, reason: Self.describe(error))
    }
    do {
      try Self.migrator.migrate(pool)
    } catch {
      throw .notANotesDatabase(path: path, reason: Self.describe(error))
    }
    database = pool
  }

  /// Opens a new, empty notes database in memory.
  ///
  /// - Throws: ``SQLiteNotesError`` in the unlikely case SQLite cannot create it.
  public init(inMemory: Void = ()) throws(SQLiteNotesError) {
    path = nil
    do {
      let queue = try DatabaseQueue()
      try Self.migrator.migrate(queue)
      database = queue
    } catch {
      throw .cannotOpen(path: ":memory:", reason: Self.describe(error))
    }
  }

  // MARK: - Schema

  private static let noteTable = "note"

  private static var migrator: DatabaseMigrator {
    var migrator = DatabaseMigrator()
    migrator.registerMigration("create notes") { db in
      try db.create(table: noteTable) { table in
        table.autoIncrementedPrimaryKey("id")
        table.column("title", .text).notNull()
        table.column("body", .text).notNull()
        table.column("createdAt", .double).notNull()
        table.column("updatedAt", .double).notNull()
      }
    }
    return migrator
  }

  /// Refuses, before anything writes to it, a file that is not an empty or Orderly notes
  /// database.
  private static func checkExistingFile(at path: String) throws(SQLiteNotesError) {
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else { return }
    if isFolder.boolValue { throw .cannotOpen(path: path, reason: "it is a folder") }
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw .cannotOpen(path: path, reason: "the file cannot be read (permission denied?)")
    }
    let header = (try? handle.read(upToCount: 16)) ?? Data()
    try? handle.close()
    // An empty file is an empty database to SQLite.
    if header.isEmpty { return }
    guard header == Data("SQLite format 3\0".utf8) else {
      throw .notANotesDatabase(path: path, reason: "it is not an SQLite file")
    }
    do {
      var configuration = Configuration()
      configuration.readonly = true
      let reader = try DatabaseQueue(path: path, configuration: configuration)
      defer { try? reader.close() }
      let problem = try reader.read { db -> String? in
        let tables = try String.fetchAll(
          db,
          sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        if tables.isEmpty { return nil }
        guard tables.contains("grdb_migrations"), tables.contains(noteTable) else {
          return "it is another program's SQLite database (tables: "
            + tables.sorted().joined(separator: ", ") + ")"
        }
        if try migrator.hasBeenSuperseded(db) {
          return "it was written by a newer version of Orderly"
        }
        return nil
      }
      if let problem { throw SQLiteNotesError.notANotesDatabase(path: path, reason: problem) }
    } catch let error as SQLiteNotesError {
      throw error
    } catch {
      throw .notANotesDatabase(path: path, reason: describe(error))
    }
  }

  private static func describe(_ error: any Error) -> String {
    if let error = error as? DatabaseError {
      return error.message ?? "SQLite error \(error.resultCode.rawValue)"
    }
    return "\(error)"
  }

  // MARK: - NotesService

  /// All notes, oldest first.
  ///
  /// - Returns: Every note, ordered by identifier.
  /// - Throws: A GRDB `DatabaseError` if SQLite fails.
  public func fetchNotes() async throws -> [Note] {
    try await database.read { db in
      try Row.fetchAll(db, sql: "SELECT * FROM note ORDER BY id").map(Self.note)
    }
  }

  /// One note.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil` if there is none.
  /// - Throws: A GRDB `DatabaseError` if SQLite fails.
  public func fetchNote(id: Note.ID) async throws -> Note? {
    try await database.read { db in
      try Row.fetchOne(db, sql: "SELECT * FROM note WHERE id = ?", arguments: [id]).map(Self.note)
    }
  }

  /// Creates a note; SQLite assigns its identifier.
  ///
  /// Durable once it returns.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note.
  /// - Throws: A GRDB `DatabaseError` if SQLite fails.
  public func createNote(title: String, body: String) async throws -> Note {
    // Stored as seconds since 1970; the note returned carries the stored value, so it equals
    // the note read back later.
    let stamp = Date().timeIntervalSince1970
    return try await database.write { db in
      try db.execute(
        sql: "INSERT INTO note (title, body, createdAt, updatedAt) VALUES (?, ?, ?, ?)",
        arguments: [title, body, stamp, stamp]
      )
      return Note(
        id: db.lastInsertedRowID,
        title: title,
        body: body,
        createdAt: Date(timeIntervalSince1970: stamp)
      )
    }
  }

  /// Changes a note.
  ///
  /// Durable once it returns.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: The changed note.
  /// - Throws: `NoteNotFound`; a GRDB `DatabaseError` if SQLite fails.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    let date = Date()
    return try await database.write { db in
      try db.execute(
        sql: "UPDATE note SET title = ?, body = ?, updatedAt = ? WHERE id = ?",
        arguments: [title, body, date.timeIntervalSince1970, id]
      )
      guard db.changesCount > 0,
        let row = try Row.fetchOne(db, sql: "SELECT * FROM note WHERE id = ?", arguments: [id])
      else { throw NoteNotFound(id: id) }
      return Self.note(from: row)
    }
  }

  /// Deletes a note.
  ///
  /// Durable once it returns.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: `NoteNotFound`; a GRDB `DatabaseError` if SQLite fails.
  public func deleteNote(id: Note.ID) async throws {
    try await database.write { db in
      try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id])
      if db.changesCount == 0 { throw NoteNotFound(id: id) }
    }
  }

  private static func note(from row: Row) -> Note {
    Note(
      id: row["id"],
      title: row["title"],
      body: row["body"],
      createdAt: Date(timeIntervalSince1970: row["createdAt"]),
      updatedAt: Date(timeIntervalSince1970: row["updatedAt"])
    )
  }
}
