/// A reference to the task that is running a job, kept so the queue can cancel that job.
///
/// `UnsafeCurrentTask` is not `Sendable` because it must not outlive its task. This wrapper is
/// safe under the rules every job follows (see ``PinState``): a job stores the reference under
/// its own lock only when it starts running inside that task; a canceller takes the reference
/// only under that lock, pinning the job; and the job does not end (so its task cannot go past
/// it) until every pin is released. The task is therefore alive whenever ``cancel()`` runs, and
/// `UnsafeCurrentTask.cancel()` is itself thread-safe in the runtime.
struct RunningTask: @unchecked Sendable {
  private let task: UnsafeCurrentTask

  /// The task this code runs in, or `nil` outside of any task.
  static var current: RunningTask? {
    withUnsafeCurrentTask { task in task.map(RunningTask.init(task:)) }
  }

  private init(task: UnsafeCurrentTask) {
    self.task = task
  }

  /// Cancels the task.
  ///
  /// Call it only while holding a pin on the job that stored this reference.
  func cancel() {
    task.cancel()
  }
}
