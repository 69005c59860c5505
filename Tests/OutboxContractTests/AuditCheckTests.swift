import Foundation
import OrderlyOutboxCore
import Testing

/// The audit's checks over trails written by hand: a clean one passes, and each kind of
/// violation is caught, with the rows that prove it.
@Suite("The audit's checks, on trails written by hand")
struct AuditCheckTests {
  /// Builds rows: number, key, sequence, outcome, worker, fence, start and end (seconds).
  private struct Trail {
    var records: [OutboxAuditRecord] = []
    var ids: [String: UUID] = [:]

    mutating func add(
      _ key: String?,
      _ sequence: Int64,
      _ outcome: OutboxAuditOutcome,
      worker: String = "w1",
      fence: Int64? = 1,
      from start: Double,
      to end: Double,
      attempt: Int = 1
    ) {
      let name = "\(key ?? "-")/\(sequence)"
      let id = ids[name] ?? UUID()
      ids[name] = id
      records.append(
        OutboxAuditRecord(
          number: Int64(records.count + 1),
          partition: key,
          sequence: sequence,
          messageID: id,
          attempt: attempt,
          fence: fence,
          worker: worker,
          startedAt: Date(timeIntervalSince1970: start),
          endedAt: Date(timeIntervalSince1970: end),
          outcome: outcome
        )
      )
    }

    func trail(
      held: [OutboxAuditHeld] = [],
      numbers: [OutboxAuditNumbers] = []
    ) -> OutboxAuditTrail {
      OutboxAuditTrail(records: records, held: held, numbers: numbers, readAt: Date())
    }
  }

  private func kinds(_ report: OutboxAuditReport) -> [OutboxAuditViolation.Kind] {
    report.violations.map(\.kind)
  }

  @Test(
    "a clean trail: two keys, a retry, a failover with a higher fence, a cut repeat, a dropped dead letter"
  )
  func clean() {
    var rows = Trail()
    rows.add("a", 1, .delivered, from: 0, to: 1)
    rows.add("a", 2, .retried, from: 1, to: 2)
    rows.add("a", 2, .cut, from: 2, to: 9)  // the worker paused past its lease
    rows.add("a", 2, .delivered, worker: "w2", fence: 2, from: 5, to: 6, attempt: 3)
    rows.add("b", 1, .deadLettered, from: 0, to: 1)
    rows.add("b", 2, .delivered, from: 1, to: 2)
    rows.add("b", 1, .dropped, fence: nil, from: 3, to: 3)
    let report = rows.trail(
      held: [OutboxAuditHeld(partition: "a", sequence: 3, deadLetter: false)],
      numbers: [
        OutboxAuditNumbers(partition: "a", sharedByAllKeys: false, first: 1, last: 3),
        OutboxAuditNumbers(partition: "b", sharedByAllKeys: false, first: 1, last: 2),
      ]
    ).audit()
    #expect(report.isClean, "\(report.violations)")
    #expect(report.delivered == 3)
    #expect(report.cut == 1)
    #expect(report.repeated == 1)
    #expect(report.numbersChecked == 5)
    #expect(report.keys == 2)
  }

  @Test("out of order: a message delivered before an earlier one of its key")
  func outOfOrder() {
    var rows = Trail()
    rows.add("a", 2, .delivered, from: 0, to: 1)
    rows.add("a", 1, .delivered, from: 1, to: 2)
    rows.add("b", 1, .delivered, from: 0, to: 1)  // another key: fine
    let report = rows.trail().audit()
    #expect(kinds(report) == [.outOfOrder])
    let violation = report.violations.first
    #expect(violation?.partition == "a")
    #expect(violation?.records.map(\.sequence) == [2, 1])
    #expect(violation?.detail.contains("message 2 was delivered before message 1") == true)
  }

