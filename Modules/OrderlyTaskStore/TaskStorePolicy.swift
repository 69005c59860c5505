/// What ``TaskStore/addTask(forKey:policy:priority:isolation:operation:)`` does when the key
/// already has a task.
///
/// | policy | when a task for the key is already there | known elsewhere as |
/// |---|---|---|
/// | ``cancelPrevious`` (default) | cancel it and start at once; they may overlap while the old one winds down | TCA `cancelInFlight`, Rx `flatMapLatest`, ember `restartable` |
/// | ``cancelPreviousAndWait`` | cancel it, wait until it has ended, then start: never overlap | Kotlin `collectLatest` |
/// | ``enqueue`` | wait for everything already there, then run (FIFO per key) | Rx `concatMap`, ember `enqueue` |
/// | ``concurrent(limit:)`` | run alongside, at most `limit` at once for the key | Rx `merge(maxConcurrent:)`, ember `maxConcurrency` |
/// | ``dropNew`` | do not run the new one; its handle reports it was dropped | Rx `flatMapFirst`, ember `drop` |
/// | ``keepLatest`` | one running, at most one waiting; a newer waiting task replaces the older | ember `keepLatest` |
/// | ``joinExisting`` | return the running task's handle instead of starting another | |
///
/// Whatever the policy, a key's tasks start in the order they were added: a task that may run
/// beside others (``concurrent(limit:)``, or ``joinExisting`` with nothing to join) still waits
/// for the tasks of the key already waiting to start. Each key is a line of `OrderlyCore`'s
/// engine, the one under every Orderly queue, and each policy a rule for when a task may start
/// on it (``enqueue``: when no task of the key runs; ``concurrent(limit:)``: when fewer than
/// `limit` run).
public enum TaskStorePolicy: Sendable, Hashable, CustomStringConvertible {
  /// Cancel every task of the key (running or waiting) and start the new one at once.
  ///
  /// The old task may still be winding down while the new one runs. The default.
  case cancelPrevious
  /// Cancel every task of the key, wait until the running ones have ended, then start: tasks of
  /// the key never overlap. A newer call of this kind replaces an older one still waiting.
  case cancelPreviousAndWait
  /// Wait until every task already there for the key has ended, then run: FIFO per key.
  case enqueue
  /// Run alongside the key's other tasks, at most `limit` at once (`nil`: no limit); beyond the
  /// limit, or while tasks added earlier still wait, wait in FIFO order.
  case concurrent(limit: Int?)
  /// If the key has a task running or waiting, do not run the new one: its handle reports
  /// ``TaskStoreError/dropped(key:policy:)``.
  case dropNew
  /// If the key has a task running, wait, replacing any task already waiting (which reports
  /// dropped): one running and at most one waiting, the latest.
  case keepLatest
  /// If the key has a running task with the same result type, return its handle instead of
  /// starting another; otherwise run the new one alongside, as ``concurrent(limit:)`` with no
  /// limit: at once, unless tasks added earlier still wait.
  case joinExisting

  /// The policy's name, as in `cancelPrevious`.
  public var description: String {
    switch self {
    case .cancelPrevious: "cancelPrevious"
    case .cancelPreviousAndWait: "cancelPreviousAndWait"
    case .enqueue: "enqueue"
    case .concurrent(let limit): "concurrent(limit: \(limit.map(String.init) ?? "nil"))"
    case .dropNew: "dropNew"
    case .keepLatest: "keepLatest"
    case .joinExisting: "joinExisting"
    }
  }
}

/// Why a ``TaskStoreTask`` has no value.
public enum TaskStoreError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The task never ran: its policy dropped it because of another task of the key.
  case dropped(key: String, policy: TaskStorePolicy)

  /// What happened and why.
  public var description: String {
    switch self {
    case .dropped(let key, .dropNew):
      "the task for key \(key) was dropped: .dropNew keeps the task already there"
    case .dropped(let key, .keepLatest):
      "the task for key \(key) was dropped: .keepLatest replaced it with a newer one"
    case .dropped(let key, let policy):
      "the task for key \(key) was dropped by .\(policy)"
    }
  }
}

/// How a task of a ``TaskStore`` ended.
public enum TaskOutcome<Success: Sendable>: Sendable {
  /// Its operation returned this value.
  case succeeded(Success)
  /// Its operation threw this error (other than `CancellationError`).
  case failed(any Error)
  /// It was cancelled: before it started, or it threw `CancellationError` after.
  case cancelled
  /// Its policy dropped it; it never ran.
  case dropped

  /// The outcome without its value.
  public var kind: TaskOutcomeKind {
    switch self {
    case .succeeded: .succeeded
    case .failed: .failed
    case .cancelled: .cancelled
    case .dropped: .dropped
    }
  }
}

/// How a task ended, without its value: for per-key state and events.
public enum TaskOutcomeKind: String, Sendable, Hashable, CustomStringConvertible {
  case succeeded, failed, cancelled, dropped

  /// The kind's name, as in `succeeded`.
  public var description: String { rawValue }
}
