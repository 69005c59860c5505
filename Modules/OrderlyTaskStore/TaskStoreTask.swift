internal import OrderlyCore

/// A handle to one task of a ``TaskStore``: await its value or outcome, or cancel it.
///
/// Handles are `Sendable`: await or cancel from anywhere. Two handles are equal when they refer
/// to the same task (a ``TaskStorePolicy/joinExisting`` call returns an equal handle).
public struct TaskStoreTask<Success: Sendable>: Sendable, Hashable {
  let box: TaskBox<Success>

  /// The task's value.
  ///
  /// - Throws: What the operation threw; `CancellationError` if the task was cancelled (before
  ///   it started, or it threw `CancellationError`); ``TaskStoreError/dropped(key:policy:)`` if
  ///   its policy dropped it.
  public var value: Success {
    get async throws {
      switch await box.outcome() {
      case .succeeded(let value): return value
      case .failed(let error): throw error
      case .cancelled: throw CancellationError()
      case .dropped: throw box.droppedError ?? CancellationError()
      }
    }
  }

  /// The task's outcome as a `Result`, once it has ended: the same as ``value``, with its error
  /// as a failure, as `QueuedTask.result` has it for a queue's job.
  public var result: Result<Success, any Error> {
    get async {
      do {
        return .success(try await value)
      } catch {
        return .failure(error)
      }
    }
  }

  /// How the task ended, once it has.
  public var outcome: TaskOutcome<Success> {
    get async { await box.outcome() }
  }

  /// Cancels the task.
  ///
  /// A task still waiting never runs and its awaiters resume at once with `CancellationError`;
  /// a running task sees `Task.isCancelled`. Does nothing once the task has ended.
  ///
  /// A waiting task's end is recorded by its store (its ``TaskStoreEvent/ended(key:task:outcome:)``
  /// event and the key's `lastOutcome`) at once when this is called on the store's actor, and
  /// otherwise as soon as the store's actor runs: in both cases before the task ahead of it
  /// ends, so the events keep the order things happened in.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  public func cancel(isolation: isolated (any Actor)? = #isolation) {
    box.cancel(caller: isolation)
  }

  /// Whether ``cancel(isolation:)`` was called or the store cancelled the task.
  public var isCancelled: Bool { box.isCancelled }

  /// Whether two handles refer to the same task.
  public static func == (lhs: Self, rhs: Self) -> Bool { lhs.box === rhs.box }

  /// Hashes the task's identity.
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(box)) }
}

/// The type-erased face of a task's box, for the store's bookkeeping.
protocol AnyTaskBox: AnyObject, Sendable {
  var id: UInt64 { get }
  var isResolved: Bool { get }
  /// Whether the task was cancelled (set before its `Task` is told).
  var isCancelled: Bool { get }
  /// How the task ended, once it has.
  var outcomeKind: TaskOutcomeKind? { get }
  /// Cancels the task; `caller` is the isolation of the code cancelling it.
  func cancel(caller: (any Actor)?)
  /// Records that the store announced the task's end; `false` if it had already.
  func markEnded() -> Bool
  /// Tells the store, until the task begins, when it is cancelled before it began.
  func setWaitingHook(_ hook: (@Sendable ((any Actor)?) -> Void)?)
  /// Resolves the task as dropped and takes its job out of the engine's line.
  func drop(_ error: TaskStoreError)
  /// Records the engine's job that will run the operation, and whether the engine gave it its
  /// turn the moment it was added; cancels it at once if cancel came first.
  func attach(_ job: QueuedTask<Void>, startedAtOnce: Bool)
}

/// A task's state, result and awaiters, shared by its handles and the store.
///
/// Phases: waiting, running (``begin()``), resolved. A waiting task cancelled or dropped is
/// resolved at once, so its awaiters never wait for its turn.
final class TaskBox<Success: Sendable>: AnyTaskBox {
  private struct State {
    var outcome: TaskOutcome<Success>?
    var awaiters: [UnsafeContinuation<TaskOutcome<Success>, Never>] = []
    var job: QueuedTask<Void>?
    /// Given its turn when it was added: its job runs whatever happens, and reports its end.
    var startedAtOnce = false
    var started = false
    var cancelled = false
    var dropped: TaskStoreError?
    var ended = false
    var waitingHook: (@Sendable ((any Actor)?) -> Void)?
  }

