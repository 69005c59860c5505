// When the audit trail is pruned and by how much: one rule for every store.
package import Foundation

/// When a deliverer prunes the audit trail, and how much at a time: the rule every store
/// follows, with its numbers written once.
///
/// A prune removes up to ``batch`` rows that ended before the retention, oldest first. It runs
/// at the first chance after delivery starts, then every ``interval``, and at once again while
/// a prune comes back full: a trail that grows faster than a batch an interval (a busy outbox,
/// or one started after a long stop) is brought back within the retention, a batch at a time.
package struct AuditPruning: Sendable, Equatable {
  /// Rows removed at most by one prune, so that each prune (on SQLite, inside a delivery's
  /// write) stays short.
  package static let batch = 1_000
  /// How long after a prune that was not full the next one runs.
  package static let interval: Duration = .seconds(600)

  /// When the last prune began; `nil` before the first.
  package private(set) var lastBegan: Date?
  /// Whether the last prune came back full: rows past the retention may remain.
  package private(set) var behind = false

  /// No prune yet: the first is due at once.
  package init() {}

  /// Whether a prune is due at `now`.
  package func isDue(at now: Date) -> Bool {
    guard let lastBegan, !behind else { return true }
    return now.timeIntervalSince(lastBegan) >= Self.seconds(Self.interval)
  }

  /// How long from `now` until a prune is due; zero if it is due.
  package func wait(at now: Date) -> Duration {
    guard let lastBegan, !behind else { return .zero }
    let left = Self.seconds(Self.interval) - now.timeIntervalSince(lastBegan)
    return left > 0 ? .milliseconds(Int64((left * 1_000).rounded(.up))) : .zero
  }

  /// Takes the prune due at `now`, if one is.
  ///
  /// The caller runs it, then reports ``finished(removed:)``; a second caller before then is
  /// told it is not due.
  ///
  /// - Returns: The cutoff: rows that ended before it are removed; `nil` if no prune is due.
  package mutating func begin(at now: Date, retentionSeconds: Double) -> Date? {
    guard isDue(at: now) else { return nil }
    lastBegan = now
    behind = false
    return now.addingTimeInterval(-retentionSeconds)
  }

  /// Records how many rows a prune removed (0 if it failed: the next is due after the
  /// interval).
  package mutating func finished(removed: Int) {
    behind = removed >= Self.batch
  }

  /// A duration in seconds, attoseconds included.
  private static func seconds(_ duration: Duration) -> Double {
    let parts = duration.components
    return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
  }
}
