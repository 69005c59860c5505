/// One of the notes operations the source's demo fires.
public enum NotesOperation: String, Sendable {
  /// Fetch every note.
  case fetchNotes
  /// Fetch one note.
  case fetchNote
  /// Create a note.
  case addNote
  /// Change a note.
  case updateNote
  /// Delete a note.
  case deleteNote
}

/// A numbered call in the seven-task scenario, with how long the slow service takes for it.
public struct ScenarioTask: Sendable, CustomStringConvertible {
  /// The task's number, 1 to 7: the order the user fired it in.
  public let number: Int
  /// What the task asks of the service.
  public let operation: NotesOperation
  /// How long the service takes to answer it.
  public let latency: Duration

  /// Creates a task.
  ///
  /// - Parameters:
  ///   - number: The task's number.
  ///   - operation: What it asks of the service.
  ///   - latency: How long the service takes.
  public init(number: Int, operation: NotesOperation, latency: Duration) {
    self.number = number
    self.operation = operation
    self.latency = latency
  }

  /// The seven calls of the source's notes screen, in the order the user fires them.
  ///
  /// Their latencies vary so that, fired all at once, later calls finish before earlier ones.
  public static let seven: [ScenarioTask] = [
    ScenarioTask(number: 1, operation: .fetchNotes, latency: .milliseconds(120)),
    ScenarioTask(number: 2, operation: .fetchNote, latency: .milliseconds(40)),
    ScenarioTask(number: 3, operation: .addNote, latency: .milliseconds(90)),
    ScenarioTask(number: 4, operation: .fetchNotes, latency: .milliseconds(20)),
    ScenarioTask(number: 5, operation: .updateNote, latency: .milliseconds(70)),
    ScenarioTask(number: 6, operation: .fetchNotes, latency: .milliseconds(30)),
    ScenarioTask(number: 7, operation: .deleteNote, latency: .milliseconds(10)),
  ]

  /// `task 3 (addNote)`.
  public var description: String { "task \(number) (\(operation.rawValue))" }
}
