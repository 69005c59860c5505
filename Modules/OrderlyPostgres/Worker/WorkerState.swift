// What a PostgreSQL worker knows of its lines, and the decisions it makes from that alone: which
// lines stop and why, which leases are no longer certain, what a renewal's answer means, how many
// lines it may take, when a line's turn is over. No database and no clock of its own: the rooms
// that act (Leases, TakingLines, DeliveringLines) read these under the worker's lock and do the
// rest, and WorkerStateTests checks them without a server.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres

/// A line this worker holds a lease on.
struct HeldLine: Sendable {
  let fence: Int64
  /// Before this instant the database cannot have given the line to anyone else: the lease
  /// was renewed (or taken) by a query sent no earlier than `deadline - lease`.
  var deadline: ContinuousClock.Instant
  var lost = false
  var task: Task<Void, Never>?
  var delivery: Task<Void, any Error>?
}

/// Why a line's task stops before its next message or retry.
enum LineStop: Error, Equatable {
  /// Its lease is no longer certain: it records nothing more.
  case lost
  /// The worker stops, or drains for a graceful stop: the line settles, then is released.
  case ending
  /// The outbox, or this line, is paused: the line settles, then is released.
  case paused
}

/// What a worker knows of its lines, under its lock.
struct WorkerState: Sendable {
  var held: [String: HeldLine] = [:]
  var paused: Bool
  /// Lines known to be paused on their own.
  ///
  /// Paused by ``PostgresOutbox/pause(partition:)`` in this process, or read from the flag by
  /// a renewal: a line in it stops before its next message or retry, and is released. Cleared
  /// for a line this worker takes (the database said it was not paused) or that is resumed.
  var pausedLines: Set<String> = []
  /// Taking no new message, for a graceful stop: each line is released after its delivery.
  var draining = false
  /// Tasks in `waitUntilIdle()`.
  var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
  var lastToken: UInt64 = 0
  var ending = false
  var loops: [Task<Void, Never>] = []
  /// What the worker waited on when it stalled, while it is stalled (see ``StallWatch``).
  var stalledOn: [String]?

  /// Lines held and not lost.
  var keysHeld: Int { held.values.count { !$0.lost } }

  /// Whether new lines may be taken at all: not paused, draining or ending.
  var isTaking: Bool { !(paused || draining || ending) }

  /// How many lines may be taken now, up to `limit` held at once.
  func freeSlots(limit: Int) -> Int {
    isTaking ? max(0, limit - held.count) : 0
  }

  /// Whether a line may still record under `fence`: held under that fence, not lost, and its
  /// lease certain for at least `margin` more (the renewal period: a lease is given up before
  /// the database could give it away).
  func isLive(
    _ line: String,
    fence: Int64,
    now: ContinuousClock.Instant,
    margin: Duration
  ) -> Bool {
    guard let held = held[line], held.fence == fence else { return false }
    return !held.lost && now < held.deadline - margin
  }

  /// Whether a line's task must stop before its next message or retry, and why: stopping or
  /// draining first, then a pause (of the outbox or the line), then a lease no longer certain.
  func checkpoint(
    _ line: String,
    fence: Int64,
    now: ContinuousClock.Instant,
    margin: Duration,
    cancelled: Bool = false
  ) -> LineStop? {
    if cancelled || ending || draining { return .ending }
    if paused || pausedLines.contains(line) { return .paused }
    if !isLive(line, fence: fence, now: now, margin: margin) { return .lost }
    return nil
  }

  /// The lines not lost whose lease has less than `margin` left: given up before the database
  /// could give them to another worker.
  func lateLines(now: ContinuousClock.Instant, margin: Duration) -> [String: Int64] {
    held.filter { !$0.value.lost && $0.value.deadline - margin <= now }.mapValues(\.fence)
  }

  /// The lines a renewal is sent for: held and not lost, with their fences.
  var renewable: [String: Int64] { held.filter { !$0.value.lost }.mapValues(\.fence) }

  /// Applies a renewal's answer: a line renewed under the fence it was sent with gets a new
  /// deadline, one lease after the query was sent; any other line sent (another worker took
  /// it, or it had expired) is returned, to be lost.
  ///
  /// - Parameters:
  ///   - sent: The lines sent, with their fences.
  ///   - renewed: The lines the database renewed, with their fences.
  ///   - sentAt: When the query was sent.
  ///   - lease: The lease.
  /// - Returns: The lines not renewed, with the fences they were held under.
  mutating func applyRenewal(
    sent: [String: Int64],
    renewed: [String: Int64],
    sentAt: ContinuousClock.Instant,
    lease: Duration
  ) -> [String: Int64] {
    var notRenewed: [String: Int64] = [:]
    for (line, fence) in sent {
      if renewed[line] == fence {
        if held[line]?.fence == fence { held[line]?.deadline = sentAt + lease }
      } else {
        notRenewed[line] = fence
      }
    }
    return notRenewed
  }

  /// Marks a line lost, if it is still held under `fence` and not lost already.
  ///
  /// - Returns: `nil` when nothing changed; otherwise the line's delivery in progress (itself
  ///   `nil` when none runs), for the caller to cancel.
  mutating func lose(_ line: String, fence: Int64) -> Task<Void, any Error>?? {
    guard let current = held[line], current.fence == fence, !current.lost else { return nil }
    held[line]?.lost = true
    return .some(current.delivery)
  }

  /// Whether every slot is taken: only then does a line whose turn ran out give way (to a line
  /// that waits, which the database is asked about only then).
  func isFull(limit: Int) -> Bool { held.count >= limit }
}
#endif
