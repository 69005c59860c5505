#if Server
import Foundation
import OrderlyCore
public import Logging
public import OrderlyOutboxCore
public import ServiceLifecycle
public import Tracing

/// An outbox's delivery as a swift-service-lifecycle `Service`: started with the process's
/// `ServiceGroup`, stopped by its graceful shutdown.
///
/// ```swift
/// let outbox = try Outbox<OrderEvent>(path: "/var/lib/orders/outbox.sqlite")
/// let delivery = OutboxService(
///   outbox: outbox,
///   name: "orders",
///   shutdownGracePeriod: .seconds(10),
///   logger: logger,
///   metrics: OutboxMetrics(outboxName: "orders")
/// ) { envelope in
///   try await broker.publish(envelope.message, idempotencyKey: envelope.id)
/// }
/// let group = ServiceGroup(
///   services: [server, delivery],
///   gracefulShutdownSignals: [.sigterm, .sigint],
///   logger: logger
/// )
/// try await group.run()
/// ```
///
/// ``run()`` starts delivery (as
/// `Outbox.start(limit:retry:onDeadLetter:whenDeliveredElsewhere:pollInterval:deliver:)`
/// does, taking the file's deliverer lock or waiting for it) and returns when the service is
/// told to stop:
///
/// - On graceful shutdown it takes no new message, lets the delivery in progress finish for up
///   to `shutdownGracePeriod` (on the outbox's clock), then cancels it (its message stays and
///   is delivered again by the next start), gives back the deliverer lock, and returns. A
///   message whose delivery returned is recorded as delivered before `run()` returns: it is
///   not delivered again.
/// - Cancelled (the group's own shutdown timeout, or a failing sibling service), it stops at
///   once, as `Outbox.stop()` does.
/// - When the outbox's worker says it is stalled (`DelivererStatistics.isStalled`: on
///   PostgreSQL, it had work and made no progress for `PostgresOutbox.stallAfter`, two leases by
///   default), it logs an error naming what the worker waited on, stops delivery, and throws
///   ``OutboxWorkerStalled``: the `ServiceGroup` shuts down and the process ends with an error,
///   for its supervisor to start it again. It looks once a second.
///
/// `run()` does not close the outbox: the process may still append (a request in flight) until
/// it closes the outbox itself.
///
/// ## Logs
///
/// Quiet at `info` while things go well: one line when delivery starts and one when it stops.
///
/// | Level | When | Metadata |
/// |---|---|---|
/// | `info` | delivery started; stopped (graceful or cancelled) | `orderly.outbox` |
/// | `trace` | a message appended or merged | `orderly.message_id`, `orderly.sequence`, `orderly.partition` |
/// | `debug` | a delivery begins; a message delivered | the above, `orderly.attempt`, `orderly.fence` (PostgreSQL) |
/// | `warning` | an attempt failed and will be retried | the above, `orderly.retry_in`, `orderly.reason` |
/// | `error` | a message became a dead letter; recording a delivery failed (retried) | the above, `orderly.reason`, `orderly.line_stopped` |
/// | `error` | the worker is stalled: delivery stops and ``run()`` throws ``OutboxWorkerStalled`` | `orderly.waiting_on` |
/// | `warning` | (with metrics) the key blocked longest changed: it waits at a dead letter, or is paused | `orderly.blocked_keys`, `orderly.partition`, `orderly.blocked_since` |
/// | `info` | (with metrics) no key is blocked any more | |
///
/// Every line about a message of a partitioned outbox names its key (`orderly.partition`), the
/// events' lines included: on PostgreSQL a message's number counts within its key, so a
/// number alone names one message of every key.
///
/// ## Traces
///
/// Each attempt runs in a span named `orderly.outbox.deliver`, of kind consumer, with the
/// attributes `orderly.outbox`, `orderly.outbox.message_id`, `orderly.outbox.attempt`,
/// `orderly.outbox.sequence` and `orderly.outbox.partition`. The span starts a trace of its
/// own and is linked to the context stored with the message by
/// ``OrderlyOutboxCore/DurableOutbox/appendTraced(_:partition:headers:context:instrument:)``.
public struct OutboxService<Message: Codable & Sendable>: Service {
  /// The outbox delivered: an `Outbox` (SQLite), a `PostgresOutbox`, or another store's.
  public let outbox: any DurableOutbox<Message>
  /// The outbox's name in logs, metrics and spans.
  public let name: String
  /// How long a delivery in progress may go on after graceful shutdown begins.
  public let shutdownGracePeriod: Duration