  @Test("out of order: a message delivered while an earlier one is still pending (skipped)")
  func skipped() {
    var rows = Trail()
    rows.add("a", 1, .delivered, from: 0, to: 1)
    rows.add("a", 3, .delivered, from: 1, to: 2)
    rows.add("a", 4, .delivered, from: 2, to: 3)
    let report = rows.trail(held: [OutboxAuditHeld(partition: "a", sequence: 2, deadLetter: false)])
      .audit()
    // Once for the key, at the first delivery past it.
    #expect(kinds(report) == [.outOfOrder])
    #expect(report.violations.first?.detail.contains("while message 2") == true)
    #expect(report.violations.first?.records.map(\.sequence) == [3])
  }

  @Test("a retried dead letter delivered after the messages behind it is not out of order")
  func retriedDeadLetter() {
    var rows = Trail()
    rows.add("a", 1, .deadLettered, from: 0, to: 1)
    rows.add("a", 2, .delivered, from: 1, to: 2)
    rows.add("a", 1, .delivered, from: 3, to: 4)
    let report = rows.trail().audit()
    #expect(report.isClean, "\(report.violations)")
  }

  @Test("overlap: two holders of one key at once")
  func overlap() {
    var rows = Trail()
    rows.add("a", 1, .delivered, worker: "w1", fence: 1, from: 0, to: 5)
    rows.add("a", 2, .delivered, worker: "w2", fence: 2, from: 3, to: 6)
    let report = rows.trail().audit()
    #expect(kinds(report) == [.overlap])
    #expect(report.violations.first?.records.map(\.worker) == ["w1", "w2"])
  }

  @Test("acknowledged twice: one message with two delivered rows")
  func acknowledgedTwice() {
    var rows = Trail()
    rows.add("a", 1, .delivered, from: 0, to: 1)
    rows.add("a", 1, .delivered, worker: "w2", fence: 2, from: 2, to: 3)
    let report = rows.trail().audit()
    #expect(kinds(report) == [.acknowledgedTwice])
    #expect(report.violations.first?.records.count == 2)
  }

  @Test("vanished: a number handed out that is neither delivered, held nor dropped")
  func vanished() {
    var rows = Trail()
    rows.add("a", 1, .delivered, from: 0, to: 1)
    rows.add("a", 3, .delivered, from: 1, to: 2)
    let perKey = rows.trail(
      numbers: [OutboxAuditNumbers(partition: "a", sharedByAllKeys: false, first: 1, last: 4)]
    ).audit()
    #expect(kinds(perKey) == [.vanished])
    #expect(perKey.violations.first?.detail.contains("numbered 2, 4") == true)
    // A store that numbers every key together (SQLite): the number's key is not known.
    let shared = rows.trail(
      held: [OutboxAuditHeld(partition: "b", sequence: 2, deadLetter: false)],
      numbers: [OutboxAuditNumbers(partition: nil, sharedByAllKeys: true, first: 1, last: 4)]
    ).audit()
    #expect(kinds(shared) == [.vanished])
    #expect(shared.violations.first?.detail.contains("numbered 4,") == true)
  }

  @Test("fence not raised: a new holder with a fence no higher than the last")
  func fenceNotRaised() {
    var rows = Trail()
    rows.add("a", 1, .delivered, worker: "w1", fence: 3, from: 0, to: 1)
    rows.add("a", 2, .delivered, worker: "w2", fence: 3, from: 2, to: 3)
    let report = rows.trail().audit()
    #expect(kinds(report) == [.fenceNotRaised])
    #expect(report.violations.first?.detail.contains("(3, then 3)") == true)
  }

  @Test("--key: only that key's rows and numbers are checked")
  func oneKey() {
    var rows = Trail()
    rows.add("a", 2, .delivered, from: 0, to: 1)
    rows.add("a", 1, .delivered, from: 1, to: 2)
    rows.add("b", 1, .delivered, from: 0, to: 1)
    let trail = rows.trail()
    #expect(trail.audit(key: "b").isClean)
    #expect(trail.audit(key: "a").violations.count == 1)
    #expect(trail.audit(key: .some(nil)).attempts == 0)
  }
}
