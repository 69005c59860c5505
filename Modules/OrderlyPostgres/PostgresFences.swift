// Fences for the handler's own writes on PostgreSQL: a write that commits only under the key's
// newest fence.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
import Foundation
public import Logging
public import OrderlyOutboxCore
public import PostgresNIO

/// A handler's write refused because its fence is lower than one already written for its key:
/// the worker lost the key (its lease ran out while it was paused or cut off) and the key's next
/// holder has written since.
///
/// Thrown by ``PostgresFences/admit(_:on:logger:)`` inside the handler's transaction: roll the
/// transaction back (throwing from `withTransaction` does, and wraps it in PostgresNIO's
/// `PostgresTransactionError`: ``in(_:)`` finds it there), and nothing of this delivery
/// commits. The outbox refuses the stale worker's acknowledgement too; the key's holder
/// delivers the message.
public struct StaleFence: Error, Sendable, Equatable, CustomStringConvertible {
  /// The key whose write was refused.
  public let key: String
  /// The fence the refused write came with.
  public let fence: Int64
  /// The fence already written for the key, higher than ``fence``.
  public let lastFence: Int64

  /// Creates the error.
  public init(key: String, fence: Int64, lastFence: Int64) {
    self.key = key
    self.fence = fence
    self.lastFence = lastFence
  }

  /// The refusal `error` is or carries, or `nil`.
  ///
  /// PostgresNIO's `withTransaction` throws a `PostgresTransactionError` that carries the
  /// closure's error; this finds a ``StaleFence`` in either.
  ///
  /// ```swift
  /// do {
  ///   try await client.withTransaction(logger: logger) { connection in ... }
  /// } catch {
  ///   if let stale = StaleFence.in(error) { logger.info("\(stale)") }
  ///   throw error
  /// }
  /// ```
  public static func `in`(_ error: any Error) -> StaleFence? {
    if let stale = error as? StaleFence { return stale }
    if let transaction = error as? PostgresTransactionError, let inner = transaction.closureError {
      return inner as? StaleFence
    }
    return nil
  }

  /// What was refused, and why.
  public var description: String {
    "the write for key '\(key)' under fence \(fence) was refused: fence \(lastFence) wrote "
      + "since (this worker lost the key; the key's holder delivers the message)"
  }
}

/// A table of the last fence per key, that makes a handler's writes conditional on its fence.
///
/// A lease alone does not keep a handler's effects in order: a worker paused past its lease
/// (a stopped process, a long pause of the machine) wakes up still inside its handler, and
/// writes after the key's next holder wrote. Call ``admit(_:on:logger:)`` first in the
/// handler's own transaction, on the same database as the effects:
///
/// ```swift
/// let fences = try PostgresFences()
/// try await fences.createTable(client, logger: logger)
/// try outbox.start { envelope in
///   try await client.withTransaction(logger: logger) { connection in
///     try await fences.admit(envelope, on: connection, logger: logger)
///     try await connection.query("INSERT INTO ledger ...", logger: logger)
///   }
/// }
/// ```
///
/// `admit` runs `INSERT ... ON CONFLICT (key) DO UPDATE SET last_fence = $fence WHERE
/// last_fence <= $fence`: it writes the envelope's fence for its key unless a higher one is
/// there, and then holds the key's row until the transaction ends. A stale worker's transaction
/// therefore either finds the higher fence and throws ``StaleFence``, or waits for the newer
/// holder's transaction to end and then finds it; two holders' effects never interleave.
///
/// Envelopes without a fence (an outbox on SQLite, one deliverer per file) pass without a write.
public struct PostgresFences: Sendable {
  /// The table's default name.
  public static let defaultTable = "orderly_outbox_fence"

  /// The table's name, in the connection's `search_path` schema.
  public let table: String

