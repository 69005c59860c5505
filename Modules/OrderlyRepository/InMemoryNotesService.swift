public import Foundation
internal import OrderlyCore

/// A ``NotesService`` in memory, with latency and failure injection for demos and tests.
///
/// Safe to call from any task. Each call waits its latency first (on the injected clock) and
/// then reads or changes the notes, so concurrent calls change the notes in the order they
/// *finish*, as calls to a slow server would. Random latencies and failures come from a seeded
/// generator: the same seed and the same order of calls give the same run.
///
/// ```swift
/// let service = InMemoryNotesService(
///   latency: .random(.milliseconds(10) ... .milliseconds(80)),
///   failures: [.call(2, of: .updateNote)],
///   seed: 42
/// )
/// ```
public final class InMemoryNotesService: NotesService {
  /// How long a call takes.
  public enum Latency: Sendable, Equatable {
    /// No wait.
    case none
    /// The same wait for every call.
    case fixed(Duration)
    /// A wait drawn uniformly from the range, from the service's seeded generator.
    case random(ClosedRange<Duration>)
  }

  /// A rule that makes calls fail with ``InjectedFailure``.
  public struct Failure: Sendable, Equatable {
    enum Rule: Sendable, Equatable {
      case call(Int, NotesOperation)
      case probability(Double, NotesOperation?)
    }

    let rule: Rule

    /// Fails the n-th call (counting from 1) of an operation.
    ///
    /// - Parameters:
    ///   - number: Which call to fail, from 1.
    ///   - operation: The operation whose calls are counted.
    /// - Returns: The rule.
    public static func call(_ number: Int, of operation: NotesOperation) -> Failure {
      Failure(rule: .call(number, operation))
    }

    /// Fails each call with a probability, drawn from the service's seeded generator.
    ///
    /// - Parameters:
    ///   - probability: From 0 (never) to 1 (always).
    ///   - operation: The operation it applies to; `nil` for every operation.
    /// - Returns: The rule.
    public static func probability(_ probability: Double, of operation: NotesOperation? = nil)
      -> Failure
    {
      Failure(rule: .probability(probability, operation))
    }
  }

  private struct State {
    var notes: [Note.ID: Note]
    var lastID: Note.ID
    var calls: [NotesOperation: Int] = [:]
    var generator: SeededGenerator
  }

  private let state: OrderlyLock<State>
  private let latency: Latency
  private let latencies: [NotesOperation: Latency]
  private let failures: [Failure]
  private let clock: any Clock<Duration>
  private let now: @Sendable () -> Date

  /// Creates a service.
  ///
  /// - Parameters:
  ///   - notes: Notes to start with; new identifiers follow the largest of theirs.
  ///   - latency: How long every call takes.
  ///   - latencies: Per-operation latencies, overriding `latency`.
  ///   - failures: Rules that make calls fail.
  ///   - seed: The seed of the generator behind random latencies and failures.
  ///   - clock: The clock to wait on; real time by default, a manual clock in tests.
  ///   - now: Where creation and update dates come from.
  public init(
    notes: [Note] = [],
    latency: Latency = .none,
    latencies: [NotesOperation: Latency] = [:],
    failures: [Failure] = [],
    seed: UInt64 = 0,
    clock: any Clock<Duration> = ContinuousClock(),
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.state = OrderlyLock(
      State(
        notes: Dictionary(notes.map { ($0.id, $0) }, uniquingKeysWith: { _, last in last }),
        lastID: notes.map(\.id).max() ?? 0,
        generator: SeededGenerator(seed: seed)
      )
    )
    self.latency = latency
    self.latencies = latencies
    self.failures = failures
    self.clock = clock
    self.now = now
  }

  /// How many calls of each operation the service has received.
  public var callCounts: [NotesOperation: Int] {
    state.withLock(announcingTo: self) { $0.calls }
  }

  // MARK: - NotesService

