// How an outbox merges a new message into a pending one for the same entity.
//
/// How an outbox folds a new message into a pending one for the same entity: two edits of one
/// note become one request.
///
/// When a message is appended, the outbox looks for the newest message still waiting for the
/// same ``entity`` in the same line. If there is one, and its delivery has never begun (in this
/// process or an earlier one: a message that may have reached the receiver keeps its body, so
/// its identifier always stands for one body), ``merge`` is asked to fold the new message into
/// it; the result replaces the pending message, which
/// keeps its place, identifier and sequence, and nothing new is added (the append reports
/// ``OutboxEvent/merged(into:sequence:partition:)`` and returns the pending message's
/// identifier). If `merge` returns `nil`, the new message is appended as usual.
///
/// The merged message is delivered at the pending message's place: merge only messages whose
/// combined effect may arrive that early (a note's later edit folded into its earlier edit or
/// its creation), and return `nil` otherwise (a deletion after an edit, say).
public struct Coalescing<Message: Sendable>: Sendable {
  /// The entity a message is about, or `nil` for a message that is never merged.
  public let entity: @Sendable (Message) -> String?
  /// The pending message with the new one folded in, or `nil` to append the new one.
  public let merge: @Sendable (_ pending: Message, _ new: Message) -> Message?

  /// Coalescing by entity.
  ///
  /// - Parameters:
  ///   - entity: The entity a message is about; `nil` never merges it.
  ///   - merge: Folds `new` into `pending`, or returns `nil` to keep them apart.
  public init(
    entity: @escaping @Sendable (Message) -> String?,
    merge: @escaping @Sendable (_ pending: Message, _ new: Message) -> Message?
  ) {
    self.entity = entity
    self.merge = merge
  }
}
