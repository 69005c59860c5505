// The audit trail's pruning rule, every store's: when a prune is due and what it removes, on
// times given by the test.
import Foundation
import Testing

@testable import OrderlyOutboxCore

@Suite("Audit pruning: due at once, then every 10 minutes, and at once again while behind")
struct AuditPruningTests {
  private let start = Date(timeIntervalSince1970: 1_800_000_000)

  @Test(
    "the first prune is due at once, with the cutoff one retention back; a second caller is not"
  )
  func first() {
    var pruning = AuditPruning()
    #expect(pruning.isDue(at: start) && pruning.wait(at: start) == .zero)
    let cutoff = pruning.begin(at: start, retentionSeconds: 3_600)
    #expect(cutoff == start.addingTimeInterval(-3_600))
    #expect(pruning.begin(at: start, retentionSeconds: 3_600) == nil, "one prune at a time")
  }

  @Test("a prune that was not full: the next is due 10 minutes after it began")
  func notFull() {
    var pruning = AuditPruning()
    _ = pruning.begin(at: start, retentionSeconds: 60)
    pruning.finished(removed: AuditPruning.batch - 1)
    let later = start.addingTimeInterval(599)
    #expect(!pruning.isDue(at: later))
    #expect(pruning.wait(at: later) == .seconds(1))
    #expect(pruning.begin(at: later, retentionSeconds: 60) == nil)
    #expect(pruning.isDue(at: start.addingTimeInterval(600)))
  }

  @Test("a full prune: rows past the retention may remain, so the next is due at once")
  func behind() {
    var pruning = AuditPruning()
    _ = pruning.begin(at: start, retentionSeconds: 60)
    pruning.finished(removed: AuditPruning.batch)
    let moment = start.addingTimeInterval(1)
    #expect(pruning.isDue(at: moment) && pruning.wait(at: moment) == .zero)
    _ = pruning.begin(at: moment, retentionSeconds: 60)
    pruning.finished(removed: 0)
    #expect(!pruning.isDue(at: moment.addingTimeInterval(1)), "caught up: back to every 10 minutes")
  }

  @Test("a prune that failed counts as one that removed nothing")
  func failed() {
    var pruning = AuditPruning()
    _ = pruning.begin(at: start, retentionSeconds: 60)
    pruning.finished(removed: 0)
    #expect(!pruning.isDue(at: start.addingTimeInterval(10)))
  }
}
