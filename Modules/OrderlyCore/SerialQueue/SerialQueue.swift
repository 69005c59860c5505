/// A queue that runs asynchronous jobs one at a time, in the order they were enqueued.
///
/// A job starts only after the previous one has *finished*, across all of the previous job's
/// suspension points: unlike an actor, a `SerialQueue` never lets the next job in while the
/// current one awaits. Results are typed, errors reach whoever awaits the job unchanged, and a
/// failed job never stops the queue.
///
/// Submit work three ways (five, counting synchronous detached jobs and `execute`), mirroring Swift's own `Task` API and Dispatch's:
///
/// | call | like | runs the job |
/// |---|---|---|
/// | ``enqueue(name:priority:isolation:operation:)`` | `Task { }` | in a new task with the caller's priority, task-local values and actor isolation |
/// | ``enqueueDetached(name:priority:operation:)-63whl`` | `Task.detached { }` | on the queue's runner task, inheriting nothing |
/// | ``enqueueDetached(name:priority:operation:)-8aju8`` (a closure with no `await`) | `DispatchQueue.async` | on the runner task, called in a plain loop with no async frame: the cheapest path with a handle |
/// | ``execute(_:)`` (a synchronous closure, no handle) | `DispatchQueue.async` | on the runner task, with the closures enqueued beside it, in one loop: fire-and-forget at a closure's cost |
/// | ``enqueueAndWait(name:isolation:operation:)`` | `await` | in the caller's own task, once its turn comes |
///
/// ```swift
/// let queue = SerialQueue(name: "notes")
/// queue.enqueue { try await service.save(note) }          // from synchronous code
/// let notes = try await queue.enqueueAndWait { try await service.fetchAll() }
/// ```
///
/// ## Ordering
///
/// Every enqueue call takes its place in line synchronously, before it returns or suspends. Calls
/// from one producer keep their program order; calls from concurrent producers are linearized in
/// the order they took the queue's lock. Jobs start in that order and each one ends before the
/// next starts.
///
/// ## Cancellation
///
/// Cancelling a job that has not started (through its ``QueuedTask``, ``cancelAll()``, or by
/// cancelling the task awaiting ``enqueueAndWait(name:isolation:operation:)``) removes it from
/// the line in amortized O(1): it never runs and its awaiter resumes at once with
/// `CancellationError`. A running job sees `Task.isCancelled`, with one exception:
/// ``cancelAll()`` leaves an ``enqueueAndWait(name:isolation:operation:)`` job that has started
/// alone, because it runs in its caller's own task and a cancelled task stays cancelled after
/// the call returns (see ``OrderlyQueue/cancelAll()``).
///
/// ## Reentrancy
///
/// A job that waits for work on its own queue could only deadlock, so the queue detects it and
/// throws ``QueueError/reentrantWait(queue:)`` instead: a direct wait, a wait from a child task
/// or a `Task {}` started in the job while it runs, and cycles across queues. Two cases cannot
/// be seen and hang: a wait from a `Task.detached {}` started in the job (it inherits no
/// task-local values), and a job awaiting something only a later job provides (a continuation,
/// a signal). Enqueuing without waiting from inside a job is fine: the new job runs after the
/// current one.
///
/// ## Priority
///
/// A job enqueued at a higher priority, or a higher-priority task awaiting a job's `value`,
/// raises the running job and the jobs ahead of it to that priority, as awaiting a `Task` does.
///
/// - Important: Raising a job that already runs, or one that waits ahead, uses
///   `UnsafeCurrentTask.escalatePriority(to:)` and `Task.escalatePriority(to:)`, which Apple
///   systems have from macOS 26, iOS 26, tvOS 26, watchOS 26 and visionOS 26 (and Linux with
///   every toolchain this package supports). On earlier Apple systems only what Swift itself
///   escalates is raised: awaiting the `value` of a job submitted with `enqueue` raises that
///   job's own task; the jobs ahead of it and detached jobs keep their priority.
///
/// ## Lifetime
///
/// Dropping the last reference to a queue does not drop jobs already enqueued: they still run,
/// in order, as on a `DispatchQueue`, and the queue is freed after the last one ends.
public final class SerialQueue: AssertableQueue {
  let core: JobQueueCore

  /// Creates an empty, idle queue whose jobs run on Swift's cooperative pool.
  ///
  /// - Parameter name: A name for events and error messages.
  public init(name: String = "SerialQueue") {
    core = JobQueueCore(name: name, limit: 1)
  }

  /// Creates an empty, idle queue whose jobs run on a task executor.
  ///
  /// Task executors need macOS 15, iOS 18, tvOS 18, watchOS 11 or visionOS 2; on earlier
  /// systems use ``init(name:)``.
  ///
  /// - Parameters:
  ///   - name: A name for events and error messages.
  ///   - executor: Where the jobs run: a task executor such as ``DedicatedThreadExecutor`` for
  ///     jobs that block a thread, or `nil` for Swift's cooperative pool. Detached jobs run on
  ///     it; `enqueue` jobs and `enqueueAndWait` run with it as their executor preference, so
  ///     their nonisolated code runs there while code isolated to an actor still runs on the
  ///     actor. Order, cancellation, task-locals and priority are unchanged.
  @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
  public init(name: String = "SerialQueue", executor: (any TaskExecutor)?) {
    core = JobQueueCore(name: name, limit: 1, executor: executor.map(TaskExecutorPreference.init))
  }