  /// Starts the outbox's delivery with the handler it is given (the service's wrapped one).
  private let start: @Sendable (DeliveryHandler<Message>) throws(OutboxError) -> Void
  private let logger: Logger
  private let metrics: OutboxMetrics?
  private let spans: DeliverySpans
  /// The handler the service was given.
  private let deliver: DeliveryHandler<Message>
  private let events: AsyncStream<OutboxEvent>
  /// The partition key of each message being delivered, by id, so that the lines of its events
  /// name its key: on PostgreSQL a message's number counts within its key, and `#11` alone is
  /// one message of every key.
  private let keys = KeysInFlight()

  /// A service that delivers any outbox, started by `start`: for a store of your own.
  ///
  /// Its logs and metrics cover what happens from now on (an append between now and ``run()``
  /// is counted): create it before the code that appends starts.
  ///
  /// ```swift
  /// let delivery = OutboxService(outbox: outbox, name: "ledger") { deliver in
  ///   try outbox.start(limit: 16, deliver: deliver)
  /// } deliver: { envelope in
  ///   try await ledger.apply(envelope.message, id: envelope.id)
  /// }
  /// ```
  ///
  /// - Parameters:
  ///   - outbox: The outbox to deliver.
  ///   - name: Its name in logs, metrics and spans.
  ///   - shutdownGracePeriod: How long a delivery in progress may go on after graceful shutdown
  ///     begins; 10 seconds by default.
  ///   - logger: Where the service logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  ///   - tracer: The tracer of the delivery spans; the process's bootstrapped tracer by default.
  ///   - start: Starts the outbox's delivery with the closure it is given (the service's
  ///     `deliver`, wrapped in its span, timing and logs).
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  public init(
    outbox: some DurableOutbox<Message>,
    name: String,
    shutdownGracePeriod: Duration = .seconds(10),
    logger: Logger = Logger(label: "orderly.outbox"),
    metrics: OutboxMetrics? = nil,
    tracer: (any Tracer)? = nil,
    start:
      @escaping @Sendable (@escaping @Sendable (Envelope<Message>) async throws -> Void)
      throws(OutboxError) -> Void,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) {
    self.init(
      outbox: outbox,
      name: name,
      shutdownGracePeriod: shutdownGracePeriod,
      logger: logger,
      metrics: metrics,
      tracer: tracer,
      starting: { (handler) throws(OutboxError) in
        switch handler {
        case .each(let deliver): try start(deliver)
        case .batches(let deliver): try start { envelope in try await deliver([envelope]) }
        }
      },
      deliver: .each(deliver)
    )
  }

  /// A service that delivers any outbox with its store's options, one message a call.
  ///
  /// ```swift
  /// let delivery = OutboxService(
  ///   outbox: outbox,
  ///   name: "orders",
  ///   options: FleetDeliveryOptions(limit: 16, lease: .seconds(20))
  /// ) { envelope in
  ///   try await broker.publish(envelope.message, idempotencyKey: envelope.id)
  /// }
  /// ```
  ///
  /// Its logs and metrics cover what happens from now on (an append between now and ``run()``
  /// is counted): create it before the code that appends starts.
  ///
  /// - Parameters:
  ///   - outbox: The outbox to deliver.
  ///   - name: Its name in logs, metrics and spans.
  ///   - options: The store's delivery options (`OutboxDeliveryOptions`,
  ///     `FleetDeliveryOptions`); their batch size must be 1 (see
  ///     ``init(outbox:name:options:shutdownGracePeriod:logger:metrics:tracer:deliverBatches:)``
  ///     for batches). ``run()`` throws `OutboxError.invalidOption(_:)` for one out of range.
  ///   - shutdownGracePeriod: How long a delivery in progress may go on after graceful shutdown
  ///     begins; 10 seconds by default.
  ///   - logger: Where the service logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  ///   - tracer: The tracer of the delivery spans; the process's bootstrapped tracer by default.
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  public init<Store: DurableOutbox<Message>>(
    outbox: Store,
    name: String,
    options: Store.Options,
    shutdownGracePeriod: Duration = .seconds(10),
    logger: Logger = Logger(label: "orderly.outbox"),
    metrics: OutboxMetrics? = nil,
    tracer: (any Tracer)? = nil,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) {
    self.init(
      outbox: outbox,
      name: name,
      shutdownGracePeriod: shutdownGracePeriod,
      logger: logger,
      metrics: metrics,
      tracer: tracer,
      starting: { (handler) throws(OutboxError) in try outbox.start(options, deliver: handler) },
      deliver: .each(deliver)
    )
  }

