/// How a job ended.
enum JobOutcome: Sendable {
  case succeeded
  case failed(any Error)
  case cancelled

  init<Success>(_ result: Result<Success, any Error>) {
    switch result {
    case .success: self = .succeeded
    case .failure(let error) where error is CancellationError: self = .cancelled
    case .failure(let error): self = .failed(error)
    }
  }
}

/// How a detached job's run went, for the runner task that ran it.
struct RunReport {
  /// The job's number (read here, where it costs no witness call).
  let id: JobID
  let outcome: JobOutcome
  /// Whether the job was cancelled after it was given its turn.
  ///
  /// Only such a cancellation cancels the runner's task (while the job runs, and before the job
  /// ends), so a runner whose job reports `false` was not cancelled and may run the next job.
  let cancelRequested: Bool
}

/// A detached job's state, with the result type erased so that nothing generic is instantiated
/// per job (see ``DetachedJob``).
///
/// Fields are ordered so that `phase` fills the padding after `result`: one allocation size class
/// smaller per job.
struct ErasedJobState {
  /// A job's result with its type erased.
  ///
  /// `Void`, the usual result of a detached job, has a case of its own: storing, copying and
  /// delivering it then never goes through an existential's value witnesses.
  enum Outcome {
    case void
    case value(any Sendable)
    case failure(any Error)

    /// The outcome of `operation`, kept typed as long as it is awaited.
    @_specialize(where Success == Void)
    static func of<Success: Sendable>(
      _ operation: () async throws -> Success
    ) async -> Outcome {
      do {
        let value = try await operation()
        // Folded away in the `Void` specialization.
        return Success.self == Void.self ? .void : .value(value)
      } catch {
        return .failure(error)
      }
    }

    /// The outcome of a synchronous `operation`.
    @_specialize(where Success == Void)
    static func of<Success: Sendable>(synchronous operation: () throws -> Success) -> Outcome {
      do {
        let value = try operation()
        return Success.self == Void.self ? .void : .value(value)
      } catch {
        return .failure(error)
      }
    }

    /// How the job ended, for the queue's bookkeeping.
    var jobOutcome: JobOutcome {
      switch self {
      case .void, .value: .succeeded
      case .failure(let error) where error is CancellationError: .cancelled
      case .failure(let error): .failed(error)
      }
    }

    /// The result as `Success`.
    @_specialize(where Success == Void)
    func typed<Success: Sendable>(as _: Success.Type) -> Result<Success, any Error> {
      switch self {
      case .void:
        guard let value = () as? Success else { return .failure(DetachedJobResultMismatch()) }
        return .success(value)
      case .value(let value):
        guard let value = value as? Success else { return .failure(DetachedJobResultMismatch()) }
        return .success(value)
      case .failure(let error):
        return .failure(error)
      }
    }
  }

  var result: Outcome?
  var phase = JobPhase.waiting
  /// The queue running the job, from the moment it begins until it ends.
  ///
  /// While it is set, the job is the frame that reentrancy checks see (``RunningJobFrame``). It
  /// is held only while the job runs, so a pending job never keeps its queue alive.
  var owner: JobQueueCore?
  var awaiters: [UnsafeContinuation<Outcome, Never>] = []
  var pins = PinState()
}

/// The value stored in a job's result was not of its `Success` type.
///
/// Cannot happen: the only value ever stored is what the job's own operation returned, and the
/// operation returns `Success`. It exists so that the cast back needs no force-unwrap.
struct DetachedJobResultMismatch: Error, CustomStringConvertible {
  var description: String { "internal error: a detached job's result had the wrong type" }
}

/// A job that a queue's runner task runs: everything of an `enqueueDetached` job except its
/// operation, with no generic parameter.
///
/// The line, the inbox and the runner hold jobs as this class: reading a field is a load and
/// calling ``run(in:owner:)`` a class method call, where a protocol existential (as before) made
/// both calls through a witness table and took two words per job in every list. Its state is
/// stored with the result type erased (``ErasedJobState``), so that nothing generic is
/// instantiated per job: profiling `enqueueDetached` with `perf` showed such lookups at about
/// 40% of a job's time once. Its one subclass, ``DetachedJob``, adds the operation, typed.
///
/// While it runs the job is its own reentrancy frame. Lock order as for ``TurnNode``: the queue's
/// lock may be held while this job's lock is taken, and nothing is resumed or cancelled under
/// either.
// @unchecked Sendable, proved here: a class that is not final cannot be checked by the compiler.
// Every stored property is a `let` of a Sendable type; the state and number live in
// ``RunnableJobStorage`` (the platform room), whose own comment proves them; the subclasses add a
// field each that they read and write only under the job's lock (see their comments).
class RunnableJob: RunnableJobStorage, PinnedJob, RunningJobFrame, @unchecked Sendable {
  let name: String?
  let priority: TaskPriority?
  /// `(priority ?? .medium).rawValue`, computed once: the line reads it for every admission.
  let basePriority: UInt8
  let isBarrier: Bool
  /// Whether the job's work is a synchronous closure, which ``runSynchronously(in:owner:)``
  /// runs with no async frame.
  let isSynchronous: Bool
  /// Whether the job is a ``LaneBatch``: work of `execute(_:)`, which has no handle and reports
  /// no events.
  let isLane: Bool

