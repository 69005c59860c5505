/// A queue that can tell whether one of its jobs is running, for reentrancy checks.
protocol JobOwner: AnyObject, Sendable {
  /// Whether the job with this identifier is the one running now.
  func isRunning(_ id: JobID) -> Bool
  /// The error to throw when a job of this queue waits on the same queue.
  var reentrantWaitError: any Error { get }
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
  static func checkNotInside(_ owner: any JobOwner) throws {
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
