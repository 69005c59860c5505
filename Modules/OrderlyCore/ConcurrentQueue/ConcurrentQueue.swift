/// A queue that admits jobs in the order they were enqueued and runs up to `limit` of them at
/// once, with barriers that run alone.
///
/// Jobs are *admitted* in enqueue order (FIFO admission): a job is given a slot when fewer than
/// ``limit`` jobs run and every job enqueued before it has been given one. Admitted jobs run
/// concurrently, so the first lines of two jobs admitted one after the other may execute in
/// either order, and jobs may *end* in any order. A barrier,
/// enqueued with ``enqueueBarrier(name:priority:isolation:operation:)``, waits for the running
/// jobs to end, runs alone, and then lets the line go on. With `limit: 1` the queue behaves
/// exactly like a ``SerialQueue``: the same engine runs both.
///
/// ```swift
/// let downloads = ConcurrentQueue(name: "downloads", limit: 4)
/// for url in urls {
///   downloads.enqueue { try await fetch(url) }   // at most 4 at once, started in order
/// }
/// downloads.enqueueBarrier { try await index.rebuild() }  // after those, alone
/// try await downloads.waitUntilIdle()
/// ```
///
/// Submission, cancellation and events work as on ``SerialQueue``: ``enqueue(name:priority:isolation:operation:)``
/// runs a job like `Task { }`, ``enqueueDetached(name:priority:operation:)-77usp`` like
/// `Task.detached { }` without a task per job, and ``enqueueAndWait(name:isolation:operation:)``
/// in the caller's task. A pending job that is cancelled leaves the line at once and its awaiter
/// resumes with `CancellationError`; a running job sees `Task.isCancelled`.
///
/// ## Limit
///
/// Change the limit while the queue runs with ``setLimit(_:)``. Raising it starts waiting jobs
/// at once; lowering it stops nothing that runs, and the next job starts once fewer than the new
/// limit run. A limit of 0 pauses the queue: jobs wait until it is raised.
///
/// ## Reentrancy
///
/// A job that waits for work on its own queue may deadlock (when every slot is held by such a
/// job, or behind a barrier), so it throws ``QueueError/reentrantWait(queue:)`` at once, for any
/// limit, as on a ``SerialQueue``. Enqueuing without waiting from inside a job is fine.
///
/// ## Lifetime
///
/// Dropping the last reference to a queue drops no job: enqueued jobs still run, in order.
public final class ConcurrentQueue: AssertableQueue {
  let core: JobQueueCore

  /// Creates an empty, idle queue whose jobs run on Swift's cooperative pool.
  ///
  /// - Precondition: `limit` is 0 or more. A negative limit is a programming error that stops
  ///   the program with a message saying so.
  /// - Parameters:
  ///   - name: A name for events and error messages.
  ///   - limit: How many jobs may run at once; 1 makes a serial queue, 0 a paused one.
  public init(name: String = "ConcurrentQueue", limit: Int) {
    Self.checkLimit(limit)
    core = JobQueueCore(name: name, limit: limit, mergesLaneWork: false)
  }

  /// Creates an empty, idle queue whose jobs run on a task executor.
  ///
  /// - Precondition: `limit` is 0 or more. A negative limit is a programming error that stops
  ///   the program with a message saying so.
  /// - Parameters:
  ///   - name: A name for events and error messages.
  ///   - limit: How many jobs may run at once; 1 makes a serial queue, 0 a paused one.
  ///   - executor: Where the jobs run: a task executor such as ``DedicatedThreadExecutor`` (give
  ///     it `limit` threads to run blocking jobs side by side), or `nil` for Swift's cooperative
  ///     pool; see ``SerialQueue/init(name:executor:)``.
  @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
  public init(name: String = "ConcurrentQueue", limit: Int, executor: (any TaskExecutor)?) {
    Self.checkLimit(limit)
    core = JobQueueCore(
      name: name,
      limit: limit,
      executor: executor.map(TaskExecutorPreference.init),
      mergesLaneWork: false
    )
  }

  /// How many jobs may run at once.
  public var limit: Int { core.limit }

  /// Changes how many jobs may run at once, while the queue runs.
  ///
  /// Raising the limit starts waiting jobs at once, in order. Lowering it cancels and pauses
  /// nothing that runs: the next job starts once fewer than `newLimit` jobs run. A limit of 0
  /// pauses the queue.
  ///
  /// - Precondition: `newLimit` is 0 or more.
  /// - Parameter newLimit: The new limit.
  public func setLimit(_ newLimit: Int) {
    Self.checkLimit(newLimit)
    core.setLimit(newLimit)
  }

  private static func checkLimit(_ limit: Int) {
    precondition(
      limit >= 0,
      "ConcurrentQueue limit must be 0 or more (0 pauses the queue, 1 makes it serial); got \(limit)"
    )
  }

  // MARK: - Submitting work

