import Foundation
import OrderlyCore
import OrderlyOutbox
import Synchronization

/// A change to a note, as an app would send it to its server.
struct Change: Codable, Sendable, Equatable, CustomStringConvertible {
  var note: String
  var text: String

  init(_ note: String, _ text: String) {
    self.note = note
    self.text = text
  }

  var description: String { "\(note):\(text)" }
}

/// The server could not be reached.
struct ServerDown: Error, CustomStringConvertible {
  var description: String { "the server is down" }
}

/// A fake server: applies each message once (by its identifier), can be down, can refuse
/// messages for good, and counts how many deliveries run at once.
final class FakeServer: Sendable {
  private struct State {
    var applied: [Change] = []
    var appliedIDs: Set<UUID> = []
    var deliveries = 0
    var duplicates = 0
    var down = false
    var refused: Set<String> = []
    var running = 0
    var mostRunning = 0
    var attempts: [Int] = []
  }

  private let state = Mutex(State())

  /// What the server applied, in order.
  var applied: [Change] { state.withLock(announcingTo: self) { $0.applied } }
  /// How many deliveries arrived, duplicates included.
  var deliveries: Int { state.withLock(announcingTo: self) { $0.deliveries } }
  /// How many deliveries carried an identifier already applied.
  var duplicates: Int { state.withLock(announcingTo: self) { $0.duplicates } }
  /// The most deliveries that ran at once.
  var mostRunning: Int { state.withLock(announcingTo: self) { $0.mostRunning } }
  /// The attempt number of each delivery, in order.
  var attempts: [Int] { state.withLock(announcingTo: self) { $0.attempts } }

  func setDown(_ down: Bool) { state.withLock(announcingTo: self) { $0.down = down } }
  func refuse(_ text: String) { state.withLock(announcingTo: self) { _ = $0.refused.insert(text) } }
  func accept(_ text: String) { state.withLock(announcingTo: self) { _ = $0.refused.remove(text) } }

  /// The delivery closure.
  @Sendable func deliver(_ envelope: Envelope<Change>) async throws {
    try state.withLock(announcingTo: self) { state in
      state.deliveries += 1
      state.attempts.append(envelope.attempt)
      if state.down { throw ServerDown() }
      if state.refused.contains(envelope.message.text) {
        throw PermanentDeliveryFailure("the server refused \(envelope.message)")
      }
      state.running += 1
      state.mostRunning = max(state.mostRunning, state.running)
    }
    // Lets other lines run meanwhile, so that side-by-side delivery can be seen.
    await Task.yield()
    state.withLock(announcingTo: self) { state in
      state.running -= 1
      if state.appliedIDs.insert(envelope.id).inserted {
        state.applied.append(envelope.message)
      } else {
        state.duplicates += 1
      }
    }
  }
}

extension AsyncStream<OutboxEvent>.Iterator {
  /// The next event that matches, skipping the others.
  mutating func next(where matches: (OutboxEvent) -> Bool) async -> OutboxEvent? {
    while let event = await next() {
      if matches(event) { return event }
    }
    return nil
  }
}

extension OutboxEvent {
  var isRetrying: Bool {
    if case .retrying = self { return true }
    return false
  }

  var isDeadLettered: Bool {
    if case .deadLettered = self { return true }
    return false
  }

  var isDelivered: Bool {
    if case .delivered = self { return true }
    return false
  }
}

/// A retry policy without jitter, so waits are exact: 1 s, 2 s, 4 s, ...
func exactRetry(
  maximumAttempts: Int? = nil,
  isRetryable: @escaping @Sendable (any Error) -> Bool = { !($0 is PermanentDeliveryFailure) }
) throws -> RetryPolicy {
  try RetryPolicy(jitter: 0, maximumAttempts: maximumAttempts, isRetryable: isRetryable)
}
