// How a PostgreSQL worker takes lines: looking for due lines no worker holds, oldest first, taking
// their leases with their first messages, and releasing them.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

extension FleetWorker {
  // MARK: Taking lines

  func claimLoop() async {
    // Where the last look stopped in the lines (by key): the next look goes on from there, so
    // every line gets its turn, however many there are.
    var cursor: String?
    // With fair shares: each group's place in the lines by key, and when it last walked them.
    var walks: [String: GroupWalk] = [:]
    while !Task.isCancelled {
      let soonest =
        if let shares = settings.options.fairShares {
          await claimFairly(shares, walks: &walks)
        } else {
          await claim(from: &cursor)
        }
      // A line held by a worker that stopped renewing is free the moment its lease ends: look
      // then, not up to a poll interval later (a live holder renews long before its lease
      // ends, so this wakes the loop early only for a line whose holder has died or is cut
      // off).
      let wait = soonest.map { min(settings.pollInterval, max($0, .milliseconds(1))) }
      await bell.wait(upTo: wait ?? settings.pollInterval)
    }
  }

  /// Takes lines that have messages and no live lease, up to the free slots: the lines whose
  /// oldest message waits longest first, then, past the oldest messages, going round the lines
  /// from `cursor`.
  ///
  /// - Returns: When the first lease held by another worker ends, if this worker still has
  ///   free slots; `nil` if there is none, or nothing is known.
  private func claim(from cursor: inout String?) async -> Duration? {
    var free = state.withLock(announcingTo: self) { $0.freeSlots(limit: settings.limit) }
    guard free > 0 else { return nil }
    let room = free
    do {
      // The lines waiting longest. A few rounds at most, as long as each finds all it asked
      // for: lines that other workers took at the same moment are skipped, not waited for.
      for _ in 0..<4 where free > 0 {
        let wanted = free * 2 + 4
        let oldest = try await oldestCandidates(limit: wanted)
        let mine = state.withLock(announcingTo: self) { state in Set(state.held.keys) }
        free -= try await take(oldest.filter { !mine.contains($0.line) }, upTo: free).count
        if oldest.count < wanted { break }
      }
      if free == 0 {
        stall.withLock { $0.looked(foundNothing: false, at: .now) }
        return nil
      }
      // Room left: lines whose first message is younger than the oldest messages read, by key.
      // A few rounds at most: a round whose lines were all taken by other workers at the same
      // moment goes on past them.
      for _ in 0..<4 where free > 0 {
        let wanted = free * 2 + 4
        let (found, next) = try await walk(from: cursor, limit: wanted)
        let walkedAll = next == nil
        cursor = next
        let mine = state.withLock(announcingTo: self) { state in Set(state.held.keys) }
        free -= try await take(found.filter { !mine.contains($0.line) }, upTo: free).count
        if walkedAll { break }
      }
      return try await lookEnded(free: free, room: room)
    } catch {
      lookFailed(error)
      return nil
    }
  }

  /// Up to `limit` lines with messages and no live lease, by key from `cursor`, going on from
  /// the first line up to `cursor` when the walk reaches the end.
  ///
  /// - Returns: The lines, and where the next walk goes on (`nil`: this one walked every line).
  private func walk(from cursor: String?, limit: Int, group: LineGroupFilter = .every)
    async throws -> (found: [Candidate], next: String?)
  {
    var found = try await candidates(after: cursor, through: nil, limit: limit, group: group)
    if found.count < limit, let cursor {
      // The end of the lines: go on from the first, up to where this walk began.
      found += try await candidates(
        after: nil,
        through: cursor,
        limit: limit - found.count,
        group: group
      )
    }
    return (found, found.count < limit ? nil : found.last?.line)
  }

  /// A look that took what it could: counted as progress (or as a look that found nothing),
  /// and, with slots still free, when the first lease held by another worker ends.
  private func lookEnded(free: Int, room: Int) async throws -> Duration? {
    let soonest = free > 0 ? try await soonestLeaseEnd() : nil
    stall.withLock { $0.looked(foundNothing: free == room, at: .now) }
    return soonest
  }

  /// Says that a look failed; the loop looks again in the poll interval.
  private func lookFailed(_ error: any Error) {
    guard !Task.isCancelled else { return }
    logger.warning(
      "could not look for lines to deliver; trying again in the poll interval",
      metadata: [
        "worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))",
      ]
    )
  }

