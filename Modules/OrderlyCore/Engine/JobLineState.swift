import DequeModule

/// A line of jobs and the jobs it lets run, guarded by the owning ``JobQueueCore``'s lock.
///
/// The line admits jobs strictly in order: the job at its head starts when one of `limit` slots
/// is free, and nothing behind it starts before it. A barrier starts only when no job is running
/// and holds every later job back until it ends. A job started by a line that releases slots at
/// start (an ``ActorQueue``) gives its slot back as soon as it begins, so the next one may start
/// while it is still running; the line still tracks it until it ends.
///
/// Invariant, re-established by ``advance(wakeups:launches:)`` after every change that can free
/// a slot: the line is empty, or its head is a live job that cannot start yet. Cancelled entries
/// stay in the line as tombstones (so cancelling is O(1)) and are skipped when they reach the
/// head, or swept out once they outnumber the live ones.
struct JobLineState {
  enum Entry {
    case turn(TurnNode)
    case detached(RunnableJob)

    var id: JobID {
      switch self {
      case .turn(let node): node.id
      case .detached(let job): job.id
      }
    }

    var name: String? {
      switch self {
      case .turn(let node): node.name
      case .detached(let job): job.name
      }
    }

    var isBarrier: Bool {
      switch self {
      case .turn(let node): node.isBarrier
      case .detached(let job): job.isBarrier
      }
    }

    /// How few jobs of the line must run for the entry to start (see ``TurnNode/startsBelow``).
    var startsBelow: Int {
      switch self {
      case .turn(let node): node.startsBelow
      case .detached: .max
      }
    }

    /// Whether the entry was created with its turn (see ``TurnNode/isGrantedAtAdmission``).
    var isGrantedAtAdmission: Bool {
      switch self {
      case .turn(let node): node.isGrantedAtAdmission
      case .detached: false
      }
    }

    var isCancelledWhileWaiting: Bool {
      switch self {
      case .turn(let node): node.isCancelledWhileWaiting
      case .detached(let job): job.isCancelledWhileWaiting
      }
    }

    func grant(into wakeups: inout Wakeups) -> Bool {
      switch self {
      case .turn(let node): node.grant(into: &wakeups)
      case .detached(let job): job.grant(into: &wakeups)
      }
    }

    func cancelWaiting(into wakeups: inout Wakeups) -> Bool {
      switch self {
      case .turn(let node): node.cancelWaiting(into: &wakeups)
      case .detached(let job): job.cancelWaiting(into: &wakeups)
      }
    }

    func cancelRunning(into wakeups: inout Wakeups, sparingCallersTask: Bool = false) {
      switch self {
      case .turn(let node):
        node.cancelRunning(into: &wakeups, sparingCallersTask: sparingCallersTask)
      case .detached(let job): job.cancelRunning(into: &wakeups)
      }
    }

    func escalate(to priority: TaskPriority, into wakeups: inout Wakeups) {
      switch self {
      case .turn(let node): node.escalate(to: priority, into: &wakeups)
      case .detached(let job): job.escalate(to: priority, into: &wakeups)
      }
    }

    /// The priority the job's task has when it is admitted, as `TaskPriority.rawValue`.
    var basePriority: UInt8 {
      switch self {
      case .turn(let node): node.basePriority
      case .detached(let job): job.basePriority
      }
    }
  }

  /// A `waitUntilIdle` caller and how many jobs enqueued before it have not ended yet.
  private struct IdleWaiter {
    let node: TurnNode
    /// The last job identifier handed out when the waiter arrived.
    let mark: UInt64
    var remaining: Int
  }

  /// The queue's name, for events.
  let queueName: String
  /// Where events go.
  let events: EventHub

  private(set) var line = Deque<Entry>()
  /// A running job with what the line asks of it often, read once when it starts.
  ///
  /// Reading them from the entry costs a retain, a witness call and a release each time.
  struct RunningEntry {
    let id: JobID
    let isBarrier: Bool
    let entry: Entry
  }

  /// Running jobs that hold one of the slots.
  private(set) var running: [RunningEntry] = []
  /// Running jobs that gave their slot back when they began (start-ordered lines).
  private(set) var released: [RunningEntry] = []
  /// How many jobs may hold a slot at once; 0 pauses the line.
  private(set) var limit: Int
  private var barrierRunning = false
  /// Live jobs in the line (not tombstones).
  private(set) var pendingCount = 0
  private var tombstones = 0
  private var idleWaiters: [IdleWaiter] = []
  /// For each priority waiting jobs were raised to, the last job number raised.
  ///
  /// See ``escalate(through:including:to:wakeups:)``. A few entries at most: one per priority.
  private var raisedThrough: [(priority: UInt8, through: UInt64)] = []
  /// How many jobs have ended (finished, failed, or cancelled), for the stall watchdog.
  private(set) var ended: UInt64 = 0

