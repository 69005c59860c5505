import ArgumentParser
import Foundation
import OrderlyOutboxCore

/// `orderly outbox audit`: checks the audit trail the workers wrote.
///
/// The trail is written when delivery starts with `audit` on. Per key: deliveries in order with
/// none skipped, no two holders at once, no message acknowledged twice, nothing vanished,
/// fences rising. Exit status 1 on any violation.
struct OutboxAudit: AsyncParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "audit",
    abstract:
      "Check that nothing was lost, reordered, delivered by two holders at once, or acknowledged twice.",
    discussion: """
      Reads the audit trail the workers write when delivery starts with audit on \
      (OutboxAuditOptions), and checks it per key. Prints each violation with the trail's \
      rows that prove it and exits 1; prints a one-line summary and exits 0 when there is none. \
      Read-only: nothing is changed.
      """
  )

  @OptionGroup var target: OutboxTarget
  @OptionGroup var read: ReadOptions
  @Option(
    help: ArgumentHelp(
      "Only attempts begun since then: an ISO 8601 time (2026-11-29T10:00:00Z) or an age (90s, 30m, 12h, 7d).",
      valueName: "WHEN"
    )
  )
  var since: SinceArgument?
  @Option(help: ArgumentHelp("Only this key; (default) for the default line.", valueName: "KEY"))
  var key: KeyArgument?

  func run() async throws {
    try await operate {
      let trail = try await target.with { outbox in try await outbox.auditTrail() }
      guard var trail else {
        throw OperatorFailure(
          message:
            "the outbox has no audit trail: no delivery started with audit on "
            + "(OutboxDeliveryOptions.audit or FleetDeliveryOptions.audit = .on); start the "
            + "workers with it, then audit"
        )
      }
      if let since { trail = trail.since(since.date(now: Date())) }
      let report = trail.audit(key: key.map { .some($0.partition) } ?? nil)
      if read.format == .json {
        print(OperatorReport.json(AuditJSON(target: target.shown, report: report)))
      } else {
        print(Self.text(report, target: target.shown, key: key?.partition, keyGiven: key != nil))
      }
      if !report.isClean { throw ExitCode.failure }
    }
  }

  /// The report for a terminal: each violation with its rows, then the summary line.
  static func text(
    _ report: OutboxAuditReport,
    target: (store: String, name: String),
    key: String?,
    keyGiven: Bool
  ) -> String {
    var lines: [String] = []
    for violation in report.violations {
      lines.append("VIOLATION \(violation.kind.rawValue): \(violation.detail)")
      if !violation.records.isEmpty {
        var rows = [
          ["row", "key", "message", "attempt", "outcome", "worker", "fence", "started", "ended"]
        ]
        for record in violation.records {
          rows.append([
            "\(record.number)", OperatorReport.shown(record.partition), "\(record.sequence)",
            "\(record.attempt)", record.outcome.rawValue, record.worker,
            record.fence.map(String.init) ?? "-", milliseconds(record.startedAt),
            milliseconds(record.endedAt),
          ])
        }
        lines += OperatorReport.table(rows).split(separator: "\n").map { "  " + $0 }
      }
    }
    let scope = keyGiven ? "key \(OperatorReport.shown(key))" : "\(report.keys) key(s)"
    let verdict =
      report.isClean
      ? "no violation" : "\(report.violations.count) violation(s)"
    lines.append(
      "audit of \(target.store) \(target.name): \(report.attempts) attempt(s) over \(scope), "
        + "\(report.delivered) delivered, \(report.cut) cut by a lost lease "
        + "(\(report.repeated) delivered again), \(report.numbersChecked) message number(s) "
        + "checked for loss: \(verdict)"
    )
    return lines.joined(separator: "\n")
  }

  /// A time to the millisecond, in UTC.
  private static func milliseconds(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    return formatter.string(from: date)
  }
}

/// The JSON of `orderly outbox audit --format json`.
private struct AuditJSON: Encodable {
  let store: String
  let outbox: String
  let report: OutboxAuditReport

  init(target: (store: String, name: String), report: OutboxAuditReport) {
    (store, outbox, self.report) = (target.store, target.name, report)
  }
}

/// `--since`: an ISO 8601 time, or an age back from now.
struct SinceArgument: ExpressibleByArgument {
  private enum Value {
    case time(Date)
    case age(TimeInterval)
  }

  private let value: Value

  init?(argument: String) {
    let text = argument.trimmingCharacters(in: .whitespaces)
    if let date = ISO8601DateFormatter().date(from: text) {
      value = .time(date)
      return
    }
    let units: [Character: TimeInterval] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
    guard let unit = text.last.flatMap({ units[$0] }), let count = Double(text.dropLast()),
      count >= 0
    else { return nil }
    value = .age(count * unit)
  }

  /// The window's start.
  func date(now: Date) -> Date {
    switch value {
    case .time(let date): return date
    case .age(let seconds): return now.addingTimeInterval(-seconds)
    }
  }

  static var defaultCompletionKind: CompletionKind { .default }
}
