/// The engine behind every Orderly queue: a ``JobLineState`` under a lock, and the code that
/// runs its jobs.
///
/// The public queues are thin layers over it: ``SerialQueue`` is a core with one slot,
/// ``ConcurrentQueue`` one with `limit` slots, ``ActorQueue`` and ``MainActorQueue`` a core with
/// one slot released when a job begins, and ``KeyedSerialQueue`` one core per busy key. Jobs and
/// their handles keep the core alive, so dropping the public queue drops no job.
///
/// The generic submission paths are pre-specialized for `Void` results (`@_specialize`), the
/// common fire-and-forget case; the public queues export those specializations to callers.
final class JobQueueCore: Sendable {
  /// When a running job gives its slot back.
  enum SlotRelease: Sendable {
    /// When it ends: the queue orders both starts and ends.
    case atEnd
    /// When it begins: the queue orders starts only, and jobs overlap across suspensions.
    case atStart
  }

  let name: String
  let slotRelease: SlotRelease
  /// Where the queue's events go; shared by every line of a keyed queue.
  let hub: EventHub
  /// A barging lock, not a `Mutex`: producer threads contend for it while no job runs yet (see
  /// ``BargingLock``).
  private let state: BargingLock<JobLineState>
  /// Detached jobs submitted while the line is busy, and the numbering of every job.
  private let inbox = JobInbox()
  /// Told, with no lock held, when the last job ends (a keyed queue then frees the key's line).
  private let idleHandler: (@Sendable (JobQueueCore) -> Void)?
  /// Where the queue's jobs run, if not on the cooperative pool (see `SerialQueue.init`).
  let executor: (any ExecutorPreference)?
  /// Whether `execute(_:)` closures enqueued back to back share one job while they wait.
  ///
  /// A serial line runs them one after another either way; a line of several slots
  /// (``ConcurrentQueue``) gives each its own job, so that they run side by side up to its limit.
  let mergesLaneWork: Bool
  /// A copy of ``JobLineState/lowestPriority``, written under the lock, read without it: a
  /// waiter whose priority is not above it has nothing to raise, and takes no lock to find out.
  private let lowestPriority = OrderlyAtomic<UInt8>(.max)

  init(
    name: String,
    limit: Int,
    slotRelease: SlotRelease = .atEnd,
    events: EventHub = EventHub(),
    executor: (any ExecutorPreference)? = nil,
    mergesLaneWork: Bool = true,
    idleHandler: (@Sendable (JobQueueCore) -> Void)? = nil
  ) {
    self.name = name
    self.mergesLaneWork = mergesLaneWork
    self.executor = executor
    self.slotRelease = slotRelease
    self.idleHandler = idleHandler
    self.hub = events
    self.state = BargingLock(JobLineState(queueName: name, events: events, limit: limit))
    StallWatchdog.register(self)
  }

  /// Runner tasks alive, for the stall watchdog (counted only while it runs).
  private let runners = OrderlyAtomic<Int>(0)

  /// The queue's state now, for the stall watchdog.
  func diagnosticSnapshot() -> QueueSnapshot {
    state.withLock { state in
      QueueSnapshot(
        name: name,
        limit: state.limit,
        waiting: state.pendingCount,
        lineEntries: state.lineEntries,
        inbox: inbox.waitingCount,
        inboxIsWatched: state.inboxIsWatched,
        running: state.runningDescriptions,
        released: state.runningCount - state.running.count,
        ended: state.ended,
        idleWaiters: state.idleWaiterCount,
        runners: runners.load(ordering: .relaxed)
      )
    }
  }

  // MARK: - Submitting work

  /// Enqueues a job that runs in a new task, like `Task { }` (see `SerialQueue.enqueue`).
  @_specialize(where Success == Void)
  func enqueue<Success: Sendable>(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool = false,
    startsBelow: Int = .max,
    isolation: isolated (any Actor)?,
    operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    let node = admitTurn(
      named: name,
      isBarrier: isBarrier,
      startsBelow: startsBelow,
      priority: (priority ?? Task.currentPriority).rawValue
    )
    return makeTask(for: node, priority: priority, isolation: isolation, operation: operation)
  }

