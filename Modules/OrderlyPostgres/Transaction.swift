// Statements in one transaction, and the commit confirmation a line waits for before it goes on.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
import Logging
import PostgresNIO

/// A query sent on a connection that had already closed: nothing was sent.
struct ConnectionEnded: Error, CustomStringConvertible {
  var description: String {
    "the connection had closed before the query could be sent (the server ended it, or it broke)"
  }
}

/// A statement still unanswered when its connection had closed.
///
/// The watch of ``withDeadline(_:_:)`` stopped waiting for it. Whether it ran is not known (it
/// may have been a `COMMIT` the server processed before the connection ended), so it is never
/// retried as ``ConnectionEnded`` is.
struct ConnectionLost: Error, CustomStringConvertible {
  var description: String {
    "the connection closed while a statement waited for its answer; whether it ran is not known"
  }
}

extension PostgresConnection {
  // deadline: the caller's
  /// Runs `query`, or throws ``ConnectionEnded`` at once if the connection has closed.
  ///
  /// PostgresNIO 1.33 writes a query to its channel without a promise for the write: on a channel
  /// that has closed, the write fails and the query's own promise is never completed, so the
  /// caller would wait forever. This happens when the pool hands out a connection the server
  /// has just ended (`pg_terminate_backend`, a restart) before the pool has seen it close: seen
  /// under the benchmark harness's backend kills, where every append then hung. The check
  /// leaves only the moment between it and the write.
  @discardableResult
  ///
  /// Inside ``withDeadline(_:_:)``, the query names this connection to the deadline's watch,
  /// which stops waiting for it soon after the connection closes: the query may still have been
  /// written to a connection that closed right after the check.
  func checkedQuery(_ query: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
    guard !isClosed else { throw ConnectionEnded() }
    QueryConnection.current?.watch { [self] in self.isClosed }
    return try await self.query(query, logger: logger)
  }
}

extension PostgresClient {
  // deadline: the caller's
  /// Runs one statement on a connection of the pool with
  /// ``PostgresConnection/checkedQuery(_:logger:)``, and reads its rows with `read`.
  func checkedQuery<T: Sendable>(
    _ query: PostgresQuery,
    logger: Logger,
    read: (PostgresRowSequence) async throws -> T
  ) async throws -> T {
    try await withConnection { connection in
      try await read(try await connection.checkedQuery(query, logger: logger))
    }
  }
}

extension PostgresClient {
  // deadline: the caller's
  /// `BEGIN`, `body`, `COMMIT` on one connection of the pool: PostgresNIO's `withTransaction`,
  /// without its ways to wait forever on a connection that closed.
  ///
  /// Every statement of its own goes through ``PostgresConnection/checkedQuery(_:logger:)``.
  /// When `body` or the `COMMIT` fails, the `ROLLBACK` is sent only on a connection that is
  /// still open (the server rolls back the transaction of a connection that ended), and waited
  /// for 5 seconds at most; the error thrown is the one that ended the transaction, with where
  /// it happened (``TransactionFailure``).
  func transaction<T: Sendable>(
    logger: Logger,
    _ body: (PostgresConnection) async throws -> T
  ) async throws -> T {
    try await withConnection { connection in
      do {
        try await connection.checkedQuery("BEGIN", logger: logger)
      } catch {
        throw TransactionFailure(stage: .begin, underlying: error)
      }
      let value: T
      do {
        value = try await body(connection)
      } catch {
        await connection.rollBack(logger: logger)
        throw TransactionFailure(stage: .body, underlying: error)
      }
      do {
        try await connection.checkedQuery("COMMIT", logger: logger)
      } catch {
        await connection.rollBack(logger: logger)
        throw TransactionFailure(stage: .commit, underlying: error)
      }
      return value
    }
  }
}

