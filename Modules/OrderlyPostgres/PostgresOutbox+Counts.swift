// What a PostgreSQL outbox counts and reports (pending, dead letters, events, deliverer
// statistics), and pausing one line.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import OrderlyCore
public import OrderlyOutboxCore
import PostgresNIO

extension PostgresOutbox {
  // MARK: - Counts and events

  /// How many messages wait for delivery in the whole database, those being delivered
  /// included; dead letters are not counted.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func pendingCount() async throws(OutboxError) -> Int {
    try await count("SELECT count(*)::bigint FROM \(Table.message)")
  }

  /// How many dead letters the database keeps.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func deadLetterCount() async throws(OutboxError) -> Int {
    try await count("SELECT count(*)::bigint FROM \(Table.deadLetter)")
  }

  /// How many messages wait in the whole database, how many are dead letters, and when the
  /// oldest waiting message was appended, in one query.
  ///
  /// A key is blocked when it is paused (``pause(partition:)``), or when its line waits at a dead
  /// letter: under `DeadLetterPolicy.stopLine`, the policy of this worker's current (or a
  /// coming) `start`. Every worker's keys count.
  ///
  /// - Returns: The counts.
  /// - Throws: The database's error as an `OutboxError`.
  public func counts() async throws(OutboxError) -> OutboxCounts {
    let stops =
      state.withLock(announcingTo: self) { $0.worker?.settings.onDeadLetter ?? .stopLine }
      == .stopLine
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var counts = OutboxCounts(pending: 0, deadLetters: 0, oldestPendingAppendedAt: nil)
        let rows = try await client.query(
          """
          WITH blocked AS (
            SELECT line, min(appended_at) AS since FROM \(Table.deadLetter)
            WHERE \(stops) GROUP BY line
            UNION ALL
            SELECT l.line,
              (SELECT min(m.appended_at) FROM \(Table.message) m WHERE m.line = l.line)
            FROM \(Table.lease) l WHERE l.paused
          ),
          worst AS (SELECT line, since FROM blocked WHERE since IS NOT NULL ORDER BY since LIMIT 1)
          SELECT (SELECT count(*)::bigint FROM \(Table.message)) AS pending,
            (SELECT count(*)::bigint FROM \(Table.deadLetter)) AS dead,
            (SELECT min(appended_at) FROM \(Table.message)) AS oldest,
            (SELECT count(DISTINCT line)::bigint FROM blocked) AS blocked,
            (SELECT line FROM worst) AS worst_line, (SELECT since FROM worst) AS worst_since
          """,
          logger: logger
        )
        for try await row in rows {
          let row = NamedColumns(row)
          counts = OutboxCounts(
            pending: Int(try row("pending", as: Int64.self)),
            deadLetters: Int(try row("dead", as: Int64.self)),
            oldestPendingAppendedAt: try row("oldest"),
            blockedKeys: Int(try row("blocked", as: Int64.self)),
            worstBlockedPartition: try row("worst_line", as: String?.self).flatMap(Line.partition),
            worstBlockedSince: try row("worst_since")
          )
        }
        return counts
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// What this worker holds and has met since this outbox was created: the lines it holds a
  /// lease on now, the lease renewals that failed, the acknowledgements the fence refused.
  public var delivererStatistics: DelivererStatistics {
    let (worker, statistics) = state.withLock(announcingTo: self) { ($0.worker, $0.statistics) }
    var result = statistics
    result.keysHeld = worker?.keysHeld ?? 0
    if let stalled = worker?.stalled {
      result.isStalled = stalled.isStalled
      result.stalledOn = stalled.on
    }
    return result
  }

  private func count(_ query: PostgresQuery) async throws(OutboxError) -> Int {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var total = 0
        for try await value in try await client.query(query, logger: logger).decode(Int64.self) {
          total = Int(value)
        }
        return total
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// What happens to messages this outbox appends and delivers.
  ///
  /// Appended, merged, delivering, delivered, retrying, dead-lettered. Other workers' deliveries are not reported here.
  ///
  /// Each access returns a new sequence that receives every event from then on; it ends when
  /// the outbox is released.
  public var events: AsyncStream<OutboxEvent> { hub.subscribe() }

  // MARK: - Pausing one line

  /// Stops every worker from delivering a line, until ``resume(partition:)``: the line's
  /// current delivery finishes, a retry wait ends (at once on this worker; on others, at their
  /// next lease renewal), and no worker takes its next message.
  ///
  /// - Parameter partition: The line; `nil` for the default line.
  /// - Throws: The database's error as an `OutboxError`.
  public func pause(partition: String?) async throws(OutboxError) {
    try await setPaused(true, partition: partition)
    // This worker stops the line at once (a retry wait ends); another process's worker reads
    // the flag with its next renewal, within a quarter of its lease.
    state.withLock(announcingTo: self) { $0.worker }?.linesPaused([Line.key(partition)])
  }

  /// Lets workers deliver a line that ``pause(partition:)`` stopped.
  ///
  /// - Parameter partition: The line; `nil` for the default line.
  /// - Throws: The database's error as an `OutboxError`.
  public func resume(partition: String?) async throws(OutboxError) {
    state.withLock(announcingTo: self) { $0.worker }?.linesResumed([Line.key(partition)])
    try await setPaused(false, partition: partition)
  }

  private func setPaused(_ paused: Bool, partition: String?) async throws(OutboxError) {
    let line = Line.key(partition)
    do {
      try await withDeadline(Self.statementLimit) { [self] in
        // A pause or resume by hand ends a quarantine's reason; an outbox whose tables predate
        // quarantine (this is `orderly outbox`, which changes no table, before a worker of this
        // version upgraded them) has no reason to clear.
        var reasons = false
        for try await _ in try await client.query(
          """
          SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema()
            AND table_name = \(PostgresSchema.leaseTable) AND column_name = 'pause_reason'
          """,
          logger: logger
        ) {
          reasons = true
        }
        // Committed before this returns: the caller is told the line is paused (or resumed).
        try await client.committedQuery(
          reasons
            ? """
            INSERT INTO \(Table.lease) (line, owner, expires_at, fence, paused)
            VALUES (\(line), NULL, now(), 0, \(paused))
            ON CONFLICT (line) DO UPDATE SET paused = \(paused), pause_reason = NULL
            """
            : """
            INSERT INTO \(Table.lease) (line, owner, expires_at, fence, paused)
            VALUES (\(line), NULL, now(), 0, \(paused))
            ON CONFLICT (line) DO UPDATE SET paused = \(paused)
            """,
          logger: logger
        ) { _ in }
        if !paused {
          try await client.query("SELECT pg_notify(\(PostgresSchema.channel), '')", logger: logger)
        }
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// The lines that are paused with ``pause(partition:)``.
  ///
  /// - Throws: The database's error as an `OutboxError`.
  public func pausedPartitions() async throws(OutboxError) -> [String?] {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var lines: [String?] = []
        for try await line in try await client.query(
          "SELECT line FROM \(Table.lease) WHERE paused ORDER BY line",
          logger: logger
        ).decode(String.self) {
          lines.append(Line.partition(line))
        }
        return lines
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }
}
#endif
