/// Misuse of a ``SerialQueue`` that it detects and reports instead of hanging.
public enum SerialQueueError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A job of the queue waited for work on the same queue.
  ///
  /// The waiting job holds the queue, and the awaited work cannot start until that job ends, so
  /// the wait could only deadlock. The queue throws this at once instead.
  ///
  /// - Parameter queue: The name of the queue.
  case reentrantWait(queue: String)

  /// What went wrong and what to do about it.
  public var description: String {
    switch self {
    case .reentrantWait(let queue):
      """
      reentrant wait on SerialQueue '\(queue)': a job of this queue (or a task started from it) \
      waited for work on the same queue, which can only deadlock because that work cannot start \
      until the waiting job ends. Use enqueue(...) without awaiting to run the work after the \
      current job, or call the work directly inside the job.
      """
    }
  }
}