  init(queueName: String, events: EventHub, limit: Int) {
    self.queueName = queueName
    self.events = events
    self.limit = limit
  }

  /// Whether no job is running or waiting.
  var isIdle: Bool { running.isEmpty && released.isEmpty && pendingCount == 0 }

  /// The number of jobs running now.
  var runningCount: Int { running.count + released.count }

  /// The lowest priority of the jobs admitted since the line was last idle
  /// (`TaskPriority.rawValue`; `UInt8.max` when idle): a waiter of a higher priority must raise
  /// the jobs ahead of it (see ``escalate(through:to:wakeups:)``).
  var lowestPriority = UInt8.max

  /// Lane batches numbered up to this take no more closures: a `waitUntilIdle` caller arrived
  /// after them, and waits for them to end.
  private var laneSealedThrough: UInt64 = 0

  /// The lane batch at the tail of the line, if it may take more `execute(_:)` closures.
  ///
  /// Call it with the inbox's jobs moved in (or the inbox's lock held with it empty): the tail
  /// is then the newest job of the queue, and it waits (a job leaves the line when it starts; a
  /// lane batch, having no handle, is cancelled only with the whole line).
  private func openLaneTail() -> LaneBatch? {
    guard case .detached(let job)? = line.last, job.isLane,
      job.id.rawValue > laneSealedThrough
    else { return nil }
    // `isLane` is set only by `LaneBatch`'s initializer.
    return unsafeDowncast(job, to: LaneBatch.self)
  }

  /// Adds an `execute(_:)` closure to the lane batch at the tail of the line, if it may take
  /// more (see `openLaneTail()` for when to call it).
  ///
  /// - Returns: `false` if the tail is not an open lane batch: the caller admits a new one.
  mutating func appendToOpenLaneTail(_ work: LaneWork) -> Bool {
    guard let tail = openLaneTail() else { return false }
    tail.append(work)
    waitingLaneExtra += 1
    return true
  }

  /// Closures waiting in lane batches in line beyond the first of each (which `pendingCount`
  /// counts as one job): the queue's public `pendingCount` counts every closure.
  private var waitingLaneExtra = 0

  /// Every job and `execute(_:)` closure waiting in line: what the queues' `pendingCount` says.
  var pendingWorkCount: Int { pendingCount + waitingLaneExtra }

  /// The closures of a lane batch beyond its first; 0 for any other job.
  ///
  /// Read under the queue's lock while the job is in line (see `LaneBatch.work`).
  private static func laneExtra(of entry: Entry) -> Int {
    guard case .detached(let job) = entry, job.isLane else { return 0 }
    return unsafeDowncast(job, to: LaneBatch.self).count - 1
  }

  /// Whether the queue's ``JobInbox`` is open to producers, as last settled.
  ///
  /// The inbox's own flag changes only under the queue's lock, so this copy is exact.
  var inboxIsWatched = false

  /// Whether new detached jobs may wait in the queue's ``JobInbox``: jobs are waiting already
  /// (so a new one could not start now) and a running job holding a slot will look at the line
  /// again when it ends.
  ///
  /// A busy line with nobody waiting does not count: a queue used one job at a time (as by
  /// `enqueueAndWait` callers) then never opens and closes the inbox, and the first detached job
  /// that finds the line busy goes in line under the queue's lock, after which the next ones use
  /// the inbox.
  var defersAdmissions: Bool {
    !running.isEmpty && !line.isEmpty
  }

  /// Whether a job at the head of the line may start now.
  private func canStart(isBarrier: Bool, below: Int) -> Bool {
    running.count < min(limit, below) && !barrierRunning && (!isBarrier || running.isEmpty)
  }

  /// Whether a job admitted now would start at once.
  func startsAtOnce(isBarrier: Bool, below: Int = .max) -> Bool {
    line.isEmpty && canStart(isBarrier: isBarrier, below: below)
  }

