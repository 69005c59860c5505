// A receiver's side of the fence convention: refuse a lower fence, apply each message once.

public import Foundation
import OrderlyCore

/// What a ``FenceGate`` did with a delivery.
public enum FenceAdmission: Sendable, Equatable, CustomStringConvertible {
  /// The effect ran and succeeded: answer with success.
  case applied
  /// The message was applied before (its identifier is remembered): nothing ran; answer with
  /// success, so that the outbox acknowledges it.
  case repeated
  /// The delivery's fence is lower than one already accepted for its key: it comes from a worker
  /// whose lease has moved on. Nothing ran; answer `409 Conflict`.
  case stale(fence: Int64, lastFence: Int64)
  /// Another delivery of the same key is being applied (the key's previous holder, still
  /// running): nothing ran; answer `409 Conflict`, and the outbox tries again later.
  case busy
  /// The headers were missing or unreadable: nothing ran; answer `400 Bad Request`.
  case malformed(reason: String)

  /// The HTTP status a receiver answers with: 200, 200, 409, 409 and 400.
  public var statusCode: Int {
    switch self {
    case .applied, .repeated: 200
    case .stale, .busy: 409
    case .malformed: 400
    }
  }

  /// One line saying what happened.
  public var description: String {
    switch self {
    case .applied: "applied"
    case .repeated: "repeated: applied before, nothing done"
    case .stale(let fence, let lastFence):
      "refused: fence \(fence) is lower than \(lastFence), already accepted for this key"
    case .busy: "refused for now: another delivery of this key is being applied"
    case .malformed(let reason): "refused: \(reason)"
    }
  }
}

/// The receiver's check of the fence convention (``FenceHeaders``), for one receiving process.
///
/// ``apply(headers:_:)`` runs a delivery's effect only if its fence is not lower than the
/// highest fence accepted for its key, its identifier was not applied before, and no other
/// delivery of its key is being applied; it remembers the identifier once the effect succeeds.
/// A worker that was paused past its lease (a stopped process, a long garbage collection, a
/// network partition) and wakes up to deliver the message its key's next holder already
/// delivered is refused, so its write never lands after a newer one.
///
/// ```swift
/// let gate = FenceGate()
/// // In the request handler:
/// let admission = try await gate.apply(headers: request.headers) {
///   try await ledger.record(request.body)
/// }
/// return Response(status: admission.statusCode)
/// ```
///
/// The gate keeps the highest fence of every key it saw and the last `remembering` identifiers
/// applied, in memory: for one receiving process. A receiver with several processes, or one
/// that must remember across restarts, keeps the same two facts in its database, in the
/// transaction of the effect itself (on PostgreSQL: `PostgresFences` in `OrderlyPostgres`).
///
/// Deliveries without a fence (an outbox on SQLite) are checked by their identifier alone.
public final class FenceGate: Sendable {
  private struct State {
    var fences: [String: Int64] = [:]
    var running: Set<String> = []
    var applied: Set<UUID> = []
    var appliedOrder: [UUID] = []
    var oldest = 0
  }

  private let capacity: Int
  private let state = OrderlyLock(State())

  /// Creates a gate that remembers the last `remembering` identifiers it applied.
  ///
  /// - Parameter remembering: How many identifiers to remember (a number below 1 counts as 1);
  ///   a repeat of an older one is applied again. The outbox delivers a message again only
  ///   until its acknowledgement commits, so a few minutes of traffic are enough.
  public init(remembering: Int = 100_000) {
    capacity = max(1, remembering)
  }

