// A PostgreSQL outbox's dead letters (read, retried, dropped), and waiting until everything is
// delivered.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
public import Foundation
import Logging
import OrderlyCore
public import OrderlyOutboxCore
import PostgresNIO

extension PostgresOutbox {
  // MARK: - Dead letters

  /// Every dead letter, by line and place.
  ///
  /// - Returns: The dead letters, each with its message (or `nil` if it no longer decodes) and
  ///   the reason it failed.
  /// - Throws: The database's error as an `OutboxError`.
  public func deadLetters() async throws(OutboxError) -> [DeadLetter<Message>] {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        let decoder = JSONDecoder()
        var letters: [DeadLetter<Message>] = []
        let rows = try await client.query(
          """
          SELECT id, sequence, partition, payload, attempts, appended_at, failed_at, reason
          FROM \(Table.deadLetter) ORDER BY failed_at, line, sequence
          """,
          logger: logger
        )
        for try await row in rows {
          let row = NamedColumns(row)
          let payload: Data = try row("payload")
          letters.append(
            DeadLetter(
              id: try row("id"),
              sequence: try row("sequence"),
              partition: try row("partition"),
              message: try? decoder.decode(Message.self, from: payload),
              payload: payload,
              attempts: try row("attempts"),
              appendedAt: try row("appended_at"),
              failedAt: try row("failed_at"),
              reason: try row("reason")
            )
          )
        }
        return letters
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// Puts a dead letter back at its place in its line, to be delivered again before the
  /// messages that came after it.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`, or the database's error.
  public func retryDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(
      id: id,
      query: """
        WITH gone AS (DELETE FROM \(Table.deadLetter) WHERE id = \(id) RETURNING *)
        INSERT INTO \(Table.message)
          (line, sequence, id, partition, entity, payload, attempts, appended_at, headers)
        SELECT line, sequence, id, partition, entity, payload, 0, appended_at, headers FROM gone
        RETURNING sequence
        """
    )
  }

  /// Removes a dead letter for good; its line, if it waited for it, goes on.
  ///
  /// - Parameter id: The dead letter's identifier.
  /// - Throws: `OutboxError.noSuchDeadLetter(_:)`, or the database's error.
  public func dropDeadLetter(id: UUID) async throws(OutboxError) {
    try await settleDeadLetter(
      id: id,
      query: "DELETE FROM \(Table.deadLetter) WHERE id = \(id) RETURNING sequence",
      audited: true
    )
  }

  /// Runs a dead letter's retry or drop, with, for a drop (`audited`), its row in the audit
  /// trail when the trail has begun.
  private func settleDeadLetter(
    id: UUID,
    query: PostgresQuery,
    audited: Bool = false
  ) async throws(OutboxError) {
    let found: Bool
    do {
      found = try await withDeadline(Self.statementLimit) { [self] in
        try await client.transaction(logger: logger) { connection in
          if audited, try await PostgresAudit.trailExists(connection, logger: self.logger) {
            try await connection.checkedQuery(PostgresAudit.dropped(id: id), logger: self.logger)
          }
          var found = false
          for try await _ in try await connection.checkedQuery(query, logger: self.logger)
            .decode(Int64.self)
          {
            found = true
          }
          try await connection.checkedQuery(
            "SELECT pg_notify(\(PostgresSchema.channel), '')",
            logger: self.logger
          )
          return found
        }
      }
    } catch {
      throw outboxError(error, database: database)
    }
    guard found else { throw .noSuchDeadLetter(id) }
  }

  // MARK: - Waiting

  /// Waits until no message is pending in the database: every worker's deliveries count.
  ///
  /// It looks every 50 milliseconds (and at once after each of this outbox's deliveries).
  ///
  /// - Throws: `OutboxError.lineStopped(partition:deadLetter:)` when a line waits at a dead
  ///   letter with messages behind it (while this outbox delivers with
  ///   `DeadLetterPolicy.stopLine`, or is not started); `OutboxError.cancelled` if the
  ///   calling task is cancelled; `OutboxError.closed(path:)` once ``close()`` is called (a
  ///   look under way when it is ends first, within its deadline); the database's error as an
  ///   `OutboxError` (a look the database does not answer within 30 seconds is
  ///   `OutboxError.cannotOpen(path:reason:)`).
  public func waitUntilDelivered() async throws(OutboxError) {
    while true {
      let (policy, closed) = state.withLock(announcingTo: self) {
        ($0.worker?.settings.onDeadLetter, $0.closed)
      }
      if closed { throw .closed(path: database) }
      do {
        let (pending, stopped) = try await withDeadline(Self.statementLimit) {
          try await self.pendingAndStopped()
        }
        if pending == 0 { return }
        if policy != .continueLine, let stopped {
          throw OutboxError.lineStopped(partition: Line.partition(stopped.0), deadLetter: stopped.1)
        }
        // Safe as library code: a poll interval, ended early by cancellation.
        try await Task.sleep(for: .milliseconds(50))
      } catch {
        throw outboxError(error, database: database)
      }
    }
  }

  /// How long the statements of one call (a count, a look of ``waitUntilDelivered()``, a dead
  /// letter settled, opening) may wait for the database, a pooled connection included; past
  /// it the call fails with `OutboxError.cannotOpen(path:reason:)`.
  static var statementLimit: Duration { .seconds(30) }

  // deadline: the caller's
  /// How many messages are pending, and the first line that waits at a dead letter with
  /// messages behind it.
  private func pendingAndStopped() async throws -> (Int64, (String, UUID)?) {
    var pending: Int64 = 0
    var stopped: (String, UUID)?
    let rows = try await client.query(
      """
      SELECT (SELECT count(*)::bigint FROM \(Table.message)) AS pending,
        (SELECT d.line FROM \(Table.deadLetter) d
          WHERE EXISTS (SELECT 1 FROM \(Table.message) m WHERE m.line = d.line)
          ORDER BY d.line, d.sequence LIMIT 1) AS stopped_line,
        (SELECT d.id FROM \(Table.deadLetter) d
          WHERE EXISTS (SELECT 1 FROM \(Table.message) m WHERE m.line = d.line)
          ORDER BY d.line, d.sequence LIMIT 1) AS stopped_id
      """,
      logger: logger
    )
    for try await row in rows {
      let row = NamedColumns(row)
      pending = try row("pending")
      if let line = try row("stopped_line", as: String?.self),
        let id = try row("stopped_id", as: UUID?.self)
      {
        stopped = (line, id)
      }
    }
    return (pending, stopped)
  }
}
#endif