  init(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool,
    isSynchronous: Bool,
    isLane: Bool = false
  ) {
    self.name = name
    self.priority = priority
    self.basePriority = (priority ?? .medium).rawValue
    self.isBarrier = isBarrier
    self.isSynchronous = isSynchronous
    self.isLane = isLane
    super.init()
  }

  final var runningJob: (owner: any JobOwner, id: JobID)? {
    withState { state in state.owner.map { ($0, id) } }
  }

  /// A detached job runs in the queue's runner task, never inside another job.
  final var parent: (any RunningJobFrame)? { nil }

  final var isCancelledWhileWaiting: Bool {
    withState { $0.phase == .cancelled }
  }

  /// Whether the job is over: it ran and ended, or it was cancelled before it ran.
  final var isOver: Bool {
    withState { $0.result != nil }
  }

  /// Whether the job was cancelled: before it ran, or by a request while it ran.
  final var isCancelled: Bool {
    withState { $0.phase == .cancelled || $0.pins.cancelRequested }
  }

  final func grant(into wakeups: inout Wakeups) -> Bool {
    withState { state in
      guard state.phase == .waiting else { return false }
      state.phase = .granted
      return true
    }
  }

  final func cancelWaiting(into wakeups: inout Wakeups) -> Bool {
    let cancelled = withState { state in
      guard state.phase == .waiting else { return false }
      state.phase = .cancelled
      state.result = .failure(CancellationError())
      return true
    }
    // The work is released by the wakeup, once every lock is released: it may run any
    // deinitializer the closure captured, and this is called under the queue's lock, which
    // such a deinitializer may take (by submitting to the queue, or reading its counts).
    if cancelled { wakeups.append(.cancelAwaiters(self)) }
    return cancelled
  }

  /// Releases the cancelled job's work and resumes whoever awaits the job with its
  /// cancellation; called with no lock held.
  final func resumeAwaitersCancelled() {
    dropWork()
    let awaiters = withState { state in
      defer { state.awaiters = [] }
      return state.awaiters
    }
    for awaiter in awaiters { awaiter.resume(returning: .failure(CancellationError())) }
  }

  final func withPins<Result: Sendable>(_ body: (JobPhase, inout PinState) -> Result) -> Result {
    withState { body($0.phase, &$0.pins) }
  }

  /// Runs the granted job in the current task, bound as the current frame of `owner`, and
  /// delivers its result.
  ///
  /// ``DetachedJob`` overrides it.
  func run(in task: RunningTask?, owner: JobQueueCore) async -> RunReport {
    // Not reached: every job is a `DetachedJob`, which overrides this.
    end(with: .failure(DetachedJobResultMismatch())).0
  }

  /// Runs a granted synchronous job in the current task, as ``run(in:owner:)`` does, without
  /// an async frame.
  ///
  /// ``DetachedJob`` overrides it.
  ///
  /// - Returns: The report, and whether a canceller still pins the job: the runner must then
  ///   call `parkUntilUnpinned()` before the job's task may go past it.
  func runSynchronously(in task: RunningTask?, owner: JobQueueCore) -> (RunReport, pinned: Bool) {
    // Not reached: every job is a `DetachedJob`, which overrides this.
    end(with: .failure(DetachedJobResultMismatch()))
  }

  /// Drops the job's work; called once the job was cancelled before it ran, with no lock held.
  func dropWork() {}

  /// Marks a granted job running in `task` for `owner`, calling `takeWork` under the job's lock;
  /// returns `nil` (and takes nothing) if it was cancelled after its turn came.
  @inline(__always)
  final func begin<Work>(
    in task: RunningTask?,
    owner: JobQueueCore,
    takeWork: () -> Work?
  ) -> Work? {
    var escalation: UInt8 = 0
    let work = withState { state -> Work? in
      guard state.phase == .granted, !state.pins.cancelRequested else { return nil }
      state.phase = .running
      state.owner = owner
      escalation = state.pins.start(in: task)
      return takeWork()
    }
    // The job runs in the runner's task, the current one: it may raise its own priority.
    if escalation != 0 { RunningTask.escalateCurrent(to: TaskPriority(rawValue: escalation)) }
    return work
  }