  /// Starts the task of an admitted `enqueue` job.
  @_specialize(where Success == Void)
  func makeTask<Success: Sendable>(
    for node: TurnNode,
    priority: TaskPriority?,
    isolation: isolated (any Actor)?,
    operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    if let executor {
      // Nonisolated work runs on the executor; an operation isolated to an actor still hops to
      // its actor when called.
      let task = executor.task(priority: priority) { [self] () async throws -> Success in
        // The new task inherited the caller's task-local values: its frame (read by runTurn
        // after the wait) is the caller's job, if any, so a wait on that job's queue from this
        // job is seen as the cycle it is.
        try await runTurn(node, callersTask: false, operation: operation)
      }
      return QueuedTask(backing: .attached(task, node), owner: self)
    }
    let task = Task(priority: priority) { [self] () async throws -> Success in
      // Capturing `isolation` makes this task start on the caller's actor, as `Task {}` does.
      _ = isolation
      // The job's parent is the caller's job, if any (inherited; runTurn reads it after the
      // wait): cycles across queues are seen.
      return try await runTurn(node, callersTask: false, operation: operation)
    }
    return QueuedTask(backing: .attached(task, node), owner: self)
  }

  /// Enqueues a job run by the queue's runner task, like `Task.detached { }`.
  @_specialize(where Success == Void)
  func enqueueDetached<Success: Sendable>(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool = false,
    operation: sending @escaping () async throws -> Success
  ) -> QueuedTask<Success> {
    // Built outside the lock because `operation` is sent into it.
    let job = DetachedJob(
      name: name,
      priority: priority,
      isBarrier: isBarrier,
      operation: operation
    )
    return submit(job)
  }

  /// Enqueues a synchronous job run by the queue's runner task in a plain loop with the
  /// synchronous jobs around it (see `SerialQueue.enqueueDetached`).
  @_specialize(where Success == Void)
  func enqueueDetached<Success: Sendable>(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool = false,
    synchronous operation: sending @escaping () throws -> Success
  ) -> QueuedTask<Success> {
    let job = DetachedJob(
      name: name,
      priority: priority,
      isBarrier: isBarrier,
      synchronous: operation
    )
    return submit(job)
  }

  /// Enqueues a synchronous closure with no handle, in the queue's one order (see
  /// `SerialQueue.execute(_:)`).
  ///
  /// A queue with event listeners makes an ordinary synchronous detached job of the closure, so
  /// that it reports its events; otherwise see ``admitLaneWork(_:)``.
  func execute(_ work: sending @escaping () -> Void) {
    if hub.hasListeners {
      _ = enqueueDetached(name: nil, priority: nil, synchronous: work)
      return
    }
    if let batch = admitLaneWork(LaneWork(work)) { startRunner(with: batch) }
  }

  /// Puts an `execute(_:)` closure in line: in the newest job of the queue when that is a
  /// waiting ``LaneBatch`` and the queue merges lane work (see `mergesLaneWork`), otherwise in
  /// a new batch.
  ///
  /// A keyed queue calls it while holding its own lock: an admission never ends the last job, so
  /// the idle handler is not called.
  ///
  /// - Returns: A new batch that has its turn now and needs a runner.
  func admitLaneWork(_ work: LaneWork) -> LaneBatch? {
    // As for `admit(_:)`: work of a higher priority than a job in line takes the locked path,
    // which raises the jobs ahead of it. Lane work runs at the default priority.
    let raises = TaskPriority.medium.rawValue > lowestPriority.load(ordering: .relaxed)
    if !raises, inbox.keepLaneWorkIfWatched(work, merging: mergesLaneWork) { return nil }
    let (batch, launches) = update(movingInboxFirst: false) {
      state,
      wakeups,
      launches -> LaneBatch? in
      inbox.takeAll { waiting, number -> LaneBatch? in
        admit(waiting, into: &state, launches: &launches)
        if mergesLaneWork, state.appendToOpenLaneTail(work) { return nil }
        let batch = LaneBatch(work)
        batch.assign(id: number())
        return state.admitRaisingAhead(.detached(batch), wakeups: &wakeups) ? batch : nil
      }
    }
    startRunners(for: launches)
    return batch
  }

  /// Admits a built detached job, starts a runner if it has its turn now, and returns its handle.
  @_specialize(where Success == Void)
  private func submit<Success: Sendable>(_ job: DetachedJob<Success>) -> QueuedTask<Success> {
    if admit(job) { startRunner(with: job) }
    return QueuedTask(backing: .detached(job), owner: self)
  }

