/// What every Orderly queue offers beside submitting work: its name, its counts, waiting until it
/// is idle, cancelling everything, and its events.
///
/// ``SerialQueue``, ``ConcurrentQueue``, ``ActorQueue`` and ``MainActorQueue`` conform. Write code
/// that only controls or observes a queue against this protocol, and it works with any of them:
///
/// ```swift
/// func shutDown(_ queue: some OrderlyQueue) async {
///   queue.cancelAll()
///   try? await queue.waitUntilIdle()
/// }
/// ```
///
/// The members are implemented once, here, for every queue. Only Orderly's queues can conform:
/// the requirement is the queue's engine, which nothing outside the library can create.
public protocol OrderlyQueue: AnyObject, Sendable {
  /// The engine that runs the queue's jobs; not for use outside Orderly.
  var _engine: QueueEngine { get }
}

/// The engine behind an Orderly queue, as ``OrderlyQueue`` reaches it; it has no API of its own.
public struct QueueEngine: Sendable {
  let core: JobQueueCore
}

extension OrderlyQueue {
  /// The queue's name, used in its events and errors.
  public var name: String { _engine.core.name }

  /// The number of jobs waiting for their turn, not counting running ones.
  public var pendingCount: Int { _engine.core.pendingCount }

  /// The number of jobs that have started and not yet ended (suspended ones included).
  public var runningCount: Int { _engine.core.runningCount }

  /// Whether no job is running or waiting.
  public var isIdle: Bool { _engine.core.isIdle }

  /// Cancels every running job and every pending one; the queue stays usable.
  ///
  /// Pending jobs leave the line at once and their awaiters resume with `CancellationError`
  /// (an `enqueueAndWait` caller that was waiting gets the error; its own task is not
  /// cancelled). Running jobs that run in a task of the queue's (`enqueue`, `enqueueDetached`)
  /// see `Task.isCancelled`. Jobs enqueued after this call run as usual.
  ///
  /// A job of `enqueueAndWait` that has already started runs in its caller's own task, and
  /// `cancelAll()` leaves it running: a cancelled task stays cancelled, so cancelling it would
  /// leave the rest of the caller's work (the rest of a view's `.task`, a request handler)
  /// cancelled after the call returned. It is the caller's to cancel, by cancelling its task.
  /// Work that another party must be able to stop goes through `enqueue`, awaiting `value`:
  /// `cancelAll()` then ends the job and the awaiter gets its error, with its own task
  /// untouched.
  public func cancelAll() {
    _engine.core.cancelAll()
  }

  /// Returns once every job enqueued before this call has ended.
  ///
  /// Jobs enqueued after the call do not delay it. It returns at once when the queue is idle.
  ///
  /// - Parameter isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the waiting task is cancelled (the jobs are not);
  ///   ``QueueError/reentrantWait(queue:)`` if called from inside a job of this queue, which
  ///   would wait for itself.
  public func waitUntilIdle(isolation: isolated (any Actor)? = #isolation) async throws {
    try await _engine.core.waitUntilIdle(isolation: isolation)
  }

  /// A sequence of everything that happens to this queue's jobs from now on, in order.
  ///
  /// Each read of this property starts a new, independent listener that receives every event
  /// from that moment; earlier events are not replayed. Events are buffered without limit until
  /// read, so read them as they come or drop the sequence; a dropped listener is forgotten at
  /// the next event. The sequence ends when the queue and its last job are freed. With no
  /// listener, the queue builds no events at all. For an ``ActorQueue`` or a
  /// ``MainActorQueue``, `started` means the job was given its turn.
  public var events: AsyncStream<QueueEvent> { _engine.core.events }
}

/// A queue whose jobs can tell that they run inside it: ``SerialQueue`` and ``ConcurrentQueue``.
///
/// (An ``ActorQueue``'s jobs run on their actor, which already says where code runs:
/// `actor.assertIsolated()`.)
public protocol AssertableQueue: OrderlyQueue {}

extension AssertableQueue {
  /// Whether the current task runs inside a job of this queue.
  ///
  /// `true` in a running job's operation, and in a child task or a `Task {}` started from it
  /// while the job still runs (they inherit its task-local record); `false` anywhere else,
  /// including a `Task.detached {}` started from a job (it inherits nothing).
  public var isCurrent: Bool { _engine.core.isCurrent }

  /// Stops a debug build if the current task is not inside a job of this queue (see
  /// ``isCurrent``); does nothing in a release build, like `assert`.
  ///
  /// - Parameters:
  ///   - message: What the code expected, shown before the reason.
  ///   - file: The file to name; leave the default.
  ///   - line: The line to name; leave the default.
  public func assertOnQueue(
    _ message: @autoclosure () -> String = String(),
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    _engine.core.assertCurrent(message, file: file, line: line)
  }

  /// Stops the program, in debug and release builds alike, if the current task is not inside a
  /// job of this queue (see ``isCurrent``), like `precondition`.
  ///
  /// - Parameters:
  ///   - message: What the code expected, shown before the reason.
  ///   - file: The file to name; leave the default.
  ///   - line: The line to name; leave the default.
  public func preconditionOnQueue(
    _ message: @autoclosure () -> String = String(),
    file: StaticString = #fileID,
    line: UInt = #line
  ) {
    _engine.core.preconditionCurrent(message, file: file, line: line)
  }
}
