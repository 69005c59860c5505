// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import OrderlyCore

/// A query that did not end within its deadline: the worker gave up waiting for it.
struct QueryTimedOut: Error, CustomStringConvertible {
  let limit: Duration
  var description: String {
    "the database did not answer within \(limit); the query was abandoned"
  }
}

/// Runs `operation`, and stops waiting for it after `limit`.
///
/// A worker must never wait forever for the database: a line whose query never ends would keep
/// its lease, renewed by the worker's other connections, and its key would stall in the whole
/// fleet. After `limit` the operation is cancelled and this function throws
/// ``QueryTimedOut`` at once, even if the operation ignores the cancellation (it is then left
/// to end on its own; its result is dropped). Cancelling the caller cancels the operation; the
/// caller waits at most `limit` for it.
///
/// - Parameters:
///   - limit: How long to wait.
///   - operation: The work, run in a task of its own.
/// - Returns: What `operation` returned.
/// - Throws: What `operation` threw, or ``QueryTimedOut``.
func withDeadline<T: Sendable>(
  _ limit: Duration,
  _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
  let work = Task { try await operation() }
  let outcome = Outcome<T>()
  return try await withTaskCancellationHandler {
    try await withCheckedThrowingContinuation { continuation in
      outcome.wait(with: continuation)
      let timer = Task {
        // Real time, not the outbox's injected clock: like the leases it guards (renewed on real
        // time, expiring on the server's), this bounds a wait for the network, which a test's
        // clock does not drive. A test that advanced its clock past a lease would otherwise
        // abandon queries that are merely in flight.
        try await Task.sleep(for: limit)
        work.cancel()
        outcome.finish(.failure(QueryTimedOut(limit: limit)))
      }
      Task {
        let result = await work.result
        timer.cancel()
        outcome.finish(result)
      }
    }
  } onCancel: {
    work.cancel()
  }
}

/// The first result of a race, handed to the one waiter; later ones are dropped.
private final class Outcome<T: Sendable>: Sendable {
  private let waiter = OrderlyLock<CheckedContinuation<T, any Error>?>(nil)

  func wait(with continuation: CheckedContinuation<T, any Error>) {
    waiter.withLock { $0 = continuation }
  }

  func finish(_ result: Result<T, any Error>) {
    waiter.withLock { waiter in
      defer { waiter = nil }
      return waiter
    }?.resume(with: result)
  }
}
#endif