  /// A service that delivers any outbox with its store's options, in ordered batches: each
  /// call of `deliverBatches` gets up to `options.batchSize` consecutive messages of one line.
  ///
  /// ```swift
  /// var options = OutboxDeliveryOptions(limit: 8)
  /// options.batchSize = 50
  /// let delivery = OutboxService(outbox: outbox, name: "search", options: options) { batch in
  ///   try await index.write(batch.map(\.message))
  /// }
  /// ```
  ///
  /// The batch contract is the store's (`Outbox.start(limit:batchesOf:...)`,
  /// `PostgresOutbox.start(limit:batchesOf:...)`): throw `BatchDeliveryError` to say how many
  /// messages came through before the one that failed. Each call runs in one span
  /// (`orderly.outbox.deliver`, with `orderly.outbox.batch_size` and
  /// `orderly.outbox.last_sequence`, linked to every message's stored trace context), is timed
  /// once, and records each delivered message's time since its append; the events, logs and
  /// counters stay per message.
  ///
  /// - Parameters:
  ///   - outbox: The outbox to deliver.
  ///   - name: Its name in logs, metrics and spans.
  ///   - options: The store's delivery options, with the batch size.
  ///   - shutdownGracePeriod: How long a delivery in progress may go on after graceful shutdown
  ///     begins; 10 seconds by default.
  ///   - logger: Where the service logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  ///   - tracer: The tracer of the delivery spans; the process's bootstrapped tracer by default.
  ///   - deliverBatches: Sends a batch, in order; returns once the receiver has all of it, or
  ///     throws (a `BatchDeliveryError` to say how many came through first).
  public init<Store: DurableOutbox<Message>>(
    outbox: Store,
    name: String,
    options: Store.Options,
    shutdownGracePeriod: Duration = .seconds(10),
    logger: Logger = Logger(label: "orderly.outbox"),
    metrics: OutboxMetrics? = nil,
    tracer: (any Tracer)? = nil,
    deliverBatches: @escaping @Sendable ([Envelope<Message>]) async throws -> Void
  ) {
    self.init(
      outbox: outbox,
      name: name,
      shutdownGracePeriod: shutdownGracePeriod,
      logger: logger,
      metrics: metrics,
      tracer: tracer,
      starting: { (handler) throws(OutboxError) in try outbox.start(options, deliver: handler) },
      deliver: .batches(deliverBatches)
    )
  }

  /// The one initializer the others call.
  private init(
    outbox: some DurableOutbox<Message>,
    name: String,
    shutdownGracePeriod: Duration,
    logger: Logger,
    metrics: OutboxMetrics?,
    tracer: (any Tracer)?,
    starting: @escaping @Sendable (DeliveryHandler<Message>) throws(OutboxError) -> Void,
    deliver: DeliveryHandler<Message>
  ) {
    self.outbox = outbox
    self.name = name
    self.shutdownGracePeriod = shutdownGracePeriod
    self.start = starting
    var logger = logger
    logger[metadataKey: "orderly.outbox"] = .string(name)
    self.logger = logger
    self.metrics = metrics
    let chosen: any Tracer = tracer ?? InstrumentationSystem.tracer
    spans = DeliverySpans(tracer: chosen)
    self.deliver = deliver
    events = outbox.events
  }

