import OrderlyCore

/// One call to a ``NotesRepository``, described before it is made: what
/// ``NotesRepository/submit(_:priority:)`` puts in line.
///
/// Make one with the static members, one per repository method:
///
/// ```swift
/// let created = repository.submit(.create(title: "Milk"))
/// let all = repository.submit(.notes)
/// ```
public struct NotesRequest<Answer: Sendable>: Sendable {
  /// The service operation the call makes.
  public let operation: NotesOperation
  let summary: @Sendable (Answer) -> String
  let body: @Sendable (any NotesService) async throws -> Answer
  let failure: @Sendable (String) -> NotesError

  init(
    _ operation: NotesOperation,
    summary: @escaping @Sendable (Answer) -> String,
    body: @escaping @Sendable (any NotesService) async throws -> Answer,
    failure: @escaping @Sendable (String) -> NotesError
  ) {
    self.operation = operation
    self.summary = summary
    self.body = body
    self.failure = failure
  }
}

extension NotesRequest where Answer == [Note] {
  /// All notes, oldest first (as ``NotesRepository/notes(isolation:)``).
  public static var notes: Self {
    Self(.fetchNotes, summary: { Note.count($0.count) }) { service in
      try await service.fetchNotes()
    } failure: {
      .fetchNotes(reason: $0)
    }
  }
}

extension NotesRequest where Answer == Note {
  /// One note (as ``NotesRepository/note(id:isolation:)``).
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The request; its call fails with ``NotesError/fetchNote(id:reason:)``, also
  ///   when there is no such note.
  public static func note(id: Note.ID) -> Self {
    Self(.fetchNote, summary: { $0.summary }) { service in
      guard let note = try await service.fetchNote(id: id) else { throw NoteNotFound(id: id) }
      return note
    } failure: {
      .fetchNote(id: id, reason: $0)
    }
  }

  /// A new note (as ``NotesRepository/create(title:body:isolation:)``).
  ///
  /// - Parameters:
  ///   - title: The title: one line that contains more than spaces (see ``NoteTextError``).
  ///   - body: The text; anything but a NUL character.
  /// - Returns: The request; its call fails with ``NotesError/createNote(reason:)``.
  public static func create(title: String, body: String = "") -> Self {
    Self(.createNote, summary: { $0.summary }) { service in
      try NoteTextError.check(title: title, body: body)
      return try await service.createNote(title: title, body: body)
    } failure: {
      .createNote(reason: $0)
    }
  }

  /// A change to a note's title and text (as ``NotesRepository/update(id:title:body:isolation:)``).
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title: one line that contains more than spaces.
  ///   - body: The new text; anything but a NUL character.
  /// - Returns: The request; its call fails with ``NotesError/updateNote(id:reason:)``.
  public static func update(id: Note.ID, title: String, body: String = "") -> Self {
    Self(.updateNote, summary: { $0.summary }) { service in
      try NoteTextError.check(title: title, body: body)
      return try await service.updateNote(id: id, title: title, body: body)
    } failure: {
      .updateNote(id: id, reason: $0)
    }
  }
}

extension NotesRequest where Answer == Void {
  /// A note's deletion (as ``NotesRepository/delete(id:isolation:)``).
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The request; its call fails with ``NotesError/deleteNote(id:reason:)``.
  public static func delete(id: Note.ID) -> Self {
    Self(.deleteNote, summary: { _ in "deleted note \(id)" }) { service in
      try await service.deleteNote(id: id)
    } failure: {
      .deleteNote(id: id, reason: $0)
    }
  }
}

/// A call made with ``NotesRepository/submit(_:priority:)``: await its answer, or cancel it.
///
/// Dropping the handle does not cancel the call; it still runs in its turn.
public struct NotesCall<Answer: Sendable>: Sendable {
  let job: QueuedTask<Answer>
  let failure: @Sendable (String) -> NotesError

  /// The call's number in the repository's ``NotesRepository/log``, in the order of the line.
  public let number: Int

  /// The call's answer, once it has run.
  ///
  /// Awaiting it does not cancel the call when the awaiting task is cancelled (as awaiting a
  /// `Task`'s value does not); use ``cancel()``.
  ///
  /// - Throws: The request's ``NotesError``; its reason is `cancelled` if the call was
  ///   cancelled before it reached the service.
  public var value: Answer {
    get async throws(NotesError) {
      do {
        return try await job.value
      } catch is CancellationError {
        throw failure("cancelled")
      } catch {
        throw failure("\(error)")
      }
    }
  }

  /// Cancels the call: if it has not started it never reaches the service; if it runs, the
  /// service sees `Task.isCancelled`.
  public func cancel() {
    job.cancel()
  }
}
