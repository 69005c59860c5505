/// Where notes are stored: an in-memory service, a SQLite file, a server.
///
/// Implementations must be safe to call from any task. They need not order concurrent calls:
/// ``NotesRepository`` does that. Errors may be of any type; the repository keeps their
/// description in its ``NotesError``.
public protocol NotesService: Sendable {
  /// All notes, oldest first.
  ///
  /// - Returns: Every note, ordered by identifier.
  /// - Throws: Whatever the storage throws.
  func fetchNotes() async throws -> [Note]

  /// One note.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil` if there is none with that identifier.
  /// - Throws: Whatever the storage throws.
  func fetchNote(id: Note.ID) async throws -> Note?

  /// Creates a note and assigns it an identifier.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note.
  /// - Throws: Whatever the storage throws.
  func createNote(title: String, body: String) async throws -> Note

  /// Changes a note's title and text.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: The changed note.
  /// - Throws: ``NoteNotFound`` if there is no such note; whatever the storage throws.
  func updateNote(id: Note.ID, title: String, body: String) async throws -> Note

  /// Deletes a note.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: ``NoteNotFound`` if there is no such note; whatever the storage throws.
  func deleteNote(id: Note.ID) async throws
}

/// The five operations of a ``NotesService``, for logs, latency and failure injection.
public enum NotesOperation: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
  case fetchNotes, fetchNote, createNote, updateNote, deleteNote

  /// The operation's name, as in `fetchNotes`.
  public var description: String { rawValue }
}

/// The error a service throws when asked to change or delete a note that does not exist.
public struct NoteNotFound: Error, Sendable, Equatable, CustomStringConvertible {
  /// The identifier that matched no note.
  public let id: Note.ID

  /// Creates the error.
  ///
  /// - Parameter id: The identifier that matched no note.
  public init(id: Note.ID) {
    self.id = id
  }

  /// `no note with id 7`.
  public var description: String { "no note with id \(id)" }
}
