// When a line gives its slot up to the others: the one rule of every store, as a value.

/// A line's turn: how long one line may keep a delivery slot while other lines wait for one.
///
/// The rule, the same on every store: a turn lasts ``deliveryLimit`` deliveries (handler calls;
/// 16 by default) or the store's ``timeLimit`` (PostgreSQL: a quarter of the lease; SQLite:
/// none), whichever is spent first. When it is spent, the line gives its slot up after its next
/// delivery only if another line waits for a slot; if none does, a new turn begins at once and
/// the line goes on. So lines share a full deliverer fairly, and a deliverer with room never
/// interrupts a busy line.
///
/// The runner keeps one per run and asks it before each delivery; it decides without I/O (the
/// store answers only whether other lines wait).
package struct LineTurn: Sendable, Equatable {
  /// How many deliveries a turn makes at most, on every store.
  package static let standardDeliveries = 16

  /// How many deliveries a turn makes at most (1 or more).
  package let deliveryLimit: Int
  /// How long a turn lasts at most, if the store bounds it in time.
  package let timeLimit: Duration?
  /// Deliveries made in this turn.
  package private(set) var deliveries = 0
  /// When this turn began.
  package private(set) var began: ContinuousClock.Instant

  /// A turn that begins at `now`.
  ///
  /// - Parameters:
  ///   - deliveryLimit: Deliveries per turn; ``standardDeliveries`` by default. Below 1 counts
  ///     as 1.
  ///   - timeLimit: The store's bound in time, or `nil`.
  ///   - now: When the turn begins.
  package init(
    deliveryLimit: Int = LineTurn.standardDeliveries,
    timeLimit: Duration?,
    at now: ContinuousClock.Instant
  ) {
    self.deliveryLimit = max(1, deliveryLimit)
    self.timeLimit = timeLimit
    self.began = now
  }

  /// Whether the next delivery is the turn's last: it would be delivery number
  /// ``deliveryLimit``, or the turn's time is up.
  ///
  /// - Parameter now: The time of the question.
  /// - Returns: `true` when the line should give way after the next delivery, if others wait.
  package func isSpent(at now: ContinuousClock.Instant) -> Bool {
    if deliveries + 1 >= deliveryLimit { return true }
    guard let timeLimit else { return false }
    return now >= began + timeLimit
  }

  /// Counts a delivery made in this turn.
  package mutating func delivered() { deliveries += 1 }

  /// Begins a new turn at `now`: the line keeps its slot, as no other line waits.
  ///
  /// - Parameter now: When the new turn begins.
  package mutating func renew(at now: ContinuousClock.Instant) {
    deliveries = 0
    began = now
  }

  /// Decides before a delivery whether its acknowledgement gives the line up, and counts it.
  ///
  /// - Parameters:
  ///   - now: The time of the question.
  ///   - othersWait: Whether another line waits for a slot; asked only when the turn is spent.
  /// - Returns: `true` when the line gives way after this delivery.
  package mutating func beforeDelivery(
    at now: ContinuousClock.Instant,
    othersWait: () async -> Bool
  ) async -> Bool {
    var over = false
    if isSpent(at: now) {
      over = await othersWait()
      if !over { renew(at: now) }
    }
    delivered()
    return over
  }
}
