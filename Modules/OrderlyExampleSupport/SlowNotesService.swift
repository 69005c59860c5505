/// An error from the slow notes service.
public struct NotesServiceError: Error, Sendable, CustomStringConvertible {
  /// The task that failed.
  public let task: Int

  /// Creates the error for a task.
  ///
  /// - Parameter task: The number of the task that failed.
  public init(task: Int) {
    self.task = task
  }

  /// `the service rejected task 5`.
  public var description: String { "the service rejected task \(task)" }
}

/// A fake notes service that answers each call after the call's latency.
///
/// Time comes from an injected clock, so tests can run the scenario without waiting.
public struct SlowNotesService: Sendable {
  private let clock: any Clock<Duration>
  private let failing: Set<Int>

  /// Creates a service.
  ///
  /// - Parameters:
  ///   - clock: The clock to wait on; real time by default.
  ///   - failing: Numbers of the tasks the service rejects with ``NotesServiceError``.
  public init(clock: any Clock<Duration> = ContinuousClock(), failing: Set<Int> = []) {
    self.clock = clock
    self.failing = failing
  }

  /// Answers a call after its latency.
  ///
  /// - Parameter task: The call.
  /// - Returns: A short description of the answer, such as `3 notes`.
  /// - Throws: ``NotesServiceError`` for a failing task; `CancellationError` if cancelled while
  ///   waiting.
  public func perform(_ task: ScenarioTask) async throws -> String {
    try await clock.sleep(for: task.latency)
    if failing.contains(task.number) { throw NotesServiceError(task: task.number) }
    switch task.operation {
    case .fetchNotes: return "\(task.number + 2) notes"
    case .fetchNote: return "note #\(task.number)"
    case .addNote: return "added note #\(task.number)"
    case .updateNote: return "updated note #\(task.number)"
    case .deleteNote: return "deleted note #\(task.number)"
    }
  }

  /// Performs a call and writes its start and its finish (or error) to `log`, like the source's
  /// UI messages.
  ///
  /// - Parameters:
  ///   - task: The call.
  ///   - log: Where to write what happens.
  /// - Returns: The answer, or `nil` if the call failed.
  @discardableResult
  public func run(_ task: ScenarioTask, log: ScenarioLog) async -> String? {
    log.start(task)
    do {
      let answer = try await perform(task)
      log.finish(task, answer: answer)
      return answer
    } catch {
      log.fail(task, error: error)
      return nil
    }
  }
}
