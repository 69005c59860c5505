import Synchronization

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

/// A job that a queue's runner task runs: the type-erased face of ``DetachedJob``.
protocol RunnableJob: AnyObject, Sendable {
  var id: JobID { get }
  var name: String? { get }
  var priority: TaskPriority? { get }
  var isCancelledWhileWaiting: Bool { get }
  func grant() -> Bool
  func cancelWaiting() -> Bool
  func cancelRunning()
  /// Runs the granted job in the current task with `frame` bound, and delivers its result.
  func run(in task: RunningTask?, frame: JobFrame) async -> JobOutcome
}

/// An `enqueueDetached` job: its operation, its result and the tasks awaiting that result.
///
/// No task is created for it: the queue's runner task calls ``run(in:frame:)``. Lock order as for
/// ``TurnNode``: the queue's lock may be held while this job's lock is taken.
final class DetachedJob<Success: Sendable>: RunnableJob {
  private enum Phase {
    case waiting, granted, running, finished, cancelled
  }

  private struct State {
    var phase: Phase = .waiting
    var operation: (() async throws -> Success)?
    var result: Result<Success, any Error>?
    var awaiters: [UnsafeContinuation<Result<Success, any Error>, Never>] = []
    var runningTask: RunningTask?
    var cancelRequested = false

    /// Stores the result and hands back the awaiters to resume with it.
    mutating func complete(
      _ result: Result<Success, any Error>,
      phase: Phase
    ) -> [UnsafeContinuation<Result<Success, any Error>, Never>] {
      self.phase = phase
      self.result = result
      operation = nil
      runningTask = nil
      defer { awaiters = [] }
      return awaiters
    }
  }

  let name: String?
  let priority: TaskPriority?
  private let state: Mutex<State>
  private let rawID = Atomic<UInt64>(0)

  /// The job's identifier, assigned once under the queue's lock before the job is shared.
  var id: JobID { JobID(rawValue: rawID.load(ordering: .relaxed)) }

  init(
    name: String?,
    priority: TaskPriority?,
    operation: sending @escaping () async throws -> Success
  ) {
    self.name = name
    self.priority = priority
    self.state = Mutex(State(operation: operation))
  }

  /// Numbers the job. Called once, under the queue's lock, before the job is put in line; the
  /// lock's release publishes the value to every thread that later finds the job there.
  func assign(id: JobID) {
    rawID.store(id.rawValue, ordering: .relaxed)
  }

  var isCancelledWhileWaiting: Bool {
    state.withLock(announcingTo: self) { $0.phase == .cancelled }
  }

  /// Whether the job is over: it ran and ended, or it was cancelled before it ran.
  var isOver: Bool {
    state.withLock(announcingTo: self) { $0.result != nil }
  }

  /// Whether the job was cancelled: before it ran, or by a request while it ran.
  var isCancelled: Bool {
    state.withLock(announcingTo: self) { $0.phase == .cancelled || $0.cancelRequested }
  }

  func grant() -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.phase == .waiting else { return false }
      state.phase = .granted
      return true
    }
  }

  func cancelWaiting() -> Bool {
    let awaiters = state.withLock(announcingTo: self) { state in
      guard state.phase == .waiting else { return nil as [UnsafeContinuation<Result<Success, any Error>, Never>]? }
      return state.complete(.failure(CancellationError()), phase: .cancelled)
    }
    guard let awaiters else { return false }
    for awaiter in awaiters { awaiter.resume(returning: .failure(CancellationError())) }
    return true
  }

  func cancelRunning() {
    state.withLock(announcingTo: self) { state in
      switch state.phase {
      case .granted, .running:
        state.cancelRequested = true
        state.runningTask?.cancel()
      case .waiting, .finished, .cancelled: break
      }
    }
  }

  func run(in task: RunningTask?, frame: JobFrame) async -> JobOutcome {
    let operation = state.withLock(announcingTo: self) { state -> (() async throws -> Success)? in
      guard state.phase == .granted, !state.cancelRequested else { return nil }
      state.phase = .running
      state.runningTask = task
      return state.operation.take()
    }
    let result: Result<Success, any Error>
    if let operation {
      do {
        result = .success(try await JobFrame.$current.withValue(frame) { try await operation() })
      } catch {
        result = .failure(error)
      }
    } else {
      result = .failure(CancellationError())
    }
    let awaiters = state.withLock(announcingTo: self) { $0.complete(result, phase: .finished) }
    for awaiter in awaiters { awaiter.resume(returning: result) }
    return JobOutcome(result)
  }

  /// Waits for the job's result. Not cancellable, like `Task.value`.
  func result() async -> Result<Success, any Error> {
    await withUnsafeContinuation { continuation in
      let ready = state.withLock(announcingTo: self) { state -> Result<Success, any Error>? in
        if let result = state.result { return result }
        state.awaiters.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }
}
