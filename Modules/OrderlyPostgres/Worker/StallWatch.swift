// The worker's stall watchdog: a pure state machine of waits and progress.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import OrderlyCore

/// What a worker's stall watchdog decides from.
///
/// When the worker last made progress, when it last finished a look for lines, and what it
/// waits on now. Pure: the worker feeds it instants and asks it for a verdict; it performs
/// nothing.
///
/// A worker *has work* when it holds keys, or when it has not finished a look for lines within
/// the limit and its poll interval (it cannot tell whether messages are due, so it must assume
/// some are). It *makes
/// progress* when it takes a line, records a delivery's outcome (delivered, retried, set aside),
/// renews its leases, releases a line, or finishes a look that finds nothing to take. A worker
/// that has work and has made no progress for the limit is stalled, until its next progress.
struct StallWatch: Sendable {
  /// A verdict of ``check(at:keysHeld:)``.
  enum Verdict: Equatable, Sendable {
    /// Working, or idle with nothing to do.
    case healthy
    /// Stalled from this check on: no progress for `idle`, with work; it was waiting on
    /// `waitingOn` (what is in flight, oldest first, each with how long it has waited).
    case stalled(idle: Duration, waitingOn: [String])
    /// Still stalled, as the last check said.
    case stillStalled
    /// It made progress again, after being stalled for `after`.
    case recovered(after: Duration)
  }

  /// How long a worker with work may make no progress.
  let limit: Duration
  /// How long the worker may wait between looks for lines (its poll interval): a look is
  /// overdue only when none has ended for the limit and this.
  let lookInterval: Duration
  private(set) var lastProgress: ContinuousClock.Instant
  private var lastLook: ContinuousClock.Instant
  private var waits: [UInt64: (what: String, since: ContinuousClock.Instant)] = [:]
  private var lastToken: UInt64 = 0
  /// The last wait that ended in failure (its deadline, or an error), and when.
  private var lastFailed: (what: String, at: ContinuousClock.Instant)?
  private(set) var stalledSince: ContinuousClock.Instant?

  /// A watch of a worker that starts at `now`: it has made progress, and looked, just now.
  init(limit: Duration, lookInterval: Duration = .zero, now: ContinuousClock.Instant) {
    self.limit = limit
    self.lookInterval = lookInterval
    self.lastProgress = now
    self.lastLook = now
  }

  /// The worker moved: a line taken, an outcome recorded, leases renewed, a line released.
  mutating func progressed(at now: ContinuousClock.Instant) {
    lastProgress = max(lastProgress, now)
  }

  /// A look for lines ended without an error; one that found nothing to take is progress.
  mutating func looked(foundNothing: Bool, at now: ContinuousClock.Instant) {
    lastLook = max(lastLook, now)
    if foundNothing { progressed(at: now) }
  }

  /// The worker waits on `what` (a statement, its connection) from `now`.
  ///
  /// - Returns: The token to end the wait with.
  mutating func begin(_ what: String, at now: ContinuousClock.Instant) -> UInt64 {
    lastToken &+= 1
    waits[lastToken] = (what, now)
    return lastToken
  }

  /// The wait `token` ended: answered, or (`failed`) given up or failed.
  mutating func end(_ token: UInt64, failed: Bool = false, at now: ContinuousClock.Instant) {
    guard let wait = waits.removeValue(forKey: token) else { return }
    if failed { lastFailed = (wait.what, now) }
  }

  /// What the worker waits on now, oldest first, each with how long it has waited; between
  /// two tries, the last wait that failed.
  func waitingOn(at now: ContinuousClock.Instant) -> [String] {
    let current = waits.values.sorted { $0.since < $1.since }.map { wait in
      "\(wait.what) (for \(Self.shown(now - wait.since)))"
    }
    guard current.isEmpty, let failed = lastFailed else { return current }
    return ["\(failed.what) (failed \(Self.shown(now - failed.at)) ago; tried again later)"]
  }

  /// Whether the worker is stalled now, and whether that is news.
  ///
  /// - Parameters:
  ///   - now: The instant of the check.
  ///   - keysHeld: How many keys the worker holds.
  ///   - taking: Whether it takes new lines (not paused, draining or ending); a worker that
  ///     takes none and holds none has nothing to do.
  /// - Returns: Healthy, stalled (news), still stalled, or recovered (news).
  mutating func check(at now: ContinuousClock.Instant, keysHeld: Int, taking: Bool = true)
    -> Verdict
  {
    let hasWork = keysHeld > 0 || (taking && now - lastLook >= limit + lookInterval)
    let idle = now - lastProgress
    if hasWork, idle >= limit {
      guard stalledSince == nil else { return .stillStalled }
      stalledSince = now
      let waiting = waitingOn(at: now)
      return .stalled(
        idle: idle,
        waitingOn: waiting.isEmpty ? ["nothing in flight: no statement was sent"] : waiting
      )
    }
    guard let since = stalledSince else { return .healthy }
    stalledSince = nil
    return .recovered(after: now - since)
  }

  /// A duration in milliseconds, or seconds with one decimal from 10 s on.
  static func shown(_ duration: Duration) -> String {
    let milliseconds = Int(duration / .milliseconds(1))
    if milliseconds < 10_000 { return "\(milliseconds) ms" }
    return "\(milliseconds / 1_000).\((milliseconds % 1_000) / 100) s"
  }
}
#endif

#if Postgres
extension PostgresOutbox {
  /// For tests: while `on`, every statement of this outbox's worker waits without an answer
  /// until its deadline (a lease) passes, as a database that stopped answering would; the
  /// worker makes no progress, and its stall watch must say so.
  ///
  /// - Parameter on: Whether to withhold the answers.
  package func withholdAnswers(_ on: Bool) {
    withheld.set(on)
  }
}

/// The hold of ``PostgresOutbox/withholdAnswers(_:)``.
final class WithheldAnswers: Sendable {
  private let on = OrderlyAtomic<Bool>(false)

  func set(_ value: Bool) {
    on.store(value, ordering: .relaxed)
  }

  /// Returns at once unless the answers are withheld; then waits until they are not, or the
  /// task is cancelled (the deadline of the statement it stands for cancels it).
  func wait() async throws {
    while on.load(ordering: .relaxed) {
      // Safe as library code: only while a test withholds answers, it stands for a database
      // that does not answer, and it ends when the statement's deadline cancels it.
      try await Task.sleep(for: .milliseconds(20))
    }
  }
}
#endif