  /// Waits for the job's turn, then runs it in the caller's task.
  @inline(__always)
  func enqueueAndWait<Success>(
    name: String?,
    isBarrier: Bool = false,
    isolation: isolated (any Actor)?,
    operation: () async throws -> Success
  ) async throws -> Success {
    try JobFrame.checkNotInside(self)
    try Task.checkCancellation()
    let node = admitTurn(
      named: name,
      isBarrier: isBarrier,
      priority: Task.currentPriority.rawValue
    )
    if let executor {
      return try await executor.run(isolation: isolation) {
        try await runTurn(
          node,
          callersTask: true,
          operation: operation
        )
      }
    }
    return try await runTurn(
      node,
      callersTask: true,
      operation: operation
    )
  }

  /// Numbers a job that runs in a task of its own and puts it in line.
  ///
  /// - Parameters:
  ///   - name: The job's name, for events.
  ///   - isBarrier: Whether the job runs alone.
  ///   - startsBelow: How few jobs of the line must run for the job to start.
  ///   - priority: The priority of the job's task (`TaskPriority.rawValue`).
  /// - Returns: The job's place in line.
  func admitTurn(
    named name: String?,
    isBarrier: Bool = false,
    startsBelow: Int = .max,
    priority: UInt8 = TaskPriority.medium.rawValue
  ) -> TurnNode {
    let (node, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
      let (waiting, id) = inbox.takeAllAndNumber { announceEnqueued($0, name: name) }
      admit(waiting, into: &state, launches: &launches)
      let node = TurnNode(
        id: id,
        name: name,
        purpose: .job,
        isBarrier: isBarrier,
        startsBelow: startsBelow,
        granted: state.startsAtOnce(isBarrier: isBarrier, below: startsBelow),
        basePriority: priority
      )
      state.admitRaisingAhead(.turn(node), wakeups: &wakeups)
      return node
    }
    startRunners(for: launches)
    return node
  }

  /// Numbers a detached job and puts it in line, or in the inbox while the line is busy.
  ///
  /// - Returns: `true` if the job has its turn now and needs a runner.
  func admit(_ job: RunnableJob) -> Bool {
    // A job of a higher priority than some job already in line takes the locked path, which
    // raises the jobs ahead of it at once; the inbox would admit it only after they end.
    let raises = job.basePriority > lowestPriority.load(ordering: .relaxed)
    if !raises, inbox.keepIfWatched(job, announce: { announceEnqueued($0, name: job.name) }) {
      return false
    }
    let (startsNow, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
      let (waiting, id) = inbox.takeAllAndNumber { announceEnqueued($0, name: job.name) }
      admit(waiting, into: &state, launches: &launches)
      job.assign(id: id)
      return state.admitRaisingAhead(.detached(job), wakeups: &wakeups)
    }
    startRunners(for: launches)
    return startsNow
  }

  private func announceEnqueued(_ id: JobID, name jobName: @autoclosure () -> String?) {
    guard hub.hasListeners else { return }
    hub.emit(.enqueued, jobID: id, jobName: jobName(), queueName: name)
  }

  // MARK: - Control and introspection

  /// Cancels every running and pending job (see `SerialQueue.cancelAll`).
  func cancelAll() {
    let (_, launches) = update { state, wakeups, _ in state.cancelAll(wakeups: &wakeups) }
    startRunners(for: launches)
  }

  var pendingCount: Int {
    read { $0.pendingWorkCount }
  }

  var runningCount: Int {
    state.withLock { $0.runningCount }
  }

  var isIdle: Bool {
    read { $0.isIdle }
  }

  /// The number of `waitUntilIdle` callers waiting (for tests).
  var idleWaiterCount: Int {
    state.withLock { $0.idleWaiterCount }
  }

  var limit: Int {
    state.withLock { $0.limit }
  }

  func setLimit(_ limit: Int) {
    let (_, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
      state.setLimit(limit, wakeups: &wakeups, launches: &launches)
    }
    startRunners(for: launches)
  }

  /// Returns once every job enqueued before the call has ended (see `SerialQueue`).
  func waitUntilIdle(isolation: isolated (any Actor)?) async throws {
    // The waiting job would be one of the jobs waited for: it could never return.
    try JobFrame.checkNotInside(self, always: true)
    guard let node = admitIdleWaiter() else { return }
    try await waitForIdle(node)
  }

