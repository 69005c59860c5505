/// A queue that starts `@MainActor` jobs in the order they were enqueued, from any code.
///
/// The main-actor form of ``ActorQueue``, with the same guarantees: jobs start on the main actor
/// in enqueue order whatever their priorities, the code up to a job's first suspension runs
/// before the next job starts, and a job may await the same queue without deadlock.
///
/// ```swift
/// nonisolated func didReceive(_ message: Message) {
///   MainActorQueue.shared.enqueue { model.apply(message) }  // applied in arrival order
/// }
/// ```
///
/// Use ``shared`` for one app-wide line, or create queues for independent lines of work (jobs of
/// different queues are not ordered with each other).
public final class MainActorQueue: OrderlyQueue {
  /// An app-wide queue.
  public static let shared = MainActorQueue(name: "MainActorQueue.shared")

  let core: JobQueueCore

  /// Creates an empty queue.
  ///
  /// - Parameter name: A name for events.
  public init(name: String = "MainActorQueue") {
    core = JobQueueCore(name: name, limit: 1, slotRelease: .atStart)
  }

  /// Enqueues a job that runs on the main actor, in a new task, once every earlier job has
  /// started.
  ///
  /// Callable from synchronous code on any thread.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's. It never changes
  ///     the start order.
  ///   - operation: The job's work, on the main actor.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueue<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    @_implicitSelfCapture operation: @escaping @MainActor () async throws -> Success
  ) -> QueuedTask<Success> {
    let node = core.admitTurn(
      named: name,
      priority: (priority ?? Task.currentPriority).rawValue
    )
    let task = Task(priority: priority) { @MainActor [core] () async throws -> Success in
      // Its parent frame is the caller's job, if any (inherited): cycles across queues are seen.
      try await core.runTurn(node, callersTask: false, operation: operation)
    }
    return QueuedTask(backing: .attached(task, node), owner: core)
  }

  /// Waits for every earlier job to start, then runs `operation` on the main actor in the
  /// caller's task, and returns its result.
  ///
  /// May be called from inside a job of this queue without deadlock.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - operation: The job's work, on the main actor.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw; `CancellationError` if the caller's task was cancelled
  ///   before the job started (it then never runs).
  public func enqueueAndWait<Success: Sendable>(
    name: String? = nil,
    operation: @MainActor () async throws -> Success
  ) async throws -> Success {
    try Task.checkCancellation()
    let node = core.admitTurn(named: name, priority: Task.currentPriority.rawValue)
    return try await Self.run(
      node,
      core: core,
      callersTask: true,
      operation
    )
  }

  @MainActor
  private static func run<Success: Sendable>(
    _ node: TurnNode,
    core: JobQueueCore,
    callersTask: Bool,
    _ operation: @MainActor () async throws -> Success
  ) async throws -> Success {
    try await core.runTurn(node, callersTask: callersTask, operation: operation)
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  public var _engine: QueueEngine { QueueEngine(core: core) }
}
