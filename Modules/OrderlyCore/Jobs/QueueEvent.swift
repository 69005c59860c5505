/// One thing that happened to a job on a queue.
///
/// Read a queue's events from its `events` sequence. Events of one queue are delivered in the
/// order they happened, and their ``timestamp`` never decreases.
public struct QueueEvent: Sendable, CustomStringConvertible {
  /// What happened.
  public enum Kind: Sendable, CustomStringConvertible {
    /// The job took its place in line.
    case enqueued
    /// The job was given its turn and starts running.
    case started
    /// The job's operation returned.
    case finished
    /// The job's operation threw an error other than `CancellationError`.
    case failed(any Error)
    /// The job was cancelled: it left the line before it started, or it ended by throwing
    /// `CancellationError`.
    case cancelled

    /// A one-word name for the kind, as in `started`.
    public var description: String {
      switch self {
      case .enqueued: "enqueued"
      case .started: "started"
      case .finished: "finished"
      case .failed(let error): "failed(\(error))"
      case .cancelled: "cancelled"
      }
    }
  }

  /// What happened to the job.
  public let kind: Kind
  /// The job it happened to.
  public let jobID: JobID
  /// The job's name, if it was given one when it was enqueued.
  public let jobName: String?
  /// The name of the queue the job belongs to.
  public let queueName: String
  /// When it happened, on the monotonic continuous clock.
  public let timestamp: ContinuousClock.Instant

  /// Creates an event.
  ///
  /// - Parameters:
  ///   - kind: What happened.
  ///   - jobID: The job it happened to.
  ///   - jobName: The job's name, if any.
  ///   - queueName: The name of the job's queue.
  ///   - timestamp: When it happened.
  public init(
    kind: Kind,
    jobID: JobID,
    jobName: String?,
    queueName: String,
    timestamp: ContinuousClock.Instant
  ) {
    self.kind = kind
    self.jobID = jobID
    self.jobName = jobName
    self.queueName = queueName
    self.timestamp = timestamp
  }

  /// A line such as `serial #3 (save) started`.
  public var description: String {
    let label = jobName.map { " (\($0))" } ?? ""
    return "\(queueName) \(jobID)\(label) \(kind)"
  }
}
