#if Server
public import CoreMetrics
public import Foundation
import Metrics
import OrderlyCore
public import OrderlyOutboxCore

/// The swift-metrics an outbox reports: what was appended, delivered, retried and given up, how
/// long deliveries take, and how far delivery is behind.
///
/// Every metric carries the dimension `outbox` (the name given here), and is created with the
/// factory given here (the process's `MetricsSystem.factory` by default).
///
/// | Name | Kind | Extra dimensions | What |
/// |---|---|---|---|
/// | `orderly_outbox_messages_appended_total` | counter | | messages written (merges not counted) |
/// | `orderly_outbox_messages_delivered_total` | counter | | deliveries recorded |
/// | `orderly_outbox_messages_retried_total` | counter | | failed attempts that will be tried again |
/// | `orderly_outbox_messages_dead_lettered_total` | counter | | messages given up |
/// | `orderly_outbox_appends_deduplicated_total` | counter | | appends that stored nothing: their unique key was held (`UniqueAppend.duplicate`) |
/// | `orderly_outbox_schedule_ticks_total` | counter | | messages appended by recurring schedules, one per tick (`OutboxEvent.ticked`) |
/// | `orderly_outbox_keys_quarantined_total` | counter | | keys delivery quarantined (`QuarantinePolicy`): paused with the reason until resumed |
/// | `orderly_outbox_delivery_duration` | timer | `result`: `delivered`, `failed` | one call of the delivery closure (a whole batch, for a batch handler) |
/// | `orderly_outbox_append_to_delivery_duration` | timer | | from the append to the end of its delivery |
/// | `orderly_outbox_pending_messages` | gauge | | messages waiting, dead letters excluded |
/// | `orderly_outbox_dead_letters` | gauge | | dead letters kept |
/// | `orderly_outbox_oldest_pending_age_seconds` | gauge | | age of the oldest waiting message; 0 when none |
/// | `orderly_outbox_blocked_keys` | gauge | | keys waiting at a dead letter (`stopLine`), or paused on their own |
/// | `orderly_outbox_worst_blocked_key_age_seconds` | gauge | | the key blocked longest: age of its oldest message (its dead letter, or its oldest waiting message); 0 when none |
/// | `orderly_outbox_keys_held` | gauge | | keys this process delivers now (on PostgreSQL, the lines it holds a lease on) |
/// | `orderly_outbox_lease_renewals_failed_total` | counter | | held keys whose lease renewal failed (PostgreSQL) |
/// | `orderly_outbox_acknowledgements_refused_total` | counter | | acknowledgements refused by the fence (PostgreSQL): the key's next holder delivers the message again |
/// | `orderly_outbox_order_refusals_total` | counter | `reason`: `stale_fence`, `out_of_order` | acknowledgements the store's own statement refused because they would have broken order (`DelivererStatistics.orderRefusals`); `out_of_order` is never expected, and means a defect kept from committing |
/// | `orderly_outbox_worker_stalled` | gauge | | 1 while this process's worker has work and makes no progress (PostgreSQL: `PostgresOutbox.stallAfter`), else 0 |
///
/// The same names for every store: an outbox on SQLite counts its own file, one on PostgreSQL
/// the whole fleet's tables (the gauges of messages and keys read the store; `keys_held`, the
/// counters and the timers count what this process did). The key blocked longest is named in
/// `OutboxCounts.worstBlockedPartition`, and ``OutboxService`` logs it when it changes: keys
/// are not a dimension, so that a fleet with a million keys has a handful of series.
///
/// ``OutboxService`` records them all when given an `OutboxMetrics`, for any `DurableOutbox`:
/// the gauges when delivery starts, every 10 seconds while it runs, and when it stops. Outside
/// a service, feed it the outbox's events with `record(_:)`, set the gauges with
/// ``recordGauges(of:now:)`` (which records the outbox's `delivererStatistics` too), and wrap
/// the delivery closure with ``measure(_:)`` (a batch handler with ``measureBatches(_:)``).
public struct OutboxMetrics: Sendable {
  /// The value of the `outbox` dimension.
  public let outboxName: String

  let appended: Counter
  let delivered: Counter
  let retried: Counter
  let deadLettered: Counter
  let quarantined: Counter
  let deduplicated: Counter
  let ticks: Counter
  let deliverySucceeded: CoreMetrics.Timer
  let deliveryFailed: CoreMetrics.Timer
  let appendToDelivery: CoreMetrics.Timer
  let pending: Gauge
  let deadLetters: Gauge
  let oldestAge: Gauge
  let blockedKeys: Gauge
  let worstBlockedAge: Gauge
  let keysHeld: Gauge
  let stalled: Gauge
  let renewalsFailed: Counter
  let acknowledgementsRefused: Counter
  let refusedStaleFence: Counter
  let refusedOutOfOrder: Counter
  /// The deliverer's counts last recorded, so that each read adds only what is new.
  private let recorded = RecordedStatistics()