  /// Puts a numbered job in line, or starts it at once if it may.
  ///
  /// The job's `enqueued` event was emitted when it was numbered (see ``JobInbox``).
  ///
  /// - Returns: `true` if the job has its turn now.
  mutating func admit(_ entry: Entry) -> Bool {
    let priority = entry.basePriority
    if priority < lowestPriority { lowestPriority = priority }
    // By the invariant, a non-empty line has a head that cannot start: the new entry waits.
    guard line.isEmpty else {
      waitingLaneExtra += Self.laneExtra(of: entry)
      line.append(entry)
      pendingCount += 1
      return false
    }
    let isBarrier = entry.isBarrier
    if canStart(isBarrier: isBarrier, below: entry.startsBelow) {
      // Nobody waits on a new entry yet, so granting it has nothing to wake. A node created
      // granted (see ``startsAtOnce(isBarrier:below:)``) needs no grant.
      if !entry.isGrantedAtAdmission {
        var nothingToWake = Wakeups()
        _ = entry.grant(into: &nothingToWake)
      }
      start(entry, isBarrier: isBarrier)
      return true
    }
    waitingLaneExtra += Self.laneExtra(of: entry)
    line.append(entry)
    pendingCount += 1
    return false
  }

  private mutating func start(_ entry: consuming Entry, isBarrier: Bool) {
    if isBarrier { barrierRunning = true }
    emit(.started, for: entry)
    running.append(RunningEntry(id: entry.id, isBarrier: isBarrier, entry: entry))
  }

  /// Starts every job at the head of the line that may start now.
  ///
  /// Jobs that run in their own task are resumed through `wakeups`; detached jobs are added to
  /// `launches`, for the caller to run.
  mutating func advance(wakeups: inout Wakeups, launches: inout Launches) {
    // Entries are moved out of the line and, if they cannot start, back in: peeking at a copy
    // would cost a retain and a release per look.
    while let head = line.popFirst() {
      let isBarrier = head.isBarrier
      if !canStart(isBarrier: isBarrier, below: head.startsBelow) {
        // Nothing can start while every slot is taken or a barrier runs, whatever the head is.
        // A head that is a barrier (or starts only below a count) waits for running jobs to
        // end; a cancelled one must not block the live jobs behind it.
        if running.count >= limit || barrierRunning || !head.isCancelledWhileWaiting {
          line.prepend(head)
          return
        }
        tombstones -= 1
        continue
      }
      guard head.grant(into: &wakeups) else {
        tombstones -= 1
        continue
      }
      pendingCount -= 1
      if case .detached(let job) = head {
        if job.isLane { waitingLaneExtra -= Self.laneExtra(of: head) }
        launches.append(job)
      }
      start(head, isBarrier: isBarrier)
    }
  }

  /// Ends a running job and starts what may start next.
  mutating func finish(
    _ id: JobID,
    outcome: JobOutcome,
    wakeups: inout Wakeups,
    launches: inout Launches
  ) {
    let finished: Entry
    if let index = running.firstIndex(where: { $0.id == id }) {
      let removed = running.remove(at: index)
      if removed.isBarrier { barrierRunning = false }
      finished = removed.entry
    } else if let index = released.firstIndex(where: { $0.id == id }) {
      finished = released.remove(at: index).entry
    } else {
      return
    }
    switch outcome {
    case .succeeded: emit(.finished, for: finished)
    case .failed(let error): emit(.failed(error), for: finished)
    case .cancelled: emit(.cancelled, for: finished)
    }
    jobEnded(id, wakeups: &wakeups)
    advance(wakeups: &wakeups, launches: &launches)
  }

  /// Gives a running job's slot back while it goes on running (start-ordered lines).
  mutating func release(_ id: JobID, wakeups: inout Wakeups, launches: inout Launches) {
    guard let index = running.firstIndex(where: { $0.id == id }) else { return }
    let entry = running.remove(at: index)
    if entry.isBarrier { barrierRunning = false }
    released.append(entry)
    advance(wakeups: &wakeups, launches: &launches)
  }

  /// Changes how many jobs may hold a slot at once, starting waiting jobs if it grew.
  ///
  /// Lowering it stops nothing that runs; jobs wait until fewer than `limit` run.
  mutating func setLimit(_ newLimit: Int, wakeups: inout Wakeups, launches: inout Launches) {
    limit = newLimit
    advance(wakeups: &wakeups, launches: &launches)
  }

