/// A serial queue that keeps at most one job waiting: a new job replaces the waiting one.
///
/// Jobs run one at a time, each ending before the next starts, as on a ``SerialQueue``. While a
/// job runs, only the newest job enqueued after it waits: enqueuing another replaces it, and the
/// replaced job never runs; its awaiter throws ``QueueError/superseded(queue:)``. The running job
/// is never touched. This is what a refresh, a search-as-you-type or a save of the latest state
/// wants: after the current run, one more run with the newest input, however many came in.
///
/// ```swift
/// let refresh = CoalescingQueue(name: "refresh")
/// for query in ["s", "sw", "swi", "swift"] {
///   refresh.enqueue { try await search(query) }  // "s" runs; "sw" and "swi" are replaced
/// }
/// ```
///
/// ## Submitting
///
/// ``enqueue(name:priority:isolation:operation:)`` runs the job like `Task { }`: in a new task
/// that inherits the caller's priority, task-local values and actor isolation. Each call takes
/// its place synchronously, so of two calls from the same code the later one replaces the
/// earlier.
///
/// ## Cancellation
///
/// Cancelling the waiting job (through its ``QueuedTask`` or ``cancelAll()``) removes it, and its
/// awaiter throws `CancellationError`; a running job sees `Task.isCancelled`. A job that awaits a
/// job of its own queue throws ``QueueError/reentrantWait(queue:)``, as on a ``SerialQueue``.
public final class CoalescingQueue: OrderlyQueue {
  /// The waiting job's mark: set when a newer job replaces it.
  private final class Waiting: Sendable {
    let node: TurnNode
    private let replaced = OrderlyAtomic(false)

    init(node: TurnNode) {
      self.node = node
    }

    var wasReplaced: Bool { replaced.load(ordering: .acquiring) }

    func markReplaced() { replaced.store(true, ordering: .releasing) }
  }

  let core: JobQueueCore
  /// The job waiting for its turn, if any.
  private let waiting = OrderlyLock<Waiting?>(nil)

  /// Creates an empty, idle queue.
  ///
  /// - Parameter name: A name for events and error messages.
  public init(name: String = "CoalescingQueue") {
    core = JobQueueCore(name: name, limit: 1)
  }

  /// Enqueues a job that runs like `Task { }` once the running job has ended, replacing the job
  /// that waits, if any.
  ///
  /// Callable from synchronous code. The job runs in a new task that inherits what `Task { }`
  /// inherits: the caller's priority, task-local values and actor isolation.
  ///
  /// - Important: The replaced job never runs, and awaiting its value throws
  ///   ``QueueError/superseded(queue:)``.
  ///
  /// - Parameters:
  ///   - name: A name for the job, shown in ``events``.
  ///   - priority: The priority of the job's task; `nil` inherits the caller's, as `Task` does.
  ///   - isolation: The caller's isolation; leave the default.
  ///   - operation: The job's work.
  /// - Returns: A handle to await or cancel the job; dropping it does not cancel the job.
  @discardableResult
  public func enqueue<Success: Sendable>(
    name: String? = nil,
    priority: TaskPriority? = nil,
    isolation: isolated (any Actor)? = #isolation,
    @_inheritActorContext @_implicitSelfCapture operation:
      sending @escaping () async throws
      -> Success
  ) -> QueuedTask<Success> {
    let basePriority = (priority ?? Task.currentPriority).rawValue
    // Admitted, recorded and the replaced job marked under one lock, so the newest job is
    // always the one kept, and a replaced job that begins meanwhile finds its mark under that
    // lock before it runs anything. Marked outside it, a job could begin between the two, see
    // no mark, start its work and then be cancelled by the `cancel` below.
    //
    // Only a job still waiting for its turn is replaced: one that has its turn (it was admitted
    // to an idle queue, or the job ahead of it has just ended) is the current run, and runs.
    let (mine, replaced) = waiting.withLock(announcingTo: self) {
      waiting -> (Waiting, Waiting?) in
      let node = core.admitTurn(named: name, priority: basePriority)
      let mine = Waiting(node: node)
      let previous = waiting
      waiting = mine
      guard let previous, previous.node.isWaiting else { return (mine, nil) }
      previous.markReplaced()
      return (mine, previous)
    }
    // Takes a replaced job that has not begun out of line at once; one that has begun already
    // throws `superseded` on its own, and cancelling it then changes nothing.
    if let replaced { core.cancel(replaced.node) }
    let queueName = core.name
    let task = Task(priority: priority) { [self] () async throws -> Success in
      _ = isolation  // start on the caller's actor, as `Task {}` does
      do {
        return try await core.runTurn(mine.node, callersTask: false) {
          // A job replaced just as it began must not run.
          let replaced = waiting.withLock(announcingTo: self) { current -> Bool in
            if current === mine { current = nil }
            return mine.wasReplaced
          }
          if replaced { throw QueueError.superseded(queue: queueName) }
          return try await operation()
        }
      } catch is CancellationError where mine.wasReplaced {
        throw QueueError.superseded(queue: queueName)
      }
    }
    return QueuedTask(backing: .attached(task, mine.node), owner: core)
  }

  /// The engine that runs the queue's jobs (see ``OrderlyQueue``); not for use outside Orderly.
  ///
  /// Through it the queue has what every Orderly queue has: ``OrderlyQueue/cancelAll()`` (the
  /// running job and the waiting one), ``OrderlyQueue/pendingCount`` (0 or 1),
  /// ``OrderlyQueue/waitUntilIdle(isolation:)`` (every job enqueued before the call has ended
  /// or been replaced), ``OrderlyQueue/isIdle`` and ``OrderlyQueue/events`` (a replaced job
  /// shows as cancelled).
  public var _engine: QueueEngine { QueueEngine(core: core) }
}
