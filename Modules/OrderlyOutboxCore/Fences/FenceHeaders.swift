// The HTTP convention for a relay: the headers that carry a delivery's key, fence and identity.

import Foundation

/// The headers a relay sends with each delivery, so that the receiver can apply every message
/// once and refuse the writes of a worker whose lease has moved on.
///
/// - `Orderly-Key`: the message's key (its partition; empty for the default line).
/// - `Orderly-Fence`: the fence of the lease the delivery runs under (``Envelope/fence``). It
///   grows with every worker that takes the key, so a lower fence than one the receiver already
///   accepted for the key comes from a worker that lost the key: the receiver refuses it.
/// - `Idempotency-Key`: the message's identifier (``Envelope/id``), the same on every attempt:
///   the receiver applies each identifier once and answers a repeat as a success.
///
/// An outbox on SQLite has one deliverer per file and no fence: its envelopes carry the key and
/// the identifier only, and a receiver's ``FenceGate`` checks the identifier alone.
///
/// See the article "Exactly-once effects with fences".
public enum FenceHeaders {
  /// The header naming the message's key.
  public static let key = "Orderly-Key"
  /// The header carrying the delivery's fence.
  public static let fence = "Orderly-Fence"
  /// The header carrying the message's identifier.
  public static let idempotencyKey = "Idempotency-Key"
}

extension Envelope {
  /// The headers of ``FenceHeaders`` for this delivery: its key, its fence (when the store
  /// gives one) and its identifier, to send with the request a relay makes.
  public var fenceHeaders: [String: String] {
    var headers = [
      FenceHeaders.key: partition ?? "",
      FenceHeaders.idempotencyKey: id.uuidString,
    ]
    if let fence { headers[FenceHeaders.fence] = String(fence) }
    return headers
  }
}