  /// Where a fair-share group's walk of the lines by key stopped, and when it last walked.
  struct GroupWalk {
    var cursor: String?
    var last: ContinuousClock.Instant
  }

  /// Takes lines up to the free slots, group by group as the groups' turns come
  /// (``FairShareTurns``): each group's lines waiting longest, found by a look at the group's
  /// own oldest messages, so a group with few keys is found beside one with thousands.
  ///
  /// A group whose look finds fewer lines than it could take also walks its lines by key, from
  /// where its last walk stopped, at most once a poll interval: a line whose first message is
  /// younger than the group's oldest messages is found within that time, as without groups.
  ///
  /// - Returns: When the first lease held by another worker ends, if this worker still has
  ///   free slots; `nil` if there is none, or nothing is known.
  private func claimFairly(_ shares: FairShares, walks: inout [String: GroupWalk]) async
    -> Duration?
  {
    var free = state.withLock(announcingTo: self) { $0.freeSlots(limit: settings.limit) }
    guard free > 0 else { return nil }
    let room = free
    do {
      for _ in 0..<4 where free > 0 {
        let wanted = free * 2 + 4
        let mine = state.withLock(announcingTo: self) { state in Set(state.held.keys) }
        var found: [String: [Candidate]] = [:]
        var complete = true
        for name in shares.names {
          let group = LineGroupFilter(group: name, of: shares)
          var lines = try await oldestCandidates(limit: wanted, group: group)
          if lines.count < wanted {
            var walk = walks[name] ?? GroupWalk(cursor: nil, last: .now - settings.pollInterval)
            if ContinuousClock.now - walk.last >= settings.pollInterval {
              walk.last = .now
              let seen = Set(lines.map(\.line))
              let (more, next) = try await self.walk(from: walk.cursor, limit: wanted, group: group)
              walk.cursor = next
              lines += more.filter { !seen.contains($0.line) }
            }
            walks[name] = walk
          } else {
            complete = false
          }
          found[name] = lines.filter { !mine.contains($0.line) }
        }
        let order = state.withLock(announcingTo: self) { state in
          state.turns?.order(found, upTo: wanted) ?? []
        }
        let waiting = Set(found.filter { !$0.value.isEmpty }.keys)
        state.withLock(announcingTo: self) { $0.groupsWaiting = waiting }
        free -= try await take(order, upTo: free, groupsWaiting: waiting).count
        if complete { break }
      }
      return try await lookEnded(free: free, room: room)
    } catch {
      lookFailed(error)
      return nil
    }
  }

  /// How many of the oldest messages a look reads to find the lines that wait longest.
  ///
  /// Bounds a look's cost when the oldest messages belong to lines that are held: a line with
  /// a long backlog, held by a worker, would otherwise be read through on every look.
  static var ageWindow: Int { 2_048 }

  /// Up to `limit` lines with messages and no live lease whose first message is among the
  /// ``ageWindow`` oldest messages, the line whose first message is oldest first.
  ///
  /// A message's age is its append's time (`appended_at`). The walk reads the messages in
  /// that order through the age index and stops as soon as `limit` lines are found.
  ///
  /// - Parameters:
  ///   - limit: How many lines at most.
  ///   - group: Which lines: every one, or a fair-share group's (its own oldest messages).
  /// - Returns: The lines, the one waiting longest first.
  /// - Throws: What the database answered, or the look's deadline.
  func oldestCandidates(limit: Int, group: LineGroupFilter = .every) async throws -> [Candidate] {
    let stopLine = settings.onDeadLetter == .stopLine
    let window = Self.ageWindow
    let (client, logger) = (client, logger)
    return try await bounded("looking for the lines waiting longest") { () -> [Candidate] in
      var candidates: [Candidate] = []
      try await client.checkedExecute(
        OldestLinesStatement(window: window, stopLine: stopLine, limit: limit, group: group),
        logger: logger
      ) { rows in
        for try await (line, fresh) in rows {
          candidates.append(Candidate(line: line, fresh: fresh))
        }
      }
      return candidates
    }
  }

