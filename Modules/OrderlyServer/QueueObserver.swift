#if Server
public import CoreMetrics
import Metrics
public import Logging
public import OrderlyCore
public import ServiceLifecycle

/// Turns a queue's events into logs and metrics, as a swift-service-lifecycle `Service`.
///
/// Queues are values in memory with no loop of their own; their `QueueEvent` sequence says
/// what happened. Give the observer that sequence, and run it in the `ServiceGroup` (or in a
/// task of its own):
///
/// ```swift
/// let saves = SerialQueue(name: "saves")
/// let observer = QueueObserver(saves.events, logger: logger, metrics: QueueMetrics())
/// let group = ServiceGroup(services: [server, observer], logger: logger)
/// ```
///
/// It ends when the sequence ends (the queue is released), at graceful shutdown, or when
/// cancelled, after handling the events already emitted. Take the sequence before enqueueing:
/// it holds only what happened from then on.
///
/// ## Logs
///
/// Nothing at `info`: what a queue does is the app's business, and its errors go to the
/// callers that enqueued the jobs.
///
/// | Level | When | Metadata |
/// |---|---|---|
/// | `trace` | a job enqueued, started, finished | `orderly.queue`, `orderly.job_id`, `orderly.job_name` |
/// | `debug` | a job failed, or was cancelled | the above, `orderly.error` |
public struct QueueObserver: Service {
  private let events: AsyncStream<QueueEvent>
  private let logger: Logger
  private let metrics: QueueMetrics?

  /// Creates an observer of one queue's events.
  ///
  /// - Parameters:
  ///   - events: The queue's `events`, taken before the jobs it should see are enqueued.
  ///   - logger: Where it logs (see the table above).
  ///   - metrics: The metrics to record; none by default.
  public init(
    _ events: AsyncStream<QueueEvent>,
    logger: Logger = Logger(label: "orderly.queue"),
    metrics: QueueMetrics? = nil
  ) {
    self.events = events
    self.logger = logger
    self.metrics = metrics
  }

  /// Logs and records every event until the sequence ends, graceful shutdown, or cancellation.
  ///
  /// Cancelled (or at graceful shutdown), it still handles every event the queue emitted
  /// before, then returns.
  public func run() async {
    let (events, logger, metrics) = (self.events, self.logger, self.metrics)
    await cancelWhenGracefulShutdown {
      let recorder = metrics?.recorder()
      for await event in events {
        Self.log(event, to: logger)
        recorder?.record(event)
      }
    }
  }

  static func log(_ event: QueueEvent, to logger: Logger) {
    var metadata: Logger.Metadata = [
      "orderly.queue": "\(event.queueName)",
      "orderly.job_id": "\(event.jobID)",
    ]
    if let name = event.jobName { metadata["orderly.job_name"] = "\(name)" }
    switch event.kind {
    case .enqueued: logger.trace("job enqueued", metadata: metadata)
    case .started: logger.trace("job started", metadata: metadata)
    case .finished: logger.trace("job finished", metadata: metadata)
    case .failed(let error):
      metadata["orderly.error"] = "\(error)"
      logger.debug("job failed", metadata: metadata)
    case .cancelled: logger.debug("job cancelled", metadata: metadata)
    }
  }
}

/// The swift-metrics a queue reports, through a ``QueueObserver``.
///
/// Every metric carries the dimension `queue`: the queue's name, without a keyed queue's
/// `[key]` (keys would make one series per key).
///
/// | Name | Kind | Extra dimensions | What |
/// |---|---|---|---|
/// | `orderly_queue_jobs_enqueued_total` | counter | | jobs that took their place in line |
/// | `orderly_queue_jobs_started_total` | counter | | jobs given their turn |
/// | `orderly_queue_jobs_ended_total` | counter | `outcome`: `finished`, `failed`, `cancelled` | jobs that ended, after they started |
/// | `orderly_queue_jobs_cancelled_total` | counter | | jobs cancelled, before or after they started |
/// | `orderly_queue_wait_duration` | timer | | from enqueued to started |
/// | `orderly_queue_pending_jobs` | gauge | | jobs enqueued and not yet started |
public struct QueueMetrics: Sendable {
  private let factory: any MetricsFactory

  /// Creates the metrics, made by `factory` (the process's bootstrapped one by default).
  ///
  /// - Parameter factory: Where the metrics go.
  public init(factory: any MetricsFactory = MetricsSystem.factory) {
    self.factory = factory
  }

  /// One observer's bookkeeping: which jobs wait, since when, and the metrics of each queue.
  final class Recorder {
    private let factory: any MetricsFactory
    private var waiting: [String: [JobID: ContinuousClock.Instant]] = [:]
    private var series: [String: Series] = [:]

    init(factory: any MetricsFactory) { self.factory = factory }

    struct Series {
      let enqueued: Counter
      let started: Counter
      let finished: Counter
      let failed: Counter
      let cancelledAfterStart: Counter
      let cancelled: Counter
      let wait: CoreMetrics.Timer
      let pending: Gauge
    }

    private func series(for queue: String) -> Series {
      if let existing = series[queue] { return existing }
      let dimensions = [("queue", queue)]
      let ended = "orderly_queue_jobs_ended_total"
      let made = Series(
        enqueued: Counter(
          label: "orderly_queue_jobs_enqueued_total",
          dimensions: dimensions,
          factory: factory
        ),
        started: Counter(
          label: "orderly_queue_jobs_started_total",
          dimensions: dimensions,
          factory: factory
        ),
        finished: Counter(
          label: ended,
          dimensions: dimensions + [("outcome", "finished")],
          factory: factory
        ),
        failed: Counter(
          label: ended,
          dimensions: dimensions + [("outcome", "failed")],
          factory: factory
        ),
        cancelledAfterStart: Counter(
          label: ended,
          dimensions: dimensions + [("outcome", "cancelled")],
          factory: factory
        ),
        cancelled: Counter(
          label: "orderly_queue_jobs_cancelled_total",
          dimensions: dimensions,
          factory: factory
        ),
        wait: CoreMetrics.Timer(
          label: "orderly_queue_wait_duration",
          dimensions: dimensions,
          factory: factory
        ),
        pending: Gauge(
          label: "orderly_queue_pending_jobs",
          dimensions: dimensions,
          factory: factory
        )
      )
      series[queue] = made
      return made
    }

    func record(_ event: QueueEvent) {
      // `name[key]` of a keyed queue counts under `name`.
      let queue = String(event.queueName.prefix { $0 != "[" })
      let metrics = series(for: queue)
      switch event.kind {
      case .enqueued:
        metrics.enqueued.increment()
        waiting[queue, default: [:]][event.jobID] = event.timestamp
      case .started:
        metrics.started.increment()
        if let since = waiting[queue]?.removeValue(forKey: event.jobID) {
          metrics.wait.record(duration: event.timestamp - since)
        }
      case .finished: metrics.finished.increment()
      case .failed: metrics.failed.increment()
      case .cancelled:
        metrics.cancelled.increment()
        // Cancelled in line, it never started; cancelled while it ran, it ended.
        if waiting[queue]?.removeValue(forKey: event.jobID) == nil {
          metrics.cancelledAfterStart.increment()
        }
      }
      metrics.pending.record(waiting[queue]?.count ?? 0)
    }
  }

  func recorder() -> Recorder { Recorder(factory: factory) }
}
#endif
