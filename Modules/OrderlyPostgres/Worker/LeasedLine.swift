// One line a PostgreSQL worker holds under a lease, behind the line runner: statements under the
// fence, turns, the handler's task.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
import OrderlyOutboxCore
import PostgresNIO

/// One line a PostgreSQL worker holds under a lease, as the line runner delivers it: what the
/// store does behind ``LineStore`` (statements under the fence, committed before the line goes
/// on; turns at saturation; the handler in a task that losing the lease cancels).
struct LeasedLine<Message: Codable & Sendable>: LineStore {
  /// With fair shares, charges the line's group as the handler is given its messages.
  func handing(_ count: Int) {
    worker.state.withLock(announcingTo: worker) { $0.handing(line, count) }
  }

  let worker: FleetWorker<Message>
  let line: String
  let fence: Int64?
  /// The line `line`, held under `fence`.
  init(worker: FleetWorker<Message>, line: String, fence: Int64) {
    self.worker = worker
    self.line = line
    self.fence = fence
  }

  /// The fence this line is held under.
  private var held: Int64 { fence ?? 0 }

  var audits: Bool { worker.settings.options.audit.isOn }

  func halt() -> LineHalt? {
    switch worker.checkpoint(line, fence: held) {
    case nil: return nil
    case .lost: return .abandon
    case .ending, .paused: return .settle
    }
  }

  /// Nothing particular to a failure: the runner also asks ``halt()``.
  func haltAfterFailure(_ error: any Error) -> LineHalt? { nil }

  /// A quarter of the lease (`FleetSettings.turn`), besides the turn's deliveries.
  var turnTime: Duration? { worker.settings.turn }

  /// Whether the worker has no free slot while a line it could take waits.
  func othersWait() async -> Bool { await worker.othersWait(besides: line) }

  /// Reads the line's first messages (up to `limit`, and up to the first that is not due) and
  /// counts the attempts about to begin.
  func claim(upTo limit: Int, recording attempts: [AuditAttempt]) async -> LineStep {
    let (client, logger, line) = (worker.client, worker.logger, line)
    // A failed attempt about to be retried: its row, before the claim that retries it.
    if !attempts.isEmpty { await recordAudit(attempts) }
    do {
      let claimed = try await worker.bounded(
        "reading the next messages of line \(Line.shown(line))",
        progress: true
      ) { () -> [ClaimedHead] in
        var claimed: [ClaimedHead] = []
        try await client.checkedExecute(
          ClaimBatchStatement(line: line, batch: limit),
          logger: logger
        ) { rows in
          for try await message in rows { claimed.append(message) }
        }
        return claimed
      }
      return claimed.isEmpty ? .end(.empty) : .deliver(claimed)
    } catch {
      logger.warning(
        "could not read a line's next messages",
        metadata: [
          "worker": "\(worker.id)", "partition": "\(Line.shown(line))",
          "error": "\(outboxError(error, database: worker.outbox.database))",
        ]
      )
      return .end(.stopped)
    }
  }

  /// Runs the handler in a task of its own, which losing the lease or stopping cancels.
  func run(_ work: @escaping @Sendable () async throws -> Void) async -> Result<Void, any Error> {
    await worker.runHandler(line: line, fence: held, work)
  }