  /// A service that delivers a SQLite outbox (`Outbox`); nothing is delivered until ``run()``.
  ///
  /// Its logs and metrics cover what happens from now on (an append between now and ``run()``
  /// is counted): create it before the code that appends starts.
  ///
  /// - Parameters:
  ///   - outbox: The outbox to deliver.
  ///   - name: Its name in logs, metrics and spans; the file's name (or `outbox`) by default
  ///     (`DurableOutbox.defaultName`).
  ///   - limit: How many lines deliver at once.
  ///   - retry: When a failed delivery is tried again.
  ///   - onDeadLetter: Whether a line waits at a dead letter or goes on.
  ///   - whenDeliveredElsewhere: What to do when another process delivers the same file.
  ///   - pollInterval: How often the outbox looks for other processes' appends.
  ///   - shutdownGracePeriod: How long a delivery in progress may go on after graceful shutdown
  ///     begins; 10 seconds by default.
  ///   - logger: Where the service logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  ///   - tracer: The tracer of the delivery spans; the process's bootstrapped tracer by default
  ///     (which does nothing unless one was bootstrapped).
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  public init<Store: DurableOutbox<Message>>(
    outbox: Store,
    name: String? = nil,
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    whenDeliveredElsewhere: WhenDeliveredElsewhere = .wait,
    pollInterval: Duration = .seconds(1),
    shutdownGracePeriod: Duration = .seconds(10),
    logger: Logger = Logger(label: "orderly.outbox"),
    metrics: OutboxMetrics? = nil,
    tracer: (any Tracer)? = nil,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) where Store.Options == OutboxDeliveryOptions {
    self.init(
      outbox: outbox,
      name: name ?? outbox.defaultName,
      options: OutboxDeliveryOptions(
        limit: limit,
        retry: retry,
        onDeadLetter: onDeadLetter,
        whenDeliveredElsewhere: whenDeliveredElsewhere,
        pollInterval: pollInterval
      ),
      shutdownGracePeriod: shutdownGracePeriod,
      logger: logger,
      metrics: metrics,
      tracer: tracer,
      deliver: deliver
    )
  }

  /// A service that delivers an outbox on PostgreSQL (`PostgresOutbox`) as one worker of a fleet.
  ///
  /// On graceful shutdown (SIGTERM through the `ServiceGroup`) the worker takes no new
  /// message, lets the deliveries in progress finish for up to `shutdownGracePeriod`, and
  /// releases each line as soon as its delivery is acknowledged: another worker delivers the
  /// line's next message within its poll interval, not after the lease. A killed worker's
  /// lines wait for their leases instead.
  ///
  /// - Parameters:
  ///   - outbox: The outbox to deliver.
  ///   - name: Its name in logs, metrics and spans; `outbox` by default
  ///     (`DurableOutbox.defaultName`).
  ///   - limit: How many lines this worker delivers at once.
  ///   - retry: When a failed delivery is tried again.
  ///   - onDeadLetter: Whether a line waits at a dead letter or goes on (the same on every
  ///     worker).
  ///   - lease: How long a line stays with this worker without a renewal.
  ///   - pollInterval: How often the worker looks for lines when no notification came.
  ///   - shutdownGracePeriod: How long a delivery in progress may go on after graceful shutdown
  ///     begins; 10 seconds by default.
  ///   - logger: Where the service logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  ///   - tracer: The tracer of the delivery spans; the process's bootstrapped tracer by default.
  ///   - deliver: Sends one message; returns once the receiver has it, throws otherwise.
  public init<Store: DurableOutbox<Message>>(
    outbox: Store,
    name: String? = nil,
    limit: Int = 4,
    retry: RetryPolicy = .standard,
    onDeadLetter: DeadLetterPolicy = .stopLine,
    lease: Duration = .seconds(30),
    pollInterval: Duration = .seconds(1),
    shutdownGracePeriod: Duration = .seconds(10),
    logger: Logger = Logger(label: "orderly.outbox"),
    metrics: OutboxMetrics? = nil,
    tracer: (any Tracer)? = nil,
    deliver: @escaping @Sendable (Envelope<Message>) async throws -> Void
  ) where Store.Options == FleetDeliveryOptions {
    self.init(
      outbox: outbox,
      name: name ?? outbox.defaultName,
      options: FleetDeliveryOptions(
        limit: limit,
        retry: retry,
        onDeadLetter: onDeadLetter,
        lease: lease,
        pollInterval: pollInterval
      ),
      shutdownGracePeriod: shutdownGracePeriod,
      logger: logger,
      metrics: metrics,
      tracer: tracer,
      deliver: deliver
    )
  }

