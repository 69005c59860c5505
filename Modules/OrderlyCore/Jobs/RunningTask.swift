/// A reference to the task that is running a job, kept so the queue can cancel that job.
///
/// A class, not a struct around `UnsafeCurrentTask`: the Concurrency library's types are
/// resilient, so a struct holding one has a layout known only at run time, and so did every value
/// that kept it (a job's ``PinState`` and the whole locked state of every job). Copying or
/// destroying any of them went through the runtime's value witnesses, on every job (about a
/// tenth of the runner's time in the profile). A reference has a fixed layout; a runner task
/// makes one for all the jobs it runs.
///
/// `UnsafeCurrentTask` is not `Sendable` because it must not outlive its task. This wrapper is
/// safe under the rules every job follows (see ``PinState``): a job stores the reference under
/// its own lock only when it starts running inside that task; a canceller takes the reference
/// only under that lock, pinning the job; and the job does not end (so its task cannot go past
/// it) until every pin is released. The task is therefore alive whenever ``cancel()`` runs, and
/// `UnsafeCurrentTask.cancel()` is itself thread-safe in the runtime.
final class RunningTask: @unchecked Sendable {
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

  /// Raises the task's priority to at least `priority`, as awaiting it from a task of that
  /// priority would.
  ///
  /// Call it only while holding a pin on the job that stored this reference.
  func escalate(to priority: TaskPriority) {
    if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
      task.escalatePriority(to: priority)
    }
  }

  /// Raises the priority of the task this code runs in to at least `priority`.
  static func escalateCurrent(to priority: TaskPriority) {
    if #available(macOS 26, iOS 26, tvOS 26, watchOS 26, visionOS 26, *) {
      withUnsafeCurrentTask { $0?.escalatePriority(to: priority) }
    }
  }
}