  /// Cancels a waiting entry in O(1): it stays in line as a tombstone.
  ///
  /// - Returns: `true` if the entry was waiting and is now cancelled.
  mutating func cancelWaiting(
    _ entry: Entry,
    wakeups: inout Wakeups,
    launches: inout Launches
  ) -> Bool {
    guard entry.cancelWaiting(into: &wakeups) else { return false }
    tombstones += 1
    pendingCount -= 1
    emit(.cancelled, for: entry)
    jobEnded(entry.id, wakeups: &wakeups)
    sweepTombstonesIfNeeded()
    // A cancelled barrier at the head may have been holding back jobs that can start now.
    advance(wakeups: &wakeups, launches: &launches)
    return true
  }

  /// Drops tombstones once they outnumber live entries, so cancelled jobs never pile up.
  ///
  /// Each sweep is O(n) and follows at least n/2 cancellations: amortized O(1) per cancel.
  private mutating func sweepTombstonesIfNeeded() {
    guard tombstones > 64, tombstones * 2 > line.count else { return }
    line.removeAll { $0.isCancelledWhileWaiting }
    tombstones = 0
  }

  /// Cancels every waiting entry and requests cancellation of the running ones.
  mutating func cancelAll(wakeups: inout Wakeups) {
    // A job running in its caller's task (`enqueueAndWait`) is the caller's to cancel: a
    // cancelled task stays cancelled, so cancelling it here would leave the caller's work after
    // the call (the rest of a view's `.task`, a request handler) cancelled too.
    for running in running { running.entry.cancelRunning(into: &wakeups, sparingCallersTask: true) }
    for running in released {
      running.entry.cancelRunning(into: &wakeups, sparingCallersTask: true)
    }
    let cancelled = line
    line = []
    pendingCount = 0
    waitingLaneExtra = 0
    tombstones = 0
    for entry in cancelled where entry.cancelWaiting(into: &wakeups) {
      emit(.cancelled, for: entry)
      jobEnded(entry.id, wakeups: &wakeups)
    }
  }

  /// Raises every job up to `id` (running, or waiting ahead in line) to at least `priority`, as
  /// awaiting a `Task` raises it: a task of that priority waits for them.
  ///
  /// Running jobs' tasks are raised by `wakeups`; a job that has not begun raises its own task
  /// when it begins.
  ///
  /// - Parameters:
  ///   - id: The last job to raise.
  ///   - including: Whether job `id` itself is raised, or only the jobs ahead of it.
  ///   - priority: The priority that waits for them.
  ///   - wakeups: Where the raising of running tasks is collected.
  ///
  /// Each waiting job is raised to a given priority once: the line remembers, per priority, the
  /// last job number it raised to at least that priority, and walks only the jobs after it.
  /// Without that, a line where every new job is admitted above the first one's priority walked
  /// the whole line at every admission: 4,000 such admissions took 2.4 s, quadratic, under the
  /// queue's lock on a cooperative thread.
  mutating func escalate(
    through id: JobID,
    including: Bool = true,
    to priority: TaskPriority,
    wakeups: inout Wakeups
  ) {
    let last = including ? id.rawValue : id.rawValue &- 1
    for running in running where running.id.rawValue <= last {
      running.entry.escalate(to: priority, into: &wakeups)
    }
    for running in released where running.id.rawValue <= last {
      running.entry.escalate(to: priority, into: &wakeups)
    }
    let level = priority.rawValue
    // Waiting jobs up to `done` were raised to this priority or higher already.
    var done: UInt64 = 0
    for raised in raisedThrough where raised.priority >= level { done = max(done, raised.through) }
    guard done < last else { return }
    var index = firstIndexInLine(after: done)
    while index < line.endIndex {
      let entry = line[index]
      guard entry.id.rawValue <= last else { break }
      entry.escalate(to: priority, into: &wakeups)
      index += 1
    }
    if let existing = raisedThrough.firstIndex(where: { $0.priority == level }) {
      raisedThrough[existing].through = max(raisedThrough[existing].through, last)
    } else {
      raisedThrough.append((level, last))
    }
  }

  /// The index of the first entry in line numbered after `id` (the line is in number order).
  private func firstIndexInLine(after id: UInt64) -> Int {
    var low = line.startIndex
    var high = line.endIndex
    while low < high {
      let middle = low + (high - low) / 2
      if line[middle].id.rawValue <= id { low = middle + 1 } else { high = middle }
    }
    return low
  }