  /// Delivers until graceful shutdown or cancellation, then stops (see the type's discussion).
  ///
  /// - Throws: An `OutboxError` if delivery cannot start (the outbox is closed or delivering
  ///   already, an option is invalid, or another process delivers the file and
  ///   `whenDeliveredElsewhere` is `.fail`).
  public func run() async throws {
    // Subscribed when the service was created, so that nothing since is missed.
    let observer = Task { [logger, metrics, events, keys] in
      for await event in events {
        Self.log(event, to: logger, keys: keys)
        metrics?.record(event)
      }
    }
    // The gauges (pending, dead letters, the oldest message's age) are read from the store:
    // at once, then every `gaugeInterval` while delivery runs (an age grows with no event to
    // tell), and once more when it stopped.
    let gauges = metrics.map { metrics in
      Task { [outbox, logger] in
        var blocked: OutboxCounts?
        while !Task.isCancelled {
          if let counts = try? await metrics.recordGauges(of: outbox) {
            Self.logBlocked(counts, before: blocked, to: logger)
            blocked = counts
          }
          // Real time on purpose: gauges are read on a scrape's time scale, not the outbox's
          // injected clock; cancelled when delivery stops.
          try? await Task.sleep(for: Self.gaugeInterval)
        }
      }
    }
    // Cancelled, the observer still reads every event already emitted, then ends: awaited,
    // it has logged and counted everything up to the stop.
    func endObservers() async {
      observer.cancel()
      gauges?.cancel()
      await observer.value
      await gauges?.value
    }
    // Read before delivery starts, so that the line below comes before any delivery's.
    let started = await pendingMetadata()
    do {
      try start(wrapped())
    } catch {
      await endObservers()
      logger.error("outbox delivery could not start", metadata: ["orderly.reason": "\(error)"])
      throw error
    }
    logger.info("outbox delivery started", metadata: started)
    var stalled: OutboxWorkerStalled?
    switch await ending() {
    case .gracefulShutdown:
      // Paused first, synchronously: once the line below is logged, no line takes a new
      // message; the delivery in flight finishes and is recorded (or is cancelled by the stop
      // when the grace period ends).
      let wasPaused = outbox.isPaused
      outbox.pause()
      logger.info(
        "outbox delivery stopping: graceful shutdown, no new messages taken",
        metadata: ["orderly.grace_period": "\(shutdownGracePeriod)"]
      )
      await outbox.stop(gracePeriod: shutdownGracePeriod)
      if !wasPaused { outbox.resume() }
    case .cancelled:
      await outbox.stop()
    case .stalled(let waitingOn):
      stalled = OutboxWorkerStalled(outboxName: name, waitingOn: waitingOn)
      metrics?.record(outbox.delivererStatistics)
      logger.error(
        "outbox delivery stopping: the worker is stalled; the service fails so that the process is restarted",
        metadata: ["orderly.waiting_on": "\(waitingOn.joined(separator: "; "))"]
      )
      await outbox.stop()
    }
    await endObservers()
    if let metrics {
      // In a task of its own: this one may be cancelled, and the read would be too.
      let outbox = self.outbox
      _ = await Task { try? await metrics.recordGauges(of: outbox) }.value
    }
    let stopped = await pendingMetadata()
    logger.info("outbox delivery stopped", metadata: stopped)
    if let stalled { throw stalled }
  }

  /// Why ``run()`` stops delivering.
  private enum Ending: Sendable {
    case gracefulShutdown
    case cancelled
    /// The outbox's worker said it is stalled, waiting on these.
    case stalled([String])
  }

  /// Waits for graceful shutdown, the task's cancellation, or the worker's stall, whichever
  /// comes first.
  private func ending() async -> Ending {
    let outbox = self.outbox
    return await withTaskGroup(of: Ending?.self) { group in
      group.addTask {
        do {
          try await gracefulShutdown()
          return .gracefulShutdown
        } catch {
          return .cancelled
        }
      }
      group.addTask {
        while !Task.isCancelled {
          let statistics = outbox.delivererStatistics
          if statistics.isStalled { return .stalled(statistics.stalledOn) }
          // Real time on purpose: the worker's stall limit is measured on real time (its
          // leases are), and this look is cheap (memory only); cancelled when the run ends.
          try? await Task.sleep(for: Self.stallCheckInterval)
        }
        return nil
      }
      defer { group.cancelAll() }
      while let next = await group.next() {
        if let ending = next { return ending }
      }
      return .cancelled
    }
  }