  /// Registers a waiter for every job enqueued so far to end.
  ///
  /// - Returns: The waiter to pass to ``waitForIdle(_:isolation:)``, or `nil` if the queue is
  ///   idle.
  func admitIdleWaiter() -> TurnNode? {
    let node = TurnNode(id: JobID(rawValue: 0), name: nil, purpose: .waiter)
    let (waits, launches) = update { state, _, launches in
      // Moved again with the mark, so no job numbered up to the mark is left in the inbox.
      let mark = moveInbox(into: &state, launches: &launches)
      return state.admitIdleWaiter(node, mark: mark)
    }
    startRunners(for: launches)
    return waits ? node : nil
  }

  /// Suspends until the jobs an idle waiter counts have ended; cancelling the task removes it.
  func waitForIdle(_ node: TurnNode, isolation: isolated (any Actor)? = #isolation) async throws {
    try await waitForTurn(node)
  }

  /// A new listener for the queue's events.
  var events: AsyncStream<QueueEvent> {
    hub.subscribe()
  }

  // MARK: - Running jobs

  /// Waits for the node's turn, runs `operation` in the current task, and passes the turn on.
  ///
  /// - Parameters:
  ///   - node: The job's place in line.
  ///   - callersTask: Whether the current task is the caller's own (`enqueueAndWait`), which
  ///     `cancelAll()` leaves alone, rather than a task made for the job (`enqueue`).
  ///   - isolation: Where `operation` runs.
  ///   - operation: The job's work.
  /// - Returns: What `operation` returned.
  /// - Throws: What `operation` threw; `CancellationError` if the job was cancelled before it
  ///   began.
  ///
  /// The job's task and its parent frame (the caller's job, if any: a task made for an
  /// `enqueue` job inherited the caller's task-local values) are read after the wait, not
  /// passed in: a value held across the wait is kept in the waiting task's async frame, and a
  /// pending `enqueue` job's frames must stay within the task's first slab of memory (the
  /// benchmarks' memory row: a parent frame passed in took each pending job from 1.10x to
  /// 1.80x a suspended bare Task).
  @_specialize(where Success == Void)
  func runTurn<Success>(
    _ node: TurnNode,
    callersTask: Bool,
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Success
  ) async throws -> Success {
    // Always awaited, with nothing but `isGranted` checked inside: skipping the call for a node
    // granted at admission (or checking that in waitForTurn) cost the uncontended path an async
    // call less, but made a waiting `enqueue` job's async frames outgrow the task's first slab
    // of memory, so each pending job took about 1 KB more (the benchmarks' memory row: 1.10x ->
    // 1.80x a suspended bare Task).
    try await waitForTurn(node)
    let begins =
      !Task.isCancelled
      && node.begin(callersTask: callersTask, owner: self)
    guard begins else {
      if node.endRunning() { await node.parkUntilUnpinned() }
      finish(node.id, outcome: .cancelled)
      throw CancellationError()
    }
    if slotRelease == .atStart { release(node.id) }
    let result: Result<Success, any Error>
    do {
      // The closure captures `isolation` so it runs on the caller's actor: without the capture
      // it would be nonisolated and every job would hop off the caller's executor and back.
      result = .success(
        try await JobFrame.$current.withValue(
          node,
          operation: {
            _ = isolation
            return try await operation()
          },
          isolation: isolation
        )
      )
    } catch {
      result = .failure(error)
    }
    if node.endRunning() { await node.parkUntilUnpinned() }
    finish(node.id, outcome: JobOutcome(result))
    return try result.get()
  }

  /// Suspends until the node has its turn; cancelling the waiting task takes it out of line.
  private func waitForTurn(
    _ node: TurnNode,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    if node.isGranted { return }
    try await withTaskCancellationHandler(
      operation: {
        _ = isolation  // stay on the caller's actor (see runTurn)
        try await withUnsafeThrowingContinuation(isolation: isolation) {
          node.parkUntilGranted($0)
        }
      },
      onCancel: { cancel(node) },
      isolation: isolation
    )
  }

  private func finish(_ id: JobID, outcome: JobOutcome) {
    let (_, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
      state.finish(id, outcome: outcome, wakeups: &wakeups, launches: &launches)
    }
    startRunners(for: launches)
  }

  private func release(_ id: JobID) {
    let (_, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
      state.release(id, wakeups: &wakeups, launches: &launches)
    }
    startRunners(for: launches)
  }

