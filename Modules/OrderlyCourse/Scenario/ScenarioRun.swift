import Foundation
import OrderlyRepository

/// What one run of ``NotesScenario`` did: the log, each call's span, and the verdict.
public struct ScenarioRun: Sendable, Codable, Equatable {
  /// One call, from its start to its end, in milliseconds from the start of the run.
  public struct Span: Sendable, Codable, Equatable {
    /// The call's number.
    public let call: Int
    /// The call's operation.
    public let operation: String
    /// When it started, in milliseconds from the start of the run.
    public let startMilliseconds: Double
    /// When it finished or failed, in milliseconds from the start of the run.
    public let endMilliseconds: Double
    /// Whether it failed.
    public let failed: Bool
  }

  /// The strategy's name.
  public let strategy: String
  /// The seed of the service's latency.
  public let seed: UInt64
  /// The activity log, one line per entry, as in `finish 3 createNote: note 3`.
  public let log: [String]
  /// Each call's span, by call number.
  public let spans: [Span]
  /// `in order`, or which call finished before which.
  public let verdict: String
  /// Whether the calls ended in call order.
  public let inOrder: Bool
  /// What went wrong because of the order: each call whose answer differs from its answer in
  /// a run in call order (see ``NotesScenario/consequences(of:)``).
  public let consequences: [String]

  init<C: Clock>(
    strategy: NotesScenario<C>.Strategy,
    seed: UInt64,
    entries: [ActivityEntry],
    consequences: [String]
  ) {
    self.consequences = consequences
    self.strategy = strategy.rawValue
    self.seed = seed
    log = entries.map(\.description)
    var starts: [Int: Duration] = [:]
    var spans: [Span] = []
    for entry in entries {
      let time = entry.elapsed ?? .zero
      switch entry.kind {
      case .start: starts[entry.call] = time
      case .finish, .error:
        spans.append(
          Span(
            call: entry.call,
            operation: entry.operation.rawValue,
            startMilliseconds: Self.milliseconds(starts[entry.call] ?? time),
            endMilliseconds: Self.milliseconds(time),
            failed: { if case .error = entry.kind { true } else { false } }()
          )
        )
      }
    }
    self.spans = spans.sorted { $0.call < $1.call }
    let verdict = ActivityLog.verdict(of: entries)
    self.verdict = verdict.description
    inOrder = verdict == .inOrder
  }

  private static func milliseconds(_ duration: Duration) -> Double {
    duration / .milliseconds(1)
  }

  /// The spans drawn on a shared time axis: one row per call, a bar from its start to its end.
  ///
  /// - Parameters:
  ///   - width: The number of characters of the time axis.
  ///   - milliseconds: Where the axis ends; this run's end by default. Give several runs the
  ///     same end to draw them on one scale.
  /// - Returns: One line per call, then a line with the axis's scale.
  public func timeline(width: Int = 48, upTo milliseconds: Double? = nil) -> [String] {
    let width = max(width, 8)
    let total = max(milliseconds ?? spans.map(\.endMilliseconds).max() ?? 0, 1)
    let labelWidth = spans.map { "\($0.call) \($0.operation)".count }.max() ?? 0
    var lines: [String] = []
    for span in spans {
      let first = min(width - 1, Int(span.startMilliseconds / total * Double(width)))
      let last = max(
        first + 1,
        min(width, Int((span.endMilliseconds / total * Double(width)).rounded(.up)))
      )
      let bar =
        String(repeating: " ", count: first)
        + String(repeating: span.failed ? "▒" : "█", count: last - first)
        + String(repeating: " ", count: width - last)
      let label = "\(span.call) \(span.operation)"
      lines.append(
        label.padding(toLength: labelWidth, withPad: " ", startingAt: 0) + " │" + bar + "│"
      )
    }
    let scale =
      "0 ms".padding(toLength: width - 8, withPad: " ", startingAt: 0)
      + String(format: "%6.0f ms", total)
    lines.append(String(repeating: " ", count: labelWidth) + "  " + scale)
    return lines
  }
}
