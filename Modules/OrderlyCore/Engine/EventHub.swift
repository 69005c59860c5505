/// The listeners of a queue's `events`, shared by every line that reports to them.
///
/// A serial or concurrent queue has one hub; a keyed queue's per-key lines all report to the
/// keyed queue's hub. Lines emit while holding their own lock, so events of one line reach
/// listeners in the order they happened. Lock order: a line's lock, then the hub's.
final class EventHub: Sendable {
  private struct Listeners {
    var continuations: [UInt64: AsyncStream<QueueEvent>.Continuation] = [:]
    var lastToken: UInt64 = 0
  }

  private let listeners = OrderlyLock(Listeners())
  /// Read without the lock, so emitting costs one load when nobody listens.
  private let listenerCount = OrderlyAtomic<Int>(0)

  /// A new listener that receives every event emitted from now on.
  func subscribe() -> AsyncStream<QueueEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: QueueEvent.self)
    listeners.withLock(announcingTo: self) { listeners in
      listeners.lastToken += 1
      listeners.continuations[listeners.lastToken] = continuation
      listenerCount.store(listeners.continuations.count, ordering: .releasing)
    }
    return stream
  }

  /// Whether anyone listens: one atomic load.
  ///
  /// Emitters check it before gathering an event's details, which may cost more than the load.
  var hasListeners: Bool {
    listenerCount.load(ordering: .acquiring) > 0
  }

  /// Delivers an event to every listener, dropping listeners whose sequence has ended.
  ///
  /// With no listener this is one atomic load: no clock read, no allocation, no lock.
  ///
  /// `yield` never runs the listener's code; a listener that went away is noticed here, not in
  /// an `onTermination` callback, which could run inside a task's cancellation and would have to
  /// take a queue's lock.
  func emit(_ kind: QueueEvent.Kind, jobID: JobID, jobName: String?, queueName: String) {
    guard listenerCount.load(ordering: .acquiring) > 0 else { return }
    let event = QueueEvent(
      kind: kind,
      jobID: jobID,
      jobName: jobName,
      queueName: queueName,
      timestamp: .now
    )
    listeners.withLock(announcingTo: self) { listeners in
      for (token, continuation) in listeners.continuations {
        if case .terminated = continuation.yield(event) { listeners.continuations[token] = nil }
      }
      listenerCount.store(listeners.continuations.count, ordering: .releasing)
    }
  }

  /// Ends every listener's sequence once the queue and all of its lines are freed.
  deinit {
    listeners.withLock(announcingTo: self) { listeners in
      for continuation in listeners.continuations.values { continuation.finish() }
      listeners.continuations = [:]
    }
  }
}
