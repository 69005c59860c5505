/// A queue that can tell whether one of its jobs is running, for reentrancy checks.
protocol JobOwner: AnyObject, Sendable {
  /// Whether the job with this identifier is the one running now.
  func isRunning(_ id: JobID) -> Bool
  /// The error to throw when a job of this queue waits on the same queue.
  var reentrantWaitError: any Error { get }
  /// Whether waiting for another job of the queue from inside one of its jobs can deadlock.
  ///
  /// `true` for queues whose jobs hold their slot until they end; `false` for start-ordered
  /// queues, whose jobs give their slot back as soon as they begin.
  var detectsReentrantWaits: Bool { get }
}

/// A job as the reentrancy check sees it, bound in a task-local value while the job runs.
///
/// Every running job is its own frame: a ``TurnNode`` for a job that runs in a task of its own
/// or in the caller's task, a ``DetachedJob`` for one run by the queue's runner. Binding one
/// allocates nothing.
protocol RunningJobFrame: AnyObject, Sendable {
  /// The queue running the job and the job's identifier; `nil` once the job is over.
  var runningJob: (owner: any JobOwner, id: JobID)? { get }
  /// The frame that was current when the job began, if any.
  var parent: (any RunningJobFrame)? { get }
}

/// The jobs running in the current task, innermost first, recorded in a task-local value.
///
/// A job binds itself as the current frame while its operation runs, so code inside it
/// (including child tasks and tasks it starts, which inherit task-local values) can see which
/// queues it is running on. A frame whose job has ended is stale and is ignored.
enum JobFrame {
  @TaskLocal static var current: (any RunningJobFrame)?

  /// Throws the owner's reentrancy error if the current task is inside a running job of `owner`.
  ///
  /// - Parameters:
  ///   - owner: The queue about to be waited on.
  ///   - always: Check even if the owner's jobs may wait for each other (a wait for the owner to
  ///     go idle includes the waiting job itself, so it can never end).
  /// - Throws: The owner's `reentrantWaitError`.
  static func checkNotInside(_ owner: any JobOwner, always: Bool = false) throws {
    guard always || owner.detectsReentrantWaits else { return }
    if isInside(owner) { throw owner.reentrantWaitError }
  }

  /// Whether the current task runs a job of `owner`, or was started from one that still runs
  /// (a child task, or a `Task {}` that inherited the task-local values).
  static func isInside(_ owner: any JobOwner) -> Bool {
    var frame = current
    while let candidate = frame {
      if let job = candidate.runningJob, job.owner === owner, owner.isRunning(job.id) {
        return true
      }
      frame = candidate.parent
    }
    return false
  }
}

/// What a ``QueuedTask`` needs from the queue that owns its job.
protocol JobQueueBackend: JobOwner {
  /// Cancels a job that runs in its own task: it leaves the line, or is cancelled if running.
  func cancel(_ node: TurnNode)
  /// Cancels a detached job: it leaves the line, or is cancelled if running.
  func cancel(_ job: RunnableJob)
  /// Raises the job `id` and every job ahead of it to the current task's priority, if needed:
  /// the current task is about to await the job's result.
  func escalateForAwaiter(of id: JobID, jobPriority: UInt8)
}
