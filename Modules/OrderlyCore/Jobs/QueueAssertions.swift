/// The checks behind each queue's `isCurrent`, `assertOnQueue` and `preconditionOnQueue`.
enum QueueAssertions {
  /// The message of a failed check.
  static func failure(queue: String, message: String) -> String {
    let reason = "not running inside a job of queue '\(queue)'"
    return message.isEmpty ? reason : "\(message): \(reason)"
  }
}

extension JobQueueCore {
  /// Whether the current task runs a job of this queue, or was started from one that still runs,
  /// or the current thread runs the queue's `execute(_:)` closures.
  var isCurrent: Bool { isRunningLaneWorkHere || JobFrame.isInside(self) }

}
