public import OrderlyCore

/// The notes of the serial task executor article, behind a repository that runs every call through one
/// `SerialQueue`.
///
/// Calls made concurrently, say one `Task {}` per tap, start and finish in the order they were
/// made: each call takes its place in line when it is made, and runs only after the previous call
/// has finished. Every method throws a ``NotesError`` naming the operation and keeping what went
/// wrong underneath.
///
/// ```swift
/// let repository = NotesRepository(service: InMemoryNotesService())
/// Task { try await repository.create(title: "Milk") }
/// Task { print(try await repository.notes()) }  // sees the note: it runs second
/// ```
///
/// Unlike the serial task executor article's repository, the queue's jobs hold the service
/// strongly: a call never turns into a silent empty result because the repository went away. A call cancelled before its turn
/// never reaches the service and throws its operation's ``NotesError`` with the reason
/// `cancelled`.
///
/// Every call is written to ``log``: a numbered start entry when it runs, then a finish or an
/// error entry.
public final class NotesRepository: Sendable {
  /// Where the notes are stored.
  public let service: any NotesService
  /// What the repository's calls did, in order.
  public let log: ActivityLog

  private let queue: SerialQueue
  /// The number of the last call made; taken with the call's place in line, under one lock.
  private let callCount = OrderlyLock(0)

  /// Creates a repository over a service.
  ///
  /// - Parameters:
  ///   - service: Where the notes are stored.
  ///   - log: Where to write what the calls do; a new log by default.
  ///   - name: The name of the repository's queue, for its events.
  public init(
    service: any NotesService,
    log: ActivityLog = ActivityLog(),
    name: String = "NotesRepository"
  ) {
    self.service = service
    self.log = log
    self.queue = SerialQueue(name: name)
  }

  /// The queue's events: every call's enqueue, start and end.
  public var events: AsyncStream<QueueEvent> { queue.events }

  // MARK: - Operations

  /// All notes, oldest first.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Returns: Every note.
  /// - Throws: ``NotesError/fetchNotes(reason:)``.
  public func notes(isolation: isolated (any Actor)? = #isolation) async throws(NotesError)
    -> [Note]
  {
    try await perform(.fetchNotes, summary: { Note.count($0.count) }) { service in
      try await service.fetchNotes()
    } failure: {
      .fetchNotes(reason: $0)
    }
  }

  /// One note.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Returns: The note.
  /// - Throws: ``NotesError/fetchNote(id:reason:)``, also when there is no such note.
  public func note(
    id: Note.ID,
    isolation: isolated (any Actor)? = #isolation
  ) async throws(NotesError) -> Note {
    try await perform(.fetchNote, summary: { $0.summary }) { service in
      guard let note = try await service.fetchNote(id: id) else { throw NoteNotFound(id: id) }
      return note
    } failure: {
      .fetchNote(id: id, reason: $0)
    }
  }

  /// Creates a note.
  ///
  /// - Parameters:
  ///   - title: The title: one line that contains more than spaces (see ``NoteTextError``).
  ///   - body: The text; anything but a NUL character.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Returns: The new note as stored, with its identifier.
  /// - Throws: ``NotesError/createNote(reason:)``, also when the title or text cannot be stored
  ///   as given (the reason is the ``NoteTextError``'s description, and nothing is stored).
  @discardableResult
  public func create(
    title: String,
    body: String = "",
    isolation: isolated (any Actor)? = #isolation
  ) async throws(NotesError) -> Note {
    try await perform(.createNote, summary: { $0.summary }) { service in
      try NoteTextError.check(title: title, body: body)
      return try await service.createNote(title: title, body: body)
    } failure: {
      .createNote(reason: $0)
    }
  }

  /// Changes a note's title and text.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title: one line that contains more than spaces (see ``NoteTextError``).
  ///   - body: The new text; anything but a NUL character.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Returns: The changed note as stored.
  /// - Throws: ``NotesError/updateNote(id:reason:)``, also when there is no such note or the
  ///   title or text cannot be stored as given (nothing is changed then).
  @discardableResult
  public func update(
    id: Note.ID,
    title: String,
    body: String = "",
    isolation: isolated (any Actor)? = #isolation
  ) async throws(NotesError) -> Note {
    try await perform(.updateNote, summary: { $0.summary }) { service in
      try NoteTextError.check(title: title, body: body)
      return try await service.updateNote(id: id, title: title, body: body)
    } failure: {
      .updateNote(id: id, reason: $0)
    }
  }

  /// Deletes a note.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Throws: ``NotesError/deleteNote(id:reason:)``, also when there is no such note.
  public func delete(
    id: Note.ID,
    isolation: isolated (any Actor)? = #isolation
  ) async throws(NotesError) {
    try await perform(.deleteNote, summary: { _ in "deleted note \(id)" }) { service in
      try await service.deleteNote(id: id)
    } failure: {
      .deleteNote(id: id, reason: $0)
    }
  }

  /// Returns once every call made before this one has ended.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the waiting task is cancelled.
  public func waitUntilIdle(isolation: isolated (any Actor)? = #isolation) async throws {
    try await queue.waitUntilIdle()
  }

  // MARK: - Running calls

  /// Numbers the call and puts it in line under one lock, so numbers follow the order of the
  /// line; then waits for it, mapping any error to the operation's ``NotesError``.
  private func perform<Answer: Sendable>(
    _ operation: NotesOperation,
    summary: @escaping @Sendable (Answer) -> String,
    isolation: isolated (any Actor)? = #isolation,
    body: @escaping @Sendable (any NotesService) async throws -> Answer,
    failure: (String) -> NotesError
  ) async throws(NotesError) -> Answer {
    let job = callCount.withLock(announcingTo: self) { count in
      count += 1
      let call = count
      return queue.enqueueDetached(name: "\(operation) #\(call)") {
        [service, log] () async throws -> Answer in
        try await log.track(operation, call: call, summary: summary) { try await body(service) }
      }
    }
    do {
      return try await withTaskCancellationHandler(
        operation: { try await job.value },
        onCancel: { job.cancel() },
        isolation: isolation
      )
    } catch is CancellationError {
      throw failure("cancelled")
    } catch {
      throw failure("\(error)")
    }
  }
}
