// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDB
import OrderlyCore
import OrderlyDatabaseFile
public import OrderlyRepository

/// A `NotesService` on an SQLite file (or in memory), through GRDB.
///
/// A file database runs in WAL mode with `synchronous = FULL`: once a write has returned, it is
/// on disk, and survives the process being killed right after (and a power cut). Every call
/// returns what was stored, read back in the same transaction.
///
/// Opening checks the file before anything writes to it or beside it (see
/// ``init(path:busyTimeout:)``): a path that cannot be opened, a file that is not SQLite,
/// another program's database, or a database from a newer Orderly gives a ``SQLiteNotesError``
/// naming the path and the cause, and the file and its folder are left as they were. A notes
/// file that a killed process left empty or half-created is always taken, and completed.
///
/// Several services, in one process or several, may use one file: a connection that finds the
/// database locked waits for it up to the busy timeout, and only then fails, with
/// ``SQLiteNotesError/busy(path:waited:)``.
///
/// ```swift
/// let service = try SQLiteNotesService(path: "/path/to/notes.sqlite")
/// let repository = NotesRepository(service: service)
/// ```
public final class SQLiteNotesService: NotesService {
  /// The database file, or `nil` for an in-memory database.
  public let path: String?
  /// How long a call waits for another connection's lock before it fails.
  public let busyTimeout: Duration

  let database: any DatabaseWriter
  /// Set by ``close()``: a closed GRDB connection reports SQLite's misuse error with the
  /// message "out of memory", so calls check this first.
  private let isClosed = OrderlyLock(false)
  /// Runs inside every write's transaction with the change it made (the offline-first service
  /// appends it to its outbox there).
  let onChange: (@Sendable (NoteMutation, Database) throws -> Void)?

  /// Opens the notes database at `path`, creating it if there is no file there yet.
  ///
  /// The path must name a regular file (or nothing, in an existing, writable folder). An
  /// existing file must be empty, or an SQLite database holding Orderly's notes tables only,
  /// possibly half-created by a process killed while it created them.
  ///
  /// - Parameters:
  ///   - path: The database file. Its folder must exist.
  ///   - busyTimeout: How long to wait when another connection holds the database's lock;
  ///     60 seconds by default, so that a write waits, rather than fails, while another
  ///     process writes on a busy machine.
  /// - Throws: ``SQLiteNotesError`` if the file cannot be opened or is not a notes database.
  ///   The file and its folder are then as they were: nothing is left behind.
  public convenience init(path: String, busyTimeout: Duration = .seconds(60))
    throws(SQLiteNotesError)
  {
    try self.init(path: path, busyTimeout: busyTimeout, schema: NotesSchema.schema, onChange: nil)
  }

  /// Opens a database holding `schema`'s tables, with a hook run in every write's transaction.
  init(
    path: String,
    busyTimeout: Duration,
    schema: DatabaseSchema,
    onChange: (@Sendable (NoteMutation, Database) throws -> Void)?
  ) throws(SQLiteNotesError) {
    self.path = path
    self.busyTimeout = busyTimeout
    self.onChange = onChange
    let existed: Bool
    do {
      existed = try DatabaseFile.check(path, busyTimeout: busyTimeout, schema: schema)
    } catch {
      throw SQLiteNotesError(error)
    }
    do {
      let pool = try DurableDatabase.openPool(path: path, busyTimeout: busyTimeout)
      do {
        if let problem = try schema.migrate(pool) {
          try? pool.close()
          throw SQLiteNotesError.notANotesDatabase(path: path, reason: problem)
        }
      } catch {
        try? pool.close()
        throw error
      }
      database = pool
    } catch {
      if !existed { DatabaseFile.remove(path) }
      throw Self.openingError(error, path: path, busyTimeout: busyTimeout)
    }
  }

  /// Opens a new, empty notes database in memory.
  ///
  /// - Throws: ``SQLiteNotesError`` in the unlikely case SQLite cannot create it.
  public init(inMemory: Void = ()) throws(SQLiteNotesError) {
    path = nil
    busyTimeout = .zero
    onChange = nil
    do {
      let queue = try DatabaseQueue()
      _ = try NotesSchema.schema.migrate(queue)
      database = queue
    } catch {
      throw .cannotOpen(path: ":memory:", reason: Self.describe(error))
    }
  }

  /// Closes the database; calls made afterwards throw ``SQLiteNotesError/closed(path:)``.
  ///
  /// Close a service before its file is opened again by a new one (a relaunch in one process,
  /// a test), so that the new one does not wait for the old connection's lock. A service that
  /// is released closes its database too, but only once the last call holding it has ended.
  ///
  /// - Throws: ``SQLiteNotesError/busy(path:waited:)`` if a statement is still running.
  public func close() throws(SQLiteNotesError) {
    let wasClosed = isClosed.withLock(announcingTo: self) { closed -> Bool in
      defer { closed = true }
      return closed
    }
    // Closing twice does nothing: a closed connection must not be used again.
    if wasClosed { return }
    do {
      try DurableDatabase.checkpointAndClose(database)
    } catch let error as DatabaseError {
      throw lockOrClosed(error)
        ?? .cannotOpen(path: path ?? ":memory:", reason: Self.describe(error))
    } catch {
      throw .cannotOpen(path: path ?? ":memory:", reason: Self.describe(error))
    }
  }

