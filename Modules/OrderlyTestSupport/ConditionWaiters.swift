import OrderlyCore

/// A value behind a lock, and the tasks waiting for a condition on it to hold.
///
/// The one suspension mechanism behind ``Gate``, ``OrderedRecorder`` and ``ManualClock``: every
/// change goes through ``update(_:)``, which resumes each waiter whose condition now holds.
/// Waiting is cancellable and never leaks a continuation.
final class ConditionWaiters<Value>: Sendable {
  private struct Waiter {
    /// The condition, given the value and the number of waiters that are not watchers.
    let isSatisfied: (Value, Int) -> Bool
    /// A watcher waits for other waiters (``waitForWaiters(_:)``) and is not counted itself.
    let isWatcher: Bool
    var continuation: UnsafeContinuation<Void, any Error>?
  }

  private struct Storage {
    var value: Value
    var waiters: [UInt64: Waiter] = [:]
    var cancelled: Set<UInt64> = []
    var lastToken: UInt64 = 0

    var waiterCount: Int {
      waiters.values.count { !$0.isWatcher }
    }

    /// Removes every waiter whose condition holds and returns their continuations.
    mutating func takeSatisfied() -> [UnsafeContinuation<Void, any Error>] {
      let count = waiterCount
      var ready: [UnsafeContinuation<Void, any Error>] = []
      for (token, waiter) in waiters where waiter.isSatisfied(value, count) {
        if let continuation = waiter.continuation { ready.append(continuation) }
        waiters[token] = nil
      }
      return ready
    }
  }

  private let storage: OrderlyLock<Storage>

  init(_ value: sending Value) {
    storage = OrderlyLock(Storage(value: value))
  }

  /// Reads the value.
  func read<Result: Sendable>(_ body: (Value) -> Result) -> Result {
    storage.withLock(announcingTo: self) { body($0.value) }
  }

  /// Changes the value, then resumes every waiter whose condition holds.
  func update<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
    let (result, ready) = storage.withLock(announcingTo: self) { storage in
      let result = body(&storage.value)
      return (result, storage.takeSatisfied())
    }
    for continuation in ready { continuation.resume() }
    return result
  }

  /// The number of tasks waiting for the value now (watchers not counted).
  var waiterCount: Int {
    storage.withLock(announcingTo: self) { $0.waiterCount }
  }

  /// Suspends until `condition` holds for the value; returns at once if it holds already.
  ///
  /// - Throws: `CancellationError` if the task is cancelled before the condition holds.
  func wait(
    isolation: isolated (any Actor)? = #isolation,
    until condition: @escaping @Sendable (Value) -> Bool
  ) async throws {
    try await suspend(isWatcher: false) { value, _ in condition(value) }
  }

  /// Suspends until at least `count` tasks are waiting for the value.
  ///
  /// - Throws: `CancellationError` if the task is cancelled first.
  func waitForWaiters(
    _ count: Int,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    try await suspend(isWatcher: true) { _, waiters in waiters >= count }
  }

  private func suspend(
    isolation: isolated (any Actor)? = #isolation,
    isWatcher: Bool,
    until condition: @escaping @Sendable (Value, Int) -> Bool
  ) async throws {
    let (token, ready) = storage.withLock(announcingTo: self) {
      storage -> (UInt64?, [UnsafeContinuation<Void, any Error>]) in
      if condition(storage.value, storage.waiterCount) { return (nil, []) }
      storage.lastToken += 1
      storage.waiters[storage.lastToken] = Waiter(
        isSatisfied: condition,
        isWatcher: isWatcher,
        continuation: nil
      )
      // A new waiter may be what a watcher waits for.
      return (storage.lastToken, isWatcher ? [] : storage.takeSatisfied())
    }
    for continuation in ready { continuation.resume() }
    guard let token else { return }
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation(isolation: isolation) {
        (continuation: UnsafeContinuation<Void, any Error>) in
        let outcome = storage.withLock(announcingTo: self) { storage -> Bool? in
          if storage.cancelled.remove(token) != nil { return false }
          guard storage.waiters[token] != nil else { return true }
          storage.waiters[token]?.continuation = continuation
          return nil
        }
        switch outcome {
        case true?: continuation.resume()
        case false?: continuation.resume(throwing: CancellationError())
        case nil: break
        }
      }
    } onCancel: {
      let continuation = storage.withLock(announcingTo: self) {
        storage -> UnsafeContinuation<Void, any Error>? in
        guard let waiter = storage.waiters.removeValue(forKey: token) else { return nil }
        if waiter.continuation == nil { storage.cancelled.insert(token) }
        return waiter.continuation
      }
      continuation?.resume(throwing: CancellationError())
    }
  }
}