  /// How often ``run()`` looks whether the outbox's worker is stalled.
  static var stallCheckInterval: Duration { .seconds(1) }

  /// Names the key blocked longest when it changes, so that an operator reading the logs finds
  /// the key behind `orderly_outbox_worst_blocked_key_age_seconds`.
  static func logBlocked(_ counts: OutboxCounts, before: OutboxCounts?, to logger: Logger) {
    let key = counts.worstBlockedSince.map { _ in counts.worstBlockedPartition ?? "(default)" }
    let previous = before?.worstBlockedSince.map { _ in before?.worstBlockedPartition ?? "(default)"
    }
    guard key != previous || counts.blockedKeys != (before?.blockedKeys ?? 0) else { return }
    guard let key, let since = counts.worstBlockedSince else {
      if previous != nil { logger.info("no outbox key is blocked") }
      return
    }
    logger.warning(
      "outbox keys blocked: a dead letter at their head, or paused",
      metadata: [
        "orderly.blocked_keys": "\(counts.blockedKeys)", "orderly.partition": "\(key)",
        "orderly.blocked_since": "\(since.formatted(.iso8601))",
      ]
    )
  }

  /// How often the gauges are read from the store while delivery runs.
  static var gaugeInterval: Duration { .seconds(10) }

  /// The pending count, as log metadata, read in a task of its own (the caller may be
  /// cancelled); empty if the store cannot be read.
  private func pendingMetadata() async -> Logger.Metadata {
    let outbox = self.outbox
    guard let counts = await Task(operation: { try? await outbox.counts() }).value else {
      return [:]
    }
    return ["orderly.pending": "\(counts.pending)"]
  }

  /// The handler with its span, its timing and its debug lines.
  private func wrapped() -> DeliveryHandler<Message> {
    switch deliver {
    case .each(let deliver):
      let measured = metrics?.measure(deliver) ?? deliver
      return .each { [logger, spans, name, keys] envelope in
        if let partition = envelope.partition { keys.deliver(envelope.id, partition: partition) }
        logger.debug("delivering", metadata: Self.metadata(of: envelope))
        try await spans.deliver(envelope, outboxName: name) { try await measured(envelope) }
      }
    case .batches(let deliver):
      let measured = metrics?.measureBatches(deliver) ?? deliver
      return .batches { [logger, spans, name, keys] envelopes in
        for envelope in envelopes {
          if let partition = envelope.partition { keys.deliver(envelope.id, partition: partition) }
        }
        if let first = envelopes.first {
          var metadata = Self.metadata(of: first)
          metadata["orderly.batch_size"] = "\(envelopes.count)"
          logger.debug("delivering a batch", metadata: metadata)
        }
        try await spans.deliver(batch: envelopes, outboxName: name) {
          try await measured(envelopes)
        }
      }
    }
  }

  static func metadata(of envelope: Envelope<Message>) -> Logger.Metadata {
    var metadata: Logger.Metadata = [
      "orderly.message_id": "\(envelope.id)",
      "orderly.sequence": "\(envelope.sequence)",
      "orderly.attempt": "\(envelope.attempt)",
    ]
    if let partition = envelope.partition { metadata["orderly.partition"] = "\(partition)" }
    if let fence = envelope.fence { metadata["orderly.fence"] = "\(fence)" }
    return metadata
  }