  /// Up to `limit` lines with messages and no live lease, in key order: after `after` (from the
  /// first line if `nil`), and up to `through` if given.
  ///
  /// The lines are found by one index probe each (not a scan of every message), and the walk
  /// stops as soon as `limit` are found: a look costs what it finds, not the number of lines.
  /// A fair-share group's walk (`group`) skips the other groups' lines.
  private func candidates(
    after: String?,
    through: String?,
    limit: Int,
    group: LineGroupFilter = .every
  ) async throws -> [Candidate] {
    let (within, outside) = (group.within, group.outside)
    let stopLine = settings.onDeadLetter == .stopLine
    let (client, logger) = (client, logger)
    return try await bounded("looking for lines by key") { () -> [Candidate] in
      var candidates: [Candidate] = []
      // The conditions are subqueries, not joins, so that the walk stays lazy: PostgreSQL
      // evaluates a recursive WITH only as far as the LIMIT reads it.
      try await client.checkedQuery(
        """
        WITH RECURSIVE lines(line) AS (
          (SELECT line FROM \(Table.message)
           WHERE \(after)::text IS NULL OR line > \(after) ORDER BY line LIMIT 1)
          UNION ALL
          SELECT (SELECT m.line FROM \(Table.message) m WHERE m.line > lines.line
                  ORDER BY m.line LIMIT 1)
          FROM lines
          WHERE lines.line IS NOT NULL AND (\(through)::text IS NULL OR lines.line < \(through))
        )
        SELECT lines.line,
          NOT EXISTS (SELECT 1 FROM \(Table.lease) f WHERE f.line = lines.line) AS fresh
        FROM lines
        WHERE lines.line IS NOT NULL
          AND (\(through)::text IS NULL OR lines.line <= \(through))
          AND (\(within)::text IS NULL OR lines.line ^@ \(within))
          AND NOT (lines.line ^@ ANY(\(outside)::text[]))
          AND NOT EXISTS (
            SELECT 1 FROM \(Table.lease) l WHERE l.line = lines.line
              AND (l.paused OR (l.owner IS NOT NULL AND l.expires_at > now())))
          AND (NOT \(stopLine) OR NOT EXISTS (
            SELECT 1 FROM \(Table.deadLetter) d WHERE d.line = lines.line))
          AND coalesce((
            SELECT h.not_before FROM \(Table.message) h WHERE h.line = lines.line
            ORDER BY h.sequence LIMIT 1), '-infinity') <= now()
        LIMIT \(limit)
        """,
        logger: logger
      ) { rows in
        for try await row in rows {
          let row = NamedColumns(row)
          candidates.append(Candidate(line: try row("line"), fresh: try row("fresh")))
        }
      }
      return candidates
    }
  }

  /// How long until the first lease held by another worker ends (`nil` if none is held).
  ///
  /// A holder that is alive renews long before then; one that died, or cannot reach the
  /// database, does not, and its line is free from that moment.
  private func soonestLeaseEnd() async throws -> Duration? {
    let (client, id, logger) = (client, id, logger)
    return try await bounded("reading when the next lease ends") { () -> Duration? in
      var soonest: Duration?
      try await client.checkedQuery(
        """
        SELECT extract(epoch FROM min(expires_at) - now())::float8 FROM \(Table.lease)
        WHERE owner IS NOT NULL AND owner <> \(id) AND expires_at > now() AND NOT paused
        """,
        logger: logger
      ) { rows in
        for try await seconds in rows.decode(Double?.self) {
          if let seconds { soonest = .milliseconds(Int64((seconds * 1000).rounded(.up)) + 2) }
        }
      }
      return soonest
    }
  }

  /// A line found with messages and no live lease.
  struct Candidate {
    let line: String
    /// Whether the line has no lease row yet (no worker ever held it, and it was never paused).
    let fresh: Bool
  }

