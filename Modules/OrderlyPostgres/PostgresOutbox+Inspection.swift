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
            FROM orderly_outbox_message GROUP BY line
          ),
          dead AS (
            SELECT line, count(*)::bigint AS n, min(failed_at) AS failed
            FROM orderly_outbox_dead_letter GROUP BY line
          ),
          keys AS (
            SELECT line FROM pending UNION SELECT line FROM dead
            UNION SELECT line FROM orderly_outbox_lease WHERE paused
          )
          SELECT k.line, coalesce(p.n, 0)::bigint, p.oldest, m.id, coalesce(m.attempts, 0)::bigint,
            coalesce(d.n, 0)::bigint, d.failed, coalesce(l.paused, false), l.owner, l.expires_at,
            l.fence, m.not_before
          FROM keys k
          LEFT JOIN pending p ON p.line = k.line
          LEFT JOIN dead d ON d.line = k.line
          LEFT JOIN orderly_outbox_message m ON m.line = k.line AND m.sequence = p.head
          LEFT JOIN orderly_outbox_lease l ON l.line = k.line
          """,
          logger: logger
        )
        for try await (
          line, pending, oldest, head, attempts, dead, failed, paused, owner, expires, fence,
          notBefore
        )
          in rows.decode(
            (
              String, Int64, Date?, UUID?, Int64, Int64, Date?, Bool, String?, Date?, Int64?, Date?
            ).self
          )
        {
          var holder: OutboxKeyHolder?
          if let owner, let expires, let fence {
            holder = OutboxKeyHolder(owner: owner, leaseExpiresAt: expires, fence: fence)
          }
          keys.append(
            OutboxKey(
              partition: Line.partition(line),
              pending: Int(pending),
              deadLetters: Int(dead),
              paused: paused,
              head: head,
              headAttempts: Int(attempts),
              headNotBefore: notBefore,
              oldestPendingAppendedAt: oldest,
              oldestDeadLetterFailedAt: failed,
              holder: holder
            )
          )
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
            NULL::timestamptz, NULL::text
          FROM orderly_outbox_message WHERE id = \(id)
          UNION ALL
          SELECT sequence, partition, payload, headers, attempts, appended_at, NULL::timestamptz,
            failed_at, reason
          FROM orderly_outbox_dead_letter WHERE id = \(id)
          """,
          logger: logger
        )
        for try await (
          sequence, partition, payload, headers, attempts, appendedAt, notBefore, failedAt, reason
        )
          in rows.decode((Int64, String?, Data, String?, Int, Date, Date?, Date?, String?).self)
        {
          found = OutboxStoredMessage(
            id: id,
            sequence: sequence,
            partition: partition,
            payload: payload,
            headers: StoredHeaders.decode(headers),
            attempts: attempts,
            appendedAt: appendedAt,
            notBefore: notBefore,
            deadLetter: failedAt.map { ($0, reason ?? "") }
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
