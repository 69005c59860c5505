/// A ``TurnNode``'s state, kept by ``TurnNodeStorage`` (the platform room) under the node's lock.
struct TurnNodeState {
  var phase = JobPhase.waiting
  var continuation: UnsafeContinuation<Void, any Error>?
  var pins = PinState()
  /// The queue running the job, from ``begin(in:owner:parent:)`` until ``endRunning()``:
  /// the node is then the job's reentrancy frame.
  var owner: JobQueueCore?
  /// The frame that was current when the job began; kept after the job ends, as the frames
  /// of the jobs around it still matter to a task that escaped it.
  var parentFrame: (any RunningJobFrame)?
}

/// A place in line for work that runs in a task of its own: an `enqueue` job (its own `Task`),
/// an `enqueueAndWait` job (the caller's task) or a `waitUntilIdle` waiter.
///
/// The queue gives the node its turn under the queue's lock; the waiting task suspends on the
/// node until then. Lock order: the queue's lock may be held while the node's lock is taken,
/// never the other way round. No continuation is resumed and no task cancelled under either
/// lock: those go through ``Wakeups``.
// @unchecked Sendable, restated from ``TurnNodeStorage`` (the platform room), which proves the
// state it keeps; every stored property added here is a `let` of a Sendable type.
final class TurnNode: TurnNodeStorage, PinnedJob, RunningJobFrame, @unchecked Sendable {
  enum Purpose: Sendable {
    /// A job: it holds the queue while it runs and calls `finish` when it ends.
    case job
    /// A waiter (for `waitUntilIdle`, or a semaphore's permit): it is resumed when its turn
    /// comes and holds no place in a queue.
    case waiter
  }

  let id: JobID
  let name: String?
  let purpose: Purpose
  /// Whether the job runs alone, as a barrier of a concurrent queue.
  let isBarrier: Bool
  /// Whether the node was created with its turn, as it started the moment it was admitted: the
  /// queue then took no lock of the node to grant it.
  let isGrantedAtAdmission: Bool
  /// The priority the job's task had when it was admitted (`TaskPriority.rawValue`).
  let basePriority: UInt8
  /// How few jobs of its line must run for the job to start.
  ///
  /// `Int.max`: whenever a slot is free. Unlike a barrier, once started it holds no later job
  /// back: a `TaskStore` task that waits for the tasks ahead of it to end, then runs beside
  /// later ones.
  ///
  /// Kept in 32 bits, beside the one-byte fields, so a node is no larger than without it (the
  /// benchmarks' memory row for a pending `enqueue` job).
  private let startsBelowStorage: UInt32
  var startsBelow: Int { startsBelowStorage == .max ? .max : Int(startsBelowStorage) }

  /// Creates a node.
  ///
  /// - Parameters:
  ///   - id: The job's number.
  ///   - name: The job's name, for events.
  ///   - purpose: What the node waits for.
  ///   - isBarrier: Whether the job runs alone.
  ///   - startsBelow: How few jobs of the line must run for the job to start.
  ///   - granted: Whether the node has its turn already (it starts the moment it is admitted):
  ///     the queue then takes no lock of the node to give it.
  ///   - basePriority: The priority of the job's task at admission.
  init(
    id: JobID,
    name: String?,
    purpose: Purpose,
    isBarrier: Bool = false,
    startsBelow: Int = .max,
    granted: Bool = false,
    basePriority: UInt8 = TaskPriority.medium.rawValue
  ) {
    self.id = id
    self.name = name
    self.purpose = purpose
    self.isBarrier = isBarrier
    self.startsBelowStorage = UInt32(clamping: startsBelow)
    self.isGrantedAtAdmission = granted
    self.basePriority = basePriority
    super.init(state: TurnNodeState(phase: granted ? .granted : .waiting))
  }

  /// Whether the node left the line cancelled without ever being granted (a tombstone).
  var isCancelledWhileWaiting: Bool {
    withState { $0.phase == .cancelled }
  }

  /// Whether the node's job is over: it ran and ended, or it was cancelled before it ran.
  var isOver: Bool {
    withState { $0.phase == .finished || $0.phase == .cancelled }
  }

  /// Whether the node's job was cancelled: before it ran, or after it was given its turn.
  var wasCancelled: Bool {
    withState { $0.phase == .cancelled || $0.pins.cancelRequested }
  }

  /// Whether the node still waits for its turn: not yet granted, not cancelled, not begun.
  var isWaiting: Bool {
    withState { $0.phase == .waiting }
  }

  /// Whether the node has its turn already, so the waiting task need not suspend.
  var isGranted: Bool {
    withState { $0.phase == .granted }
  }

