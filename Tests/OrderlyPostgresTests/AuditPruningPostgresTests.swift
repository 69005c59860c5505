// Built with the Postgres trait only; see Package.swift.
#if Postgres
import Foundation
import OrderlyOutboxCore
import OrderlyPostgres
import Testing

/// The pruning rule every store follows (`AuditPruning`), on PostgreSQL: a worker that starts
/// with a trail far past its retention prunes it back at once, a batch after another.
@Suite("PostgreSQL: the audit trail is pruned back within its retention", .timeLimit(.minutes(3)))
struct AuditPruningPostgresTests {
  @Test("2,500 rows past the retention: a worker that starts removes them all, not one batch")
  func backlog() async throws {
    guard let database = try await TestDatabase.make() else { return }
    defer { Task { await database.drop() } }
    let first = try await database.outbox(of: String.self)
    try await first.append(contentsOf: (0..<2_500).map { "m\($0)" }, partition: "k")
    var keep = FleetDeliveryOptions(batchSize: 100)
    keep.audit = .on
    try first.start(keep, deliver: .batches { _ in })
    try await first.waitUntilDelivered()
    await first.stop()
    let written = try #require(try await first.auditTrail()).records.count
    #expect(written == 2_500)
    await first.close()

    let second = try await database.outbox(of: String.self)
    var short = FleetDeliveryOptions()
    short.audit = OutboxAuditOptions(isOn: true, retention: .milliseconds(1))
    try second.start(short, deliver: .each { _ in })
    let pruned = await eventually {
      (try await second.auditTrail()?.records.count ?? -1) == 0
    }
    await second.stop()
    #expect(pruned, "rows past the retention are left after the first prune")
    await second.close()
  }
}
#endif
