/// A clock whose time moves only when a test advances it.
///
/// Inject it wherever code takes an `any Clock<Duration>`, so timeouts and delays are tested
/// without waiting:
///
/// ```swift
/// let clock = ManualClock()
/// let timer = Task { try await clock.sleep(for: .seconds(5)) }
/// try await clock.waitForSleepers(1)   // the task is asleep now
/// clock.advance(by: .seconds(5))       // and wakes at once
/// ```
public final class ManualClock: Clock, Sendable {
  /// A point in the manual clock's time: the duration since the clock was created.
  public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
    /// The time elapsed since the clock's start.
    public var offset: Duration

    /// Creates an instant at `offset` after the clock's start.
    ///
    /// - Parameter offset: The time since the clock's start.
    public init(offset: Duration) {
      self.offset = offset
    }

    /// The instant `duration` later.
    public func advanced(by duration: Duration) -> Instant {
      Instant(offset: offset + duration)
    }

    /// The duration from this instant to `other`.
    public func duration(to other: Instant) -> Duration {
      other.offset - offset
    }

    /// Whether `lhs` comes before `rhs`.
    public static func < (lhs: Instant, rhs: Instant) -> Bool {
      lhs.offset < rhs.offset
    }

    /// The offset, as in `5.0 seconds`.
    public var description: String { "\(offset)" }
  }

  private let time: ConditionWaiters<Instant>

  /// Creates a clock at instant zero.
  public init() {
    time = ConditionWaiters(Instant(offset: .zero))
  }

  /// The current instant; it changes only through ``advance(by:)`` and ``advance(to:)``.
  public var now: Instant {
    time.read { $0 }
  }

  /// Zero: the clock has no resolution limit.
  public var minimumResolution: Duration { .zero }

  /// The number of tasks sleeping on the clock now.
  public var sleeperCount: Int {
    time.waiterCount
  }

  /// Suspends until the clock is advanced to `deadline` or past it.
  ///
  /// Returns at once if the deadline has passed already.
  ///
  /// - Parameters:
  ///   - deadline: The instant to wake at.
  ///   - tolerance: Ignored: the clock wakes sleepers exactly when it is advanced.
  /// - Throws: `CancellationError` if the task is cancelled first; it wakes at once.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    try await time.wait { $0 >= deadline }
  }

  /// Suspends until the clock is advanced by `duration` from now, staying on the caller's actor.
  ///
  /// Called on a `ManualClock` (not through `any Clock`), sleeping registers the sleeper
  /// before the call suspends, on the caller's actor: a task on the main actor that sleeps and
  /// a driver on the main actor that then advances the clock see each other in the order they
  /// ran, however busy the machine is. (The `Clock` protocol's own `sleep(for:)` first hops to
  /// the cooperative pool, where a busy machine may delay the registration past the driver's
  /// next advance.)
  ///
  /// - Parameters:
  ///   - duration: How long to sleep, in the clock's time.
  ///   - tolerance: Ignored.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled first; it wakes at once.
  public func sleep(
    for duration: Duration,
    tolerance: Duration? = nil,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    let deadline = now.advanced(by: duration)
    try await time.wait(isolation: isolation) { $0 >= deadline }
  }

  /// Moves time forward, waking every sleeper whose deadline is reached.
  ///
  /// - Parameter duration: How far to move; a negative duration is ignored, since time never
  ///   goes back.
  public func advance(by duration: Duration) {
    time.update { now in now = max(now, now.advanced(by: duration)) }
  }

  /// Moves time forward to `instant`, waking every sleeper whose deadline is reached.
  ///
  /// - Parameter instant: The new time; an instant earlier than ``now`` is ignored.
  public func advance(to instant: Instant) {
    time.update { now in now = max(now, instant) }
  }

  /// Waits until at least `count` tasks are sleeping on the clock, so a test can advance time
  /// knowing who it wakes.
  ///
  /// - Parameters:
  ///   - count: The number of sleepers to wait for.
  ///   - isolation: The caller's isolation; leave the default.
  /// - Throws: `CancellationError` if the task is cancelled first.
  public func waitForSleepers(
    _ count: Int,
    isolation: isolated (any Actor)? = #isolation
  ) async throws {
    try await time.waitForWaiters(count)
  }
}