  /// Enqueues a job that runs like `Task { }`, once every earlier job has started and a slot
  /// is free.
  ///
  /// Callable from synchronous code. The job runs in a new task that inherits the caller's
  /// priority, task-local values and actor isolation, as `Task { }` does.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's.
  ///   - isolation: The caller's isolation; leave the default. The operation is isolated to the
  ///     caller's actor as a `Task {}` closure is; passing another actor changes only where the
  ///     job's task starts, not where a nonisolated operation runs.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  @_specialize(exported:true,where Success == Void)
  public func enqueue<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext @_implicitSelfCapture operation:
      sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    core.enqueue(name: name, priority: priority, isolation: isolation, operation: operation)
  }

  /// Enqueues a job that runs like `Task.detached { }`, once every earlier job has started and a
  /// slot is free.
  ///
  /// No task is created per job: runner tasks, one per busy slot, run detached jobs back to back.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  @_specialize(exported:true,where Success == Void)
  public func enqueueDetached<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    @_implicitSelfCapture operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    core.enqueueDetached(name: name, priority: priority, operation: operation)
  }

  /// Enqueues a synchronous job that runs like `Task.detached { }`, once every earlier job has
  /// started and a slot is free.
  ///
  /// Runner tasks call synchronous jobs with no async frame, as a `DispatchQueue` calls its
  /// blocks; order, cancellation, events, ``isCurrent`` and priority are as for the async
  /// overload. A closure with no `await` in it picks this overload; one that awaits picks the
  /// async one (see ``SerialQueue``'s synchronous `enqueueDetached`).
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work; it cannot suspend.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  @_specialize(exported:true,where Success == Void)
  public func enqueueDetached<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    @_implicitSelfCapture operation: sending @escaping () throws -> Success
  ) -> QueuedTask<Success> {
    core.enqueueDetached(name: name, priority: priority, synchronous: operation)
  }

  /// Runs a synchronous closure once every earlier job has started and a slot is free, with no
  /// handle: the queue's counterpart of `DispatchQueue.async(execute:)`.
  ///
  /// As ``SerialQueue/execute(_:)``: the closure keeps its place in the queue's order with every
  /// other kind of job (barriers included), has no handle, result, name or priority of its own,
  /// is dropped unrun by ``cancelAll()`` if it has not started, reports events only while
  /// someone listens, and sees ``isCurrent`` as `true`. Here each closure takes a slot of its
  /// own, so closures run side by side up to ``limit``, as jobs do; what it saves is the handle,
  /// the stored result and the task-local binding of a detached job.
  ///
  /// - Parameter work: The closure; it cannot suspend.
  public func execute(_ work: sending @escaping () -> Void) {
    core.execute(work)
  }

  /// Waits for this job's turn and a free slot, then runs it in the caller's task.
  ///
  /// - Important: Calling this from inside a job of the same queue throws
  ///   ``QueueError/reentrantWait(queue:)`` at once (see Reentrancy above).
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The job's work.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw, unchanged; `CancellationError` if the caller's task was
  ///   cancelled before the job started; ``QueueError`` on a reentrant wait.
  @_specialize(exported:true,where Success == Void)
  public func enqueueAndWait<Success>(
    name: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    try await core.enqueueAndWait(name: name, isolation: isolation, operation: operation)
  }

  /// Enqueues a barrier: a job that waits for every running job to end, runs alone, and then
  /// lets the jobs behind it start.
  ///
  /// Like ``enqueue(name:priority:isolation:operation:)``, it runs in a new task that inherits
  /// the caller's context. Jobs enqueued after the barrier do not start before it ends, even if
  /// slots are free.
  ///
  /// - Parameters:
  ///   - name: A name for the barrier, shown in ``events``.
  ///   - priority: The priority of its task; `nil` inherits the caller's.
  ///   - isolation: The actor it runs on; leave the default, the caller's isolation.
  ///   - operation: The barrier's work.
  /// - Returns: A handle to await or cancel the barrier. A barrier cancelled before it starts
  ///   leaves the line and the jobs behind it go on.
  @discardableResult
  @_specialize(exported:true,where Success == Void)
  public func enqueueBarrier<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext @_implicitSelfCapture operation:
      sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    core.enqueue(
      name: name,
      priority: priority,
      isBarrier: true,
      isolation: isolation,
      operation: operation
    )
  }

  /// Enqueues a job that runs like `Task { }` once every earlier job has started and fewer than
  /// `count` jobs of the queue run.
  ///
  /// Unlike a barrier, the job holds no later job back once it runs. The app modules build their
  /// admission rules on it: a `TaskStore` task under `.enqueue` starts when no task of its key
  /// runs (`count` 1), one under `.concurrent(limit:)` when fewer than its limit do.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's.
  ///   - count: How few jobs must run for this one to start; 1 or more.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job.
  @discardableResult
  package func enqueue<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    startingWhenFewerThan count: Int,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext @_implicitSelfCapture operation:
      sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    core.enqueue(
      name: name,
      priority: priority,
      startsBelow: max(1, count),
      isolation: isolation,
      operation: operation
    )
  }

  /// Enqueues a barrier and runs it in the caller's task once it has the queue to itself.
  ///
  /// - Parameters:
  ///   - name: A name for the barrier, shown in ``events``.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The barrier's work.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw; `CancellationError` if the caller's task was cancelled
  ///   before the barrier started; ``QueueError`` when called from inside a job of this queue.
  @_specialize(exported:true,where Success == Void)
  public func enqueueBarrierAndWait<Success>(
    name: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    try await core.enqueueAndWait(
      name: name,
      isBarrier: true,
      isolation: isolation,
      operation: operation
    )
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  public var _engine: QueueEngine { QueueEngine(core: core) }
}
