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

/// The jobs running in the current task, innermost first, recorded in a task-local value.
///
/// A job binds a frame while its operation runs, so code inside it (including child tasks and
/// tasks it starts, which inherit task-local values) can see which queues it is running on. A
/// frame whose job has ended is stale and is ignored.
final class JobFrame: Sendable {
  @TaskLocal static var current: JobFrame?

  let owner: any JobOwner
  let jobID: JobID
  let parent: JobFrame?

  init(owner: any JobOwner, jobID: JobID, parent: JobFrame?) {
    self.owner = owner
    self.jobID = jobID
    self.parent = parent
  }

  /// Throws the owner's reentrancy error if the current task is inside a running job of `owner`.
  ///
  /// - Parameters:
  ///   - owner: The queue about to be waited on.
  ///   - always: Check even if the owner's jobs may wait for each other (a wait for the owner to
  ///     go idle includes the waiting job itself, so it can never end).
  /// - Throws: The owner's `reentrantWaitError`.
  static func checkNotInside(_ owner: any JobOwner, always: Bool = false) throws {
    guard always || owner.detectsReentrantWaits else { return }
    var frame = current
    while let candidate = frame {
      if candidate.owner === owner && owner.isRunning(candidate.jobID) {
        throw owner.reentrantWaitError
      }
      frame = candidate.parent
    }
  }
}

/// What a ``QueuedTask`` needs from the queue that owns its job.
protocol JobQueueBackend: JobOwner {
  /// Cancels a job that runs in its own task: it leaves the line, or is cancelled if running.
  func cancel(_ node: TurnNode)
  /// Cancels a detached job: it leaves the line, or is cancelled if running.
  func cancel(_ job: any RunnableJob)
}
