// What a worker that holds its lines by lease (the PostgreSQL store's) knows of them, and the
// decisions it makes from that alone: which lines stop and why, which leases are no longer
// certain, what a renewal's answer means, how many lines it may take. No database and no clock
// of its own: the rooms that act (OrderlyPostgres' Leases, TakingLines, DeliveringLines) read
// these under the worker's lock and do the rest. Here, in the outbox's rules rather than in the
// PostgreSQL module, so that WorkerStateTests runs in a plain `swift test`, with no trait and no
// server.

/// A line this worker holds a lease on.
package struct HeldLine: Sendable {
  package let fence: Int64
  /// Before this instant the database cannot have given the line to anyone else: the lease
  /// was renewed (or taken) by a query sent no earlier than `deadline - lease`.
  package var deadline: ContinuousClock.Instant
  package var lost = false
  package var task: Task<Void, Never>?
  package var delivery: Task<Void, any Error>?

  /// A line just taken (or renewed) under `fence`, certain until `deadline`.
  package init(fence: Int64, deadline: ContinuousClock.Instant) {
    self.fence = fence
    self.deadline = deadline
  }
}

/// Why a line's task stops before its next message or retry.
package enum LineStop: Error, Equatable {
  /// Its lease is no longer certain: it records nothing more.
  case lost
  /// The worker stops, or drains for a graceful stop: the line settles, then is released.
  case ending
  /// The outbox, or this line, is paused: the line settles, then is released.
  case paused
}

/// What a worker knows of its lines, under its lock.
package struct WorkerState: Sendable {
  package var held: [String: HeldLine] = [:]
  package var paused: Bool
  /// Lines known to be paused on their own.
  ///
  /// Paused by ``PostgresOutbox/pause(partition:)`` in this process, or read from the flag by
  /// a renewal: a line in it stops before its next message or retry, and is released. Cleared
  /// for a line this worker takes (the database said it was not paused) or that is resumed.
  package var pausedLines: Set<String> = []
  /// Taking no new message, for a graceful stop: each line is released after its delivery.
  package var draining = false
  /// Tasks in `waitUntilIdle()`.
  package var idleWaiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
  package var lastToken: UInt64 = 0
  package var ending = false
  package var loops: [Task<Void, Never>] = []
  /// What the worker waited on when it stalled, while it is stalled (see ``StallWatch``).
  package var stalledOn: [String]?

  /// With fair shares, the groups' turns: which group's lines a look takes first, charged for
  /// what each line's run delivered.
  package var turns: FairShareTurns?
  /// With fair shares, what each line's turn has left of the charge it was given when taken.
  package var prepaid: [String: Int] = [:]

  /// With fair shares, the groups that had lines found, no worker holding them, at the last look.
  package var groupsWaiting: Set<String> = []

  /// With fair shares, whether a group whose turn comes before `line`'s group's had lines
  /// waiting at the last look: the line gives its slot up when its turn is spent.
  ///
  /// - Parameter line: The line's key.
  /// - Returns: `false` without fair shares.
  package func othersGroupsFirst(besides line: String) -> Bool {
    guard let turns else { return false }
    let mine = turns.shares.group(of: LineKey.partition(line))
    return turns.comesBefore(groupsWaiting.subtracting([mine]), mine)
  }

  /// With fair shares, counts a line just taken as its group's turn (charged a whole turn).
  ///
  /// - Parameters:
  ///   - line: The line's key.
  ///   - waiting: The groups that had lines found by the look that took it.
  package mutating func took(_ line: String, among waiting: Set<String>) {
    guard let shares = turns?.shares else { return }
    turns?.chose(shares.group(of: LineKey.partition(line)), among: waiting)
    prepaid[line] = FairShareTurns.turnCharge
  }

  /// With fair shares, charges a line's group for messages handed to the handler.
  ///
  /// - Parameters:
  ///   - line: The line's key.
  ///   - count: The messages.
  package mutating func handing(_ line: String, _ count: Int) {
    guard let shares = turns?.shares, var left = prepaid[line] else { return }
    turns?.handing(shares.group(of: LineKey.partition(line)), count, prepaid: &left)
    prepaid[line] = left
  }

  /// With fair shares, gives back what a line's ended turn did not use of its charge.
  ///
  /// - Parameter line: The line's key.
  package mutating func ended(_ line: String) {
    guard let shares = turns?.shares, let left = prepaid.removeValue(forKey: line) else { return }
    turns?.ended(shares.group(of: LineKey.partition(line)), prepaid: left)
  }

  /// A worker holding no line, taking lines unless `paused`.
  ///
  /// - Parameters:
  ///   - paused: Whether the outbox is paused.
  ///   - fairShares: The groups whose deliveries follow their weights, if any.
  package init(paused: Bool, fairShares: FairShares? = nil) {
    self.paused = paused
    self.turns = fairShares.map(FairShareTurns.init)
  }

  /// Lines held and not lost.
  package var keysHeld: Int { held.values.count { !$0.lost } }

  /// Whether new lines may be taken at all: not paused, draining or ending.
  package var isTaking: Bool { !(paused || draining || ending) }

  /// How many lines may be taken now, up to `limit` held at once.
  package func freeSlots(limit: Int) -> Int {
    isTaking ? max(0, limit - held.count) : 0
  }

  /// Whether a line may still record under `fence`: held under that fence, not lost, and its
  /// lease certain for at least `margin` more (the renewal period: a lease is given up before
  /// the database could give it away).
  package func isLive(
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
  package func checkpoint(
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
  package func lateLines(now: ContinuousClock.Instant, margin: Duration) -> [String: Int64] {
    held.filter { !$0.value.lost && $0.value.deadline - margin <= now }.mapValues(\.fence)
  }

  /// The lines a renewal is sent for: held and not lost, with their fences.
  package var renewable: [String: Int64] { held.filter { !$0.value.lost }.mapValues(\.fence) }

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
  package mutating func applyRenewal(
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
  package mutating func lose(_ line: String, fence: Int64) -> Task<Void, any Error>?? {
    guard let current = held[line], current.fence == fence, !current.lost else { return nil }
    held[line]?.lost = true
    return .some(current.delivery)
  }

  /// Whether every slot is taken: only then does a line whose turn ran out give way (to a line
  /// that waits, which the database is asked about only then).
  package func isFull(limit: Int) -> Bool { held.count >= limit }
}
