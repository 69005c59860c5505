/// A serial line per key: jobs for one key run one at a time in enqueue order, jobs for
/// different keys run concurrently, optionally under a global limit.
///
/// Use it where each entity needs its own ``SerialQueue`` (saves to one document, messages to
/// one chat, requests for one account) without creating and keeping a queue per entity.
///
/// ```swift
/// let saves = KeyedSerialQueue<Document.ID>(name: "saves", limit: 8)
/// saves.enqueue(forKey: document.id) { try await store.save(document) }  // in order per id
/// ```
///
/// Each key's line has the guarantees of a ``SerialQueue``: FIFO, each job ends before the next
/// of the same key starts, cancellation of pending jobs in O(1), and a job that waits on its own
/// key's line throws ``QueueError/reentrantWait(queue:)``.
///
/// ## Storage
///
/// A key's line exists only while it has a job running or waiting; it is freed when its last
/// job ends. A million distinct keys used one after another never hold more than the lines busy
/// at the time.
///
/// ## Global limit
///
/// With a `limit`, at most that many jobs run at once across all keys, admitted first come,
/// first served by an ``AsyncSemaphore``. A job that has its key's turn but waits for a global
/// slot already holds its key's line (its `started` event is sent when it gets its key's turn).
/// A job that waits on another key's line while holding a global slot can deadlock if every
/// slot is held that way: avoid waiting across keys under a limit.
public final class KeyedSerialQueue<Key: Hashable & Sendable>: OrderlyQueue {
  /// The queue's name; a key's line reports events as `name[key]`.
  public let name: String
  /// How many jobs may run at once across all keys, or `nil` for no limit.
  public let limit: Int?

  /// Every key's line, behind a barging lock rather than a `Mutex`.
  ///
  /// Every producer of every key takes it, and `Mutex` on Linux hands a released lock to a
  /// waiter that may not be running (see ``BargingLock``). The stall watchdog caught a
  /// cooperative thread waiting here under load.
  private let lines = BargingLock<[Key: JobQueueCore]>([:])
  let hub = EventHub()
  private let permits: AsyncSemaphore?
  /// Where every key's jobs run, if not on the cooperative pool.
  private let executor: (any ExecutorPreference)?

  /// Creates an empty queue whose jobs run on Swift's cooperative pool.
  ///
  /// - Precondition: `limit`, if given, is 1 or more.
  /// - Parameters:
  ///   - name: A name for events and error messages.
  ///   - limit: How many jobs may run at once across all keys; `nil` for no limit.
  public convenience init(name: String = "KeyedSerialQueue", limit: Int? = nil) {
    self.init(name: name, limit: limit, preference: nil)
  }

  /// Creates an empty queue whose jobs run on a task executor.
  ///
  /// - Precondition: `limit`, if given, is 1 or more.
  /// - Parameters:
  ///   - name: A name for events and error messages.
  ///   - limit: How many jobs may run at once across all keys; `nil` for no limit.
  ///   - executor: Where the jobs of every key run: a task executor such as
  ///     ``DedicatedThreadExecutor``, or `nil` for Swift's cooperative pool; see
  ///     ``SerialQueue/init(name:executor:)``.
  @available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
  public convenience init(
    name: String = "KeyedSerialQueue",
    limit: Int? = nil,
    executor: (any TaskExecutor)?
  ) {
    self.init(name: name, limit: limit, preference: executor.map(TaskExecutorPreference.init))
  }

  private init(name: String, limit: Int?, preference: (any ExecutorPreference)?) {
    if let limit {
      precondition(limit >= 1, "KeyedSerialQueue limit must be 1 or more, or nil; got \(limit)")
    }
    self.name = name
    self.limit = limit
    self.executor = preference
    self.permits = limit.map { AsyncSemaphore(value: $0) }
  }

  // MARK: - Submitting work

