// How a batch handler says how far its batch got.
//
/// Thrown by the handler of ordered batches to say how far a batch got: its first `delivered`
/// messages were delivered, and the next one failed with `error`.
///
/// The outbox acknowledges those `delivered` messages, and retries the failed one (or sets it
/// aside) by the retry policy, which judges `error`; delivery goes on from it in a new batch.
/// Both stores deliver ordered batches: `Outbox.start(limit:batchesOf:...)` on SQLite and
/// `PostgresOutbox.start(limit:batchesOf:...)` on PostgreSQL.
///
/// ```swift
/// try outbox.start(batchesOf: 50) { envelopes in
///   for (index, envelope) in envelopes.enumerated() {
///     do {
///       try await ledger.apply(envelope.message, id: envelope.id)
///     } catch {
///       throw BatchDeliveryError(delivered: index, error: error)
///     }
///   }
/// }
/// ```
///
/// A count outside the batch (below 0, or as many as the batch holds) is logged as a warning
/// and taken as a failure of the batch's first message.
public struct BatchDeliveryError: Error, CustomStringConvertible {
  /// How many of the batch's first messages were delivered before the failure.
  public let delivered: Int
  /// Why the next message failed.
  public let error: any Error

  /// A failure of a batch's message at index `delivered`, after the ones before it were
  /// delivered.
  ///
  /// - Parameters:
  ///   - delivered: How many of the batch's first messages were delivered.
  ///   - error: Why the next one failed.
  public init(delivered: Int, error: any Error) {
    self.delivered = delivered
    self.error = error
  }

  /// The failed message's error, after how many came through before it.
  public var description: String { "after \(delivered) delivered: \(error)" }
}