  /// Runs `effect` if the delivery described by `headers` may be applied, and says what
  /// happened.
  ///
  /// - Parameters:
  ///   - headers: The request's headers; names are matched without regard to case.
  ///   - effect: The delivery's effect. If it throws, nothing is remembered and a repeat of the
  ///     delivery may apply it again.
  /// - Returns: What the gate did; ``FenceAdmission/statusCode`` is the answer to send.
  /// - Throws: What `effect` threw.
  public func apply(
    headers: [String: String],
    _ effect: () async throws -> Void
  ) async throws -> FenceAdmission {
    switch Self.read(headers) {
    case .failure(let problem): return .malformed(reason: problem.reason)
    case .success(let delivery):
      return try await apply(key: delivery.key, fence: delivery.fence, id: delivery.id, effect)
    }
  }

  /// Runs `effect` if the delivery of message `id` of `key` under `fence` may be applied, and
  /// says what happened.
  ///
  /// - Parameters:
  ///   - key: The message's key (``FenceHeaders/key``).
  ///   - fence: The delivery's fence, or `nil` when the outbox gives none.
  ///   - id: The message's identifier.
  ///   - effect: The delivery's effect. If it throws, nothing is remembered.
  /// - Returns: What the gate did.
  /// - Throws: What `effect` threw.
  public func apply(
    key: String,
    fence: Int64?,
    id: UUID,
    _ effect: () async throws -> Void
  ) async throws -> FenceAdmission {
    let admission = state.withLock(announcingTo: self) { state -> FenceAdmission? in
      if let fence, let last = state.fences[key], fence < last {
        return .stale(fence: fence, lastFence: last)
      }
      if state.running.contains(key) { return .busy }
      if let fence { state.fences[key] = fence }
      if state.applied.contains(id) { return .repeated }
      state.running.insert(key)
      return nil
    }
    if let admission { return admission }
    do {
      try await effect()
    } catch {
      state.withLock(announcingTo: self) { _ = $0.running.remove(key) }
      throw error
    }
    state.withLock(announcingTo: self) { state in
      state.running.remove(key)
      remember(id, in: &state)
    }
    return .applied
  }

  /// The highest fence accepted for `key`, or `nil` if the gate saw none.
  public func lastFence(of key: String) -> Int64? {
    state.withLock(announcingTo: self) { $0.fences[key] }
  }

  private func remember(_ id: UUID, in state: inout State) {
    guard state.applied.insert(id).inserted else { return }
    if state.appliedOrder.count < capacity {
      state.appliedOrder.append(id)
      return
    }
    state.applied.remove(state.appliedOrder[state.oldest])
    state.appliedOrder[state.oldest] = id
    state.oldest = (state.oldest + 1) % capacity
  }

  /// What the headers say, or why they cannot be read.
  struct Delivery: Equatable {
    var key: String
    var fence: Int64?
    var id: UUID
  }

  /// Why headers cannot be read.
  struct Problem: Error, Equatable {
    var reason: String
  }

  static func read(_ headers: [String: String]) -> Result<Delivery, Problem> {
    func value(_ name: String) -> String? {
      headers.first { $0.key.caseInsensitiveCompare(name) == .orderedSame }?.value
    }
    guard let idText = value(FenceHeaders.idempotencyKey) else {
      return .failure(
        Problem(reason: "no \(FenceHeaders.idempotencyKey) header: send the message's id")
      )
    }
    guard let id = UUID(uuidString: idText.trimmingCharacters(in: .whitespaces)) else {
      return .failure(
        Problem(reason: "\(FenceHeaders.idempotencyKey) '\(idText)' is not a message id (a UUID)")
      )
    }
    var fence: Int64?
    if let fenceText = value(FenceHeaders.fence) {
      guard let number = Int64(fenceText.trimmingCharacters(in: .whitespaces)) else {
        return .failure(
          Problem(reason: "\(FenceHeaders.fence) '\(fenceText)' is not a whole number")
        )
      }
      fence = number
    }
    guard let key = value(FenceHeaders.key) else {
      return .failure(
        Problem(reason: "no \(FenceHeaders.key) header: send the message's key (empty for none)")
      )
    }
    return .success(Delivery(key: key, fence: fence, id: id))
  }
}
