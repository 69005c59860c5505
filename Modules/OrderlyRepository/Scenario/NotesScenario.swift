import Foundation

/// Seed 000's seven-call notes scenario, run under one of four strategies, with the facts to
/// show what each strategy does to the order of the answers.
///
/// Every run uses a fresh ``InMemoryNotesService`` with the same seeded latency and failures, so
/// the strategies meet the same service and a seed repeats exactly.
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

  /// Seed 000's seven calls, in the order the screen makes them.
  public static var calls: [NotesOperation] {
    [.fetchNotes, .fetchNote, .createNote, .fetchNotes, .updateNote, .fetchNotes, .deleteNote]
  }

  /// The seed of the service's latency and failures.
  public let seed: UInt64
  /// The range each call's latency is drawn from.
  public let latency: ClosedRange<Duration>
  /// The call (1 to 7) that fails, if any.
  public let failingCall: Int?
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
  }

  /// Runs the seven calls under `strategy` and reports what happened.
  ///
  /// Like seed 000's screen, it runs on the main actor and makes each call of the concurrent
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
          try await Self.perform(operation, on: service)
        }
      }
    case .unordered:
      for (index, operation) in calls {
        tasks.append(
          Task {
            _ = try? await log.track(operation, call: index + 1, summary: { $0 }) {
              try await Self.perform(operation, on: service)
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
      let repository = NotesRepository(service: service, log: log)
      for (_, operation) in calls {
        tasks.append(Task { try? await Self.perform(operation, on: repository) })
      }
    }
    for task in tasks { await task.value }
    return ScenarioRun(strategy: strategy, seed: seed, entries: log.entries)
  }

  private func makeService() -> InMemoryNotesService {
    var failures: [InMemoryNotesService.Failure] = []
    if let failingCall, (1...Self.calls.count).contains(failingCall) {
      let operation = Self.calls[failingCall - 1]
      let number = Self.calls.prefix(failingCall).filter { $0 == operation }.count
      failures.append(.call(number, of: operation))
    }
    return InMemoryNotesService(
      notes: [
        Note(id: 1, title: "groceries", body: "milk", createdAt: .init(timeIntervalSince1970: 0)),
        Note(id: 2, title: "ideas", body: "", createdAt: .init(timeIntervalSince1970: 0)),
      ],
      latency: .random(latency),
      failures: failures,
      seed: seed,
      clock: clock
    )
  }

  /// One of the seven calls straight at the service, with a summary of its answer.
  static func perform(_ operation: NotesOperation, on service: some NotesService) async throws
    -> String
  {
    switch operation {
    case .fetchNotes: return "\(try await service.fetchNotes().count) notes"
    case .fetchNote: return "note 1: \(try await service.fetchNote(id: 1)?.title ?? "none")"
    case .createNote: return "note \(try await service.createNote(title: "todo", body: "").id)"
    case .updateNote:
      return "note \(try await service.updateNote(id: 1, title: "shopping", body: "").id)"
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

/// Seed 000's first attempt: an actor repository. Each method awaits the service, and the actor
/// lets the next call in at that await.
private actor ActorNotesRepository {
  let service: InMemoryNotesService
  let log: ActivityLog

  init(service: InMemoryNotesService, log: ActivityLog) {
    self.service = service
    self.log = log
  }

  func perform(_ operation: NotesOperation, call: Int) async throws {
    _ = try await log.track(operation, call: call, summary: { $0 }) {
      try await NotesScenario<ContinuousClock>.perform(operation, on: service)
    }
  }
}
