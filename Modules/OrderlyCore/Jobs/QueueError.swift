/// Misuse of an Orderly queue that it detects and reports instead of hanging.
public enum QueueError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A job of the queue waited for work on the same queue.
  ///
  /// On a ``SerialQueue`` or ``ConcurrentQueue`` the waiting job holds its slot, and the awaited
  /// work may not start until that job ends, so the wait could deadlock. Waiting for the queue to
  /// go idle from inside one of its jobs (on any queue) includes the waiting job itself. The
  /// queue throws this at once instead.
  ///
  /// - Parameter queue: The name of the queue.
  case reentrantWait(queue: String)

  /// A ``CoalescingQueue`` job was replaced by a newer one before it started, and never ran.
  ///
  /// - Parameter queue: The name of the queue.
  case superseded(queue: String)

  /// What went wrong and what to do about it.
  public var description: String {
    switch self {
    case .reentrantWait(let queue):
      """
      reentrant wait on queue '\(queue)': a job of this queue (or a task started from it) \
      waited for work on the same queue, which can deadlock because that work cannot start \
      (or the queue cannot go idle) until the waiting job ends. Use enqueue(...) without \
      awaiting to run the work after the current job, or call the work directly inside the job.
      """
    case .superseded(let queue):
      """
      superseded on queue '\(queue)': a newer job was enqueued before this one started, and \
      replaced it; it never ran. Await the newest job's value for the latest result.
      """
    }
  }
}