  /// Stores the job's result, resumes its awaiters and reports how it ended.
  @inline(__always)
  final func end(with result: ErasedJobState.Outcome) -> (RunReport, pinned: Bool) {
    let (awaiters, pinned, cancelRequested) = withState { state in
      state.phase = .finished
      state.result = result
      state.owner = nil
      if !state.pins.isPinned { state.pins.clear() }
      let awaiters = state.awaiters
      if !awaiters.isEmpty { state.awaiters = [] }
      return (awaiters, state.pins.isPinned, state.pins.cancelRequested)
    }
    for awaiter in awaiters { awaiter.resume(returning: result) }
    return (RunReport(id: id, outcome: result.jobOutcome, cancelRequested: cancelRequested), pinned)
  }

  /// Waits for the job's result, with its type erased.
  ///
  /// Not cancellable, like `Task.value`.
  fileprivate final func erasedResult() async -> ErasedJobState.Outcome {
    await withUnsafeContinuation { continuation in
      let ready = withState { state -> ErasedJobState.Outcome? in
        if let result = state.result { return result }
        state.awaiters.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }
}

/// An `enqueueDetached` job: a ``RunnableJob`` with its operation, and the cast of its result
/// back to `Success` for awaiters.
///
/// No task is created for it: the queue's runner task calls ``run(in:owner:)``.
// @unchecked Sendable, restated from ``RunnableJob`` and proved there and at `operation`: the
// only field added here is read and written under the job's lock.
final class DetachedJob<Success: Sendable>: RunnableJob, @unchecked Sendable {
  /// A job's work: an async closure, or a synchronous one that the runner calls in a plain
  /// loop.
  enum Work {
    case async(() async throws -> Success)
    case sync(() throws -> Success)
  }

  /// The job's work, until it runs or is cancelled.
  ///
  /// It lives outside the locked state because its type is generic over `Success`; wrapping it
  /// to erase the type would cost an allocation per job (measured: 161 -> 241 bytes per pending
  /// job).
  // Safe: written once in `init`, before the job is shared; afterwards taken only inside the
  // job's lock, by the `takeWork` closure of `begin(in:owner:takeWork:)`, which runs only while
  // the job is `.granted`, or cleared by `dropWork()`, which runs (from the wakeup that
  // `cancelWaiting(into:)` collects) only after the job moved from `.waiting` to `.cancelled`
  // under that lock, so no `takeWork` can follow, and runs once per job. The lock orders every access as it would for a field of the locked state.
  nonisolated(unsafe) private var operation: Work?

  @_specialize(where Success == Void)
  init(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool = false,
    operation: sending @escaping () async throws -> Success
  ) {
    self.operation = .async(operation)
    super.init(name: name, priority: priority, isBarrier: isBarrier, isSynchronous: false)
  }

  /// A job whose work is synchronous.
  @_specialize(where Success == Void)
  init(
    name: String?,
    priority: TaskPriority?,
    isBarrier: Bool = false,
    synchronous operation: sending @escaping () throws -> Success
  ) {
    self.operation = .sync(operation)
    super.init(name: name, priority: priority, isBarrier: isBarrier, isSynchronous: true)
  }

  override func dropWork() {
    operation = nil
  }

  @_specialize(where Success == Void)
  override func run(in task: RunningTask?, owner: JobQueueCore) async -> RunReport {
    let result: ErasedJobState.Outcome
    switch begin(in: task, owner: owner, takeWork: { self.operation.take() }) {
    case .async(let operation):
      // A placeholder that allocates nothing: a `CancellationError` here would box an error
      // for every job (the profile showed one malloc per job in `swift_allocError`).
      var outcome = ErasedJobState.Outcome.void
      await JobFrame.$current.withValue(self) {
        outcome = await .of(operation)
      }
      result = outcome
    case .sync(let operation):
      result = JobFrame.$current.withValue(self) { .of(synchronous: operation) }
    case nil:
      result = .failure(CancellationError())
    }
    let (report, pinned) = end(with: result)
    if pinned { await parkUntilUnpinned() }
    return report
  }

  @_specialize(where Success == Void)
  override func runSynchronously(
    in task: RunningTask?,
    owner: JobQueueCore
  ) -> (RunReport, pinned: Bool) {
    let result: ErasedJobState.Outcome
    switch begin(in: task, owner: owner, takeWork: { self.operation.take() }) {
    case .sync(let operation):
      result = JobFrame.$current.withValue(self) { .of(synchronous: operation) }
    case .async:
      // Not reached: the runner calls this only for jobs made with a synchronous operation.
      result = .failure(DetachedJobResultMismatch())
    case nil:
      result = .failure(CancellationError())
    }
    return end(with: result)
  }

  /// Waits for the job's result.
  ///
  /// Not cancellable, like `Task.value`.
  @_specialize(where Success == Void)
  func result() async -> Result<Success, any Error> {
    await erasedResult().typed(as: Success.self)
  }
}
