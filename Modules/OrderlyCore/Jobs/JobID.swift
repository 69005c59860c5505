/// The identity of one job on one queue.
///
/// A queue numbers its jobs from 1 in the order their enqueue calls took their place in line, so
/// on a FIFO queue a smaller identifier always started earlier. Identifiers of different queues
/// are unrelated.
public struct JobID: Hashable, Comparable, Sendable, CustomStringConvertible {
  /// The job's number on its queue, starting at 1.
  public let rawValue: UInt64

  /// Creates an identifier from its number.
  ///
  /// - Parameter rawValue: The job's number on its queue.
  public init(rawValue: UInt64) {
    self.rawValue = rawValue
  }

  /// Orders identifiers by their number, which is their place in line.
  public static func < (lhs: JobID, rhs: JobID) -> Bool {
    lhs.rawValue < rhs.rawValue
  }

  /// The number with a leading `#`, as in `#12`.
  public var description: String { "#\(rawValue)" }
}
