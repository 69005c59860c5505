import DequeModule

/// A counting semaphore for Swift concurrency: tasks wait for a permit without blocking a thread,
/// in strict first-come, first-served order.
///
/// ```swift
/// let connections = AsyncSemaphore(value: 4)
/// let page = try await connections.withPermit { try await fetch(url) }  // at most 4 at once
/// ```
///
/// ## Fairness
///
/// Waiters get permits in the order they called ``wait(isolation:)`` or
/// ``waitUnlessCancelled(isolation:)``. A released permit goes straight to the first waiter; a
/// task arriving later cannot take it first, even if it arrives between the release and the
/// waiter's resumption.
///
/// ## Cancellation
///
/// Two ways to wait, as in the Semaphore package:
///
/// | call | a cancelled task |
/// |---|---|
/// | ``waitUnlessCancelled(isolation:)`` | leaves the line at once and throws `CancellationError` without a permit; a task cancelled before the call throws at once |
/// | ``wait(isolation:)`` | keeps waiting, and gets its permit in turn: use it when the permit must be taken whatever happens, as before a `defer` that signals |
///
/// A task that was given a permit keeps it whatever happens next, and must ``signal()`` it back
/// (``withPermit(isolation:operation:)`` does).
public final class AsyncSemaphore: Sendable {
  private struct State {
    var permits: Int
    var waiters = Deque<TurnNode>()
    /// Cancelled waiters still in `waiters`, skipped when they reach the head.
    var tombstones = 0
  }

  private let state: OrderlyLock<State>

  /// Creates a semaphore with `value` permits.
  ///
  /// - Precondition: `value` is 0 or more; a negative value stops the program with a message
  ///   saying so.
  /// - Parameter value: The number of permits available at first; 0 makes every `wait` wait
  ///   for a `signal`.
  public init(value: Int) {
    precondition(value >= 0, "AsyncSemaphore value must be 0 or more; got \(value)")
    state = OrderlyLock(State(permits: value))
  }

  /// Permits available now, without waiting.
  public var availablePermits: Int {
    state.withLock(announcingTo: self) { $0.permits }
  }

  /// Tasks waiting for a permit now.
  public var waiterCount: Int {
    state.withLock(announcingTo: self) { $0.waiters.count - $0.tombstones }
  }

  /// Takes a permit, waiting in line for one if none is available, whether or not the task is
  /// cancelled.
  ///
  /// Cancellation does not end the wait: the task gets its permit in turn. Use
  /// ``waitUnlessCancelled(isolation:)`` to stop waiting when the task is cancelled.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  public func wait(isolation: isolated (any Actor)? = #isolation) async {
    guard let node = takePermitOrQueue() else { return }
    // No cancellation handler is installed, so nothing can cancel the node: the continuation
    // is only ever resumed by a grant, never with an error.
    _ = try? await withUnsafeThrowingContinuation(isolation: isolation) {
      node.parkUntilGranted($0)
    }
  }

  /// Takes a permit, waiting in line for one if none is available, unless the task is cancelled.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled before or while it waits; it then
  ///   holds no permit and must not call ``signal()`` for this wait.
  public func waitUnlessCancelled(isolation: isolated (any Actor)? = #isolation) async throws {
    try Task.checkCancellation()
    guard let node = takePermitOrQueue() else { return }
    try await withTaskCancellationHandler(
      operation: {
        _ = isolation  // stay on the caller's actor
        try await withUnsafeThrowingContinuation(isolation: isolation) {
          node.parkUntilGranted($0)
        }
      },
      onCancel: { leaveLine(node) },
      isolation: isolation
    )
  }

  /// Takes a free permit, or puts a new waiter in line.
  ///
  /// - Returns: The waiter to park, or `nil` if a permit was taken.
  private func takePermitOrQueue() -> TurnNode? {
    let node = TurnNode(id: JobID(rawValue: 0), name: nil, purpose: .waiter)
    return state.withLock(announcingTo: self) { state -> TurnNode? in
      // Permits are only ever left over when nobody waits, so taking one cannot jump the line.
      if state.permits > 0 {
        state.permits -= 1
        return nil
      }
      state.waiters.append(node)
      return node
    }
  }

  /// Returns a permit: the first waiter gets it, or it becomes available.
  ///
  /// - Returns: `true` if a waiting task was resumed with the permit, `false` if nobody waited
  ///   and the permit became available.
  @discardableResult
  public func signal() -> Bool {
    let (resumed, wakeups) = state.withLock(announcingTo: self) { state in
      var wakeups = Wakeups()
      while let node = state.waiters.popFirst() {
        if node.grant(into: &wakeups) { return (true, wakeups) }
        state.tombstones -= 1
      }
      state.permits += 1
      return (false, wakeups)
    }
    wakeups.run()
    return resumed
  }

  /// Runs `operation` holding a permit, and returns the permit when it ends, however it ends.
  ///
  /// - Parameters:
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The work to run under the permit.
  /// - Returns: What `operation` returned.
  /// - Throws: `CancellationError` if the task is cancelled before it gets a permit (the
  ///   operation then does not run: the wait is ``waitUnlessCancelled(isolation:)``); otherwise
  ///   what `operation` threw.
  public func withPermit<Result>(
    isolation: isolated (any Actor)? = #isolation,
    operation: () async throws -> Result
  ) async throws -> Result {
    try await waitUnlessCancelled()
    defer { signal() }
    return try await operation()
  }

  private func leaveLine(_ node: TurnNode) {
    let wakeups = state.withLock(announcingTo: self) { state in
      var wakeups = Wakeups()
      guard node.cancelWaiting(into: &wakeups) else { return wakeups }
      state.tombstones += 1
      // Sweeping is O(n) and follows n/2 cancellations: amortized O(1) per cancel.
      if state.tombstones > 64, state.tombstones * 2 > state.waiters.count {
        state.waiters.removeAll { $0.isCancelledWhileWaiting }
        state.tombstones = 0
      }
      return wakeups
    }
    wakeups.run()
  }
}