  /// Changes the state under the lock, then runs the wakeups with no lock held, tells the idle
  /// handler if the change ended the last job, and returns `body`'s result with the detached jobs that now
  /// need a runner.
  ///
  /// - Parameters:
  ///   - movingInboxFirst: Whether `body` needs every job in the line, including those waiting
  ///     in the inbox. A job ending or a slot freeing does not: the inbox is settled after `body`
  ///     in every case, which moves its jobs in as soon as the line has room.
  ///   - body: The change, under the queue's lock.
  /// - Returns: What `body` returned, and the detached jobs that now need a runner.
  @inline(__always)  // Left generic, each call would copy its result through value witnesses.
  private func update<Result: Sendable>(
    movingInboxFirst: Bool = true,
    _ body: (inout JobLineState, inout Wakeups, inout Launches) -> Result
  ) -> (Result, Launches) {
    let hasIdleHandler = idleHandler != nil
    // Filled in place by the locked section rather than returned from it: returning them made
    // every update copy them out through a tuple.
    var wakeups = Wakeups()
    var launches = Launches()
    var becameIdle = false
    let result = state.withLock { (state: inout JobLineState) -> Result in
      if movingInboxFirst { _ = moveInbox(into: &state, launches: &launches) }
      // Only a change that ends the last job reports the queue idle: a keyed queue calls
      // admissions while holding its own lock, which its idle handler takes.
      let wasIdle = state.isIdle
      let result = body(&state, &wakeups, &launches)
      settleInbox(&state, launches: &launches)
      let isIdle = state.isIdle
      becameIdle = hasIdleHandler && !wasIdle && isIdle
      mirrorLowestPriority(&state, isIdle: isIdle)
      return result
    }
    wakeups.run()
    if becameIdle { idleHandler?(self) }
    return (result, launches)
  }

  /// Reads the line with the inbox's jobs moved in.
  ///
  /// Unlike ``update(movingInboxFirst:_:)`` it never calls the idle handler (reading ends no
  /// job), so a keyed queue may call it while holding its own lock.
  @inline(__always)
  private func read<Result: Sendable>(_ body: (borrowing JobLineState) -> Result) -> Result {
    let (result, launches) = state.withLock { (state: inout JobLineState) -> (Result, Launches) in
      var launches = Launches()
      _ = moveInbox(into: &state, launches: &launches)
      settleInbox(&state, launches: &launches)
      mirrorLowestPriority(&state, isIdle: state.isIdle)
      return (body(state), launches)
    }
    startRunners(for: launches)
    return result
  }

  /// Forgets the lowest priority once the line is idle, and publishes it for waiters; call it
  /// under the queue's lock, last.
  @inline(__always)
  private func mirrorLowestPriority(_ state: inout JobLineState, isIdle: Bool) {
    if isIdle { state.lowestPriority = .max }
    if lowestPriority.load(ordering: .relaxed) != state.lowestPriority {
      lowestPriority.store(state.lowestPriority, ordering: .relaxed)
    }
  }

  // MARK: - Priority escalation

  /// Raises every job up to `id` to the current task's priority, if any of them may run lower.
  ///
  /// Called by a task about to await a job's result: awaiting a `Task` raises it the same way.
  /// (A job admitted at a higher priority raises the jobs ahead of it as it is admitted, in
  /// ``JobLineState/admitRaisingAhead(_:wakeups:)``.) A waiter whose priority is not above every
  /// admitted job's takes no lock.
  @inline(__always)
  func escalateIfNeeded(through id: JobID, jobPriority: UInt8 = .max) {
    let priority = Task.currentPriority
    guard
      priority.rawValue > lowestPriority.load(ordering: .relaxed)
        || priority.rawValue > jobPriority
    else { return }
    escalate(through: id, to: priority)
  }

  /// Raises every job up to `id` (running, or waiting ahead in line) to at least `priority`.
  func escalate(through id: JobID, to priority: TaskPriority) {
    let (_, launches) = update { state, wakeups, _ in
      state.escalate(through: id, to: priority, wakeups: &wakeups)
    }
    startRunners(for: launches)
  }

  /// Moves every job waiting in the inbox into the line, in order; call it under the queue's
  /// lock.
  ///
  /// - Returns: The last job number handed out, so every job numbered up to it is now in the
  ///   line, running, or over.
  private func moveInbox(into state: inout JobLineState, launches: inout Launches) -> UInt64 {
    let (jobs, lastID) = inbox.takeAll()
    admit(jobs, into: &state, launches: &launches)
    return lastID
  }

