import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import Synchronization
import Testing

/// A failure the first time only.
private struct Offline: Error {}

/// An outbox file delivered with the audit trail on: keys `a` and `b`, five messages each, the
/// first attempt of `a`'s third failed and retried.
private struct AuditedFile {
  let folder: ScratchFolder
  let path: String

  init() async throws {
    folder = try ScratchFolder()
    path = folder.path("outbox.sqlite")
    let outbox = try Outbox<String>(path: path)
    let failed = Mutex(false)
    var options = OutboxDeliveryOptions()
    options.audit = .on
    options.retry = try RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
    try outbox.start(
      options,
      deliver: .each { envelope in
        if envelope.message == "a3", !failed.withLock({ $0 }) {
          failed.withLock { $0 = true }
          throw Offline()
        }
      }
    )
    for key in ["a", "b"] {
      try await outbox.append(
        contentsOf: (1...5).map { "\(key)\($0)" },
        partition: key,
        headers: [:]
      )
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    try await outbox.close()
  }

  func audit(_ arguments: [String] = []) async throws -> CLIResult {
    try await orderly(["outbox", "audit", "--database", path] + arguments)
  }

  /// Changes the trail by hand, as a defect would have written it.
  func tamper(_ sql: String) throws {
    let queue = try DatabaseQueue(path: path)
    try queue.write { db in try db.execute(sql: sql) }
  }
}

@Suite("orderly outbox audit", .timeLimit(.minutes(3)))
struct OutboxAuditCommandTests {
  @Test("a clean trail: a one-line summary, exit 0; --format json has no violation")
  func clean() async throws {
    let file = try await AuditedFile()
    let result = try await file.audit()
    #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
    let lines = result.stdout.split(separator: "\n")
    #expect(lines.count == 1)
    #expect(result.stdout.contains("11 attempt(s) over 2 key(s), 10 delivered"))
    #expect(result.stdout.hasSuffix("no violation\n"))

    let json = try await file.audit(["--format", "json"])
    #expect(json.status == 0)
    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    let report = object?["report"] as? [String: Any]
    #expect((report?["violations"] as? [Any])?.isEmpty == true)
    #expect(report?["delivered"] as? Int == 10)
    #expect(object?["store"] as? String == "sqlite")
  }

  @Test(
    "a trail with each kind of violation a SQLite file can show: each printed with its rows, exit 1"
  )
  func violations() async throws {
    let file = try await AuditedFile()
    // b's second message delivered again (acknowledged twice), a's fourth's row gone (vanished),
    // a's first re-delivered after the rest (out of order), an overlapping holder on b.
    try file.tamper(
      """
      INSERT INTO outbox_audit (partition, sequence, id, attempt, worker, startedAt, endedAt, outcome)
        SELECT partition, sequence, id, attempt + 1, worker, startedAt, endedAt, outcome
        FROM outbox_audit WHERE partition = 'b' AND outcome = 'delivered'
        ORDER BY number LIMIT 1 OFFSET 1;
      DELETE FROM outbox_audit WHERE number = (
        SELECT number FROM outbox_audit WHERE partition = 'a' AND outcome = 'delivered'
        ORDER BY number LIMIT 1 OFFSET 3);
      UPDATE outbox_audit SET number = 1000 WHERE number = (
        SELECT number FROM outbox_audit WHERE partition = 'a' ORDER BY number LIMIT 1);
      INSERT INTO outbox_audit (partition, sequence, id, attempt, worker, startedAt, endedAt, outcome)
        SELECT partition, sequence, id, attempt, 'another-host/1/x', startedAt - 0.5, endedAt + 0.5,
          'retried'
        FROM outbox_audit WHERE partition = 'b' ORDER BY number LIMIT 1;
      """
    )
    let result = try await file.audit()
    #expect(result.status == 1, "\(result.stdout) \(result.stderr)")
    for kind in ["out-of-order", "acknowledged-twice", "vanished", "overlap"] {
      #expect(result.stdout.contains("VIOLATION \(kind):"), "\(kind) in \(result.stdout)")
    }
    #expect(result.stdout.contains("another-host/1/x"))
    // The JSON has every field, `null` for one with no value (a SQLite row has no fence).
    let json = try await file.audit(["--format", "json"])
    let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any]
    let violations = (object?["report"] as? [String: Any])?["violations"] as? [[String: Any]]
    let found = try #require(violations)
    #expect(!found.isEmpty)
    for violation in found {
      #expect(violation.keys.contains("partition"), "\(violation)")
      for row in violation["records"] as? [[String: Any]] ?? [] {
        #expect(row["fence"] is NSNull, "\(row)")
      }
    }
    #expect(result.stdout.split(separator: "\n").last?.contains("violation(s)") == true)
    // One key only: b's violations, not a's.
    let onlyB = try await file.audit(["--key", "b"])
    #expect(onlyB.status == 1)
    #expect(!onlyB.stdout.contains("out-of-order"))
    #expect(onlyB.stdout.contains("acknowledged-twice"))
  }

  @Test("--since leaves out the attempts begun before it")
  func since() async throws {
    let file = try await AuditedFile()
    try file.tamper(
      "UPDATE outbox_audit SET startedAt = startedAt - 86400 * 3 WHERE partition = 'a'"
    )
    let recent = try await file.audit(["--since", "1d"])
    #expect(recent.status == 0, "\(recent.stdout)")
    #expect(recent.stdout.contains("5 attempt(s) over 1 key(s)"))
    let all = try await file.audit(["--since", "2020-01-01T00:00:00Z"])
    #expect(all.stdout.contains("11 attempt(s)"))
  }

  @Test("bad input: no trail, a since that is neither a time nor an age, an empty key")
  func badInput() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("plain.sqlite")
    let outbox = try Outbox<String>(path: path)
    try await outbox.append("x", partition: nil)
    try await outbox.close()
    let none = try await orderly(["outbox", "audit", "--database", path])
    #expect(none.status == 1)
    #expect(none.stderr.contains("has no audit trail"))

    let since = try await orderly(["outbox", "audit", "--database", path, "--since", "yesterday"])
    #expect(since.status == 64)
    #expect(since.stderr.contains("--since"))
    let key = try await orderly(["outbox", "audit", "--database", path, "--key", ""])
    #expect(key.status == 64)
    // Nothing was changed: the message is still there.
    let reopened = try Outbox<String>(existingAt: path)
    #expect(reopened.pendingCount == 1)
    try await reopened.close()
  }
}
