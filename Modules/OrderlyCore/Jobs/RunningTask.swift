/// A reference to the task that is running a job, kept so the queue can cancel that job.
///
/// `UnsafeCurrentTask` is not `Sendable` because it must not outlive its task. This wrapper is
/// safe under the one rule every job follows: a job stores the reference (under its own lock)
/// only when it starts running inside that task, and clears it (under the same lock) when it
/// finishes, before the task can go past the job. ``cancel()`` is only ever called under that
/// lock while the reference is stored, so the task is alive whenever it is cancelled, and
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

  /// Cancels the task. Call it only under the lock of the job that stored this reference.
  func cancel() {
    task.cancel()
  }
}
