import Foundation
import GRDB
import OrderlyOutboxCore
import Testing

@testable import OrderlyOutbox

/// The SQLite store refuses an acknowledgement that would break a line's order: a deliverer
/// made to acknowledge a line's second message while its first is there is refused in the
/// transaction, counted, and nothing changes.
@Suite("Outbox: an acknowledgement out of order is refused")
struct OutboxOrderRefusalTests {
  @Test(
    "a line's second message acknowledged before its first: refused, counted, nothing removed, the line kept"
  )
  func refused() async throws {
    let outbox = try Outbox<String>()
    try await outbox.append(contentsOf: ["one", "two"], partition: "k")
    let heads = try await outbox.database.read { db in
      try OutboxStore.heads(db, partition: "k", limit: 2)
    }
    #expect(heads.count == 2)
    let second = try #require(heads.last)
    let line = OutboxLine(outbox: outbox, partition: "k", audit: .off)
    let head = ClaimedHead(
      id: second.id,
      sequence: second.sequence,
      partition: "k",
      payload: second.payload,
      attempt: 1,
      appendedAt: second.appendedAt,
      headers: [:]
    )
    let step = try await line.acknowledge(
      [head],
      givingBack: [],
      then: .nothing,
      recording: [],
      announce: {}
    )
    // The line is kept and delivered again at once from its first message, as on every store.
    let again = if case .again = step { true } else { false }
    #expect(again)
    #expect(outbox.pendingCount == 2)
    #expect(outbox.delivererStatistics.orderRefusals.outOfOrder == 1)
    let left = try await outbox.database.read { db in
      try OutboxStore.heads(db, partition: "k", limit: 5).map(\.sequence)
    }
    #expect(left == heads.map(\.sequence))
    // Both, in order: accepted.
    let first = try #require(heads.first)
    let both = [first, second].map { stored in
      ClaimedHead(
        id: stored.id,
        sequence: stored.sequence,
        partition: "k",
        payload: stored.payload,
        attempt: 1,
        appendedAt: stored.appendedAt,
        headers: [:]
      )
    }
    _ = try await line.acknowledge(
      both,
      givingBack: [],
      then: .nothing,
      recording: [],
      announce: {}
    )
    #expect(outbox.pendingCount == 0)
    try await outbox.close()
  }
}
