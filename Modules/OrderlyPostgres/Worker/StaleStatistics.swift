// How a PostgreSQL worker keeps the messages table's statistics from calling a full queue empty.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import PostgresNIO

/// What one look at the messages table's statistics found, and did.
enum StatisticsCheck: Equatable, Sendable {
  /// The statistics count about as many rows as the table holds, or the table holds few.
  case current
  /// The statistics counted `estimated` rows while the table held about `live`: this worker
  /// ran `ANALYZE` on it.
  case analyzed(estimated: Double, live: Double)
  /// As `analyzed`, but another worker was analyzing the table at that moment.
  case analyzedElsewhere
  /// As `analyzed`, but this worker's role does not own the table, so it cannot.
  case notOwner(estimated: Double, live: Double)
}

extension FleetWorker {
  /// How often a worker looks at the messages table's statistics.
  static var statisticsInterval: Duration { .seconds(10) }

  /// The fewest rows for which stale statistics are worth an `ANALYZE`: below it, any plan
  /// reads the table quickly.
  static var statisticsFloor: Double { 1_000 }

  /// Every ``statisticsInterval``: ``checkStatistics()``.
  ///
  /// PostgreSQL estimates a table's rows as the density its last `VACUUM` or `ANALYZE` saw,
  /// times the table's pages now. An autovacuum that runs the moment the queue has drained
  /// sees no live row, and until the next `ANALYZE` every plan takes the messages table for
  /// one row, whatever it holds: full reads of an index cost, in its eyes, what one probe of
  /// the primary key costs. Autovacuum analyzes the table again only at its next round (a
  /// minute by default, later when its workers are busy); the worker's statements are written
  /// to probe the primary key even then, and this loop ends that time sooner.
  func statisticsLoop() async {
    var told = false
    while !Task.isCancelled {
      let check = await checkStatistics()
      if case .analyzed(let estimated, let live) = check {
        logger.notice(
          "the statistics of \(Table.message) counted far fewer rows than it holds (an autovacuum ran as the queue drained), so PostgreSQL planned for an empty table: analyzed it",
          metadata: ["worker": "\(id)", "estimated": "\(estimated)", "live": "\(live)"]
        )
      }
      if case .notOwner(let estimated, let live) = check, !told {
        told = true
        logger.warning(
          "the statistics of \(Table.message) count far fewer rows than it holds, so PostgreSQL may plan the worker's statements for an empty table; the worker's role does not own the table and cannot ANALYZE it: run ANALYZE \(Table.message) as its owner, or let autovacuum's next round do it",
          metadata: ["worker": "\(id)", "estimated": "\(estimated)", "live": "\(live)"]
        )
      }
      // Safe as library code: a housekeeping period on real time (the statistics age in the
      // database's time, not on the outbox's clock); nothing waits on it, it ends at once when
      // end() cancels the loop, and each check is bounded by a lease.
      try? await Task.sleep(for: Self.statisticsInterval)
    }
  }

  /// Reads the messages table's row estimate (`pg_class.reltuples`) and its count of live rows
  /// (`pg_stat_user_tables.n_live_tup`, kept by every insert and delete); when the table holds
  /// at least ``statisticsFloor`` rows and the estimate is under a tenth of them, runs
  /// `ANALYZE` on it, unless another worker of the database is doing so.
  ///
  /// Failures are logged at debug level and answered `.current`: the other loops report a
  /// server that does not answer.
  func checkStatistics() async -> StatisticsCheck {
    let (client, logger) = (client, logger)
    do {
      return try await bounded("checking the messages table's statistics") {
        () -> StatisticsCheck in
        var found: (estimated: Double, live: Double, owner: Bool)?
        try await client.checkedQuery(
          """
          SELECT c.reltuples::float8 AS estimated, coalesce(s.n_live_tup, 0)::float8 AS live,
            pg_has_role(c.relowner, 'USAGE') AS owner
          FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
          WHERE c.oid = to_regclass('\(Table.message)')
          """,
          logger: logger
        ) { rows in
          for try await row in rows {
            let row = NamedColumns(row)
            found = (try row("estimated"), try row("live"), try row("owner"))
          }
        }
        guard let found, found.live >= Self.statisticsFloor,
          found.estimated < found.live / 10
        else { return .current }
        guard found.owner else { return .notOwner(estimated: found.estimated, live: found.live) }
        return try await client.transaction(logger: logger) { connection in
          // A table locked by a VACUUM or another ANALYZE is left to it, not waited for.
          try await connection.checkedQuery("SET LOCAL lock_timeout = '1s'", logger: logger)
          var mine = false
          for try await locked in try await connection.checkedQuery(
            """
            SELECT pg_try_advisory_xact_lock(
              hashtext('orderly_outbox_analyze:' || current_schema()))
            """,
            logger: logger
          ).decode(Bool.self) {
            mine = locked
          }
          guard mine else { return .analyzedElsewhere }
          try await connection.checkedQuery("ANALYZE \(Table.message)", logger: logger)
          return .analyzed(estimated: found.estimated, live: found.live)
        }
      }
    } catch {
      logger.debug(
        "could not check the messages table's statistics",
        metadata: ["worker": "\(id)", "error": "\(outboxError(error, database: outbox.database))"]
      )
      return .current
    }
  }
}
#endif
