internal import OrderlyCore

/// A ``NotesService`` that waits a seeded random time before each call to another service: a
/// local store made to feel like a slow server, to see ordering at work.
public final class DelayedNotesService: NotesService {
  private let base: any NotesService
  private let latency: ClosedRange<Duration>
  private let clock: any Clock<Duration>
  private let generator: OrderlyLock<SeededGenerator>

  /// Wraps a service.
  ///
  /// - Parameters:
  ///   - base: The service that answers.
  ///   - latency: The range each call's wait is drawn from.
  ///   - seed: The seed of the waits.
  ///   - clock: The clock to wait on.
  public init(
    _ base: any NotesService,
    latency: ClosedRange<Duration>,
    seed: UInt64 = 0,
    clock: any Clock<Duration> = ContinuousClock()
  ) {
    self.base = base
    self.latency = latency
    self.clock = clock
    self.generator = OrderlyLock(SeededGenerator(seed: seed))
  }

  private func delay() async throws {
    let low = latency.lowerBound / .seconds(1)
    let high = latency.upperBound / .seconds(1)
    let unit = generator.withLock(announcingTo: self) { $0.nextUnit() }
    try await clock.sleep(for: .seconds(low + (high - low) * unit))
  }

  /// All notes, after a wait.
  ///
  /// - Returns: What the wrapped service returns.
  /// - Throws: What the wrapped service throws; `CancellationError` if cancelled while waiting.
  public func fetchNotes() async throws -> [Note] {
    try await delay()
    return try await base.fetchNotes()
  }

  /// One note, after a wait.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: What the wrapped service returns.
  /// - Throws: What the wrapped service throws; `CancellationError` if cancelled while waiting.
  public func fetchNote(id: Note.ID) async throws -> Note? {
    try await delay()
    return try await base.fetchNote(id: id)
  }

  /// Creates a note, after a wait.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: What the wrapped service returns.
  /// - Throws: What the wrapped service throws; `CancellationError` if cancelled while waiting.
  public func createNote(title: String, body: String) async throws -> Note {
    try await delay()
    return try await base.createNote(title: title, body: body)
  }

  /// Changes a note, after a wait.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: What the wrapped service returns.
  /// - Throws: What the wrapped service throws; `CancellationError` if cancelled while waiting.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    try await delay()
    return try await base.updateNote(id: id, title: title, body: body)
  }

  /// Deletes a note, after a wait.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: What the wrapped service throws; `CancellationError` if cancelled while waiting.
  public func deleteNote(id: Note.ID) async throws {
    try await delay()
    try await base.deleteNote(id: id)
  }
}
