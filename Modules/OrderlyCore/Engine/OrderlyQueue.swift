/// What every Orderly queue offers beside submitting work: its name, its counts, waiting until it
/// is idle, cancelling everything, and its events.
///
/// ``SerialQueue``, ``ConcurrentQueue``, ``ActorQueue``, ``MainActorQueue``, ``KeyedSerialQueue``
/// and ``CoalescingQueue`` conform. Write code that only controls or observes a queue against
/// this protocol, and it works with any of them:
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
  /// One line of jobs (every queue but the keyed one), or a line per key.
  enum Lines: Sendable {
    case one(JobQueueCore)
    case perKey(any KeyedLines)
  }

  let lines: Lines

  init(core: JobQueueCore) {
    lines = .one(core)
  }

  init(keyed: any KeyedLines) {
    lines = .perKey(keyed)
  }

  var name: String {
    switch lines {
    case .one(let core): core.name
    case .perKey(let keyed): keyed.name
    }
  }

  var pendingCount: Int {
    switch lines {
    case .one(let core): core.pendingCount
    case .perKey(let keyed): keyed.eachLine { $0.pendingCount }.reduce(0, +)
    }
  }

  var runningCount: Int {
    switch lines {
    case .one(let core): core.runningCount
    case .perKey(let keyed): keyed.eachLine { $0.runningCount }.reduce(0, +)
    }
  }

  var isIdle: Bool {
    switch lines {
    case .one(let core): core.isIdle
    case .perKey(let keyed): keyed.eachLine { $0.isIdle }.allSatisfy { $0 }
    }
  }

  func cancelAll() {
    switch lines {
    case .one(let core): core.cancelAll()
    case .perKey(let keyed): _ = keyed.eachLine { $0.cancelAll() }
    }
  }

  func waitUntilIdle(isolation: isolated (any Actor)?) async throws {
    switch lines {
    case .one(let core): try await core.waitUntilIdle(isolation: isolation)
    case .perKey(let keyed): try await keyed.waitUntilEveryLineIdle(isolation: isolation)
    }
  }

  var events: AsyncStream<QueueEvent> {
    switch lines {
    case .one(let core): core.events
    case .perKey(let keyed): keyed.hub.subscribe()
    }
  }

  /// Whether the current task runs inside a job of the queue (of any key's line).
  var isCurrent: Bool {
    switch lines {
    case .one(let core): core.isCurrent
    case .perKey(let keyed): keyed.eachLine { $0.isCurrent }.contains(true)
    }
  }
}

/// A queue with a line per key (``KeyedSerialQueue``), as its ``QueueEngine`` reaches it.
protocol KeyedLines: Sendable {
  var name: String { get }
  /// Where every line's events go.
  var hub: EventHub { get }
  /// `body` applied to each line that exists now (a key with a job running or waiting).
  func eachLine<Result>(_ body: (JobQueueCore) -> Result) -> [Result]
  /// Returns once every job enqueued before the call, on any line, has ended.
  func waitUntilEveryLineIdle(isolation: isolated (any Actor)?) async throws
}

extension OrderlyQueue {
  /// The queue's name, used in its events and errors.
  public var name: String { _engine.name }

  /// The number of jobs waiting for their turn, not counting running ones (for a keyed queue,
  /// over every key).
  public var pendingCount: Int { _engine.pendingCount }

  /// The number of jobs that have started and not yet ended (suspended ones included; for a
  /// keyed queue, over every key).
  public var runningCount: Int { _engine.runningCount }

  /// Whether no job is running or waiting.
  public var isIdle: Bool { _engine.isIdle }

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
    _engine.cancelAll()
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
    try await _engine.waitUntilIdle(isolation: isolation)
  }

  /// A sequence of everything that happens to this queue's jobs from now on, in order.
  ///
  /// Each read of this property starts a new, independent listener that receives every event
  /// from that moment; earlier events are not replayed. Events are buffered without limit until
  /// read, so read them as they come or drop the sequence; a dropped listener is forgotten at
  /// the next event. The sequence ends when the queue and its last job are freed. With no
  /// listener, the queue builds no events at all. For an ``ActorQueue`` or a
  /// ``MainActorQueue``, `started` means the job was given its turn.
  public var events: AsyncStream<QueueEvent> { _engine.events }
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
  public var isCurrent: Bool { _engine.isCurrent }

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
    assert(
      _engine.isCurrent,
      QueueAssertions.failure(queue: _engine.name, message: message()),
      file: file,
      line: line
    )
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
    precondition(
      _engine.isCurrent,
      QueueAssertions.failure(queue: _engine.name, message: message()),
      file: file,
      line: line
    )
  }
}
