// Where a PostgreSQL outbox keeps its recurring schedules: storage only (the rules and the loop
// are OrderlyOutboxCore's ScheduleTicks and ScheduleTicker).
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
package import Foundation
import OrderlyCore
public import OrderlyOutboxCore
import PostgresNIO

extension PostgresOutbox: ScheduleStore {
  /// The outbox's recurring schedules: kept in the database, so every worker sees them; each
  /// tick is appended once across the fleet, by whichever started worker takes it first.
  public var schedules: OutboxSchedules<Message> {
    OutboxSchedules(store: self, ticker: scheduleTicker)
  }

  package func readSchedules() async throws(OutboxError) -> [ScheduleRow] {
    // An outbox created before schedules, read by a tool that changes no table: none.
    guard try await hasScheduleTable() else { return [] }
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var rows: [ScheduleRow] = []
        for try await row in try await client.query(
          """
          SELECT name, rule, zone, partition, payload, headers, missed, paused, anchor,
            count_from, last_tick
          FROM \(Table.schedule)
          """,
          logger: logger
        ) {
          let row = NamedColumns(row)
          rows.append(
            ScheduleRow(
              name: try row("name"),
              rule: try row("rule"),
              zone: try row("zone"),
              partition: try row("partition"),
              payload: try row("payload", as: Data.self),
              headers: try row("headers"),
              missed: try row("missed"),
              paused: try row("paused"),
              anchor: try row("anchor"),
              countFrom: try row("count_from"),
              lastTick: try row("last_tick")
            )
          )
        }
        return rows
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  package func writeSchedule(_ row: ScheduleRow) async throws(OutboxError) {
    let query: PostgresQuery
    do {
      query = try """
      INSERT INTO \(Table.schedule)
        (name, rule, zone, partition, payload, headers, missed, paused, anchor, count_from,
         last_tick)
      VALUES (\(row.name), \(row.rule), \(row.zone), \(row.partition), \(row.payload),
        \(row.headers), \(row.missed), \(row.paused), \(row.anchor), \(row.countFrom),
        \(row.lastTick))
      ON CONFLICT (name) DO UPDATE SET
        rule = excluded.rule, zone = excluded.zone, partition = excluded.partition,
        payload = excluded.payload, headers = excluded.headers, missed = excluded.missed,
        paused = excluded.paused, anchor = excluded.anchor, count_from = excluded.count_from,
        last_tick = excluded.last_tick
      RETURNING 1
      """
    } catch {
      throw .cannotEncode(reason: "\(error)")
    }
    _ = try await execute(query)
  }

  package func setSchedulePaused(named name: String, _ paused: Bool, countFrom: Int64?)
    async throws(OutboxError) -> Bool
  {
    guard try await hasScheduleTable() else { return false }
    // Resuming a schedule that is not paused changes nothing, its count included.
    return try await execute(
      """
      UPDATE \(Table.schedule)
      SET paused = \(paused),
        count_from = CASE WHEN paused AND \(countFrom)::bigint IS NOT NULL
          THEN \(countFrom)::bigint ELSE count_from END
      WHERE name = \(name)
      RETURNING 1
      """
    ) > 0
  }

  package func deleteSchedule(named name: String) async throws(OutboxError) -> Bool {
    guard try await hasScheduleTable() else { return false }
    return try await execute(
      "DELETE FROM \(Table.schedule) WHERE name = \(name) RETURNING 1"
    ) > 0
  }

  package func takeTick(
    named name: String,
    rule: String,
    tick: Int64,
    appending message: PreparedMessage<Message>?
  ) async throws(OutboxError) -> (taken: Bool, appended: (id: UUID, sequence: Int64)?) {
    guard !Task.isCancelled else { throw .cancelled }
    let written: Written?
    do {
      let client = client
      written = try await withDeadline(Self.statementLimit) {
        try await client.transaction(logger: self.logger) { connection -> Written? in
          // The row's lock orders workers that take the same tick: the second one finds the
          // last tick moved, and takes nothing.
          var taken = false
          for try await _ in try await connection.checkedQuery(
            """
            UPDATE \(Table.schedule) SET last_tick = \(tick)
            WHERE name = \(name) AND rule = \(rule) AND NOT paused AND count_from < \(tick)
              AND (last_tick IS NULL OR last_tick < \(tick))
            RETURNING 1
            """,
            logger: self.logger
          ) {
            taken = true
          }
          guard taken else { return nil }
          guard let message else { return Written() }
          return try await self.write([message], on: connection)
        }
      }
    } catch {
      if Task.isCancelled { throw .cancelled }
      throw outboxError(error, database: database)
    }
    guard let written else { return (false, nil) }
    for event in written.events { hub.emit(event) }
    for event in written.events {
      switch event {
      case .appended(let id, let sequence, _), .merged(let id, let sequence, _):
        return (true, (id, sequence))
      default: continue
      }
    }
    return (true, nil)
  }

  /// Whether the schedules' table is there: not in an outbox created before schedules that no
  /// worker of this version opened (a tool that changes no table reads it as it is).
  private func hasScheduleTable() async throws(OutboxError) -> Bool {
    if state.withLock(announcingTo: self, { $0.hasScheduleTable }) { return true }
    let present =
      try await execute("SELECT 1 WHERE to_regclass('\(Table.schedule)') IS NOT NULL") > 0
    if present { state.withLock(announcingTo: self) { $0.hasScheduleTable = true } }
    return present
  }

  /// Runs one statement in its own transaction, under the statement limit.
  ///
  /// - Returns: How many rows it returned.
  private func execute(_ query: PostgresQuery) async throws(OutboxError) -> Int {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var count = 0
        for try await _ in try await client.query(query, logger: logger) { count += 1 }
        return count
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }
}
#endif
