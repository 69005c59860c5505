// Where an outbox's events go out to every subscriber.

import OrderlyCore

/// The listeners of an outbox's ``DurableOutbox/events``.
///
/// Events are emitted under the hub's lock, so every listener receives them in one order, the
/// order they were emitted; a line emits its events one after another.
package final class OutboxEventHub: Sendable {
  private struct Listeners {
    var continuations: [UInt64: AsyncStream<OutboxEvent>.Continuation] = [:]
    var lastToken: UInt64 = 0
    var finished = false
  }

  private let listeners = OrderlyLock(Listeners())

  /// A new listener that receives every event emitted from now on.
  package init() {}

  package func subscribe() -> AsyncStream<OutboxEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: OutboxEvent.self)
    let open = listeners.withLock(announcingTo: self) { listeners in
      guard !listeners.finished else { return false }
      listeners.lastToken += 1
      listeners.continuations[listeners.lastToken] = continuation
      return true
    }
    if !open { continuation.finish() }
    return stream
  }

  /// Delivers an event to every listener, dropping listeners whose sequence has ended.
  package func emit(_ event: OutboxEvent) {
    listeners.withLock(announcingTo: self) { listeners in
      for (token, continuation) in listeners.continuations {
        if case .terminated = continuation.yield(event) { listeners.continuations[token] = nil }
      }
    }
  }

  /// Ends every listener's sequence: the outbox closed.
  package func finish() {
    let ended = listeners.withLock(announcingTo: self) { listeners in
      listeners.finished = true
      defer { listeners.continuations = [:] }
      return Array(listeners.continuations.values)
    }
    for continuation in ended { continuation.finish() }
  }

  deinit {
    listeners.withLock(announcingTo: self) { listeners in
      for continuation in listeners.continuations.values { continuation.finish() }
      listeners.continuations = [:]
    }
  }
}
