/// Why a ``NotesRepository`` call failed: one case per operation, as in the serial task executor article, each keeping
/// what went wrong underneath.
public enum NotesError: Error, Sendable, Equatable, CustomStringConvertible {
  /// Fetching all notes failed.
  case fetchNotes(reason: String)
  /// Fetching one note failed, or there is no note with that identifier.
  case fetchNote(id: Note.ID, reason: String)
  /// Creating a note failed.
  case createNote(reason: String)
  /// Updating a note failed, or there is no note with that identifier.
  case updateNote(id: Note.ID, reason: String)
  /// Deleting a note failed, or there is no note with that identifier.
  case deleteNote(id: Note.ID, reason: String)

  /// The operation that failed.
  public var operation: NotesOperation {
    switch self {
    case .fetchNotes: .fetchNotes
    case .fetchNote: .fetchNote
    case .createNote: .createNote
    case .updateNote: .updateNote
    case .deleteNote: .deleteNote
    }
  }

  /// The description of the underlying error, such as `no note with id 7`.
  public var reason: String {
    switch self {
    case .fetchNotes(let reason), .fetchNote(_, let reason), .createNote(let reason),
      .updateNote(_, let reason), .deleteNote(_, let reason):
      reason
    }
  }

  /// A sentence such as `could not update note 7: no note with id 7`.
  public var description: String {
    switch self {
    case .fetchNotes(let reason): "could not fetch the notes: \(reason)"
    case .fetchNote(let id, let reason): "could not fetch note \(id): \(reason)"
    case .createNote(let reason): "could not create the note: \(reason)"
    case .updateNote(let id, let reason): "could not update note \(id): \(reason)"
    case .deleteNote(let id, let reason): "could not delete note \(id): \(reason)"
    }
  }
}
