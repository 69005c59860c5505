// The checks of `orderly outbox audit`, over a trail read from any store.

import Foundation

/// What the audit found wrong, with the rows that prove it.
public struct OutboxAuditViolation: Sendable, Codable, Equatable {
  /// The kinds of violation.
  public enum Kind: String, Sendable, Codable, CaseIterable {
    /// A message was delivered while an earlier message of its key was not yet delivered or
    /// set aside: the key's order was broken.
    case outOfOrder = "out-of-order"
    /// Two attempts of one key, under different holders, ran at the same time.
    case overlap
    /// A message was acknowledged (removed as delivered) twice.
    case acknowledgedTwice = "acknowledged-twice"
    /// A message the store numbered is neither delivered, pending, a dead letter nor dropped.
    case vanished
    /// A new holder of a key had a fence no higher than the holder before it.
    case fenceNotRaised = "fence-not-raised"
  }

  /// What is wrong.
  public var kind: Kind
  /// The key; `nil` for the default line, or when the key is not known (a vanished number of a
  /// store that numbers every key together).
  public var partition: String?
  /// What is wrong, in a sentence.
  public var detail: String
  /// The trail's rows that prove it (none for a vanished number: its proof is the absence).
  public var records: [OutboxAuditRecord]

  /// Writes every field, `null` for one with no value (as every `orderly outbox` JSON does).
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(kind, forKey: .kind)
    try container.encode(partition, forKey: .partition)
    try container.encode(detail, forKey: .detail)
    try container.encode(records, forKey: .records)
  }
}

/// The audit of a trail: what was checked, and every violation.
public struct OutboxAuditReport: Sendable, Codable, Equatable {
  /// The rows checked.
  public var attempts: Int
  /// The keys the rows name.
  public var keys: Int
  /// The messages delivered.
  public var delivered: Int
  /// Attempts cut by a lost lease (their messages are delivered again by the next holder).
  public var cut: Int
  /// Messages delivered more than once, with an attempt cut or retried before the last: the
  /// repeats at-least-once delivery allows (fences refuse the stale ones' effects).
  public var repeated: Int
  /// Numbers handed out that were checked for vanishing.
  public var numbersChecked: Int
  /// What is wrong; empty when the trail is clean.
  public var violations: [OutboxAuditViolation]

  /// Whether nothing is wrong.
  public var isClean: Bool { violations.isEmpty }
}

extension OutboxAuditTrail {
  /// Checks, per key: deliveries in order with none skipped; no two attempts of different
  /// holders at once; no message acknowledged twice; every number handed out delivered,
  /// pending, a dead letter or dropped; and each new holder's fence higher than the last.
  ///
  /// - Parameter partition: Only this key (`.some(nil)` for the default line); every key when
  ///   `nil`.
  /// - Returns: The report.
  public func audit(key partition: String?? = nil) -> OutboxAuditReport {
    let records: [OutboxAuditRecord]
    if case .some(let only) = partition {
      records = self.records.filter { $0.partition == only }
    } else {
      records = self.records
    }
    var byKey: [String?: [OutboxAuditRecord]] = [:]
    for record in records { byKey[record.partition, default: []].append(record) }
    var violations: [OutboxAuditViolation] = []
    for key in byKey.keys.sorted(by: { ($0 ?? "") < ($1 ?? "") }) {
      let rows = byKey[key] ?? []
      violations += orderViolations(of: key, rows)
      violations += overlaps(of: key, rows)
      violations += fenceViolations(of: key, rows)
    }
    violations += acknowledgedTwice(records)
    let (checked, vanished) = vanishedNumbers(only: partition)
    violations += vanished
    let delivered = records.filter { $0.outcome == .delivered }
    let tries = Dictionary(grouping: records.filter { $0.outcome != .dropped }, by: \.messageID)
    return OutboxAuditReport(
      attempts: records.filter { $0.outcome != .dropped }.count,
      keys: byKey.count,
      delivered: Set(delivered.map(\.messageID)).count,
      cut: records.filter { $0.outcome == .cut }.count,
      repeated: tries.values.filter { rows in
        rows.contains { $0.outcome == .delivered } && rows.count > 1
          && rows.contains { $0.outcome == .cut }
      }.count,
      numbersChecked: checked,
      violations: violations
    )
  }

