import Foundation
import OrderlyOutboxCore
import OrderlyTestSupport
import Testing

/// The audit trail on every store: what delivery writes with `audit` on, and what the audit
/// makes of it.
@Suite("The audit trail, on every store", .timeLimit(.minutes(3)))
struct AuditContractTests {
  @Test(
    "with audit on, every attempt is in the trail (delivered, retried, dead-lettered, dropped) and the audit is clean",
    arguments: Store.all
  )
  func clean(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    for key in ["a", "b", "c"] {
      try await subject.outbox.append(
        contentsOf: (1...10).map { "\(key)\($0)" },
        partition: key,
        headers: [:]
      )
    }
    let failedOnce = Switch(on: true)
    let retry = try RetryPolicy(initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
    try subject.startAudited(
      .continueLine,
      retry,
      .each { envelope in
        if envelope.message == "a3", failedOnce.isOn {
          failedOnce.set(false)
          throw Refused()
        }
        if envelope.message == "b5" { throw PermanentDeliveryFailure("never") }
      }
    )
    try await subject.outbox.waitUntilDelivered()
    let letters = try await subject.outbox.deadLetters()
    let letter = try #require(letters.first)
    try await subject.outbox.dropDeadLetter(id: letter.id)
    try await subject.outbox.append("c11", partition: "c", headers: [:])
    try await subject.outbox.waitUntilDelivered()
    let trail = try #require(try await subject.outbox.auditTrail())
    await subject.finish()

    let report = trail.audit()
    #expect(report.isClean, "\(report.violations.map(\.detail))")
    #expect(report.delivered == 30)
    #expect(report.keys == 3)
    let outcomes = trail.records.map(\.outcome)
    #expect(outcomes.filter { $0 == .delivered }.count == 30)
    #expect(outcomes.filter { $0 == .retried }.count == 1)
    #expect(outcomes.filter { $0 == .deadLettered }.count == 1)
    #expect(outcomes.filter { $0 == .dropped }.count == 1)
    // Each key's deliveries in order, and a3's two attempts counted.
    for key in ["a", "b", "c"] {
      let sequences = trail.records.filter { $0.partition == key && $0.outcome == .delivered }
        .map(\.sequence)
      #expect(sequences == sequences.sorted())
    }
    let a3 = trail.records.filter { $0.partition == "a" }.map(\.attempt)
    #expect(a3.contains(2))
    // Every number appended after the trail began was checked.
    #expect(report.numbersChecked >= 1)
  }

  @Test(
    "a trail 2,500 rows past its retention is pruned back when delivery starts again, a batch after another",
    arguments: Store.all
  )
  func pruneBacklog(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append(
      contentsOf: (0..<2_500).map { "m\($0)" },
      partition: "k",
      headers: [:]
    )
    try subject.startRetaining(100, .seconds(7 * 24 * 3_600), .batches { _ in })
    try await subject.outbox.waitUntilDelivered()
    await subject.outbox.stop()
    let written = try #require(try await subject.outbox.auditTrail()).records.count
    #expect(written == 2_500)

    // Started again with a retention every row is past: a prune is due at once, and another
    // at once while one comes back full (on SQLite, at each delivery's write).
    try subject.startRetaining(1, .milliseconds(1), .each { _ in })
    for index in 0..<5 {
      try await subject.outbox.append("n\(index)", partition: "k", headers: [:])
      try await subject.outbox.waitUntilDelivered()
    }
    let outbox = subject.outbox
    let pruned = await eventually {
      let records = try await outbox.auditTrail()?.records ?? []
      return records.count <= 5 && !records.contains { $0.sequence <= 2_500 }
    }
    let left = try await subject.outbox.auditTrail()?.records.count ?? -1
    await subject.finish()
    #expect(pruned, "\(left) rows left: rows past the retention were not pruned back")
  }

  @Test("with audit off, no trail is kept", arguments: Store.all)
  func off(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try await subject.outbox.append("x", partition: nil, headers: [:])
    try subject.start { _ in }
    try await subject.outbox.waitUntilDelivered()
    let trail = try await subject.outbox.auditTrail()
    await subject.finish()
    #expect(trail == nil)
  }

  @Test(
    "a delivery whose row is missing: the audit says the message vanished",
    arguments: Store.all
  )
  func vanished(store: Store) async throws {
    guard let subject = try await store.open(String.self) else { return }
    try subject.startAudited(.stopLine, .standard, .each { _ in })
    try await subject.outbox.append(contentsOf: ["first", "second"], partition: "k", headers: [:])
    try await subject.outbox.waitUntilDelivered()
    let trail = try #require(try await subject.outbox.auditTrail())
    await subject.finish()
    #expect(trail.audit().isClean)
    // The same trail without the row of the last delivery: as if a message were removed
    // without being delivered.
    let last = trail.records.filter { $0.outcome == .delivered }.map(\.sequence).max()
    var tampered = trail
    tampered.records.removeAll { $0.outcome == .delivered && $0.sequence == last }
    let report = tampered.audit()
    #expect(report.violations.map(\.kind) == [.vanished])
  }
}