  /// Whether the node has been given its turn and its job has not ended.
  var hasTurn: Bool {
    withState { $0.phase == .granted || $0.phase == .running }
  }

  /// Gives the node its turn.
  ///
  /// Called under the queue lock.
  ///
  /// - Returns: `false` if the node was cancelled and must be skipped.
  func grant(into wakeups: inout Wakeups) -> Bool {
    let (granted, continuation) = withState {
      state -> (Bool, UnsafeContinuation<Void, any Error>?) in
      guard state.phase == .waiting else { return (false, nil) }
      state.phase = .granted
      return (true, state.continuation.take())
    }
    if let continuation { wakeups.append(.resume(continuation)) }
    return granted
  }

  /// Cancels the node if it is still waiting.
  ///
  /// Called under the queue lock.
  ///
  /// - Returns: `true` if the node was waiting and is now cancelled.
  func cancelWaiting(into wakeups: inout Wakeups) -> Bool {
    let (cancelled, continuation) = withState {
      state -> (Bool, UnsafeContinuation<Void, any Error>?) in
      guard state.phase == .waiting else { return (false, nil) }
      state.phase = .cancelled
      return (true, state.continuation.take())
    }
    if let continuation { wakeups.append(.resumeCancelled(continuation)) }
    return cancelled
  }

  func withPins<Result: Sendable>(_ body: (JobPhase, inout PinState) -> Result) -> Result {
    withState { body($0.phase, &$0.pins) }
  }

  /// Hands the node the continuation of the task waiting for its turn.
  ///
  /// Call it from `withUnsafeThrowingContinuation`, inside a cancellation handler that cancels
  /// the node. The continuation is resumed when the node is granted, or throws
  /// `CancellationError` if it is cancelled first; if either happened already it is resumed at
  /// once. A plain function rather than an async one that suspends: every async frame of a
  /// waiting task stays in its memory while it waits.
  func parkUntilGranted(_ continuation: UnsafeContinuation<Void, any Error>) {
    let outcome = withState { state -> Bool? in
      switch state.phase {
      case .waiting:
        state.continuation = continuation
        return nil
      case .granted: return true
      case .running, .finished, .cancelled: return false
      }
    }
    switch outcome {
    case true?: continuation.resume()
    case false?: continuation.resume(throwing: CancellationError())
    case nil: break
    }
  }

  /// Marks the granted job as running in the current task, as a job of `owner`, under the
  /// frame that is current (the caller's job, if any) as its parent.
  ///
  /// Not inlined, and reading the task and the frame itself: inlined into `runTurn`, its
  /// temporaries joined that async function's frame, which a waiting `enqueue` job holds while
  /// it waits, and took each pending job past its task's first slab of memory (1.09x -> 1.79x a
  /// suspended bare Task in the benchmarks' memory row).
  ///
  /// - Parameters:
  ///   - callersTask: Whether the current task is the caller's own (`enqueueAndWait`), which
  ///     `cancelAll()` leaves alone.
  ///   - owner: The queue running the job; the node is its reentrancy frame until it ends.
  /// - Returns: `false` if the job was cancelled after it was granted; it must not run.
  @inline(never)
  func begin(callersTask: Bool, owner: JobQueueCore) -> Bool {
    let task = RunningTask.current
    let parent = JobFrame.current
    let (begins, escalation) = withState {
      state -> (Bool, TaskPriority?) in
      guard state.phase == .granted, !state.pins.cancelRequested else { return (false, nil) }
      state.phase = .running
      let escalation = state.pins.start(in: task, callersTask: callersTask)
      state.owner = owner
      state.parentFrame = parent
      return (true, escalation == 0 ? nil : TaskPriority(rawValue: escalation))
    }
    // The job runs in the current task: it may raise its own priority.
    if let escalation { RunningTask.escalateCurrent(to: escalation) }
    return begins
  }

  var runningJob: (owner: any JobOwner, id: JobID)? {
    withState { state in state.owner.map { ($0, id) } }
  }

  var parent: (any RunningJobFrame)? {
    withState { $0.parentFrame }
  }

  /// Marks the job as ended.
  ///
  /// Synchronous, so the usual ending costs no suspension point.
  ///
  /// - Returns: `true` if a canceller is still using the job's task: the caller must then
  ///   `await parkUntilUnpinned()` before its task goes past the job.
  func endRunning() -> Bool {
    withState { state in
      state.phase = .finished
      // The parent stays: a task that escaped this job still sees the jobs around it.
      state.owner = nil
      if !state.pins.isPinned { state.pins.clear() }
      return state.pins.isPinned
    }
  }
}
