// The deadline every database wait of OrderlyPostgres runs under.
//
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

/// Runs `operation`, and stops waiting for it after `limit`, or soon after the connection it
/// runs on has closed.
///
/// A worker must never wait forever for the database: a line whose query never ends would keep
/// its lease, renewed by the worker's other connections, and its key would stall in the whole
/// fleet. PostgresNIO 1.33 never answers a query it wrote to a connection that had just closed
/// (the write has no promise): such a query waits for ever, however short it is.
///
/// After `limit` the operation is cancelled and this function throws ``QueryTimedOut`` at once,
/// even if the operation ignores the cancellation (it is then left to end on its own; its result
/// is dropped). A statement sent with ``PostgresConnection/checkedQuery(_:logger:)`` inside
/// `operation` names its connection: if that connection is seen closed on two looks of the
/// watch in a row (a fifth of a second apart) while the operation still runs, this function
/// throws ``ConnectionLost`` instead of waiting out the limit (a query that was answered, or
/// failed because the connection closed, has ended by then). Cancelling the caller cancels the
/// operation; the caller waits at most `limit` for it.
///
/// One task runs the operation; one watch, shared by every call in the process, keeps the
/// deadlines (no timer or extra task per query).
///
/// - Parameters:
///   - limit: How long to wait.
///   - operation: The work, run in a task of its own.
/// - Returns: What `operation` returned.
/// - Throws: What `operation` threw, ``QueryTimedOut``, or ``ConnectionLost``.
func withDeadline<T: Sendable>(
  _ limit: Duration,
  _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
  let watched = WatchedQuery<T>(deadline: .now + limit, limit: limit)
  return try await withTaskCancellationHandler {
    // resumed by: the work's task when it ends, or the shared watch when the deadline passes
    // or the connection closes, whichever comes first (`finish` hands on the first outcome).
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
      watched.wait(with: continuation)
      // Watched before the work starts: a call that ends at once leaves the watch at once.
      QueryWatch.shared.add(watched)
      let work = Task {
        let result: Result<T, any Error>
        do {
          result = .success(
            try await QueryConnection.$current.withValue(watched.connection) {
              try await operation()
            }
          )
        } catch {
          result = .failure(error)
        }
        watched.finish(result)
      }
      watched.cancelling(work)
    }
  } onCancel: {
    watched.cancelWork()
  }
}

/// The connection the statement of a ``withDeadline(_:_:)`` call runs on, as far as it said
/// (``PostgresConnection/checkedQuery(_:logger:)`` names it).
final class QueryConnection: Sendable {
  /// The one of the call whose operation runs in this task, if any.
  @TaskLocal static var current: QueryConnection?

  private struct State {
    var isClosed: (@Sendable () -> Bool)?
    var seenClosed = false
  }
  private let state = OrderlyLock(State())

  /// Names the connection the operation's statement runs on now.
  func watch(isClosed: @escaping @Sendable () -> Bool) {
    state.withLock { $0 = State(isClosed: isClosed, seenClosed: false) }
  }

  /// Whether the connection named was closed on this look and the one before.
  fileprivate func closedTwice() -> Bool {
    state.withLock { state in
      guard let isClosed = state.isClosed, isClosed() else {
        state.seenClosed = false
        return false
      }
      defer { state.seenClosed = true }
      return state.seenClosed
    }
  }
}

/// What the watch keeps of a call in flight.
private protocol Watched: AnyObject, Sendable {
  var identifier: UInt64 { get }
  /// What ends the call on this look: its deadline passed, or its connection ended; `nil` if
  /// neither.
  func look(at now: ContinuousClock.Instant) -> (any Error)?
  /// Cancels the operation and hands `error` to the caller.
  func abandon(with error: any Error)
}

private let watchedCount = OrderlyLock<UInt64>(0)

/// One call of ``withDeadline(_:_:)``: its deadline, its connection, and the one caller its
/// first outcome goes to.
private final class WatchedQuery<T: Sendable>: Watched {
  private struct State {
    var continuation: CheckedContinuation<T, any Error>?
    var finished = false
    var cancelled = false
    var work: Task<Void, Never>?
  }

  let deadline: ContinuousClock.Instant
  let limit: Duration
  let identifier: UInt64
  let connection = QueryConnection()
  private let state = OrderlyLock(State())

  init(deadline: ContinuousClock.Instant, limit: Duration) {
    self.deadline = deadline
    self.limit = limit
    self.identifier = watchedCount.withLock { count in
      count &+= 1
      return count
    }
  }

  func wait(with continuation: CheckedContinuation<T, any Error>) {
    state.withLock { $0.continuation = continuation }
  }

  /// Keeps the task running the operation, to cancel it; cancels it at once if the call has
  /// ended or was cancelled before the task existed.
  func cancelling(_ work: Task<Void, Never>) {
    let now = state.withLock { state -> Bool in
      state.work = work
      return state.finished || state.cancelled
    }
    if now { work.cancel() }
  }

  /// Cancels the operation, now or as soon as its task exists.
  func cancelWork() {
    state.withLock { state -> Task<Void, Never>? in
      state.cancelled = true
      return state.work
    }?.cancel()
  }

  /// Hands the first outcome to the caller and leaves the watch; later ones are dropped.
  func finish(_ result: Result<T, any Error>) {
    let continuation = state.withLock { state -> CheckedContinuation<T, any Error>? in
      guard !state.finished else { return nil }
      state.finished = true
      defer { state.continuation = nil }
      return state.continuation
    }
    guard let continuation else { return }
    QueryWatch.shared.remove(identifier)
    continuation.resume(with: result)
  }

  func look(at now: ContinuousClock.Instant) -> (any Error)? {
    if now >= deadline { return QueryTimedOut(limit: limit) }
    return connection.closedTwice() ? ConnectionLost() : nil
  }

  func abandon(with error: any Error) {
    cancelWork()
    finish(.failure(error))
  }
}

/// The one watch of the process over every ``withDeadline(_:_:)`` call in flight: a task that
/// looks every fifth of a second while any is, and ends when none is.
private final class QueryWatch: Sendable {
  static let shared = QueryWatch()

  /// How often the watch looks.
  static let interval = Duration.milliseconds(200)

  private struct State {
    var watched: [UInt64: any Watched] = [:]
    var running = false
  }
  private let state = OrderlyLock(State())

  func add(_ query: any Watched) {
    let start = state.withLock { state -> Bool in
      state.watched[query.identifier] = query
      guard !state.running else { return false }
      state.running = true
      return true
    }
    if start { Task.detached { await self.run() } }
  }

  func remove(_ identifier: UInt64) {
    state.withLock { _ = $0.watched.removeValue(forKey: identifier) }
  }

  private func run() async {
    while true {
      // Safe as library code: real time, not an outbox's injected clock (the watch bounds
      // waits for the network, as the leases it guards run on real time); it sleeps only while
      // a call is in flight and ends when none is; and a sleep that fails (the detached watch
      // is never cancelled) only looks again sooner.
      try? await Task.sleep(for: Self.interval)
      let watched = state.withLock { state -> [any Watched] in
        if state.watched.isEmpty { state.running = false }
        return Array(state.watched.values)
      }
      if watched.isEmpty { return }
      let now = ContinuousClock.now
      for query in watched {
        if let error = query.look(at: now) { query.abandon(with: error) }
      }
    }
  }
}
#endif
