/// A change to one note, as an offline-first app sends it to its server.
///
/// The app assigns note identifiers when it creates notes locally, so that every later change
/// can name its note before the server has seen it. A server applies mutations in the order it
/// receives them; sent through an outbox, that is the order they were made.
public enum NoteMutation: Sendable, Codable, Hashable, CustomStringConvertible {
  /// A new note, with the identifier the app gave it.
  case create(id: Note.ID, title: String, body: String)
  /// A note's new title and text.
  case update(id: Note.ID, title: String, body: String)
  /// A note removed.
  case delete(id: Note.ID)

  /// The note the mutation changes.
  public var noteID: Note.ID {
    switch self {
    case .create(let id, _, _), .update(let id, _, _), .delete(let id): id
    }
  }

  /// `create note 3: "todo"`, `update note 3: "done"`, `delete note 3`.
  public var description: String {
    switch self {
    case .create(let id, let title, _): "create note \(id): \"\(title)\""
    case .update(let id, let title, _): "update note \(id): \"\(title)\""
    case .delete(let id): "delete note \(id)"
    }
  }

  /// Folds a later mutation of the same note into this one, when the pair can be sent as one.
  ///
  /// An edit after a creation is a creation with the new text, an edit after an edit is the
  /// later edit. Anything with a deletion is kept apart.
  ///
  /// - Parameter later: A mutation of the same note, made after this one.
  /// - Returns: The single mutation with the same effect, or `nil` to send both.
  public func merging(_ later: NoteMutation) -> NoteMutation? {
    guard later.noteID == noteID else { return nil }
    switch (self, later) {
    case (.create(let id, _, _), .update(_, let title, let body)):
      return .create(id: id, title: title, body: body)
    case (.update(let id, _, _), .update(_, let title, let body)):
      return .update(id: id, title: title, body: body)
    default:
      return nil
    }
  }

  /// The notes after applying the mutation: what a server holding `notes` keeps.
  ///
  /// - Parameter notes: The notes by identifier, as titles and texts.
  /// - Returns: Whether it changed anything (a creation of an existing note, or an update or
  ///   deletion of a missing one, does not).
  @discardableResult
  public func apply(to notes: inout [Note.ID: NoteText]) -> Bool {
    switch self {
    case .create(let id, let title, let body):
      guard notes[id] == nil else { return false }
      notes[id] = NoteText(title: title, body: body)
    case .update(let id, let title, let body):
      guard notes[id] != nil else { return false }
      notes[id] = NoteText(title: title, body: body)
    case .delete(let id):
      return notes.removeValue(forKey: id) != nil
    }
    return true
  }
}

/// A note's title and text, without its dates: what a sync compares.
public struct NoteText: Sendable, Codable, Hashable {
  /// The title.
  public var title: String
  /// The text.
  public var body: String

  /// A title and a text.
  public init(title: String, body: String) {
    self.title = title
    self.body = body
  }
}