  private static func openingError(_ error: any Error, path: String, busyTimeout: Duration)
    -> SQLiteNotesError
  {
    if let error = error as? SQLiteNotesError { return error }
    return SQLiteNotesError(DatabaseFileError(opening: error, path: path, busyTimeout: busyTimeout))
  }

  private static func describe(_ error: any Error) -> String {
    if let error = error as? DatabaseError {
      return error.message ?? "SQLite error \(error.resultCode.rawValue)"
    }
    return "\(error)"
  }

  /// A lock held past the timeout, or a closed database, as an error that says so; `nil` for
  /// any other SQLite error.
  private func lockOrClosed(_ error: DatabaseError) -> SQLiteNotesError? {
    let path = path ?? ":memory:"
    switch error.resultCode {
    case .SQLITE_BUSY, .SQLITE_LOCKED: return .busy(path: path, waited: busyTimeout)
    case .SQLITE_MISUSE: return .closed(path: path)
    default: return nil
    }
  }

  /// Throws ``SQLiteNotesError/closed(path:)`` once ``close()`` was called.
  private func checkOpen() throws(SQLiteNotesError) {
    if isClosed.withLock(announcingTo: self, { $0 }) { throw .closed(path: path ?? ":memory:") }
  }

  /// Runs a read; a lock held too long or a closed database is reported as such.
  private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws
    -> T
  {
    try checkOpen()
    do {
      return try await database.read(body)
    } catch let error as DatabaseError {
      throw lockOrClosed(error) ?? error
    }
  }

  /// Runs a write in one transaction; a lock held too long or a closed database is reported as
  /// such.
  private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws
    -> T
  {
    try checkOpen()
    do {
      return try await database.write(body)
    } catch let error as DatabaseError {
      throw lockOrClosed(error) ?? error
    }
  }

  // MARK: - NotesService

  /// All notes, oldest first.
  ///
  /// - Returns: Every note, ordered by identifier.
  /// - Throws: ``SQLiteNotesError/busy(path:waited:)`` or ``SQLiteNotesError/closed(path:)``;
  ///   a GRDB `DatabaseError` if SQLite fails otherwise.
  public func fetchNotes() async throws -> [Note] {
    try await read { db in
      try Row.fetchAll(db, sql: "SELECT * FROM note ORDER BY id").map(Self.note)
    }
  }

  /// One note.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil` if there is none.
  /// - Throws: As ``fetchNotes()``.
  public func fetchNote(id: Note.ID) async throws -> Note? {
    try await read { db in try Self.note(id: id, in: db) }
  }

  /// Creates a note; SQLite assigns its identifier.
  ///
  /// Durable once it returns.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note, as stored.
  /// - Throws: A `NoteTextError` for text SQLite would not store as given (a NUL character);
  ///   otherwise as ``fetchNotes()``.
  public func createNote(title: String, body: String) async throws -> Note {
    try NoteTextError.check(title: title, body: body)
    let stamp = Date().timeIntervalSince1970
    return try await write { db in
      try db.execute(
        sql: "INSERT INTO note (title, body, createdAt, updatedAt) VALUES (?, ?, ?, ?)",
        arguments: [title, body, stamp, stamp]
      )
      let id = db.lastInsertedRowID
      guard let note = try Self.note(id: id, in: db) else { throw NoteNotFound(id: id) }
      try self.onChange?(.create(id: id, title: title, body: body), db)
      return note
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
  /// - Returns: The changed note, as stored.
  /// - Throws: `NoteNotFound`; otherwise as ``createNote(title:body:)``.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    try NoteTextError.check(title: title, body: body)
    let stamp = Date().timeIntervalSince1970
    return try await write { db in
      try db.execute(
        sql: "UPDATE note SET title = ?, body = ?, updatedAt = ? WHERE id = ?",
        arguments: [title, body, stamp, id]
      )
      guard db.changesCount > 0, let note = try Self.note(id: id, in: db) else {
        throw NoteNotFound(id: id)
      }
      try self.onChange?(.update(id: id, title: title, body: body), db)
      return note
    }
  }

  /// Deletes a note.
  ///
  /// Durable once it returns.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: `NoteNotFound`; otherwise as ``fetchNotes()``.
  public func deleteNote(id: Note.ID) async throws {
    try await write { db in
      try db.execute(sql: "DELETE FROM note WHERE id = ?", arguments: [id])
      if db.changesCount == 0 { throw NoteNotFound(id: id) }
      try self.onChange?(.delete(id: id), db)
    }
  }

  private static func note(id: Note.ID, in db: Database) throws -> Note? {
    try Row.fetchOne(db, sql: "SELECT * FROM note WHERE id = ?", arguments: [id]).map(note)
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
#endif
