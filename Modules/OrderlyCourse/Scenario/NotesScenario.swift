import Foundation
internal import OrderlyCore
public import OrderlyRepository
import Synchronization

/// The notes screen's seven-call scenario, run under one of four strategies, with the facts to
/// show what each strategy does to the order of the answers.
///
/// Every run uses a fresh ``InMemoryNotesService``. Each call's latency belongs to the call's
/// number, not to the moment it reaches the service: the seed shuffles seven latencies spread
/// evenly over the range (at least a sixth of the range apart), and call *n* always waits the
/// *n*-th. So the strategies meet the same latencies, a seed names one run, and on any range
/// wider than scheduling noise the same seed gives the same finish order every time.
///
/// ```swift
/// let scenario = NotesScenario(seed: 42, latency: .milliseconds(20) ... .milliseconds(150))
/// let run = await scenario.run(.serial)
/// print(run.verdict)  // in order
/// ```
public struct NotesScenario<C: Clock>: Sendable where C.Duration == Duration {
  /// How the seven calls are made.
  public enum Strategy: String, Sendable, CaseIterable, Codable, CustomStringConvertible {
    /// One task awaits each call before making the next.
    case sequential
    /// Each call in its own `Task {}`, straight at the service.
    case unordered
    /// Each call in its own `Task {}`, through an actor repository (reentrant at every await).
    case actor
    /// Each call in its own `Task {}`, through ``NotesRepository`` and its serial queue.
    case serial

    /// What the strategy does, in a few words.
    public var summary: String {
      switch self {
      case .sequential: "one task awaits each call in turn"
      case .unordered: "one Task {} per call, straight at the service"
      case .actor: "one Task {} per call, through an actor repository"
      case .serial: "one Task {} per call, through NotesRepository (SerialQueue)"
      }
    }

    /// The strategy's name, as in `serial`.
    public var description: String { rawValue }
  }

  /// The notes screen's seven calls, in the order the screen makes them.
  public static var calls: [NotesOperation] {
    [.fetchNotes, .fetchNote, .createNote, .fetchNotes, .updateNote, .fetchNotes, .deleteNote]
  }

  /// The seed of the service's latency and failures.
  public let seed: UInt64
  /// The range each call's latency is drawn from.
  public let latency: ClosedRange<Duration>
  /// The call (1 to 7) that fails, if any.
  public let failingCall: Int?
  /// Each call's latency, by call number (the first is call 1's).
  public let latencies: [Duration]
  private let clock: C

  /// Creates the scenario.
  ///
  /// - Parameters:
  ///   - seed: The seed of the service's random latency.
  ///   - latency: The range each call's latency is drawn from.
  ///   - failingCall: The call, 1 to 7, that the service fails; `nil` for none.
  ///   - clock: The clock the service waits on and the timeline is measured with.
  public init(
    seed: UInt64,
    latency: ClosedRange<Duration>,
    failingCall: Int? = nil,
    clock: C
  ) {
    self.seed = seed
    self.latency = latency
    self.failingCall = failingCall
    self.clock = clock
    let count = Self.calls.count
    let step = (latency.upperBound - latency.lowerBound) / (count - 1)
    var slots = Array(0..<count)
    var generator = SeededGenerator(seed: seed)
    slots.shuffle(using: &generator)
    self.latencies = slots.map { latency.lowerBound + step * $0 }
  }

  /// Runs the seven calls under `strategy` and reports what happened.
  ///
  /// Like the notes screen, it runs on the main actor and makes each call of the concurrent
  /// strategies from its own `Task {}`, created in call order.
  ///
  /// - Parameter strategy: How the calls are made.
  /// - Returns: The activity log, each call's span on the clock, and the verdict.
  @MainActor
  public func run(_ strategy: Strategy) async -> ScenarioRun {
    let service = makeService()
    let log = ActivityLog(clock: clock)
    let calls = Array(Self.calls.enumerated())
    var tasks: [Task<Void, Never>] = []
    switch strategy {
    case .sequential:
      for (index, operation) in calls {
        _ = try? await log.track(operation, call: index + 1, summary: { $0 }) {
          try await service.perform(operation, call: index + 1)
        }
      }
    case .unordered:
      for (index, operation) in calls {
        tasks.append(
          Task {
            _ = try? await log.track(operation, call: index + 1, summary: { $0 }) {
              try await service.perform(operation, call: index + 1)
            }
          }
        )
      }
    case .actor:
      let repository = ActorNotesRepository(service: service, log: log)
      for (index, operation) in calls {
        tasks.append(Task { try? await repository.perform(operation, call: index + 1) })
      }
    case .serial:
      // The repository numbers calls in the order they reach it: here, the order of the tasks.
      // It makes them one at a time, so the service sees them in that order too.
      let repository = NotesRepository(service: service, log: log)
      for (_, operation) in calls {
        tasks.append(Task { try? await Self.perform(operation, on: repository) })
      }
    }
    for task in tasks { await task.value }
    let entries = log.entries
    return ScenarioRun(
      strategy: strategy,
      seed: seed,
      entries: entries,
      consequences: await Self.findConsequences(in: entries, failingCall: failingCall)
    )
  }