  /// Removes delivered messages if the lease still holds, and takes the line's next messages,
  /// in one statement; if the lease does not hold, leaves the messages for the line's new
  /// holder.
  ///
  /// The lease row is locked `FOR SHARE`, not renewed (the renewal loop does that): a worker
  /// taking the line over waits for this statement, and then finds the messages gone. A line
  /// with no next message due, or whose turn is over (``NextTake/yield``), is released by the
  /// same statement. Committed before the next message is delivered: an acknowledgement read
  /// but rolled back would have the line's next holder deliver this message again after that
  /// one (see `committedQuery`).
  func acknowledge(
    _ delivered: [ClaimedHead],
    givingBack: [ClaimedHead],
    then next: NextTake,
    recording attempts: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    // A lease given up locally is not used: the database may already have given it away.
    guard worker.isLive(line, fence: held) else {
      worker.refused(line, fence: held)
      // Not acknowledged: in the trail, cut (the line's next holder delivers them again).
      if !attempts.isEmpty { await recordAudit(attempts.map(\.cut)) }
      return .end(.stopped)
    }
    let giveUp = next == .yield
    let limit: Int? = if case .upTo(let limit) = next { limit } else { nil }
    let sequences = delivered.map(\.sequence)
    let (client, logger, line, owner, fence) = (worker.client, worker.logger, line, worker.id, held)
    // The next messages come after the last one acknowledged.
    let (acked, back, last) = (sequences, givingBack.map(\.sequence), sequences.last ?? Int64.min)
    let trail = AuditColumns(attempts)
    let answer = try await worker.bounded(
      "acknowledging line \(Line.shown(line))",
      progress: true
    ) { () -> Acknowledgement in
      func run<Trail: AuditVariant>(_: Trail.Type) async throws -> Acknowledgement {
        let statement = AcknowledgeStatement<Trail>(
          line: line,
          owner: owner,
          fence: fence,
          acked: acked,
          givenBack: back,
          takeNext: limit != nil,
          last: last,
          batch: limit ?? 1,
          giveUp: giveUp,
          trail: trail
        )
        return try await client.committedExecute(statement, logger: logger) { rows in
          var answer = Acknowledgement()
          for try await row in rows {
            answer.paused = row.paused
            answer.removed = row.removed > 0
            answer.released = row.released > 0
            answer.ordered = row.ordered
            if let message = row.message { answer.next.append(message) }
          }
          return answer
        }
      }
      return try await audits ? run(Audited.self) : run(Unaudited.self)
    }
    guard let paused = answer.paused else {
      // The database refused it: under the fence (the line is given up), or as out of order
      // (the line is kept and delivered again from its first message).
      let keeps = worker.refusedByStore(line, fence: held, outOfOrder: !answer.ordered)
      return keeps ? .again : .end(.stopped)
    }
    if answer.removed { announce() }
    if paused { return .end(.stopped) }
    if giveUp { return answer.released ? .end(.released) : .again }
    if limit != nil, answer.next.isEmpty {
      // Taken nothing: no message is due, and the line was released (the line's task rings
      // the bell as it ends, so a message appended since is looked for at once).
      return answer.released ? .end(.released) : .end(.empty)
    }
    return answer.next.isEmpty ? .again : .deliver(answer.next)
  }

  /// What an acknowledgement statement answered.
  private struct Acknowledgement: Sendable {
    /// Whether the line is paused on its own; `nil` when the statement was refused under the
    /// fence.
    var paused: Bool?
    var removed = false
    var next: [ClaimedHead] = []
    var released = false
    /// Whether the messages acknowledged were the line's first.
    var ordered = true
  }

  /// Moves a message to the dead letters, under the fence, committed before the line goes on
  /// or stops (see `committedQuery`).
  func setAside(
    _ message: ClaimedHead,
    attempts: Int,
    reason: String,
    stopsLine: Bool,
    recording: [AuditAttempt],
    announce: @escaping @Sendable () -> Void
  ) async throws -> LineStep {
    guard worker.isLive(line, fence: held) else {
      worker.refused(line, fence: held)
      if !recording.isEmpty { await recordAudit(recording.map(\.cut)) }
      return .end(.stopped)
    }
    let (client, id, logger, line, fence) = (worker.client, worker.id, worker.logger, line, held)
    let trail = AuditColumns(recording)
    let moved = try await worker.bounded(
      "setting a dead letter aside on line \(Line.shown(line))",
      progress: true
    ) { () -> Bool in
      func run<Trail: AuditVariant>(_: Trail.Type) async throws -> Bool {
        try await client.committedExecute(
          DeadLetterStatement<Trail>(
            line: line,
            owner: id,
            fence: fence,
            sequence: message.sequence,
            attempts: attempts,
            reason: reason,
            trail: trail
          ),
          logger: logger
        ) { rows in
          var moved = false
          for try await _ in rows { moved = true }
          return moved
        }
      }
      return try await audits ? run(Audited.self) : run(Unaudited.self)
    }
    guard moved else {
      // Refused under the fence, or (the message is not the line's first) as out of order.
      let keeps = worker.refusedByStore(
        line,
        fence: held,
        outOfOrder: worker.isLive(line, fence: held) ? !(await isFirst(message.sequence)) : false
      )
      return keeps ? .again : .end(.stopped)
    }
    announce()
    return stopsLine ? .end(.stopped) : .again
  }

