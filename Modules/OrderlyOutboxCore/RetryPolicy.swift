// When a failed delivery is tried again, and when it is set aside.
//
/// When a failed delivery is tried again, and when it is given up.
///
/// After attempt *n* fails with a retryable error, the next attempt waits
/// `initialDelay × multiplier^(n-1)`, at most `maximumDelay`, moved by up to `jitter` of itself
/// either way (so that many clients that lost the same server do not all come back at once).
/// Waits are measured on the outbox's clock, and end early when the outbox is resumed.
///
/// ```swift
/// let retry = try RetryPolicy(maximumAttempts: 10) { error in
///   (error as? HTTPError)?.status != 400
/// }
/// ```
///
/// A policy is checked when it is built: numbers out of range throw
/// ``OutboxError/invalidOption(_:)`` there, so a policy that exists is always valid.
public struct RetryPolicy: Sendable {
  /// The wait after the first failed attempt: 1 second by default.
  public let initialDelay: Duration
  /// How much each wait grows over the one before: 2 by default.
  public let multiplier: Double
  /// The longest wait: 5 minutes by default.
  public let maximumDelay: Duration
  /// How much a wait is moved at random, as a fraction of it: 0.2 by default.
  ///
  /// 0.2 moves a wait by up to 20% either way; 0 makes waits exact.
  public let jitter: Double
  /// How many attempts a message gets before it becomes a dead letter; `nil` (the default)
  /// retries a retryable error forever, as an offline app waiting for its network should.
  public let maximumAttempts: Int?
  /// Whether an error is worth another attempt.
  ///
  /// An error it returns `false` for makes the
  /// message a dead letter at once. By default every error is retryable except
  /// ``PermanentDeliveryFailure``.
  public var isRetryable: @Sendable (any Error) -> Bool

  /// The default policy: waits of 1, 2, 4 … seconds up to 5 minutes, 20% jitter, every error
  /// but ``PermanentDeliveryFailure`` retried forever.
  public static let standard = RetryPolicy(
    checked: .seconds(1),
    multiplier: 2,
    maximumDelay: .seconds(300),
    jitter: 0.2,
    maximumAttempts: nil,
    isRetryable: { !($0 is PermanentDeliveryFailure) }
  )

  /// A policy; every argument has the default described on its property.
  ///
  /// - Throws: ``OutboxError/invalidOption(_:)`` if `initialDelay` is negative, `maximumDelay`
  ///   is shorter than it, `multiplier` is below 1 or not finite, `jitter` is outside 0...1, or
  ///   `maximumAttempts` is below 1.
  public init(
    initialDelay: Duration = .seconds(1),
    multiplier: Double = 2,
    maximumDelay: Duration = .seconds(300),
    jitter: Double = 0.2,
    maximumAttempts: Int? = nil,
    isRetryable: @escaping @Sendable (any Error) -> Bool = { !($0 is PermanentDeliveryFailure) }
  ) throws(OutboxError) {
    self.init(
      checked: initialDelay,
      multiplier: multiplier,
      maximumDelay: maximumDelay,
      jitter: jitter,
      maximumAttempts: maximumAttempts,
      isRetryable: isRetryable
    )
    if let problem = problem() { throw .invalidOption(problem) }
  }

  private init(
    checked initialDelay: Duration,
    multiplier: Double,
    maximumDelay: Duration,
    jitter: Double,
    maximumAttempts: Int?,
    isRetryable: @escaping @Sendable (any Error) -> Bool
  ) {
    self.initialDelay = initialDelay
    self.multiplier = multiplier
    self.maximumDelay = maximumDelay
    self.jitter = jitter
    self.maximumAttempts = maximumAttempts
    self.isRetryable = isRetryable
  }

  /// The wait after `attempt` failed, before jitter.
  ///
  /// - Parameter attempt: The attempt that failed, 1 for the first.
  /// - Returns: `initialDelay × multiplier^(attempt-1)`, at most `maximumDelay`.
  public func baseDelay(afterAttempt attempt: Int) -> Duration {
    let growth = Swift.max(multiplier, 1)
    var delay = initialDelay
    for _ in 1..<Swift.max(attempt, 1) {
      delay = delay * growth
      if delay >= maximumDelay { return maximumDelay }
    }
    return Swift.min(delay, maximumDelay)
  }

  /// The wait after `attempt` failed, with jitter drawn from `generator`.
  ///
  /// - Parameters:
  ///   - attempt: The attempt that failed, 1 for the first.
  ///   - generator: The source of the jitter.
  /// - Returns: The base delay moved by up to `jitter` of itself, never below zero.
  public func delay(
    afterAttempt attempt: Int,
    using generator: inout some RandomNumberGenerator
  ) -> Duration {
    let base = baseDelay(afterAttempt: attempt)
    let spread = Swift.min(Swift.max(jitter, 0), 1)
    guard spread > 0 else { return base }
    let factor = Double.random(in: (1 - spread)...(1 + spread), using: &generator)
    return Swift.max(base * factor, .zero)
  }

  /// The wait after `attempt` failed, with jitter from the system's random numbers.
  ///
  /// - Parameter attempt: The attempt that failed, 1 for the first.
  /// - Returns: The base delay moved by up to `jitter` of itself, never below zero.
  public func delay(afterAttempt attempt: Int) -> Duration {
    let base = baseDelay(afterAttempt: attempt)
    let spread = Swift.min(Swift.max(jitter, 0), 1)
    guard spread > 0 else { return base }
    return Swift.max(base * Double.random(in: (1 - spread)...(1 + spread)), .zero)
  }

  /// Checks the policy's numbers.
  ///
  /// - Returns: What is wrong, or `nil`.
  private func problem() -> String? {
    if initialDelay < .zero { return "initialDelay is negative (\(initialDelay))" }
    if maximumDelay < initialDelay {
      return "maximumDelay (\(maximumDelay)) is shorter than initialDelay (\(initialDelay))"
    }
    if !(multiplier >= 1) || !multiplier.isFinite {
      return "multiplier must be 1 or more, and finite (got \(multiplier))"
    }
    if !(0...1).contains(jitter) { return "jitter must be between 0 and 1 (got \(jitter))" }
    if let maximumAttempts, maximumAttempts < 1 {
      return "maximumAttempts must be 1 or more, or nil (got \(maximumAttempts))"
    }
    return nil
  }
}

/// An error a delivery closure throws to say that trying again cannot help (the server refused
/// the message as invalid): the message becomes a dead letter at once.
public struct PermanentDeliveryFailure: Error, Sendable, Equatable, CustomStringConvertible {
  /// Why, for the dead letter and its event.
  public let reason: String

  /// A permanent failure, for the reason given.
  public init(_ reason: String) { self.reason = reason }

  /// The reason.
  public var description: String { reason }
}

/// What happens to a line when one of its messages becomes a dead letter.
public enum DeadLetterPolicy: Sendable, Equatable {
  /// The line waits: the messages after the dead letter are not delivered until it is retried
  /// or dropped. The default, for strict sequences (an edit must not reach the server before
  /// the note's creation did).
  case stopLine
  /// The line goes on with the next message.
  case continueLine
}