  /// A fresh service for one run: the two notes the screen starts with, and this scenario's
  /// latencies and failing call, by call number.
  ///
  /// - Returns: The service; make the calls with ``ScenarioNotesService/perform(_:log:isolation:)`` or
  ///   through a ``NotesRepository``.
  public func makeService() -> ScenarioNotesService {
    ScenarioNotesService(
      base: InMemoryNotesService(notes: Self.startingNotes, clock: clock),
      latencies: latencies,
      failingCall: failingCall,
      clock: clock
    )
  }

  /// The notes the screen starts with: 1 "groceries" and 2 "ideas".
  static var startingNotes: [Note] {
    [
      Note(id: 1, title: "groceries", body: "milk", createdAt: .init(timeIntervalSince1970: 0)),
      Note(id: 2, title: "ideas", body: "", createdAt: .init(timeIntervalSince1970: 0)),
    ]
  }

  /// What the seven calls answer when each waits for the one before: the answers a screen
  /// expects.
  ///
  /// - Parameter failingCall: The call, 1 to 7, that fails (and so changes nothing), as in the
  ///   run being compared; `nil` for none.
  /// - Returns: Each call's summary, by call number (the first is call 1's); the failing call's
  ///   is its error.
  public static func answersInOrder(failingCall: Int? = nil) async -> [String] {
    let service = InMemoryNotesService(notes: startingNotes)
    var answers: [String] = []
    for (index, operation) in calls.enumerated() {
      if index + 1 == failingCall {
        // Numbered as the scenario's service numbers it: the n-th call of that operation.
        let number = calls.prefix(index + 1).filter { $0 == operation }.count
        answers.append("\(InjectedFailure(operation: operation, call: number))")
        continue
      }
      do {
        answers.append(try await perform(operation, on: service))
      } catch {
        answers.append("\(error)")
      }
    }
    return answers
  }

  /// What went wrong because calls ended out of order: each call whose answer differs from the
  /// answer it gives when the calls run in order.
  ///
  /// - Parameter entries: A run's activity log.
  /// - Returns: One sentence per call that answered differently, in call order, such as
  ///   `call 4 fetchNotes saw 2 notes; in order it would have seen 3 notes`.
  public func consequences(of entries: [ActivityEntry]) async -> [String] {
    await Self.findConsequences(in: entries, failingCall: failingCall)
  }

  /// Compares a run with the in-order run that has the same failing call: a failed call is
  /// part of the story in both, not a consequence of the order.
  static func findConsequences(in entries: [ActivityEntry], failingCall: Int?) async -> [String] {
    let expected = await answersInOrder(failingCall: failingCall)
    var sentences: [String] = []
    for entry in entries.sorted(by: { $0.call < $1.call }) {
      guard case .finish(let answer) = entry.kind, expected.indices.contains(entry.call - 1)
      else { continue }
      let wanted = expected[entry.call - 1]
      if answer != wanted {
        sentences.append(
          "call \(entry.call) \(entry.operation) saw \(answer); in order it would have seen "
            + wanted
        )
      }
    }
    return sentences
  }

  /// One of the seven calls straight at the service, with a summary of its answer.
  static func perform(_ operation: NotesOperation, on service: some NotesService) async throws
    -> String
  {
    switch operation {
    case .fetchNotes: return Note.count(try await service.fetchNotes().count)
    case .fetchNote:
      guard let note = try await service.fetchNote(id: 1) else { throw NoteNotFound(id: 1) }
      return note.summary
    case .createNote: return try await service.createNote(title: "todo", body: "").summary
    case .updateNote:
      return try await service.updateNote(id: 1, title: "shopping", body: "").summary
    case .deleteNote:
      try await service.deleteNote(id: 2)
      return "deleted note 2"
    }
  }

  /// One of the seven calls through the repository (which logs it itself).
  ///
  /// It stays on the caller's actor until the call has its place in line.
  static func perform(
    _ operation: NotesOperation,
    on repository: NotesRepository,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    switch operation {
    case .fetchNotes: _ = try await repository.notes()
    case .fetchNote: _ = try await repository.note(id: 1)
    case .createNote: _ = try await repository.create(title: "todo")
    case .updateNote: _ = try await repository.update(id: 1, title: "shopping")
    case .deleteNote: try await repository.delete(id: 2)
    }
  }
}

extension NotesScenario where C == ContinuousClock {
  /// Creates the scenario on real time.
  ///
  /// - Parameters:
  ///   - seed: The seed of the service's random latency.
  ///   - latency: The range each call's latency is drawn from.
  ///   - failingCall: The call, 1 to 7, that the service fails; `nil` for none.
  public init(seed: UInt64, latency: ClosedRange<Duration>, failingCall: Int? = nil) {
    self.init(seed: seed, latency: latency, failingCall: failingCall, clock: ContinuousClock())
  }
}