  /// Creates the metrics of one outbox.
  ///
  /// - Parameters:
  ///   - outboxName: The value of the `outbox` dimension: a short, fixed name ("orders").
  ///   - factory: Where the metrics go; the process's bootstrapped factory by default.
  public init(outboxName: String = "outbox", factory: any MetricsFactory = MetricsSystem.factory) {
    self.outboxName = outboxName
    let dimensions = [("outbox", outboxName)]
    appended = Counter(
      label: "orderly_outbox_messages_appended_total",
      dimensions: dimensions,
      factory: factory
    )
    delivered = Counter(
      label: "orderly_outbox_messages_delivered_total",
      dimensions: dimensions,
      factory: factory
    )
    retried = Counter(
      label: "orderly_outbox_messages_retried_total",
      dimensions: dimensions,
      factory: factory
    )
    deadLettered = Counter(
      label: "orderly_outbox_messages_dead_lettered_total",
      dimensions: dimensions,
      factory: factory
    )
    quarantined = Counter(
      label: "orderly_outbox_keys_quarantined_total",
      dimensions: dimensions,
      factory: factory
    )
    ticks = Counter(
      label: "orderly_outbox_schedule_ticks_total",
      dimensions: dimensions,
      factory: factory
    )
    deduplicated = Counter(
      label: "orderly_outbox_appends_deduplicated_total",
      dimensions: dimensions,
      factory: factory
    )
    deliverySucceeded = CoreMetrics.Timer(
      label: "orderly_outbox_delivery_duration",
      dimensions: dimensions + [("result", "delivered")],
      factory: factory
    )
    deliveryFailed = CoreMetrics.Timer(
      label: "orderly_outbox_delivery_duration",
      dimensions: dimensions + [("result", "failed")],
      factory: factory
    )
    appendToDelivery = CoreMetrics.Timer(
      label: "orderly_outbox_append_to_delivery_duration",
      dimensions: dimensions,
      factory: factory
    )
    pending = Gauge(
      label: "orderly_outbox_pending_messages",
      dimensions: dimensions,
      factory: factory
    )
    deadLetters = Gauge(
      label: "orderly_outbox_dead_letters",
      dimensions: dimensions,
      factory: factory
    )
    oldestAge = Gauge(
      label: "orderly_outbox_oldest_pending_age_seconds",
      dimensions: dimensions,
      factory: factory
    )
    blockedKeys = Gauge(
      label: "orderly_outbox_blocked_keys",
      dimensions: dimensions,
      factory: factory
    )
    worstBlockedAge = Gauge(
      label: "orderly_outbox_worst_blocked_key_age_seconds",
      dimensions: dimensions,
      factory: factory
    )
    keysHeld = Gauge(label: "orderly_outbox_keys_held", dimensions: dimensions, factory: factory)
    stalled = Gauge(
      label: "orderly_outbox_worker_stalled",
      dimensions: dimensions,
      factory: factory
    )
    renewalsFailed = Counter(
      label: "orderly_outbox_lease_renewals_failed_total",
      dimensions: dimensions,
      factory: factory
    )
    acknowledgementsRefused = Counter(
      label: "orderly_outbox_acknowledgements_refused_total",
      dimensions: dimensions,
      factory: factory
    )
    refusedStaleFence = Counter(
      label: "orderly_outbox_order_refusals_total",
      dimensions: dimensions + [("reason", "stale_fence")],
      factory: factory
    )
    refusedOutOfOrder = Counter(
      label: "orderly_outbox_order_refusals_total",
      dimensions: dimensions + [("reason", "out_of_order")],
      factory: factory
    )
  }

  /// Counts an event, and sets the pending gauge.
  ///
  /// - Parameters:
  ///   - event: An event from `Outbox.events`.
  ///   - pending: The outbox's `Outbox.pendingCount` now.
  public func record(_ event: OutboxEvent, pending: Int) {
    record(event)
    self.pending.record(pending)
  }

  /// Counts an event: appended, delivered, retried, dead-lettered.
  ///
  /// The gauges are left as they are (``recordGauges(of:now:)`` sets them from the store).
  ///
  /// - Parameter event: An event from the outbox's `events`.
  public func record(_ event: OutboxEvent) {
    switch event {
    case .appended: appended.increment()
    case .delivered: delivered.increment()
    case .retrying: retried.increment()
    case .deadLettered: deadLettered.increment()
    case .quarantined: quarantined.increment()
    case .duplicate: deduplicated.increment()
    case .ticked: ticks.increment()
    case .merged, .delivering, .recordFailed: break
    }
  }

