import BuiltProducts
import Foundation
import GRDB
import OrderlyOutboxCore
import Testing

@testable import OrderlyOutbox

/// A row whose identifier a hand edit broke is reported, with what to do; no identifier is
/// made up for it.
@Suite("Outbox: an unreadable row is reported, not replaced")
struct OutboxUnreadableRowTests {
  @Test("a dead letter whose id was broken by hand: deadLetters() says which row and what to do")
  func unreadableDeadLetter() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<String>(path: path)
    try await outbox.append("x", partition: "k")
    try outbox.start(retry: try RetryPolicy(maximumAttempts: 1), onDeadLetter: .continueLine) {
      _ in throw PermanentDeliveryFailure("no")
    }
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    let good = try await outbox.deadLetters()
    #expect(good.count == 1)
    try await DatabaseQueue(path: path).write { db in
      try db.execute(sql: "UPDATE outbox_dead_letter SET id = 'not-an-id'")
    }
    do {
      let letters = try await outbox.deadLetters()
      Issue.record("an unreadable id was read as \(letters.map(\.id))")
    } catch {
      let text = "\(error)"
      #expect(text.contains("outbox_dead_letter has an unreadable id (\"not-an-id\")"), "\(text)")
      #expect(text.contains("restore it from a backup"), "\(text)")
    }
    try await outbox.close()
  }

  @Test("an audit row whose outcome this version does not know: auditTrail() says which, not 'cut'")
  func unknownAuditOutcome() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let outbox = try Outbox<String>(path: path)
    try await outbox.append("x", partition: "k")
    var options = OutboxDeliveryOptions()
    options.audit = .on
    try outbox.start(options, deliver: .each { _ in })
    try await outbox.waitUntilDelivered()
    await outbox.stop()
    let good = try #require(try await outbox.auditTrail())
    #expect(good.records.map(\.outcome) == [.delivered])
    try await DatabaseQueue(path: path).write { db in
      try db.execute(sql: "UPDATE outbox_audit SET outcome = 'teleported'")
    }
    do {
      let trail = try await outbox.auditTrail()
      Issue.record("an unknown outcome was read as \(trail?.records.map(\.outcome) ?? [])")
    } catch {
      let text = "\(error)"
      #expect(text.contains("outbox_audit has an unreadable outcome (\"teleported\")"), "\(text)")
    }
    try await outbox.close()
  }
}