  /// Pauses the line for every worker, with the reason, committed before the line ends; this
  /// worker stops taking it at once (others read the flag with their next renewal).
  func quarantine(reason: String) async throws {
    let (client, logger, line) = (worker.client, worker.logger, line)
    try await worker.bounded("quarantining line \(Line.shown(line))", progress: true) {
      try await client.committedQuery(
        """
        INSERT INTO \(Table.lease) (line, owner, expires_at, fence, paused, pause_reason)
        VALUES (\(line), NULL, now(), 0, true, \(reason))
        ON CONFLICT (line) DO UPDATE SET paused = true, pause_reason = excluded.pause_reason
        """,
        logger: logger
      ) { _ in }
    }
    worker.linesPaused([line])
  }

  /// The line's key.
  var partition: String? { Line.partition(line) }

  /// This machine's clock: the nearest this worker reads the database server's.
  ///
  /// The rate windows are counted on the server's clock. A clock ahead of the server's takes a permit again a little
  /// early (a permit wasted); one behind it by a few milliseconds lets a delivery begin that
  /// much after its window ended (a fleet's clocks are kept close by NTP).
  var permitClock: Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded(.down)) }

  /// Takes permits on the database server's clock, which every worker reads: one statement
  /// per counter (in the counters' order, so two lines never wait for each other in a cycle),
  /// in one transaction.
  ///
  /// Each statement reads the clock, then takes the counter's row lock, and grants what its
  /// window leaves. A statement whose clock was read before another transaction moved the
  /// counter to a newer window counts in that newer window (windows only move forward): a
  /// delivery it grants begins in it. A key several limits count takes from each in turn, as
  /// many as the ones before granted, and gives back to the earlier counters what a later one
  /// did not grant.
  func takePermits(_ limits: [RateLimit], wanting: Int) async throws -> RateGrant {
    let (client, logger, partition) = (worker.client, worker.logger, partition)
    let counted = limits.filter { $0.counts(partition) }
      .map { (bucket: $0.bucket(for: partition), limit: $0) }
      .sorted { $0.bucket < $1.bucket }
    if counted.count == 1 {
      // One counter: one statement on its own (its row lock lasts only that statement).
      let (bucket, limit) = counted[0]
      return try await worker.bounded("taking permits for line \(Line.shown(line))") {
        try await client.checkedQuery(
          Self.permits(bucket: bucket, limit: limit, wanting: wanting),
          logger: logger
        ) { rows in
          for try await row in rows {
            let taken = try Self.taken(NamedColumns(row))
            return RateGrant(
              granted: taken.granted,
              until: taken.granted < wanting ? taken.until : nil,
              lapses: taken.until
            )
          }
          return RateGrant(granted: 0, until: nil)
        }
      }
    }
    return try await worker.bounded("taking permits for line \(Line.shown(line))") {
      try await client.transaction(logger: logger) { connection -> RateGrant in
        var granted = max(0, wanting)
        var taken: [(bucket: String, start: Int64, granted: Int)] = []
        var until: Int64?
        var lapses: Int64?
        for (bucket, limit) in counted {
          for try await row in try await connection.checkedQuery(
            Self.permits(bucket: bucket, limit: limit, wanting: granted),
            logger: logger
          ) {
            let counter = try Self.taken(NamedColumns(row))
            taken.append((bucket, counter.start, counter.granted))
            lapses = min(lapses ?? counter.until, counter.until)
            if counter.granted < granted { until = max(until ?? counter.until, counter.until) }
            granted = min(granted, counter.granted)
          }
        }
        // What a later counter did not grant goes back to the earlier ones, in their window.
        for counter in taken where counter.granted > granted {
          try await connection.checkedQuery(
            """
            UPDATE \(Table.rateWindow) SET used = used - \(counter.granted - granted)
            WHERE bucket = \(counter.bucket) AND start = \(counter.start)
            """,
            logger: logger
          )
        }
        return RateGrant(granted: granted, until: granted < wanting ? until : nil, lapses: lapses)
      }
    }
  }

  /// The statement that takes up to `wanting` permits of one counter: the clock read, then the
  /// counter's row locked, and what its window leaves granted (a clock read before another
  /// transaction moved the counter to a newer window counts in that one).
  static func permits(bucket: String, limit: RateLimit, wanting: Int) -> PostgresQuery {
    let (milliseconds, capacity, want) = (limit.milliseconds, limit.count, max(0, wanting))
    return """
      INSERT INTO \(Table.rateWindow) AS w (bucket, start, until, capacity, used, granted)
      SELECT \(bucket), c.start, c.start + \(milliseconds), \(capacity),
        LEAST(\(want), \(capacity)), LEAST(\(want), \(capacity))
      FROM (SELECT (floor(extract(epoch FROM clock_timestamp()) * 1000 / \(milliseconds))
        * \(milliseconds))::bigint AS start) c
      ON CONFLICT (bucket) DO UPDATE SET
        granted = CASE WHEN excluded.start <= w.start
          THEN LEAST(\(want), GREATEST(0, w.capacity - w.used))
          ELSE LEAST(\(want), \(capacity)) END,
        used = CASE WHEN excluded.start <= w.start
          THEN w.used + LEAST(\(want), GREATEST(0, w.capacity - w.used))
          ELSE LEAST(\(want), \(capacity)) END,
        start = GREATEST(excluded.start, w.start),
        until = GREATEST(excluded.until, w.until),
        capacity = \(capacity)
      RETURNING granted, start, until
      """
  }

  /// A counter's row as the statement returns it.
  static func taken(_ row: NamedColumns) throws -> (granted: Int, start: Int64, until: Int64) {
    (try row("granted"), try row("start"), try row("until"))
  }

  /// Whether `sequence` is the line's first message (read after a refused move, to say why).
  private func isFirst(_ sequence: Int64) async -> Bool {
    let (client, logger, line) = (worker.client, worker.logger, line)
    let earlier = try? await worker.bounded(
      "reading why line \(Line.shown(line)) refused a dead letter",
      progress: false
    ) { () -> Bool in
      try await client.checkedQuery(
        "SELECT 1 FROM \(Table.message) WHERE line = \(line) AND sequence < \(sequence)",
        logger: logger
      ) { rows in
        var found = false
        for try await _ in rows { found = true }
        return found
      }
    }
    return earlier != true
  }

  /// Writes attempts on their own, each as cut unless this worker still holds the line under
  /// its fence; one try, a failure logged.
  func recordAudit(_ attempts: [AuditAttempt]) async {
    let (client, logger, line, owner, fence) = (worker.client, worker.logger, line, worker.id, held)
    let statement = AuditStatement(
      line: line,
      owner: owner,
      fence: fence,
      columns: AuditColumns(attempts)
    )
    do {
      try await worker.bounded(
        "writing the audit trail of line \(Line.shown(line))",
        progress: false
      ) {
        try await client.checkedExecute(statement, logger: logger) { rows in
          for try await _ in rows {}
        }
      }
    } catch {
      logger.warning(
        "could not write delivery attempts to the audit trail; the trail misses them",
        metadata: [
          "worker": "\(worker.id)", "partition": "\(Line.shown(line))",
          "attempts": "\(attempts.count)",
          "error": "\(outboxError(error, database: worker.outbox.database))",
        ]
      )
    }
  }

  /// Not known whether it committed: tried again while the lease holds (deleting twice is
  /// harmless, and a next message taken twice only counts one more attempt); if the lease
  /// does not hold, or the worker is stopping, the next holder delivers the message again.
  func recordFailed(_ error: any Error, failures: Int) -> Bool {
    if Task.isCancelled || worker.state.withLock(announcingTo: worker, { $0.ending }) {
      return false
    }
    worker.logger.warning(
      "could not record a delivery's outcome; trying again",
      metadata: [
        "worker": "\(worker.id)", "partition": "\(Line.shown(line))", "fence": "\(held)",
        "failures": "\(failures)",
        "error": "\(outboxError(error, database: worker.outbox.database))",
      ]
    )
    return true
  }

  /// A quarter of the lease: the worker tries again, and renews, before the lease runs out.
  var longestRecordWait: Duration? { worker.settings.tick }

  func waitToRecordAgain(_ delay: Duration, after error: any Error) async -> Bool {
    // Safe as library code: a short pause between tries of one statement, real time as the
    // lease it runs under; cancelled with the line's task.
    try? await Task.sleep(for: delay)
    return true
  }
}
#endif
