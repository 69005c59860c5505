/// A queue that starts jobs on an actor in the order they were enqueued, from synchronous code.
///
/// An actor runs one piece of code at a time, but work sent to it with `Task { await actor.x() }`
/// arrives in no guaranteed order, and an actor lets higher-priority work in first. An
/// `ActorQueue` fixes the order of *starts*: each job begins, isolated to the actor, only after
/// every job enqueued before it has begun, whatever their priorities.
///
/// ```swift
/// actor Counter {
///   private var count = 0
///   private let queue = ActorQueue<Counter>()
///
///   nonisolated func increment() {
///     queue.enqueue(on: self) { counter in counter.count += 1 }  // from synchronous code
///   }
/// }
/// ```
///
/// ## Reentrancy
///
/// Jobs behave like actor methods: the code between two suspension points runs without
/// interruption, and when a job suspends, the next job may start. So starts are ordered, ends are
/// not. A job may enqueue on, and await, its own queue without deadlock, since the awaited job
/// only waits for earlier jobs to *start*. Use a ``SerialQueue`` when each job must end before
/// the next begins.
///
/// ## No set-up to forget
///
/// The actor is an argument of every call, so there is nothing to adopt in an initializer and
/// no way to enqueue without one: forgetting it is a compile error. The queue keeps no actor
/// alive. A pending job keeps its actor alive until it has run, exactly as
/// `Task { await actor.work() }` would.
///
/// ## Several actors on one queue
///
/// One queue may serve several actors of the same type. Jobs are admitted in enqueue order,
/// and the order of starts holds *per actor*: on any one actor, each job's code up to its first
/// suspension runs before the next job's. Across different actors there is no such order: the
/// turn passes on as soon as a job begins, and jobs on different actors then run in parallel, so
/// their first lines may run in either order. Use one queue per actor, or a ``SerialQueue``,
/// when work on different actors must happen in a fixed order.
///
/// ## Cancellation
///
/// A job cancelled before it starts never runs and its awaiter resumes with `CancellationError`;
/// the jobs behind it move up. A running job sees `Task.isCancelled`.
public final class ActorQueue<ActorType: Actor>: OrderlyQueue {
  let core: JobQueueCore

  /// Creates an empty queue.
  ///
  /// - Parameter name: A name for events.
  public init(name: String = "ActorQueue") {
    core = JobQueueCore(name: name, limit: 1, slotRelease: .atStart)
  }

  /// Enqueues a job that runs isolated to `actor`, in a new task, once every earlier job has
  /// started.
  ///
  /// Callable from synchronous, nonisolated code. The job's task inherits the caller's
  /// task-local values and, unless `priority` is given, its priority; the priority never changes
  /// the start order.
  ///
  /// - Parameters:
  ///   - actor: The actor the job runs on; passed to `operation` as its isolated parameter.
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's.
  ///   - operation: The job's work, isolated to `actor`.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueue<Success: Sendable>(
    on actor: ActorType,
    name: String? = nil,
    priority: TaskPriority? = nil,
    operation: @escaping @Sendable (isolated ActorType) async throws -> Success
  ) -> QueuedTask<Success> {
    let node = core.admitTurn(
      named: name,
      priority: (priority ?? Task.currentPriority).rawValue
    )
    let task = Task(priority: priority) { [core] () async throws -> Success in
      // Its parent frame is the caller's job, if any (inherited): cycles across queues are seen.
      try await Self.run(
        node,
        core: core,
        on: actor,
        callersTask: false,
        operation
      )
    }
    return QueuedTask(backing: .attached(task, node), owner: core)
  }

  /// Waits for every earlier job to start, then runs `operation` isolated to `actor` in the
  /// caller's task, and returns its result.
  ///
  /// May be called from inside a job of this queue: it waits only for earlier jobs to start,
  /// and the calling job has started already.
  ///
  /// - Parameters:
  ///   - actor: The actor the job runs on.
  ///   - name: A name for the job, shown in ``events``.
  ///   - operation: The job's work, isolated to `actor`.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw; `CancellationError` if the caller's task was cancelled
  ///   before the job started (it then never runs).
  public func enqueueAndWait<Success: Sendable>(
    on actor: ActorType,
    name: String? = nil,
    operation: @Sendable (isolated ActorType) async throws -> Success
  ) async throws -> Success {
    try Task.checkCancellation()
    let node = core.admitTurn(named: name, priority: Task.currentPriority.rawValue)
    return try await Self.run(
      node,
      core: core,
      on: actor,
      callersTask: true,
      operation
    )
  }

  /// Runs a job on `actor` once its turn comes, and gives the turn to the next job as soon as
  /// it has begun.
  private static func run<Success: Sendable>(
    _ node: TurnNode,
    core: JobQueueCore,
    on actor: isolated ActorType,
    callersTask: Bool,
    _ operation: @Sendable (isolated ActorType) async throws -> Success
  ) async throws -> Success {
    try await core.runTurn(node, callersTask: callersTask) {
      try await operation(actor)
    }
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  public var _engine: QueueEngine { QueueEngine(core: core) }
}