  let id: UInt64
  private let state = OrderlyLock(State())

  init(id: UInt64) {
    self.id = id
  }

  var isResolved: Bool { state.withLock(announcingTo: self) { $0.outcome != nil } }
  var isCancelled: Bool { state.withLock(announcingTo: self) { $0.cancelled } }
  var outcomeKind: TaskOutcomeKind? { state.withLock(announcingTo: self) { $0.outcome?.kind } }
  var droppedError: TaskStoreError? { state.withLock(announcingTo: self) { $0.dropped } }

  /// Records the engine's job that will run the operation; cancels it at once if cancel (or a
  /// drop) came first.
  func attach(_ job: QueuedTask<Void>, startedAtOnce: Bool) {
    let cancelNow = state.withLock(announcingTo: self) { state -> Bool in
      state.job = job
      state.startedAtOnce = startedAtOnce
      return state.cancelled || state.dropped != nil
    }
    if cancelNow { job.cancel() }
  }

  /// Marks the task as running.
  ///
  /// - Returns: `false` if it was cancelled or dropped while waiting; it must not run.
  func begin() -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.outcome == nil, !state.cancelled else { return false }
      state.started = true
      state.waitingHook = nil  // running now: a cancellation is the operation's to answer
      return true
    }
  }

  /// Delivers the outcome to every awaiter; only the first outcome counts.
  @discardableResult
  func resolve(_ outcome: TaskOutcome<Success>) -> Bool {
    let awaiters = state.withLock(announcingTo: self) {
      state -> [UnsafeContinuation<TaskOutcome<Success>, Never>]? in
      guard state.outcome == nil else { return nil }
      state.outcome = outcome
      state.job = nil
      defer { state.awaiters = [] }
      return state.awaiters
    }
    guard let awaiters else { return false }
    for awaiter in awaiters { awaiter.resume(returning: outcome) }
    return true
  }

  func cancel(caller: (any Actor)?) {
    let (job, resolveNow, hook) = state.withLock(announcingTo: self) {
      state -> (QueuedTask<Void>?, Bool, (@Sendable ((any Actor)?) -> Void)?) in
      guard state.outcome == nil else { return (nil, false, nil) }
      state.cancelled = true
      let resolveNow = !state.started
      // A task given its turn when it was added keeps its job until its work would begin: the
      // job then finds it cancelled and reports its end to the store (cancelling the job would
      // skip that). A waiting task's job leaves the engine's line at once.
      let job = state.startedAtOnce && !state.started ? nil : state.job
      return (job, resolveNow, resolveNow ? state.waitingHook.take() : nil)
    }
    job?.cancel()
    if resolveNow { resolve(.cancelled) }
    hook?(caller)
  }

  func markEnded() -> Bool {
    state.withLock(announcingTo: self) { state in
      defer { state.ended = true }
      return !state.ended
    }
  }

  func setWaitingHook(_ hook: (@Sendable ((any Actor)?) -> Void)?) {
    state.withLock(announcingTo: self) { $0.waitingHook = hook }
  }

  func drop(_ error: TaskStoreError) {
    let job = state.withLock(announcingTo: self) { state -> QueuedTask<Void>? in
      state.dropped = error
      state.waitingHook = nil
      return state.job
    }
    resolve(.dropped)
    // Out of the engine's line: the tasks behind it need not wait for a turn it will not take.
    job?.cancel()
  }

  func outcome() async -> TaskOutcome<Success> {
    await withUnsafeContinuation { continuation in
      let ready = state.withLock(announcingTo: self) { state -> TaskOutcome<Success>? in
        if let outcome = state.outcome { return outcome }
        state.awaiters.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }
}
