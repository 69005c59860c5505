// What an operator reads of a PostgreSQL outbox: counts, keys, one stored message.
//
// Compiled with the Postgres trait; see Package.swift.
#if Postgres
public import Foundation
public import OrderlyOutboxCore
import PostgresNIO

extension PostgresOutbox {
  /// The audit trail of every worker's delivery attempts, with the messages held and each
  /// line's numbers handed out, read in one repeatable-read transaction: what
  /// `OutboxAuditTrail.audit(key:)` checks.
  ///
  /// - Returns: The trail, or `nil` if no worker ever started with `audit` on.
  /// - Throws: The database's error as an `OutboxError`.
  public func auditTrail() async throws(OutboxError) -> OutboxAuditTrail? {
    do {
      // A trail of a week can be long: more time than one statement's limit.
      return try await withDeadline(Self.statementLimit * 10) { [self] in
        try await PostgresAudit.trail(client, logger: logger)
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// Every key with pending messages, dead letters or a pause, with the worker holding its
  /// lease (owner, expiry, fence), in one query: every worker's keys count.
  ///
  /// - Returns: The keys, in no set order.
  /// - Throws: The database's error as an `OutboxError`.
  public func keys() async throws(OutboxError) -> [OutboxKey] {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var keys: [OutboxKey] = []
        let rows = try await client.query(
          """
          WITH pending AS (
            SELECT line, count(*)::bigint AS n, min(appended_at) AS oldest, min(sequence) AS head
            FROM \(Table.message) GROUP BY line
          ),
          dead AS (
            SELECT line, count(*)::bigint AS n, min(failed_at) AS failed
            FROM \(Table.deadLetter) GROUP BY line
          ),
          keys AS (
            SELECT line FROM pending UNION SELECT line FROM dead
            UNION SELECT line FROM \(Table.lease) WHERE paused
          )
          SELECT k.line, coalesce(p.n, 0)::bigint AS pending, p.oldest, m.id AS head,
            coalesce(m.attempts, 0)::bigint AS attempts, coalesce(d.n, 0)::bigint AS dead,
            d.failed, coalesce(l.paused, false) AS paused, l.owner, l.expires_at, l.fence,
            m.not_before, to_jsonb(l) ->> 'pause_reason' AS pause_reason
          FROM keys k
          LEFT JOIN pending p ON p.line = k.line
          LEFT JOIN dead d ON d.line = k.line
          LEFT JOIN \(Table.message) m ON m.line = k.line AND m.sequence = p.head
          LEFT JOIN \(Table.lease) l ON l.line = k.line
          """,
          logger: logger
        )
        for try await row in rows {
          let row = NamedColumns(row)
          var holder: OutboxKeyHolder?
          if let owner = try row("owner", as: String?.self),
            let expires = try row("expires_at", as: Date?.self),
            let fence = try row("fence", as: Int64?.self)
          {
            holder = OutboxKeyHolder(owner: owner, leaseExpiresAt: expires, fence: fence)
          }
          keys.append(
            OutboxKey(
              partition: Line.partition(try row("line")),
              pending: Int(try row("pending", as: Int64.self)),
              deadLetters: Int(try row("dead", as: Int64.self)),
              paused: try row("paused"),
              head: try row("head"),
              headAttempts: Int(try row("attempts", as: Int64.self)),
              headNotBefore: try row("not_before"),
              oldestPendingAppendedAt: try row("oldest"),
              oldestDeadLetterFailedAt: try row("failed"),
              holder: holder,
              quarantine: try row("pause_reason")
            )
          )
        }
        // The counters whose current window is full (on the server's clock): the keys they
        // count wait for its end. None in an outbox created before rate limits.
        var full: [(bucket: String, until: Int64)] = []
        var present = false
        for try await found in try await client.query(
          "SELECT to_regclass('\(Table.rateWindow)') IS NOT NULL",
          logger: logger
        ).decode(Bool.self) {
          present = found
        }
        if present {
          for try await row in try await client.query(
            """
            SELECT bucket, until FROM \(Table.rateWindow)
            WHERE used >= capacity
              AND until > (extract(epoch FROM clock_timestamp()) * 1000)::bigint
            """,
            logger: logger
          ).decode((String, Int64).self) {
            full.append(row)
          }
        }
        if !full.isEmpty {
          for index in keys.indices where keys[index].pending > 0 {
            keys[index].rateLimitedUntil = RateLimits.heldUntil(keys[index].partition, full: full)
          }
        }
        return keys
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }

  /// One stored message, pending or dead, with its payload and headers as stored.
  ///
  /// - Parameter id: The message's identifier.
  /// - Returns: The message, or `nil` if the database holds none with that identifier.
  /// - Throws: The database's error as an `OutboxError`.
  public func storedMessage(id: UUID) async throws(OutboxError) -> OutboxStoredMessage? {
    do {
      return try await withDeadline(Self.statementLimit) { [self] in
        var found: OutboxStoredMessage?
        let rows = try await client.query(
          """
          SELECT sequence, partition, payload, headers, attempts, appended_at, not_before,
            NULL::timestamptz AS failed_at, NULL::text AS reason,
            to_jsonb(m) ->> 'unique_key' AS unique_key
          FROM \(Table.message) m WHERE id = \(id)
          UNION ALL
          SELECT sequence, partition, payload, headers, attempts, appended_at, NULL::timestamptz,
            failed_at, reason, NULL::text
          FROM \(Table.deadLetter) WHERE id = \(id)
          """,
          logger: logger
        )
        for try await row in rows {
          let row = NamedColumns(row)
          let reason: String? = try row("reason")
          found = OutboxStoredMessage(
            id: id,
            sequence: try row("sequence"),
            partition: try row("partition"),
            payload: try row("payload"),
            headers: StoredHeaders.decode(try row("headers", as: String?.self)),
            attempts: try row("attempts"),
            appendedAt: try row("appended_at"),
            notBefore: try row("not_before"),
            deadLetter: try row("failed_at", as: Date?.self).map { ($0, reason ?? "") },
            uniqueKey: try row("unique_key")
          )
        }
        return found
      }
    } catch {
      throw outboxError(error, database: database)
    }
  }
}
#endif
