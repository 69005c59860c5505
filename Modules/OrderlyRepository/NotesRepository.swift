public import OrderlyCore

/// The notes of the serial task executor article, behind a repository that runs every call through one
/// `SerialQueue`.
///
/// Calls run one at a time, in the order they took their place in line, each only after the
/// previous one has finished. Every method throws a ``NotesError`` naming the operation and
/// keeping what went wrong underneath.
///
/// Where a call takes its place:
///
/// - ``submit(_:priority:)`` puts it in line before it returns, from any code, synchronous or
///   not, on any actor or none. Calls submitted one after another run in the order written:
///
///   ```swift
///   let repository = NotesRepository(service: InMemoryNotesService())
///   repository.submit(.create(title: "Milk"))
///   repository.submit(.create(title: "Eggs"))
///   let all = repository.submit(.notes)  // runs third: sees both notes
///   ```
///
/// - The async methods (``create(title:body:isolation:)``, ``notes(isolation:)``, ...) take
///   their place when they are called, which in a `Task {}` is when that task starts. Tasks made
///   one after another on the main actor at one priority start in the order made, so
///   `Task { try await repository.create(title: "Milk") }` then `Task { try await
///   repository.notes() }` on the main actor sees the note. Tasks made from nonisolated code,
///   from another actor or at different priorities may start in any order; submit there.
///
/// Either way a call runs like `Task {}`: with its caller's task-local values and priority.
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
    try await perform(.notes)
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
    try await perform(.note(id: id))
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
    try await perform(.create(title: title, body: body))
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
    try await perform(.update(id: id, title: title, body: body))
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
    try await perform(.delete(id: id))
  }

  /// Puts a call in line before returning, from any code, synchronous or not, on any actor or
  /// none: calls submitted one after another run in the order written, whatever order the
  /// tasks that await them start in.
  ///
  /// The call runs like `Task {}`: with the caller's task-local values and, unless `priority`
  /// is given, its priority (a `Task {}` made later to await it changes neither).
  ///
  /// ```swift
  /// let milk = repository.submit(.create(title: "Milk"))
  /// let eggs = repository.submit(.create(title: "Eggs"))
  /// let all = repository.submit(.notes)   // runs third: sees both notes
  /// Task { print(try await all.value) }
  /// ```
  ///
  /// - Parameters:
  ///   - request: What to call: ``NotesRequest/notes``, ``NotesRequest/create(title:body:)``, ...
  ///   - priority: The call's priority; `nil` for the caller's.
  /// - Returns: The call's handle; dropping it does not cancel the call.
  @discardableResult
  public func submit<Answer>(
    _ request: NotesRequest<Answer>,
    priority: TaskPriority? = nil
  ) -> NotesCall<Answer> {
    // Numbered and put in line under one lock, so the log's numbers follow the line.
    callCount.withLock(announcingTo: self) { count in
      count += 1
      let call = count
      let job = queue.enqueue(
        name: "\(request.operation) #\(call)",
        priority: priority,
        isolation: nil
      ) { [service, log] () async throws -> Answer in
        try await log.track(request.operation, call: call, summary: request.summary) {
          try await request.body(service)
        }
      }
      return NotesCall(job: job, failure: request.failure, number: call)
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

  /// Submits the call and waits for its answer; cancelling the waiting task cancels the call.
  private func perform<Answer>(
    _ request: NotesRequest<Answer>,
    isolation: isolated (any Actor)? = #isolation
  ) async throws(NotesError) -> Answer {
    let call = submit(request)
    do {
      return try await withTaskCancellationHandler(
        operation: { try await call.job.value },
        onCancel: { call.cancel() },
        isolation: isolation
      )
    } catch is CancellationError {
      throw request.failure("cancelled")
    } catch {
      throw request.failure("\(error)")
    }
  }
}