  /// Takes the leases of up to `limit` of `candidates` (in their order) that are still free or
  /// expired, with each line's first message, in one statement, and starts delivering each line
  /// taken.
  ///
  /// Lines another worker is taking at the same moment are skipped, not waited for (`SKIP
  /// LOCKED`), so workers that look at once share the lines out instead of queueing on them. A
  /// line that waits at a dead letter (under `DeadLetterPolicy.stopLine`) is not taken, even if
  /// it was found free a moment before.
  ///
  /// With fair shares, each line taken counts as its group's turn, charged a whole turn (its
  /// run corrects that when it ends); `groupsWaiting` are the groups that had lines found.
  ///
  /// - Returns: The lines taken.
  private func take(
    _ candidates: [Candidate],
    upTo limit: Int,
    groupsWaiting: Set<String> = []
  ) async throws -> [String] {
    guard !candidates.isEmpty, limit > 0 else { return [] }
    let sent = ContinuousClock.now
    let (client, id, logger, leaseMilliseconds) = (client, id, logger, settings.leaseMilliseconds)
    let stopLine = settings.onDeadLetter == .stopLine
    let batch = settings.batch
    let lines = candidates.map(\.line)
    let fresh = candidates.filter(\.fresh).map(\.line)
    let taken = try await bounded("taking \(lines.count) lines", progress: true) {
      () -> [TakenLine] in
      if !fresh.isEmpty {
        // A line's first lease row, free (fence 0: its first holder gets fence 1).
        try await client.checkedExecute(FreshLeasesStatement(lines: fresh), logger: logger) {
          rows in
          for try await _ in rows {}
        }
      }
      // Committed before any line is delivered under it (see `committedQuery`). The attempts
      // of the messages taken are counted here, as `claimBatch` counts them: each line's first
      // `batch` messages, up to the first that is not due (`due`, true while every message
      // so far is due).
      return try await client.committedExecute(
        TakeLinesStatement(
          lines: lines,
          stopLine: stopLine,
          limit: limit,
          owner: id,
          leaseMilliseconds: leaseMilliseconds,
          batch: batch
        ),
        logger: logger
      ) { rows in
        // A row per message taken (one with no message for a line with none due), a line's
        // rows together and in order.
        var taken: [TakenLine] = []
        for try await row in rows {
          if let last = taken.indices.last, taken[last].line == row.line {
            if let message = row.message { taken[last].batch.append(message) }
          } else {
            taken.append(
              TakenLine(line: row.line, fence: row.fence, batch: row.message.map { [$0] } ?? [])
            )
          }
        }
        return taken
      }
    }
    // A line this worker still holds (one it is giving up), or a worker that is ending, does
    // not start a second task for it: the lease just taken is given back (its head's attempt
    // stays counted, one more than ran).
    let (started, refused) = state.withLock(announcingTo: self) { state in
      var started: [TakenLine] = []
      var refused: [TakenLine] = []
      for line in taken {
        guard !state.ending, !state.draining, state.held[line.line] == nil else {
          refused.append(line)
          continue
        }
        state.pausedLines.remove(line.line)
        var held = HeldLine(fence: line.fence, deadline: sent + settings.lease)
        held.task = Task {
          await self.deliverLine(line.line, fence: line.fence, batch: line.batch)
        }
        state.held[line.line] = held
        state.took(line.line, among: groupsWaiting)
        started.append(line)
      }
      return (started, refused)
    }
    for line in refused { try await release(line.line, fence: line.fence) }
    for line in started {
      logger.debug(
        "took line",
        metadata: [
          "worker": "\(id)", "partition": "\(Line.shown(line.line))", "fence": "\(line.fence)",
        ]
      )
    }
    return started.map(\.line)
  }

  /// A line whose lease was just taken, with its first messages that were due (up to the
  /// batch size; none if none was).
  private struct TakenLine: Sendable {
    let line: String
    let fence: Int64
    var batch: [ClaimedHead]
  }

  /// Keeps a line's lease until `until`, unrenewed, if it still is this worker's: a line held
  /// by its rate limit, taken by no worker before its window ends.
  func park(_ line: String, fence: Int64, until: Date) async throws {
    let (client, id, logger) = (client, id, logger)
    try await bounded("holding line \(Line.shown(line)) for its rate limit", progress: true) {
      try await client.checkedQuery(
        """
        UPDATE \(Table.lease) SET expires_at = \(until)
        WHERE line = \(line) AND owner = \(id) AND fence = \(fence)
        """,
        logger: logger
      ) { rows in
        for try await _ in rows {}
      }
    }
  }

  /// Gives a line's lease back, if it still is this worker's.
  func release(_ line: String, fence: Int64) async throws {
    let (client, id, logger) = (client, id, logger)
    try await bounded("releasing line \(Line.shown(line))", progress: true) {
      try await client.checkedExecute(
        ReleaseStatement(line: line, owner: id, fence: fence),
        logger: logger
      ) { rows in
        for try await _ in rows {}
      }
    }
  }
}
#endif