  // MARK: - Submitting work

  /// Enqueues a job that runs like `Task { }`, after every job enqueued before it has ended.
  ///
  /// Callable from synchronous code. The job runs in a new task that inherits what `Task { }`
  /// inherits: the caller's priority, task-local values and actor isolation (a job enqueued from
  /// the main actor runs on the main actor).
  ///
  /// - Important: The job takes its place in line before this call returns, so two calls from
  ///   the same code run in the order written, which two `Task { }` calls do not guarantee.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's, as `Task` does.
  ///   - isolation: The caller's isolation; leave the default. The operation is isolated to the
  ///     caller's actor as a `Task {}` closure is; passing another actor changes only where the
  ///     job's task starts, not where a nonisolated operation runs.
  ///   - operation: The job's work. It sees `Task.isCancelled` if the job is cancelled while it
  ///     runs.
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

  /// Enqueues a job that runs like `Task.detached { }`, after every job enqueued before it.
  ///
  /// Callable from synchronous code. The job inherits nothing from the caller: no actor, no
  /// task-local values, no priority. No task is created for it: the queue's runner task runs
  /// detached jobs back to back, which makes this cheaper than `enqueue` (``execute(_:)``, with
  /// no handle, is the cheapest of all).
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work. It sees `Task.isCancelled` if the job is cancelled while it
  ///     runs.
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

  /// Enqueues a synchronous job that runs like `Task.detached { }`, after every job enqueued
  /// before it: the cheapest way to submit a state change and keep a handle to it.
  ///
  /// The queue's runner task calls a run of synchronous jobs in a plain loop, as a
  /// `DispatchQueue` calls its blocks: no async frame and no task switch per job. Everything
  /// else is as for the async ``enqueueDetached(name:priority:operation:)-63whl``:
  /// the job keeps its place among the async jobs around it, can be cancelled until it starts
  /// (it then never runs), reports its events, sees ``isCurrent`` as `true`, and is raised by a
  /// higher-priority awaiter.
  ///
  /// Which overload a closure picks: a closure with no `await` in it is synchronous, so
  /// `queue.enqueueDetached { count += 1 }` calls this one; a closure that awaits
  /// (`{ await save() }`), one marked `() async in`, or an async function passed by name calls
  /// the async one. Swift prefers the synchronous overload because using a synchronous closure
  /// where an async one is expected needs a conversion, and the synchronous overload needs
  /// none.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work. It cannot suspend; it sees `Task.isCancelled` if the job is
  ///     cancelled while it runs. Blocking the thread in it holds a thread of the cooperative
  ///     pool, as in any job (give the queue a ``DedicatedThreadExecutor`` for blocking work).
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

  /// Runs a synchronous closure after every job enqueued before it, with no handle: the
  /// queue's counterpart of `DispatchQueue.async(execute:)`, and its cheapest path.
  ///
  /// For fire-and-forget work that needs nothing back: a log line, a metric, a change to a
  /// model fed from callbacks, a write-behind cache. The closure keeps its place in the queue's
  /// one order with every other kind of job (it runs after the jobs enqueued before it and
  /// before the jobs enqueued after it), but it gives up what a job with a handle has:
  ///
  /// - no handle, no result and no cancellation of its own: ``cancelAll()`` drops it unrun if it
  ///   has not started; it cannot throw (use ``enqueueDetached(name:priority:operation:)-8aju8``
  ///   for work that fails);
  /// - no name and no priority: it runs at the default priority, inheriting nothing;
  /// - events only while someone listens to ``events``: the queue then makes an ordinary
  ///   detached job of it, which reports its events as one;
  /// - ``isCurrent`` is `true` inside the closure, but not in a task the closure starts (no
  ///   task-local value is bound for it).
  ///
  /// Closures enqueued back to back while the queue is busy share one place in line, and the
  /// runner calls them in a plain loop under one lock acquisition, as a `DispatchQueue` drains
  /// its blocks: no job object, handle, result or task-local binding per closure.
  ///
  /// ```swift
  /// let log = SerialQueue(name: "log")
  /// log.execute { lines.append("saved note 7") }  // in order with every other job of `log`
  /// ```
  ///
  /// - Parameter work: The closure. It cannot suspend; blocking the thread in it holds a thread
  ///   of the cooperative pool, as in any job.
  public func execute(_ work: sending @escaping () -> Void) {
    core.execute(work)
  }

  /// Waits for this job's turn, then runs it in the caller's own task and returns its result.
  ///
  /// The job starts after every job enqueued before this call has ended, and the queue holds
  /// every later job until it ends. Because it runs in the caller's task it inherits everything,
  /// and the caller's cancellation reaches it. When the queue is idle it runs at once, without
  /// suspending or leaving the caller's thread.
  ///
  /// - Important: Calling this from inside a job of the same queue can only deadlock, so it
  ///   throws ``QueueError/reentrantWait(queue:)`` at once.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The job's work.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw, unchanged; `CancellationError` if the caller's task was
  ///   cancelled before the job started (it then never runs); ``QueueError`` on a reentrant
  ///   wait.
  @_specialize(exported:true,where Success == Void)
  public func enqueueAndWait<Success>(
    name: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    try await core.enqueueAndWait(name: name, isolation: isolation, operation: operation)
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  public var _engine: QueueEngine { QueueEngine(core: core) }
}