  /// Sets the gauges from the outbox's store and its deliverer: pending messages, dead letters,
  /// the age of the oldest pending message, blocked keys and the age of the worst, keys held,
  /// whether the worker is stalled;
  /// and adds to the counters of failed lease renewals and refused acknowledgements what the
  /// deliverer met since the last call.
  ///
  /// - Parameters:
  ///   - outbox: The outbox.
  ///   - now: The time the ages are measured at.
  /// - Returns: The counts read from the store.
  /// - Throws: `OutboxError` if the outbox cannot be read (it is closed, say); the deliverer's
  ///   figures are recorded all the same.
  @discardableResult
  public func recordGauges(of outbox: some DurableOutbox, now: Date = Date())
    async throws(OutboxError) -> OutboxCounts
  {
    record(outbox.delivererStatistics)
    let counts = try await outbox.counts()
    pending.record(counts.pending)
    deadLetters.record(counts.deadLetters)
    oldestAge.record(counts.oldestPendingAge(at: now))
    blockedKeys.record(counts.blockedKeys)
    worstBlockedAge.record(counts.worstBlockedAge(at: now))
    return counts
  }

  /// Sets the keys-held and stalled gauges, and adds to the counters what is new since the
  /// last call.
  ///
  /// - Parameter statistics: The outbox's `DurableOutbox.delivererStatistics`.
  public func record(_ statistics: DelivererStatistics) {
    keysHeld.record(statistics.keysHeld)
    stalled.record(statistics.isStalled ? 1 : 0)
    let grown = recorded.advance(to: statistics)
    if grown.renewals > 0 { renewalsFailed.increment(by: grown.renewals) }
    if grown.refusals > 0 { acknowledgementsRefused.increment(by: grown.refusals) }
    if grown.staleFence > 0 { refusedStaleFence.increment(by: grown.staleFence) }
    if grown.outOfOrder > 0 { refusedOutOfOrder.increment(by: grown.outOfOrder) }
  }

  /// Wraps a delivery closure so that each call is timed, and each delivery's time since its
  /// append recorded.
  ///
  /// - Parameter deliver: The delivery closure.
  /// - Returns: A closure that calls it.
  public func measure<Message>(
    _ deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) -> @Sendable (Envelope<Message>) async throws -> Void {
    { [self] envelope in
      let clock = ContinuousClock()
      let start = clock.now
      do {
        try await deliver(envelope)
      } catch {
        deliveryFailed.record(duration: clock.now - start)
        throw error
      }
      deliverySucceeded.record(duration: clock.now - start)
      let sinceAppend = max(0, Date().timeIntervalSince(envelope.appendedAt))
      appendToDelivery.recordNanoseconds(Int64(sinceAppend * 1_000_000_000))
    }
  }
}
extension OutboxMetrics {
  /// Wraps a batch handler so that each call is timed (`orderly_outbox_delivery_duration`,
  /// one sample a batch), and each message it delivered has its time since its append recorded:
  /// all of the batch when it returns, the first `BatchDeliveryError.delivered` when it throws
  /// one.
  ///
  /// - Parameter deliver: The batch handler.
  /// - Returns: A handler that calls it.
  public func measureBatches<Message>(
    _ deliver: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) -> @Sendable ([Envelope<Message>]) async throws -> Void {
    { [self] envelopes in
      let clock = ContinuousClock()
      let start = clock.now
      var through = envelopes.count
      do {
        try await deliver(envelopes)
      } catch {
        deliveryFailed.record(duration: clock.now - start)
        through = (error as? BatchDeliveryError)?.delivered ?? 0
        recordAppendToDelivery(envelopes.prefix(max(0, min(through, envelopes.count))))
        throw error
      }
      deliverySucceeded.record(duration: clock.now - start)
      recordAppendToDelivery(envelopes.prefix(through))
    }
  }

  private func recordAppendToDelivery<Message>(_ envelopes: ArraySlice<Envelope<Message>>) {
    let now = Date()
    for envelope in envelopes {
      let sinceAppend = max(0, now.timeIntervalSince(envelope.appendedAt))
      appendToDelivery.recordNanoseconds(Int64(sinceAppend * 1_000_000_000))
    }
  }
}

/// The deliverer's counts an ``OutboxMetrics`` last recorded.
private final class RecordedStatistics: Sendable {
  private let last = OrderlyLock(DelivererStatistics())

  /// How much each count grew since the last call (a count that went down, from another
  /// outbox object, starts over).
  func advance(
    to now: DelivererStatistics
  ) -> (renewals: Int, refusals: Int, staleFence: Int, outOfOrder: Int) {
    last.withLock { last in
      func grown(_ count: KeyPath<DelivererStatistics, Int>) -> Int {
        let grown = now[keyPath: count] - last[keyPath: count]
        return grown >= 0 ? grown : now[keyPath: count]
      }
      defer { last = now }
      return (
        grown(\.leaseRenewalsFailed), grown(\.acknowledgementsRefused),
        grown(\.orderRefusals.staleFence), grown(\.orderRefusals.outOfOrder)
      )
    }
  }
}
#endif
