/// Work that must happen after a lock is released: resuming continuations and cancelling tasks.
///
/// Resuming a continuation takes the resumed task's status lock, and cancelling a task runs its
/// cancellation handlers, which take Orderly's locks. Doing either while holding one of those
/// locks can deadlock against a thread that is cancelling the same task, so locked sections only
/// collect wakeups, and the caller runs them once every lock is released.
struct Wakeups: Sendable {
  enum Wakeup: Sendable {
    /// Give a waiting task its turn.
    case resume(UnsafeContinuation<Void, any Error>)
    /// Tell a waiting task its job was cancelled.
    case resumeCancelled(UnsafeContinuation<Void, any Error>)
    /// Deliver a cancelled job's result to its awaiters.
    case cancelAwaiters(RunnableJob)
    /// Cancel the task running a job, then release the job's pin.
    case cancelTask(RunningTask, any PinnedJob)
    /// Raise the priority of the task running a job (`TaskPriority.rawValue`), then release the
    /// job's pin.
    ///
    /// A raw value, not a `TaskPriority`: the Concurrency library's types are resilient, so a
    /// case holding one gave the enum a layout known only at run time, and every `Wakeups`
    /// destroyed at the end of every locked update asked the runtime for its tag.
    case escalateTask(RunningTask, any PinnedJob, UInt8)
  }

  // Most locked sections wake at most one task: keep it inline, without an array. A count
  // rather than an optional says whether `first` is set, so the empty case (the usual one) is
  // one integer compare instead of a runtime call for the tag of an optional multi-payload enum.
  private var count = 0
  private var first: Wakeup?
  private var rest: [Wakeup] = []

  init() {}

  mutating func append(_ wakeup: Wakeup) {
    if count == 0 {
      first = wakeup
    } else {
      rest.append(wakeup)
    }
    count += 1
  }

  /// Runs every wakeup.
  ///
  /// Call it with no lock held.
  func run() {
    guard count > 0, let first else { return }
    Self.run(first)
    if count > 1 {
      for wakeup in rest { Self.run(wakeup) }
    }
  }

  private static func run(_ wakeup: Wakeup) {
    switch wakeup {
    case .resume(let continuation): continuation.resume()
    case .resumeCancelled(let continuation): continuation.resume(throwing: CancellationError())
    case .cancelAwaiters(let job): job.resumeAwaitersCancelled()
    case .cancelTask(let task, let job):
      task.cancel()
      job.unpin()
    case .escalateTask(let task, let job, let priority):
      task.escalate(to: TaskPriority(rawValue: priority))
      job.unpin()
    }
  }
}

/// A job whose running task can be cancelled from outside its lock.
///
/// To cancel the task, a canceller pins the job under the job's lock and takes the task
/// reference; after cancelling it (with no lock held) it calls ``unpin()``. The job does not end,
/// and so its task does not go past the job, until every pin is released. This is what keeps a
/// ``RunningTask`` alive while it is cancelled.
protocol PinnedJob: AnyObject, Sendable {
  /// Runs `body` on the job's phase and pin state under the job's lock.
  func withPins<Result: Sendable>(_ body: (JobPhase, inout PinState) -> Result) -> Result
}

extension PinnedJob {
  /// Cancels the job once it has its turn: before it begins, it will not run; while it runs,
  /// its task is cancelled (by `wakeups`, after the locks are released).
  ///
  /// - Parameters:
  ///   - wakeups: Where the cancellation of a running job's task is collected.
  ///   - sparingCallersTask: Whether a job running in its caller's own task is left alone (see
  ///     ``PinState/requestCancellation(in:sparingCallersTask:)``).
  func cancelRunning(into wakeups: inout Wakeups, sparingCallersTask: Bool = false) {
    let task = withPins { phase, pins in
      pins.requestCancellation(in: phase, sparingCallersTask: sparingCallersTask)
    }
    if let task { wakeups.append(.cancelTask(task, self)) }
  }

  /// Raises the job to at least `priority`: a running job's task now (by `wakeups`, after the
  /// locks are released), a job that has not begun when it begins.
  func escalate(to priority: TaskPriority, into wakeups: inout Wakeups) {
    let task = withPins { phase, pins in pins.requestEscalation(to: priority, in: phase) }
    if let task { wakeups.append(.escalateTask(task, self, priority.rawValue)) }
  }

  /// Releases a pin, resuming the job's task if it waits for the last one.
  func unpin() {
    let ending = withPins { _, pins in pins.unpin() }
    ending?.resume()
  }