/// The serial task executor article's first attempt: an actor repository. Each method awaits the service, and the actor
/// lets the next call in at that await.
private actor ActorNotesRepository {
  let service: ScenarioNotesService
  let log: ActivityLog

  init(service: ScenarioNotesService, log: ActivityLog) {
    self.service = service
    self.log = log
  }

  func perform(_ operation: NotesOperation, call: Int) async throws {
    _ = try await log.track(operation, call: call, summary: { $0 }) {
      try await service.perform(operation, call: call)
    }
  }
}

/// The scenario's notes service: call number *n* waits the scenario's *n*-th latency, and fails
/// if it is the failing call, whatever order the calls arrive in.
///
/// Make one with ``NotesScenario/makeService()`` to write a strategy by hand, as the examples
/// do: ``perform(_:log:isolation:)`` makes one of the seven calls by its number and logs it. Calls made
/// through its `NotesService` methods (by a ``NotesRepository``, say) are numbered in the order
/// they arrive, which for a repository is the order they were made.
///
/// ```swift
/// let scenario = NotesScenario(seed: 7, latency: .milliseconds(20) ... .milliseconds(260))
/// let service = scenario.makeService()
/// let log = ActivityLog()
/// let tasks = (1...7).map { call in Task { try? await service.perform(call, log: log) } }
/// ```
public final class ScenarioNotesService: NotesService {
  let base: InMemoryNotesService
  let latencies: [Duration]
  let failingCall: Int?
  let clock: any Clock<Duration>
  private let arrivals = Mutex(0)

  init(
    base: InMemoryNotesService,
    latencies: [Duration],
    failingCall: Int?,
    clock: any Clock<Duration>
  ) {
    self.base = base
    self.latencies = latencies
    self.failingCall = failingCall
    self.clock = clock
  }

  /// Makes call number `call` of the seven, after its latency, and writes it to `log`.
  ///
  /// - Parameters:
  ///   - call: The call's number, 1 to 7 (see ``NotesScenario/calls``).
  ///   - log: Where its start and its finish or error are written.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Returns: A summary of the answer, as in `3 notes` or `note 1: groceries`.
  /// - Throws: ``InjectedFailure`` for the scenario's failing call; what the service threw.
  @discardableResult
  public func perform(
    _ call: Int,
    log: ActivityLog,
    isolation: isolated (any Actor)? = #isolation
  ) async throws -> String {
    let calls = NotesScenario<ContinuousClock>.calls
    let operation = calls[(call - 1) % calls.count]
    return try await log.track(operation, call: call, summary: { $0 }) {
      try await perform(operation, call: call)
    }
  }

  /// One of the seven calls, as call number `call`, with a summary of its answer.
  func perform(_ operation: NotesOperation, call: Int) async throws -> String {
    try await prepare(call: call, operation: operation)
    return try await NotesScenario<ContinuousClock>.perform(operation, on: base)
  }

  private func prepare(call: Int, operation: NotesOperation) async throws {
    if latencies.indices.contains(call - 1) { try await clock.sleep(for: latencies[call - 1]) }
    if call == failingCall {
      let number = NotesScenario<ContinuousClock>.calls.prefix(call).filter { $0 == operation }
        .count
      throw InjectedFailure(operation: operation, call: number)
    }
  }

  private func arrive(_ operation: NotesOperation) async throws {
    let call = arrivals.withLock(announcingTo: self) { count in
      count += 1
      return count
    }
    try await prepare(call: call, operation: operation)
  }

  /// All notes, as the arriving call's number; see ``perform(_:log:isolation:)``.
  ///
  /// - Returns: Every note, oldest first.
  /// - Throws: ``InjectedFailure`` if this is the failing call.
  public func fetchNotes() async throws -> [Note] {
    try await arrive(.fetchNotes)
    return try await base.fetchNotes()
  }

  /// One note, as the arriving call's number.
  ///
  /// - Parameter id: The note's identifier.
  /// - Returns: The note, or `nil`.
  /// - Throws: ``InjectedFailure`` if this is the failing call.
  public func fetchNote(id: Note.ID) async throws -> Note? {
    try await arrive(.fetchNote)
    return try await base.fetchNote(id: id)
  }

  /// Creates a note, as the arriving call's number.
  ///
  /// - Parameters:
  ///   - title: The title.
  ///   - body: The text.
  /// - Returns: The new note.
  /// - Throws: ``InjectedFailure`` if this is the failing call.
  public func createNote(title: String, body: String) async throws -> Note {
    try await arrive(.createNote)
    return try await base.createNote(title: title, body: body)
  }

  /// Changes a note, as the arriving call's number.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The new title.
  ///   - body: The new text.
  /// - Returns: The changed note.
  /// - Throws: ``InjectedFailure`` if this is the failing call; `NoteNotFound`.
  public func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    try await arrive(.updateNote)
    return try await base.updateNote(id: id, title: title, body: body)
  }

  /// Deletes a note, as the arriving call's number.
  ///
  /// - Parameter id: The note's identifier.
  /// - Throws: ``InjectedFailure`` if this is the failing call; `NoteNotFound`.
  public func deleteNote(id: Note.ID) async throws {
    try await arrive(.deleteNote)
    try await base.deleteNote(id: id)
  }
}