  /// Admits a job and, if it has a higher priority than a job already in line, raises the jobs
  /// ahead of it to its priority: the new job waits for them, as a higher-priority task
  /// awaiting a `Task` would.
  ///
  /// - Parameters:
  ///   - entry: The numbered job.
  ///   - wakeups: Where the raising of running tasks is collected.
  /// - Returns: `true` if the job has its turn now.
  @discardableResult
  mutating func admitRaisingAhead(_ entry: Entry, wakeups: inout Wakeups) -> Bool {
    let lowest = lowestPriority
    let startsNow = admit(entry)
    let priority = entry.basePriority
    if priority > lowest, !startsNow {
      escalate(
        through: entry.id,
        including: false,
        to: TaskPriority(rawValue: priority),
        wakeups: &wakeups
      )
    }
    return startsNow
  }

  /// Requests cancellation of the entry if it is running.
  func cancelIfRunning(_ id: JobID, wakeups: inout Wakeups) {
    let running = running.first { $0.id == id } ?? released.first { $0.id == id }
    running?.entry.cancelRunning(into: &wakeups)
  }

  /// Whether the job with this identifier is running.
  func isRunning(_ id: JobID) -> Bool {
    running.contains { $0.id == id } || released.contains { $0.id == id }
  }

  // MARK: Idle waiters

  /// Registers a `waitUntilIdle` caller, to be resumed once every job enqueued so far has ended.
  ///
  /// - Parameters:
  ///   - node: The waiter.
  ///   - mark: The last job number handed out; every job numbered up to it is in the line,
  ///     running, or over.
  /// - Returns: `false` if no job is running or waiting, so there is nothing to wait for.
  mutating func admitIdleWaiter(_ node: TurnNode, mark: UInt64) -> Bool {
    let outstanding = runningCount + pendingCount
    guard outstanding > 0 else { return false }
    // A batch it waits for must not grow while it waits.
    laneSealedThrough = mark
    idleWaiters.append(IdleWaiter(node: node, mark: mark, remaining: outstanding))
    return true
  }

  /// The number of `waitUntilIdle` callers waiting (for tests).
  var idleWaiterCount: Int { idleWaiters.count }

  /// Takes a cancelled `waitUntilIdle` caller out of the waiters.
  mutating func cancelIdleWaiter(_ node: TurnNode, wakeups: inout Wakeups) {
    guard node.cancelWaiting(into: &wakeups) else { return }
    idleWaiters.removeAll { $0.node === node }
  }

  /// Counts a job as ended for every waiter that arrived after it was enqueued.
  ///
  /// With no waiter this is one branch.
  private mutating func jobEnded(_ id: JobID, wakeups: inout Wakeups) {
    ended &+= 1
    guard !idleWaiters.isEmpty else { return }
    var index = 0
    while index < idleWaiters.count {
      if idleWaiters[index].mark >= id.rawValue {
        idleWaiters[index].remaining -= 1
        if idleWaiters[index].remaining == 0 {
          _ = idleWaiters[index].node.grant(into: &wakeups)
          idleWaiters.remove(at: index)
          continue
        }
      }
      index += 1
    }
  }

  // MARK: Diagnostics

  /// Each running job's number and phase (`#3 running`, `#4 granted, not begun`), for the stall
  /// watchdog.
  var runningDescriptions: [String] {
    running.map { running in
      let kind: String
      switch running.entry {
      case .turn: kind = "task"
      case .detached: kind = "detached"
      }
      let phase: JobPhase
      switch running.entry {
      case .turn(let node): phase = node.withPins { phase, _ in phase }
      case .detached(let job): phase = job.withPins { phase, _ in phase }
      }
      let shown = phase == .granted ? "granted, not begun" : "\(phase)"
      return "#\(running.id.rawValue) \(kind) \(shown)"
    }
  }

  /// How many entries the line holds, cancelled ones included.
  var lineEntries: Int { line.count }

  // MARK: Events

  /// Delivers an event about `entry` to the queue's listeners.
  ///
  /// With nobody listening it reads nothing from the entry.
  func emit(_ kind: QueueEvent.Kind, for entry: Entry) {
    guard events.hasListeners else { return }
    // Lane work reports no events (with listeners, `execute(_:)` makes ordinary jobs).
    if case .detached(let job) = entry, job.isLane { return }
    events.emit(kind, jobID: entry.id, jobName: entry.name, queueName: queueName)
  }
}

/// Detached jobs given their turn in one locked section, for the caller to run once unlocked.
///
/// Usually at most one: kept inline, without an array.
struct Launches {
  private(set) var first: (RunnableJob)?
  private(set) var rest: [RunnableJob] = []

  mutating func append(_ job: RunnableJob) {
    if first == nil {
      first = job
    } else {
      rest.append(job)
    }
  }
}
