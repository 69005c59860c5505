// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import GRDB
import OrderlyCore
import OrderlyDatabaseFile
public import OrderlyOutbox
public import OrderlyRepository

/// An offline-first `NotesService`: every change is written to the local SQLite file at once
/// and, in the same transaction, appended to an outbox as the `NoteMutation` the server must
/// apply.
///
/// The app reads and writes locally whether or not it has a network; the outbox sends the
/// changes in the order they were made, across relaunches and crashes, when it can. Either both
/// the note and its mutation are stored, or neither: a crash between the two is impossible.
///
/// ```swift
/// let notes = try OfflineNotesService(path: folder + "/notes.sqlite")
/// let repository = NotesRepository(service: notes)
/// try notes.outbox.start { envelope in
///   try await server.send(envelope.message, idempotencyKey: envelope.id)
/// }
/// ```
///
/// The outbox delivers one mutation at a time in one line, so the server sees a note's creation
/// before its edits. By default a later edit of a note still waiting to be sent is folded into
/// it (`NoteMutation.merging(_:)`): an hour of offline typing is one request, not hundreds.
///
/// The file holds the notes tables and the outbox's; a plain ``SQLiteNotesService`` file opens
/// here (its outbox tables are added), while a file this service wrote is refused by
/// ``SQLiteNotesService``, which does not know the outbox.
public final class OfflineNotesService: NotesService {
  /// The changes waiting for the server: start, pause and resume delivery here.
  public let outbox: Outbox<NoteMutation>
  private let notes: SQLiteNotesService

  /// Opens the notes database at `path`, creating it if there is no file there yet.
  ///
  /// - Parameters:
  ///   - path: The database file. Its folder must exist.
  ///   - busyTimeout: How long to wait when another connection holds the database's lock.
  ///   - clock: The clock the outbox's retry waits are measured on.
  ///   - mergesEdits: Whether an edit is folded into a pending mutation of the same note; `true`
  ///     by default.
  /// - Throws: ``SQLiteNotesError`` if the file cannot be opened or is not a notes database.
  public init(
    path: String,
    busyTimeout: Duration = .seconds(60),
    clock: any Clock<Duration> = ContinuousClock(),
    mergesEdits: Bool = true
  ) throws(SQLiteNotesError) {
    let slot = OutboxSlot()
    notes = try SQLiteNotesService(
      path: path,
      busyTimeout: busyTimeout,
      schema: NotesSchema.schema.combined(with: OutboxSchema.alone),
      onChange: { mutation, db in try slot.outbox?.append(mutation, in: db) }
    )
    do {
      outbox = try Outbox(
        database: notes.database,
        clock: clock,
        coalescing: mergesEdits
          ? Coalescing(entity: { "note \($0.noteID)" }, merge: { $0.merging($1) }) : nil
      )
    } catch {
      try? notes.close()
      throw .cannotOpen(path: path, reason: error.description)
    }
    slot.set(outbox)
  }

  /// Stops the outbox's delivery and closes the database.
  ///
  /// - Throws: ``SQLiteNotesError/busy(path:waited:)`` if a statement is still running.
  public func close() async throws(SQLiteNotesError) {
    // Delivery stops first; then the notes service, which owns the file, checkpoints it (so no
    // `-wal` or `-shm` is left behind) and closes it; the outbox then only marks itself closed.
    await outbox.stop()
    try notes.close()
    try? await outbox.close()
  }

  /// All notes, oldest first, from the local file.
  ///
  /// - Returns: Every note, ordered by identifier.
  /// - Throws: As ``SQLiteNotesService/fetchNotes()``.
  public func fetchNotes() async throws -> [Note] { try await notes.fetchNotes() }

  /// One note, from the local file.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil` if there is none.
  /// - Throws: As ``SQLiteNotesService/fetchNotes()``.
  public func fetchNote(id: Note.ID) async throws -> Note? { try await notes.fetchNote(id: id) }

  /// Creates a note locally and appends its `NoteMutation.create`.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note, as stored.
  /// - Throws: As ``SQLiteNotesService/createNote(title:body:)``; nothing is stored then.
  public func createNote(title: String, body: String) async throws -> Note {
    try await notes.createNote(title: title, body: body)
  }

  /// Changes a note locally and appends its `NoteMutation.update`.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: The changed note, as stored.
  /// - Throws: As ``SQLiteNotesService/updateNote(id:title:body:)``.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    try await notes.updateNote(id: id, title: title, body: body)
  }

  /// Deletes a note locally and appends its `NoteMutation.delete`.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: As ``SQLiteNotesService/deleteNote(id:)``.
  public func deleteNote(id: Note.ID) async throws { try await notes.deleteNote(id: id) }
}

/// The outbox, once it exists: the notes service is opened first (the outbox lives in its
/// database), and its write hook reaches the outbox through this.
private final class OutboxSlot: Sendable {
  private let value = OrderlyLock<Outbox<NoteMutation>?>(nil)

  var outbox: Outbox<NoteMutation>? { value.withLock(announcingTo: self) { $0 } }

  func set(_ outbox: Outbox<NoteMutation>) {
    value.withLock(announcingTo: self) { $0 = outbox }
  }
}
#endif