  /// A message delivered while an earlier one of its key had not finished (delivered or set
  /// aside), by the order outcomes were recorded, or was still pending when the trail was read.
  private func orderViolations(
    of key: String?,
    _ rows: [OutboxAuditRecord]
  ) -> [OutboxAuditViolation] {
    // The first row that finished each message: its delivery, or its setting aside.
    var finished: [Int64: OutboxAuditRecord] = [:]
    for row in rows where row.outcome == .delivered || row.outcome == .deadLettered {
      if finished[row.sequence] == nil { finished[row.sequence] = row }
    }
    let pendingNow = Set(
      held.filter { !$0.deadLetter && $0.partition == key }.map(\.sequence)
    )
    // Each delivery, against every message of the key with a lower number that finished
    // after it (or has not finished).
    var violations: [OutboxAuditViolation] = []
    // The lowest message still pending that never finished (a dead letter retried since did).
    let lowestPending = pendingNow.filter { finished[$0] == nil }.min()
    let firsts = finished.values.sorted { $0.number < $1.number }
    // Walking back from the last row: the message with the lowest number finished after each.
    var lowestLater: [Int64: OutboxAuditRecord] = [:]
    var lowest: OutboxAuditRecord?
    for row in firsts.reversed() {
      if let lowest { lowestLater[row.number] = lowest }
      if row.sequence < lowest?.sequence ?? Int64.max { lowest = row }
    }
    var skipReported = false
    for row in firsts where row.outcome == .delivered {
      if let earlier = lowestLater[row.number], earlier.sequence < row.sequence {
        violations.append(
          OutboxAuditViolation(
            kind: .outOfOrder,
            partition: key,
            detail:
              "message \(row.sequence) was delivered before message \(earlier.sequence), "
              + "which comes before it in key \(Self.shown(key)) "
              + "(\(earlier.outcome.rawValue) later, in row \(earlier.number))",
            records: [row, earlier]
          )
        )
        continue
      }
      if let skipped = lowestPending, skipped < row.sequence, !skipReported {
        // Once: every later delivery of the key passed it too.
        skipReported = true
        violations.append(
          OutboxAuditViolation(
            kind: .outOfOrder,
            partition: key,
            detail:
              "message \(row.sequence) was delivered while message \(skipped), which comes "
              + "before it in key \(Self.shown(key)), is still pending: it was skipped",
            records: [row]
          )
        )
      }
    }
    return violations
  }

  /// Two attempts of one key under different holders whose times overlap.
  ///
  /// Attempts cut by a lost lease are left out: their outcomes were refused.
  private func overlaps(
    of key: String?,
    _ rows: [OutboxAuditRecord]
  ) -> [OutboxAuditViolation] {
    let attempts = rows.filter { $0.outcome != .cut && $0.outcome != .dropped }
      .sorted { ($0.startedAt, $0.number) < ($1.startedAt, $1.number) }
    var violations: [OutboxAuditViolation] = []
    var latest: OutboxAuditRecord?
    for row in attempts {
      if let last = latest, row.startedAt < last.endedAt, Self.holder(last) != Self.holder(row) {
        violations.append(
          OutboxAuditViolation(
            kind: .overlap,
            partition: key,
            detail:
              "two holders delivered key \(Self.shown(key)) at once: \(Self.holder(last)) "
              + "until \(Self.time(last.endedAt)), \(Self.holder(row)) from "
              + "\(Self.time(row.startedAt))",
            records: [last, row]
          )
        )
      }
      if latest == nil || row.endedAt > latest?.endedAt ?? row.endedAt { latest = row }
    }
    return violations
  }