  /// Suspends the ending job's task until no canceller holds a pin, then forgets the task.
  ///
  /// Only called when the job found itself pinned as it ended: the uncommon path.
  func parkUntilUnpinned(isolation: isolated (any Actor)? = #isolation) async {
    await withUnsafeContinuation(isolation: isolation) {
      (continuation: UnsafeContinuation<Void, Never>) in
      let endsNow = withPins { _, pins -> Bool in
        guard pins.isPinned else { return true }
        pins.park(continuation)
        return false
      }
      if endsNow { continuation.resume() }
    }
    withPins { _, pins in pins.clear() }
  }
}

/// Where a job is in its life.
///
/// Both kinds of job move through the same phases.
enum JobPhase {
  case waiting, granted, running, finished, cancelled
}

/// The task running a job, whether its cancellation was requested, how many cancellers have
/// pinned it, and the job's task waiting for the last pin to go.
struct PinState {
  private(set) var runningTask: RunningTask?
  /// Set when the job is cancelled after it was given its turn.
  private(set) var cancelRequested = false
  /// The priority a job that has not begun must raise its task to when it begins.
  ///
  /// A higher-priority task waits behind the job. Kept as `TaskPriority.rawValue`, 0 for none,
  /// not as an optional `TaskPriority`: every job's start reads it, and the optional went
  /// through value witnesses there.
  private var pendingEscalation: UInt8 = 0
  /// Whether the job runs in its caller's own task (`enqueueAndWait`) rather than a task of
  /// the queue's: ``requestCancellation(in:sparingCallersTask:)`` may then leave it alone.
  private(set) var runsInCallersTask = false
  private var pins = 0
  private var endWaiter: UnsafeContinuation<Void, Never>?

  /// Whether a canceller holds a pin now.
  var isPinned: Bool { pins > 0 }

  /// Records the task that runs the job.
  ///
  /// - Returns: The priority the job's task must be raised to (`TaskPriority.rawValue`), if a
  ///   higher-priority task waited behind the job before it began; 0 otherwise.
  mutating func start(in task: RunningTask?, callersTask: Bool = false) -> UInt8 {
    runningTask = task
    runsInCallersTask = callersTask
    let escalation = pendingEscalation
    pendingEscalation = 0
    return escalation
  }

  /// Records that a task of `priority` waits behind the job: a job that has not begun raises
  /// its task when it begins; a running job is pinned and its task returned, to raise once the
  /// lock is released.
  mutating func requestEscalation(to priority: TaskPriority, in phase: JobPhase) -> RunningTask? {
    switch phase {
    case .waiting, .granted:
      if pendingEscalation < priority.rawValue { pendingEscalation = priority.rawValue }
      return nil
    case .running:
      return pin()
    case .finished, .cancelled:
      return nil
    }
  }

  /// Records a cancellation of a job in `phase`: a granted job will not begin; a running job
  /// is pinned and its task returned, to cancel once the lock is released.
  ///
  /// - Parameters:
  ///   - phase: The job's phase now.
  ///   - sparingCallersTask: Whether a running job that runs in its caller's own task is left
  ///     alone. `cancelAll()` spares it: cancelling a task cannot be undone, so the caller
  ///     would still see `Task.isCancelled` after the call returned.
  /// - Returns: The running job's task to cancel, pinned; `nil` if there is none to cancel.
  mutating func requestCancellation(
    in phase: JobPhase,
    sparingCallersTask: Bool = false
  ) -> RunningTask? {
    switch phase {
    case .granted:
      cancelRequested = true
      return nil
    case .running:
      if sparingCallersTask, runsInCallersTask { return nil }
      cancelRequested = true
      return pin()
    case .waiting, .finished, .cancelled:
      return nil
    }
  }

  /// Pins the job and returns its task, to cancel once the lock is released.
  mutating func pin() -> RunningTask? {
    guard let runningTask else { return nil }
    pins += 1
    return runningTask
  }

  /// Releases a pin; returns the job's task to resume if it waits for the last one.
  mutating func unpin() -> UnsafeContinuation<Void, Never>? {
    pins -= 1
    guard pins == 0 else { return nil }
    defer { endWaiter = nil }
    return endWaiter
  }

  /// Parks the ending job's task until the last pin is released.
  mutating func park(_ continuation: UnsafeContinuation<Void, Never>) {
    endWaiter = continuation
  }

  /// Forgets the task; called once the job has ended and no pin is held.
  mutating func clear() {
    runningTask = nil
  }
}
