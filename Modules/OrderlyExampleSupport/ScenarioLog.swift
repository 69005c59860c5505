import Synchronization

/// The scenario's "UI messages": each task's start and finish, in the order they happened.
///
/// Each line is printed as it is written, so an example's output reads as a live log.
public final class ScenarioLog: Sendable {
  /// One line of the log.
  public enum Entry: Sendable, Equatable {
    /// A task started.
    case start(task: Int)
    /// A task finished.
    case finish(task: Int)
    /// A task failed.
    case error(task: Int)
  }

  private let entries = Mutex<[Entry]>([])
  private let echo: Bool

  /// Creates an empty log.
  ///
  /// - Parameter echo: Whether to print each line as it is written.
  public init(echo: Bool = true) {
    self.echo = echo
  }

  /// Writes that a task started.
  ///
  /// - Parameter task: The task.
  public func start(_ task: ScenarioTask) {
    write(.start(task: task.number), "  start  \(task)")
  }

  /// Writes that a task finished.
  ///
  /// - Parameters:
  ///   - task: The task.
  ///   - answer: What it returned.
  public func finish(_ task: ScenarioTask, answer: String) {
    write(.finish(task: task.number), "  finish \(task): \(answer)")
  }

  /// Writes that a task failed.
  ///
  /// - Parameters:
  ///   - task: The task.
  ///   - error: What it threw.
  public func fail(_ task: ScenarioTask, error: any Error) {
    write(.error(task: task.number), "  error  \(task): \(error)")
  }

  private func write(_ entry: Entry, _ line: String) {
    entries.withLock { entries in
      entries.append(entry)
      if echo { print(line) }
    }
  }

  /// Every entry so far, in order.
  public var all: [Entry] {
    entries.withLock { $0 }
  }

  /// `in order` when tasks ended in the order of their numbers, else the first place they did
  /// not, as in `out of order: task 4 finished before task 1`.
  public var verdict: String {
    var ended: [Int] = []
    for entry in all {
      switch entry {
      case .finish(let task), .error(let task): ended.append(task)
      case .start: break
      }
    }
    var waiting = Set(ended)
    for task in ended {
      waiting.remove(task)
      if let earlier = waiting.filter({ $0 < task }).min() {
        return "out of order: task \(task) finished before task \(earlier)"
      }
    }
    return "in order"
  }
}