  /// A helper on the table named `table`.
  ///
  /// - Parameter table: A plain lower-case identifier: letters, digits and underscores, not
  ///   starting with a digit, at most 63 characters.
  /// - Throws: `OutboxError.invalidOption(_:)` when `table` is not such a name.
  public init(table: String = PostgresFences.defaultTable) throws(OutboxError) {
    let letters = Set("abcdefghijklmnopqrstuvwxyz_")
    let allowed = letters.union("0123456789")
    guard let first = table.first, letters.contains(first), table.count <= 63,
      table.allSatisfy({ allowed.contains($0) })
    else {
      throw .invalidOption(
        "the fence table's name '\(table)' is not a plain identifier: use lower-case letters, "
          + "digits and underscores, starting with a letter or underscore, at most 63 characters"
      )
    }
    self.table = table
  }

  /// Creates the table if it is not there.
  ///
  /// - Parameters:
  ///   - client: A client of the database the handler writes to.
  ///   - logger: Where the query logs.
  /// - Throws: The database's error, or a timeout after 30 seconds without an answer.
  public func createTable(_ client: PostgresClient, logger: Logger) async throws {
    let statement: PostgresQuery = """
      CREATE TABLE IF NOT EXISTS \(unescaped: table) (
        key text PRIMARY KEY,
        last_fence bigint NOT NULL,
        written_at timestamptz NOT NULL DEFAULT now()
      )
      """
    try await withDeadline(Self.statementLimit) {
      try await client.checkedQuery(statement, logger: logger) { _ in }
    }
  }

  /// Writes the envelope's fence for its key inside the handler's transaction, or throws
  /// ``StaleFence`` if a higher fence was written for the key.
  ///
  /// The key is the envelope's partition (empty for the default line). An envelope without a
  /// fence passes without a write.
  ///
  /// - Parameters:
  ///   - envelope: The delivery.
  ///   - connection: A connection inside the handler's transaction (`BEGIN` ran).
  ///   - logger: Where the query logs.
  /// - Throws: ``StaleFence``, the database's error, or a timeout after 30 seconds without an
  ///   answer; roll the transaction back.
  public func admit<Message>(
    _ envelope: Envelope<Message>,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws {
    guard let fence = envelope.fence else { return }
    try await admit(key: envelope.partition ?? "", fence: fence, on: connection, logger: logger)
  }

  /// Writes `fence` for `key` inside the handler's transaction, or throws ``StaleFence`` if a
  /// higher fence was written for it.
  ///
  /// - Parameters:
  ///   - key: The message's key.
  ///   - fence: The delivery's fence (`Envelope.fence`).
  ///   - connection: A connection inside the handler's transaction (`BEGIN` ran).
  ///   - logger: Where the query logs.
  /// - Throws: ``StaleFence``, the database's error, or a timeout after 30 seconds without an
  ///   answer; roll the transaction back.
  public func admit(
    key: String,
    fence: Int64,
    on connection: PostgresConnection,
    logger: Logger
  ) async throws {
    let write: PostgresQuery = """
      INSERT INTO \(unescaped: table) (key, last_fence) VALUES (\(key), \(fence))
      ON CONFLICT (key) DO UPDATE SET last_fence = EXCLUDED.last_fence, written_at = now()
      WHERE \(unescaped: table).last_fence <= EXCLUDED.last_fence
      RETURNING last_fence
      """
    let read: PostgresQuery = "SELECT last_fence FROM \(unescaped: table) WHERE key = \(key)"
    // No row returned: the condition refused the write (a higher fence is there).
    let outcome: Outcome = try await withDeadline(Self.statementLimit) {
      var returned = false
      for try await _ in try await connection.checkedQuery(write, logger: logger) {
        returned = true
      }
      if returned { return .written }
      var last = fence
      for try await value in try await connection.checkedQuery(read, logger: logger).decode(
        Int64.self
      ) {
        last = value
      }
      return .refused(lastFence: last)
    }
    if case .refused(let lastFence) = outcome {
      throw StaleFence(key: key, fence: fence, lastFence: lastFence)
    }
  }

  private enum Outcome: Sendable {
    case written
    case refused(lastFence: Int64)
  }

  static var statementLimit: Duration { .seconds(30) }
}
#endif