  /// A holder whose fence is no higher than the holder's before it.
  ///
  /// In the order outcomes were recorded. Attempts cut by a lost lease are left out: a stale
  /// holder records its cut attempts after the next holder began.
  private func fenceViolations(
    of key: String?,
    _ rows: [OutboxAuditRecord]
  ) -> [OutboxAuditViolation] {
    var violations: [OutboxAuditViolation] = []
    var last: OutboxAuditRecord?
    for row in rows where row.outcome != .cut && row.outcome != .dropped {
      guard let fence = row.fence else { continue }
      if let previous = last, let before = previous.fence,
        Self.holder(previous) != Self.holder(row), fence <= before
      {
        violations.append(
          OutboxAuditViolation(
            kind: .fenceNotRaised,
            partition: key,
            detail:
              "key \(Self.shown(key)) went from \(Self.holder(previous)) to "
              + "\(Self.holder(row)) without a higher fence (\(before), then \(fence))",
            records: [previous, row]
          )
        )
      }
      last = row
    }
    return violations
  }

  /// Messages with more than one `delivered` row.
  private func acknowledgedTwice(_ records: [OutboxAuditRecord]) -> [OutboxAuditViolation] {
    let delivered = Dictionary(
      grouping: records.filter { $0.outcome == .delivered },
      by: \.messageID
    )
    return delivered.values.filter { $0.count > 1 }
      .sorted { $0[0].number < $1[0].number }
      .map { rows in
        OutboxAuditViolation(
          kind: .acknowledgedTwice,
          partition: rows[0].partition,
          detail:
            "message \(rows[0].sequence) (\(rows[0].messageID.uuidString)) of key "
            + "\(Self.shown(rows[0].partition)) was acknowledged \(rows.count) times",
          records: rows
        )
      }
  }

  /// Numbers handed out that are neither delivered, held, nor dropped; with how many numbers
  /// were checked.
  private func vanishedNumbers(only partition: String??) -> (Int, [OutboxAuditViolation]) {
    var checked = 0
    var violations: [OutboxAuditViolation] = []
    for run in numbers where run.first <= run.last {
      if let partition, !run.sharedByAllKeys, run.partition != partition { continue }
      let inRun: (String?) -> Bool = { key in run.sharedByAllKeys || key == run.partition }
      var accounted = Set(
        records.filter {
          ($0.outcome == .delivered || $0.outcome == .dropped) && inRun($0.partition)
        }
        .map(\.sequence)
      )
      accounted.formUnion(held.filter { inRun($0.partition) }.map(\.sequence))
      checked += Int(run.last - run.first + 1)
      var missing: [Int64] = []
      for number in run.first...run.last where !accounted.contains(number) {
        missing.append(number)
      }
      guard !missing.isEmpty else { continue }
      let whose = run.sharedByAllKeys ? "of the outbox" : "of key \(Self.shown(run.partition))"
      violations.append(
        OutboxAuditViolation(
          kind: .vanished,
          partition: run.sharedByAllKeys ? nil : run.partition,
          detail:
            "\(missing.count) message(s) \(whose) vanished: numbered "
            + "\(Self.list(missing)), but neither delivered, pending, a dead letter nor dropped",
          records: []
        )
      )
    }
    return (checked, violations)
  }

  /// The holder of an attempt: the worker and its fence.
  private static func holder(_ row: OutboxAuditRecord) -> String {
    row.fence.map { "\(row.worker) (fence \($0))" } ?? row.worker
  }

  /// A key as the operator commands print it.
  static func shown(_ partition: String?) -> String { partition ?? "(default)" }

  /// A time, to the millisecond.
  static func time(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
  }

  /// Numbers, the first 10 and a count of the rest.
  private static func list(_ numbers: [Int64]) -> String {
    let shown = numbers.prefix(10).map(String.init).joined(separator: ", ")
    return numbers.count > 10 ? "\(shown) and \(numbers.count - 10) more" : shown
  }
}