  static func log(_ event: OutboxEvent, to logger: Logger, keys: KeysInFlight = KeysInFlight()) {
    var metadata: Logger.Metadata = [
      "orderly.message_id": "\(event.id)",
      "orderly.sequence": "\(event.sequence)",
    ]
    // A message's key, from its delivery, for the events that do not carry it; forgotten once
    // the message is delivered or given up.
    switch event {
    case .delivered, .deadLettered:
      if let partition = keys.finish(event.id) { metadata["orderly.partition"] = "\(partition)" }
    case .retrying, .recordFailed:
      if let partition = keys.partition(of: event.id) {
        metadata["orderly.partition"] = "\(partition)"
      }
    case .quarantined:
      // Ends the delivery of the message at its key's head: it is taken again once resumed.
      _ = keys.finish(event.id)
    case .appended, .merged, .delivering, .duplicate, .ticked:
      break
    }
    switch event {
    case .appended(_, _, let partition):
      if let partition { metadata["orderly.partition"] = "\(partition)" }
      logger.trace("appended", metadata: metadata)
    case .merged(_, _, let partition):
      if let partition { metadata["orderly.partition"] = "\(partition)" }
      logger.trace("merged into a pending message", metadata: metadata)
    case .delivering:
      // Logged by the delivery closure, which knows the partition.
      break
    case .delivered:
      logger.debug("delivered", metadata: metadata)
    case .retrying(_, _, let attempt, let delay, let reason):
      metadata["orderly.attempt"] = "\(attempt)"
      metadata["orderly.retry_in"] = "\(delay)"
      metadata["orderly.reason"] = "\(reason)"
      logger.warning("delivery failed; will retry", metadata: metadata)
    case .deadLettered(_, _, let reason, let lineStopped):
      metadata["orderly.reason"] = "\(reason)"
      metadata["orderly.line_stopped"] = "\(lineStopped)"
      logger.error("message moved to the dead letters", metadata: metadata)
    case .recordFailed(_, _, let reason, let delay):
      metadata["orderly.reason"] = "\(reason)"
      metadata["orderly.retry_in"] = "\(delay)"
      logger.error("recording a delivery failed; will retry", metadata: metadata)
    case .quarantined(_, _, let partition, let reason):
      if let partition { metadata["orderly.partition"] = "\(partition)" }
      metadata["orderly.reason"] = "\(reason)"
      logger.error("key quarantined: paused until resumed", metadata: metadata)
    case .duplicate(_, _, let key):
      metadata["orderly.unique_key"] = "\(key)"
      logger.debug("append not stored: its unique key is held", metadata: metadata)
    case .ticked(_, _, let schedule, let tick):
      metadata["orderly.schedule"] = "\(schedule)"
      metadata["orderly.tick"] = "\(tick)"
      logger.debug("a recurring schedule ticked", metadata: metadata)
    }
  }
}
/// The error ``OutboxService/run()`` ends with when the outbox's worker is stalled: it had work
/// and made no progress for its stall limit (`DelivererStatistics.isStalled`).
///
/// The service stops delivery first (the worker's keys are released, or run out), then throws
/// it: its `ServiceGroup` shuts down and the process ends with an error, for the supervisor
/// (systemd, Kubernetes, ...) to start it again.
public struct OutboxWorkerStalled: Error, Sendable, Equatable, CustomStringConvertible {
  /// The service's outbox name.
  public let outboxName: String
  /// What the worker was waiting on when it stalled, oldest first.
  public let waitingOn: [String]

  /// The error for the outbox `outboxName`, whose worker waited on `waitingOn`.
  ///
  /// - Parameters:
  ///   - outboxName: The service's outbox name.
  ///   - waitingOn: What the worker waited on.
  public init(outboxName: String, waitingOn: [String]) {
    self.outboxName = outboxName
    self.waitingOn = waitingOn
  }

  /// What happened and what to do, for a log line or a process's last words.
  public var description: String {
    "the worker of outbox \(outboxName) is stalled: it has work and made no progress, waiting on "
      + "\(waitingOn.joined(separator: "; ")); restart the process (its keys move to other workers "
      + "meanwhile)"
  }
}

/// The partition key of each message an ``OutboxService`` is delivering, by id.
final class KeysInFlight: Sendable {
  private let keys = OrderlyLock<[UUID: String]>([:])

  /// Notes that the message `id` of `partition` is being delivered.
  func deliver(_ id: UUID, partition: String) {
    keys.withLock(announcingTo: self) { $0[id] = partition }
  }

  /// The key of message `id`, while it is being delivered.
  func partition(of id: UUID) -> String? {
    keys.withLock(announcingTo: self) { $0[id] }
  }

  /// The key of message `id`, which is done: it is forgotten.
  func finish(_ id: UUID) -> String? {
    keys.withLock(announcingTo: self) { $0.removeValue(forKey: id) }
  }
}
#endif