  /// Enqueues a job for `key` that runs like `Task { }`, after every job enqueued for the same
  /// key before it has ended.
  ///
  /// - Parameters:
  ///   - key: The line to join.
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's.
  ///   - isolation: The caller's isolation; leave the default. The operation is isolated to the
  ///     caller's actor as a `Task {}` closure is; passing another actor changes only where the
  ///     job's task starts, not where a nonisolated operation runs.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueue<Success: Sendable>(
    forKey key: Key,
    name: String? = nil,
    priority: TaskPriority? = nil,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext @_implicitSelfCapture operation:
      sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    let (core, node) = admitTurn(
      forKey: key,
      named: name,
      priority: (priority ?? Task.currentPriority).rawValue
    )
    if let permits {
      return core.makeTask(for: node, priority: priority, isolation: isolation) {
        _ = isolation
        return try await permits.withPermit(operation: operation)
      }
    }
    return core.makeTask(for: node, priority: priority, isolation: isolation, operation: operation)
  }

  /// Enqueues a job for `key` that runs like `Task.detached { }`, after every job enqueued for
  /// the same key before it has ended.
  ///
  /// No task is created per job: each busy key's runner task runs its detached jobs back to
  /// back.
  ///
  /// - Parameters:
  ///   - key: The line to join.
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueueDetached<Success: Sendable>(
    forKey key: Key,
    name: String? = nil,
    priority: TaskPriority? = nil,
    @_implicitSelfCapture operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    let job: DetachedJob<Success>
    if let permits {
      job = DetachedJob(name: name, priority: priority) {
        try await permits.withPermit(operation: operation)
      }
    } else {
      job = DetachedJob(name: name, priority: priority, operation: operation)
    }
    let (core, startsNow) = lines.withLock { lines in
      let core = line(forKey: key, in: &lines)
      return (core, core.admit(job))
    }
    if startsNow { core.startRunner(with: job) }
    return QueuedTask(backing: .detached(job), owner: core)
  }

  /// Enqueues a synchronous job for `key` that runs like `Task.detached { }`, after every job
  /// enqueued for the same key before it has ended.
  ///
  /// Each busy key's runner task calls synchronous jobs with no async frame, as a
  /// `DispatchQueue` calls its blocks; order, cancellation, events, ``isCurrent(forKey:)`` and
  /// priority are as for the async overload. A closure with no `await` in it picks this
  /// overload; one that awaits picks the async one. With a limit on running keys, the job still
  /// waits for a permit first, so it then runs as an async job.
  ///
  /// - Parameters:
  ///   - key: The line to join.
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority to run the job at; `nil` for the default.
  ///   - operation: The job's work; it cannot suspend.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueueDetached<Success: Sendable>(
    forKey key: Key,
    name: String? = nil,
    priority: TaskPriority? = nil,
    @_implicitSelfCapture operation: sending @escaping () throws -> Success
  ) -> QueuedTask<Success> {
    let job: DetachedJob<Success>
    if let permits {
      job = DetachedJob(name: name, priority: priority) {
        try await permits.withPermit { try operation() }
      }
    } else {
      job = DetachedJob(name: name, priority: priority, synchronous: operation)
    }
    let (core, startsNow) = lines.withLock { lines in
      let core = line(forKey: key, in: &lines)
      return (core, core.admit(job))
    }
    if startsNow { core.startRunner(with: job) }
    return QueuedTask(backing: .detached(job), owner: core)
  }

  /// Runs a synchronous closure on `key`'s line after every job enqueued for the key before it,
  /// with no handle: `DispatchQueue.async(execute:)` per key.
  ///
  /// As ``SerialQueue/execute(_:)``: the closure keeps its place in the key's order with every
  /// other kind of job, has no handle, result, name or priority of its own, is dropped unrun by
  /// ``cancelAll()`` or ``cancelAll(forKey:)`` if it has not started, reports events only while
  /// someone listens, and sees ``isCurrent(forKey:)`` as `true`. Closures enqueued back to back
  /// for a busy key share one place in its line. With a limit on running keys the closure waits
  /// for a permit as a detached job does, so it is then enqueued as one (without its handle).
  ///
  /// - Parameters:
  ///   - key: The line to join.
  ///   - work: The closure; it cannot suspend.
  public func execute(forKey key: Key, _ work: sending @escaping () -> Void) {
    if permits != nil || hub.hasListeners {
      enqueueDetached(forKey: key, operation: work)
      return
    }
    let work = LaneWork(work)
    let (core, batch) = lines.withLock { lines in
      let core = line(forKey: key, in: &lines)
      return (core, core.admitLaneWork(work))
    }
    if let batch { core.startRunner(with: batch) }
  }

  /// Waits for this job's turn on `key`'s line, then runs it in the caller's task.
  ///
  /// - Parameters:
  ///   - key: The line to join.
  ///   - name: A name for the job, shown in ``events``.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The job's work.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw; `CancellationError` if the caller's task was cancelled
  ///   before the job started; ``QueueError/reentrantWait(queue:)`` if called from inside a job
  ///   of the same key.
  public func enqueueAndWait<Success>(
    forKey key: Key,
    name: String? = nil,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    if let core = lines.withLock({ $0[key] }) {
      try JobFrame.checkNotInside(core)
    }
    try Task.checkCancellation()
    let (core, node) = admitTurn(
      forKey: key,
      named: name,
      priority: Task.currentPriority.rawValue
    )
    return try await core.runTurn(
      node,
      callersTask: true
    ) {
      _ = isolation
      if let permits { return try await permits.withPermit(operation: operation) }
      return try await operation()
    }
  }

  // MARK: - Asserting where code runs

  /// Whether the current task runs inside a job of `key`'s line.
  ///
  /// `true` in a running job's operation, and in a child task or a `Task {}` started from it
  /// while the job still runs; `false` anywhere else, including a `Task.detached {}`.
  ///
  /// - Parameter key: The line to check.
  /// - Returns: Whether the current task runs inside one of the line's jobs.
  public func isCurrent(forKey key: Key) -> Bool {
    lines.withLock { $0[key] }?.isCurrent ?? false
  }

  /// Stops a debug build if the current task is not inside a job of `key`'s line (see
  /// ``isCurrent(forKey:)``); does nothing in a release build, like `assert`.
  ///
  /// - Parameters:
  ///   - key: The line the code must run on.
  ///   - message: What the code expected, shown before the reason.
  ///   - file: The file to name; leave the default.
  ///   - line: The line to name; leave the default.
  public func assertOnQueue(
    forKey key: Key,
    _ message: @autoclosure () -> String = String(),
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    assert(
      isCurrent(forKey: key),
      QueueAssertions.failure(queue: "\(name)[\(key)]", message: message()),
      file: file,
      line: line
    )
  }

  /// Stops the program, in debug and release builds alike, if the current task is not inside a
  /// job of `key`'s line (see ``isCurrent(forKey:)``), like `precondition`.
  ///
  /// - Parameters:
  ///   - key: The line the code must run on.
  ///   - message: What the code expected, shown before the reason.
  ///   - file: The file to name; leave the default.
  ///   - line: The line to name; leave the default.
  public func preconditionOnQueue(
    forKey key: Key,
    _ message: @autoclosure () -> String = String(),
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    precondition(
      isCurrent(forKey: key),
      QueueAssertions.failure(queue: "\(name)[\(key)]", message: message()),
      file: file,
      line: line
    )
  }

  private func admitTurn(forKey key: Key, named name: String?, priority: UInt8) -> (
    JobQueueCore, TurnNode
  ) {
    lines.withLock { lines in
      let core = line(forKey: key, in: &lines)
      return (core, core.admitTurn(named: name, priority: priority))
    }
  }

  /// The key's line, created if the key has none.
  ///
  /// Called under the lock.
  private func line(forKey key: Key, in lines: inout [Key: JobQueueCore]) -> JobQueueCore {
    if let core = lines[key] { return core }
    let core = JobQueueCore(
      name: "\(name)[\(key)]",
      limit: 1,
      events: hub,
      executor: executor,
      idleHandler: { [weak self] core in self?.freeLine(forKey: key, ifIdle: core) }
    )
    lines[key] = core
    return core
  }

  /// Forgets a key's line once its last job has ended, unless a job joined it meanwhile.
  private func freeLine(forKey key: Key, ifIdle core: JobQueueCore) {
    lines.withLock { lines in
      if lines[key] === core, core.isIdle { lines[key] = nil }
    }
  }

  // MARK: - Control and introspection

  /// Cancels the running and pending jobs of one key.
  ///
  /// An `enqueueAndWait(forKey:)` job that has started is left running, as by ``cancelAll()``.
  ///
  /// - Parameter key: The key whose jobs to cancel.
  public func cancelAll(forKey key: Key) {
    lines.withLock { $0[key] }?.cancelAll()
  }

  /// The number of jobs waiting for their turn on `key`'s line.
  ///
  /// - Parameter key: The key to look at.
  /// - Returns: The pending count; 0 if the key has no line.
  public func pendingCount(forKey key: Key) -> Int {
    lines.withLock { $0[key] }?.pendingCount ?? 0
  }

  /// Whether a job for `key` is running or waiting.
  ///
  /// - Parameter key: The key to look at.
  /// - Returns: `true` while the key has a line.
  public func isBusy(forKey key: Key) -> Bool {
    !(lines.withLock { $0[key] }?.isIdle ?? true)
  }

  /// The number of keys with a job running or waiting; each has one line in memory.
  public var busyKeyCount: Int {
    lines.withLock { $0.count }
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  ///
  /// Through it the queue has what every Orderly queue has, over all of its keys:
  /// ``OrderlyQueue/cancelAll()`` (an `enqueueAndWait(forKey:)` job that has started runs in its
  /// caller's task and is left running), ``OrderlyQueue/waitUntilIdle(isolation:)`` (every job
  /// enqueued before the call, for any key), ``OrderlyQueue/isIdle``,
  /// ``OrderlyQueue/pendingCount``, ``OrderlyQueue/runningCount`` and ``OrderlyQueue/events``
  /// (events of one key arrive in the order they happened; a key's line reports as `name[key]`
  /// in ``QueueEvent/queueName``).
  public var _engine: QueueEngine { QueueEngine(keyed: self) }
}

extension KeyedSerialQueue: KeyedLines {
  func eachLine<Result>(_ body: (JobQueueCore) -> Result) -> [Result] {
    lines.withLock { Array($0.values) }.map(body)
  }

  func waitUntilEveryLineIdle(isolation: isolated (any Actor)?) async throws {
    let cores = lines.withLock { Array($0.values) }
    for core in cores { try JobFrame.checkNotInside(core, always: true) }
    // Registered in one locked section, so jobs enqueued after this call delay no waiter.
    let waiters = lines.withLock { lines in
      lines.values.compactMap { core in core.admitIdleWaiter().map { (core, $0) } }
    }
    for (index, (core, node)) in waiters.enumerated() {
      do {
        try await core.waitForIdle(node)
      } catch {
        for (otherCore, otherNode) in waiters[(index + 1)...] { otherCore.cancel(otherNode) }
        throw error
      }
    }
  }
}
