import Synchronization

/// A place in line for work that runs in a task of its own: an `enqueue` job (its own `Task`),
/// an `enqueueAndWait` job (the caller's task) or a `waitUntilIdle` waiter.
///
/// The queue gives the node its turn under the queue's lock; the waiting task suspends on the
/// node until then. Lock order: the queue's lock may be held while the node's lock is taken,
/// never the other way round.
final class TurnNode: Sendable {
  enum Purpose: Sendable {
    /// A job: it holds the queue while it runs and calls `finish` when it ends.
    case job
    /// A `waitUntilIdle` waiter: it is resumed when its turn comes and holds nothing.
    case idleWaiter
  }

  private enum Phase {
    case waiting, granted, running, finished, cancelled
  }

  private struct State {
    var phase: Phase = .waiting
    var continuation: UnsafeContinuation<Void, any Error>?
    var runningTask: RunningTask?
    var cancelRequested = false
  }

  let id: JobID
  let name: String?
  let purpose: Purpose
  private let state = Mutex(State())

  init(id: JobID, name: String?, purpose: Purpose) {
    self.id = id
    self.name = name
    self.purpose = purpose
  }

  /// Whether the node left the line cancelled without ever being granted (a tombstone).
  var isCancelledWhileWaiting: Bool {
    state.withLock(announcingTo: self) { $0.phase == .cancelled }
  }

  /// Whether the node's job is over: it ran and ended, or it was cancelled before it ran.
  var isOver: Bool {
    state.withLock(announcingTo: self) { $0.phase == .finished || $0.phase == .cancelled }
  }

  /// Whether the node's job was cancelled: before it ran, or after it was given its turn.
  var wasCancelled: Bool {
    state.withLock(announcingTo: self) { $0.phase == .cancelled || $0.cancelRequested }
  }

  /// Whether the node has its turn already, so the waiting task need not suspend.
  var isGranted: Bool {
    state.withLock(announcingTo: self) { $0.phase == .granted }
  }

  /// Gives the node its turn, resuming its task if it is suspended. Called under the queue lock.
  ///
  /// - Returns: `false` if the node was cancelled and must be skipped.
  func grant() -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.phase == .waiting else { return false }
      state.phase = .granted
      state.continuation.take()?.resume()
      return true
    }
  }

  /// Cancels the node if it is still waiting, resuming its task with `CancellationError`.
  /// Called under the queue lock.
  ///
  /// - Returns: `true` if the node was waiting and is now cancelled.
  func cancelWaiting() -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.phase == .waiting else { return false }
      state.phase = .cancelled
      state.continuation.take()?.resume(throwing: CancellationError())
      return true
    }
  }

  /// Cancels the node's job once it has its turn: before it begins, it will not run; while it
  /// runs, its task is cancelled.
  func cancelRunning() {
    state.withLock(announcingTo: self) { state in
      switch state.phase {
      case .granted: state.cancelRequested = true
      case .running: state.runningTask?.cancel()
      case .waiting, .finished, .cancelled: break
      }
    }
  }

  /// Suspends the calling task until the node is granted, or throws `CancellationError` if it is
  /// cancelled first. The caller wraps it in a cancellation handler that cancels the node.
  func suspendUntilGranted(isolation: isolated (any Actor)? = #isolation) async throws {
    try await withUnsafeThrowingContinuation(isolation: isolation) {
      (continuation: UnsafeContinuation<Void, any Error>) in
      state.withLock(announcingTo: self) { state in
        switch state.phase {
        case .waiting: state.continuation = continuation
        case .granted: continuation.resume()
        case .running, .finished, .cancelled: continuation.resume(throwing: CancellationError())
        }
      }
    }
  }

  /// Marks the granted job as running in `task`.
  ///
  /// - Returns: `false` if the job was cancelled after it was granted; it must not run.
  func begin(in task: RunningTask?) -> Bool {
    state.withLock(announcingTo: self) { state in
      guard state.phase == .granted, !state.cancelRequested else { return false }
      state.phase = .running
      state.runningTask = task
      return true
    }
  }

  /// Marks the job as ended and forgets its task.
  func end() {
    state.withLock(announcingTo: self) { state in
      state.phase = .finished
      state.runningTask = nil
    }
  }
}
