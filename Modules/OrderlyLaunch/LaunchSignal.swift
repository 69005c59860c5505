internal import OrderlyCore

/// A one-shot signal that bridges a delegate or callback into a launch step: the step awaits
/// ``wait(isolation:)``, the callback calls ``fire(_:)``.
///
/// ```swift
/// let unlocked = LaunchSignal<Void>()
/// passcodeScreen.onUnlock = { unlocked.fire() }
/// present(passcodeScreen)
/// try await unlocked.wait()  // throws CancellationError if the step is cancelled first
/// ```
///
/// Firing before anyone waits works (the value is kept), firing again is ignored, any number of
/// tasks may wait, and a waiting task that is cancelled leaves at once: no continuation is ever
/// leaked or resumed twice. Safe to use from any thread.
public final class LaunchSignal<Value: Sendable>: Sendable {
  private struct State {
    var value: Value?
    var waiters: [UInt64: CheckedContinuation<Value, any Error>] = [:]
    var lastToken: UInt64 = 0
  }

  private let state = OrderlyLock(State())

  /// Creates a signal that has not fired.
  public init() {}

  /// Whether the signal has fired.
  public var hasFired: Bool {
    state.withLock(announcingTo: self) { $0.value != nil }
  }

  /// Fires the signal with `value`, resuming every waiter; later calls are ignored.
  ///
  /// - Parameter value: The value every waiter, present and future, receives.
  /// - Returns: `true` if this call fired the signal, `false` if it had fired already.
  @discardableResult
  public func fire(_ value: Value) -> Bool {
    let waiters = state.withLock(announcingTo: self) {
      state -> [CheckedContinuation<Value, any Error>]? in
      guard state.value == nil else { return nil }
      state.value = value
      defer { state.waiters = [:] }
      return Array(state.waiters.values)
    }
    guard let waiters else { return false }
    for waiter in waiters { waiter.resume(returning: value) }
    return true
  }

  /// Waits until the signal fires and returns its value; returns at once if it has fired.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Returns: The value the signal fired with.
  /// - Throws: `CancellationError` if the task is cancelled before the signal fires.
  public func wait(isolation: isolated (any Actor)? = #isolation) async throws -> Value {
    let token = state.withLock(announcingTo: self) { state -> UInt64 in
      state.lastToken += 1
      return state.lastToken
    }
    return try await withTaskCancellationHandler(
      operation: {
        _ = isolation  // stay on the caller's actor
        return try await withCheckedThrowingContinuation(isolation: isolation) {
          (continuation: CheckedContinuation<Value, any Error>) in
          let ready = state.withLock(announcingTo: self) { state -> Result<Value, any Error>? in
            if let value = state.value { return .success(value) }
            if Task.isCancelled { return .failure(CancellationError()) }
            state.waiters[token] = continuation
            return nil
          }
          if let ready { continuation.resume(with: ready) }
        }
      },
      onCancel: {
        let waiter = state.withLock(announcingTo: self) { $0.waiters.removeValue(forKey: token) }
        waiter?.resume(throwing: CancellationError())
      },
      isolation: isolation
    )
  }
}

extension LaunchSignal where Value == Void {
  /// Fires the signal; later calls are ignored.
  ///
  /// - Returns: `true` if this call fired the signal.
  @discardableResult
  public func fire() -> Bool {
    fire(())
  }
}