  /// Admits detached jobs taken from the inbox, in order.
  private func admit(
    _ jobs: [RunnableJob],
    into state: inout JobLineState,
    launches: inout Launches
  ) {
    for job in jobs where state.admit(.detached(job)) { launches.append(job) }
  }

  /// Lets new detached jobs wait in the inbox only while the line is busy.
  ///
  /// While a running job will settle the inbox again when it ends, its jobs stay there;
  /// otherwise they are moved into the line. Call it under the queue's lock, last.
  private func settleInbox(_ state: inout JobLineState, launches: inout Launches) {
    while true {
      let watched = state.defersAdmissions
      let jobs = inbox.settle(watched: watched, wasWatched: state.inboxIsWatched)
      if jobs.isEmpty {
        state.inboxIsWatched = watched
        return
      }
      admit(jobs, into: &state, launches: &launches)
    }
  }

  private func startRunners(for launches: Launches) {
    guard let first = launches.first else { return }
    startRunner(with: first)
    for job in launches.rest { startRunner(with: job) }
  }

  /// Starts a runner task for a detached job that has its turn.
  func startRunner(with job: RunnableJob) {
    if let executor {
      executor.detached(priority: job.priority) { [self] in
        await drain(startingWith: job)
      }
      return
    }
    Task.detached(priority: job.priority) { [self] in
      await drain(startingWith: job)
    }
  }

  /// Runs detached jobs back to back in the current task until no detached job is left to
  /// start here.
  ///
  /// The runner hands over to a fresh runner task when the next job wants another priority, or
  /// when a job it ran was cancelled (which cancelled this task for good). Jobs beyond the first
  /// that become startable at once (after a barrier, say) get runners of their own.
  private func drain(startingWith first: RunnableJob) async {
    let watched = StallWatchdog.shared != nil
    if watched { runners.add(1, ordering: .relaxed) }
    defer { if watched { runners.subtract(1, ordering: .relaxed) } }
    let task = RunningTask.current
    // Raw, as the line keeps it: comparing `TaskPriority?` values went through the resilient
    // type's value witnesses for every job. A job of no priority counts as `.medium`, the
    // priority a runner started with none runs at.
    let priority = first.basePriority
    var job = first
    while true {
      let report: RunReport
      if job.isSynchronous {
        // No async frame: a run of synchronous jobs is a plain loop in this task.
        let (synchronousReport, pinned) = job.runSynchronously(in: task, owner: self)
        if pinned { await job.parkUntilUnpinned() }
        report = synchronousReport
      } else {
        report = await job.run(in: task, owner: self)
      }
      let (_, launches) = update(movingInboxFirst: false) { state, wakeups, launches in
        state.finish(report.id, outcome: report.outcome, wakeups: &wakeups, launches: &launches)
      }
      if !launches.rest.isEmpty {
        for extra in launches.rest { startRunner(with: extra) }
      }
      guard let nextJob = launches.first else { return }
      // A job cancelled while it ran cancelled this task for good: hand over to a fresh one.
      if report.cancelRequested || nextJob.basePriority != priority {
        startRunner(with: nextJob)
        return
      }
      job = nextJob
    }
  }
}

// MARK: - JobQueueBackend

extension JobQueueCore: JobQueueBackend {
  func isRunning(_ id: JobID) -> Bool {
    state.withLock { $0.isRunning(id) }
  }

  var reentrantWaitError: any Error {
    QueueError.reentrantWait(queue: name)
  }

  var detectsReentrantWaits: Bool { slotRelease == .atEnd }

  func cancel(_ node: TurnNode) {
    if node.purpose == .waiter {
      let (_, launches) = update { state, wakeups, _ in
        state.cancelIdleWaiter(node, wakeups: &wakeups)
      }
      startRunners(for: launches)
    } else {
      cancel(.turn(node))
    }
  }

  func cancel(_ job: RunnableJob) {
    cancel(.detached(job))
  }

  func escalateForAwaiter(of id: JobID, jobPriority: UInt8) {
    escalateIfNeeded(through: id, jobPriority: jobPriority)
  }

  private func cancel(_ entry: JobLineState.Entry) {
    let (_, launches) = update { state, wakeups, launches in
      if !state.cancelWaiting(entry, wakeups: &wakeups, launches: &launches) {
        state.cancelIfRunning(entry.id, wakeups: &wakeups)
      }
    }
    startRunners(for: launches)
  }
}
