import BuiltProducts
import Foundation
import OrderlyOutboxCore
import Testing

@testable import OrderlyOutbox

/// A trail that grew past the retention by more than one prune's batch is brought back within
/// it, a batch at a write, not a batch every 10 minutes.
@Suite("Outbox: the audit trail is pruned back within its retention, however far behind")
struct OutboxAuditPruningTests {
  @Test("2,500 rows past the retention: the next few writes remove them all, a batch each")
  func backlog() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<String>(path: path)
    try await first.append(contentsOf: (0..<2_500).map { "m\($0)" }, partition: "k")
    var keep = OutboxDeliveryOptions(batchSize: 100)
    keep.audit = .on
    try first.start(keep, deliver: .batches { _ in })
    try await first.waitUntilDelivered()
    await first.stop()
    let written = try #require(try await first.auditTrail()).records.count
    #expect(written == 2_500)
    try await first.close()

    // The file opened again, with a retention every row is already past.
    let second = try Outbox<String>(path: path)
    var short = OutboxDeliveryOptions()
    short.audit = OutboxAuditOptions(isOn: true, retention: .milliseconds(1))
    try second.start(short, deliver: .each { _ in })
    for index in 0..<5 {
      try await second.append("n\(index)", partition: "k")
      try await second.waitUntilDelivered()
    }
    await second.stop()
    let left = try #require(try await second.auditTrail()).records
    #expect(
      left.count <= 5,
      "\(left.count) rows left: rows past the retention were not pruned back"
    )
    #expect(!left.contains { $0.partition == "k" && $0.sequence <= 2_500 })
    try await second.close()
  }
}