  /// All notes, oldest first, after the call's latency.
  ///
  /// - Returns: Every note, ordered by identifier.
  /// - Throws: ``InjectedFailure`` when a failure rule picks the call.
  public func fetchNotes() async throws -> [Note] {
    try await call(.fetchNotes) { state in state.notes.values.sorted { $0.id < $1.id } }
  }

  /// One note, after the call's latency.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil` if there is none.
  /// - Throws: ``InjectedFailure`` when a failure rule picks the call.
  public func fetchNote(id: Note.ID) async throws -> Note? {
    try await call(.fetchNote) { state in state.notes[id] }
  }

  /// Creates a note with the next identifier, after the call's latency.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note.
  /// - Throws: ``InjectedFailure`` when a failure rule picks the call.
  public func createNote(title: String, body: String) async throws -> Note {
    let date = now()
    return try await call(.createNote) { state in
      state.lastID += 1
      let note = Note(id: state.lastID, title: title, body: body, createdAt: date)
      state.notes[note.id] = note
      return note
    }
  }

  /// Changes a note, after the call's latency.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: The changed note.
  /// - Throws: ``NoteNotFound``; ``InjectedFailure`` when a failure rule picks the call.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    let date = now()
    return try await call(.updateNote) { state in
      guard var note = state.notes[id] else { throw NoteNotFound(id: id) }
      note.title = title
      note.body = body
      note.updatedAt = date
      state.notes[id] = note
      return note
    }
  }

  /// Deletes a note, after the call's latency.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: ``NoteNotFound``; ``InjectedFailure`` when a failure rule picks the call.
  public func deleteNote(id: Note.ID) async throws {
    try await call(.deleteNote) { state in
      guard state.notes.removeValue(forKey: id) != nil else { throw NoteNotFound(id: id) }
    }
  }

  // MARK: - Calls

  /// Counts the call, draws its latency and fate, waits, then applies `change` unless it fails.
  private func call<Answer: Sendable>(
    _ operation: NotesOperation,
    change: @Sendable (inout State) throws -> Answer
  ) async throws -> Answer {
    let (wait, failure) = state.withLock(announcingTo: self) { state in
      state.calls[operation, default: 0] += 1
      let number = state.calls[operation, default: 0]
      let wait = duration(for: latencies[operation] ?? latency, using: &state.generator)
      let fails = failures.contains { failure in
        switch failure.rule {
        case .call(let failing, let failingOperation):
          return failingOperation == operation && failing == number
        case .probability(let probability, let failingOperation):
          guard failingOperation == nil || failingOperation == operation else { return false }
          return state.generator.nextUnit() < probability
        }
      }
      return (wait, fails ? InjectedFailure(operation: operation, call: number) : nil)
    }
    if wait > .zero { try await clock.sleep(for: wait) }
    if let failure { throw failure }
    return try state.withLock(announcingTo: self) { state in try change(&state) }
  }

  private func duration(for latency: Latency, using generator: inout SeededGenerator) -> Duration {
    switch latency {
    case .none: return .zero
    case .fixed(let duration): return duration
    case .random(let range):
      let low = range.lowerBound / .seconds(1)
      let high = range.upperBound / .seconds(1)
      return .seconds(low + (high - low) * generator.nextUnit())
    }
  }
}

/// The error an ``InMemoryNotesService`` throws for a call its failure rules pick.
public struct InjectedFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// The operation of the failed call.
  public let operation: NotesOperation
  /// Which call of that operation it was, from 1.
  public let call: Int

  /// Creates the error.
  ///
  /// - Parameters:
  ///   - operation: The operation of the failed call.
  ///   - call: Which call of that operation it was, from 1.
  public init(operation: NotesOperation, call: Int) {
    self.operation = operation
    self.call = call
  }

  /// `injected failure: call 2 of updateNote`.
  public var description: String { "injected failure: call \(call) of \(operation)" }
}