extension PostgresClient {
  // deadline: the caller's
  /// Runs one statement on a connection of the pool, reads its rows with `read`, and returns
  /// what `read` returned only once the statement is known to have committed.
  ///
  /// PostgresNIO 1.33 hands a statement's rows over at its `CommandComplete`, but PostgreSQL
  /// commits the statement's implicit transaction only at the `Sync` that follows. A server that
  /// ends the connection in between (`pg_terminate_backend`, a restart) rolls the statement back
  /// after its rows were read: an acknowledgement that said "removed, and here is the next
  /// message" while the message stayed, so the line's next holder delivered it again after the
  /// next one (seen under a storm of ended connections). A second statement on the same
  /// connection is answered only after the first one's `Sync` was processed: its answer proves
  /// the commit, at the cost of one more round trip (``CommitConfirmation``, prepared once per
  /// connection). A statement whose effect nobody acts on (counting an attempt, releasing a
  /// lease) does not need this.
  func committedQuery<T: Sendable>(
    _ query: PostgresQuery,
    logger: Logger,
    read: (PostgresRowSequence) async throws -> T
  ) async throws -> T {
    try await withConnection { connection in
      let value = try await read(try await connection.checkedQuery(query, logger: logger))
      for try await _ in try await connection.checkedExecute(CommitConfirmation(), logger: logger) {
      }
      return value
    }
  }
}

/// `SELECT 1`, run after a statement on the same connection to prove that statement committed
/// (see ``PostgresClient/committedQuery(_:logger:read:)``).
///
/// Prepared once per connection: sent unprepared, PostgreSQL parsed and planned it at every
/// acknowledgement.
struct CommitConfirmation: PostgresPreparedStatement {
  static let name = "orderly_commit_confirmation_v1"
  static let sql = "SELECT 1"
  typealias Row = Int32

  func makeBindings() -> PostgresBindings { PostgresBindings() }

  func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Int32.self) }
}

extension PostgresConnection {
  /// Sends `ROLLBACK` on a connection that is still open, waiting 5 seconds at most; errors are
  /// ignored (the transaction's own error is what the caller reports).
  fileprivate func rollBack(logger: Logger) async {
    guard !isClosed else { return }
    _ = try? await withDeadline(.seconds(5)) {
      try await self.checkedQuery("ROLLBACK", logger: logger)
    }
  }
}

/// A transaction of ``PostgresClient/transaction(logger:_:)`` that failed, and where.
struct TransactionFailure: Error, CustomStringConvertible {
  enum Stage: Sendable { case begin, body, commit }
  /// Where it failed: only a failed `COMMIT` may have been committed all the same.
  let stage: Stage
  let underlying: any Error
  var description: String { "\(underlying)" }
}
#endif

#if Postgres
extension PostgresConnection {
  // deadline: the caller's
  /// Runs a prepared statement (parsed and planned once per connection, not at every call),
  /// or throws ``ConnectionEnded`` at once if the connection has closed; named to the deadline's
  /// watch as ``checkedQuery(_:logger:)`` is.
  func checkedExecute<Statement: PostgresPreparedStatement>(
    _ statement: Statement,
    logger: Logger
  ) async throws -> AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row> {
    guard !isClosed else { throw ConnectionEnded() }
    QueryConnection.current?.watch { [self] in self.isClosed }
    return try await self.execute(statement, logger: logger)
  }
}

extension PostgresClient {
  // deadline: the caller's
  /// ``committedQuery(_:logger:read:)`` for a prepared statement.
  func committedExecute<Statement: PostgresPreparedStatement, T: Sendable>(
    _ statement: Statement,
    logger: Logger,
    read: (AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row>) async throws -> T
  ) async throws -> T {
    try await withConnection { connection in
      let value = try await read(try await connection.checkedExecute(statement, logger: logger))
      for try await _ in try await connection.checkedExecute(CommitConfirmation(), logger: logger) {
      }
      return value
    }
  }

  // deadline: the caller's
  /// ``checkedQuery(_:logger:read:)`` for a prepared statement.
  func checkedExecute<Statement: PostgresPreparedStatement, T: Sendable>(
    _ statement: Statement,
    logger: Logger,
    read: (AsyncThrowingMapSequence<PostgresRowSequence, Statement.Row>) async throws -> T
  ) async throws -> T {
    try await withConnection { connection in
      try await read(try await connection.checkedExecute(statement, logger: logger))
    }
  }
}
#endif
