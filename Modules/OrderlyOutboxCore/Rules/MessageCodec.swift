// How a message is written, merged and read back, the same in every store.

package import Foundation

/// A message ready to be written by a store: encoded, with its line, its entity and its headers.
package struct PreparedMessage<Message: Sendable>: Sendable {
  /// The message as it was appended.
  package let message: Message
  /// Its JSON, keys sorted.
  package let payload: Data
  /// The line it joins; `nil` for the default line.
  package let partition: String?
  /// The entity it may be merged by (``Coalescing/entity``); `nil` when it is never merged.
  package let entity: String?
  /// The headers, as the store keeps them (``StoredHeaders/encode(_:)``).
  package let headers: String?
  /// The earliest time it may be delivered; `nil` for at once.
  package var notBefore: Date? = nil
  /// The key it holds while it is pending (``UniqueKeys``); `nil` for none.
  package var uniqueKey: String? = nil
  /// How long, in seconds, its unique key stays held after the append, delivered or not;
  /// `nil` for while it is pending.
  package var uniqueFor: Double? = nil
}

/// How every store turns messages into stored bytes and back: one encoder, one merge rule.
package struct MessageCodec<Message: Codable & Sendable>: Sendable {
  /// The line a message joins when its append names none.
  package let partitionOfMessage: (@Sendable (Message) -> String?)?
  /// How new messages are folded into pending ones; `nil` never merges.
  package let coalescing: Coalescing<Message>?

  /// A codec with the outbox's partition closure and coalescing.
  ///
  /// - Parameters:
  ///   - partition: The line a message joins when its append names none.
  ///   - coalescing: How new messages are folded into pending ones.
  package init(
    partition: (@Sendable (Message) -> String?)?,
    coalescing: Coalescing<Message>?
  ) {
    self.partitionOfMessage = partition
    self.coalescing = coalescing
  }

  /// The encoder every payload is written with (sorted keys: one message, one byte string).
  package static func encoder() -> JSONEncoder {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    return encoder
  }

  /// Encodes messages for an append, each with its line and entity.
  ///
  /// - Parameters:
  ///   - messages: The messages, in order.
  ///   - partition: The line the append names; `nil` asks the partition closure.
  ///   - headers: The headers stored with each of them.
  ///   - deliverAfter: The earliest time they may be delivered; `nil` for at once.
  ///   - uniqueKeys: One key per message (`nil` for none), or none at all.
  ///   - uniqueFor: How long the keys stay held after the append; `nil` for while pending.
  /// - Returns: The messages, ready to be written.
  /// - Throws: ``OutboxError/cannotEncode(reason:)``, ``OutboxError/invalidUniqueKey(_:)``;
  ///   nothing is prepared then.
  package func prepare(
    _ messages: [Message],
    partition: String?,
    headers: [String: String],
    deliverAfter: Date? = nil,
    uniqueKeys: [String?]? = nil,
    uniqueFor: Duration? = nil
  ) throws(OutboxError) -> [PreparedMessage<Message>] {
    if let uniqueKeys {
      try UniqueKeys.check(uniqueKeys, messages: messages.count, window: uniqueFor)
    }
    let window = uniqueFor.map(UniqueKeys.seconds)
    let encoder = Self.encoder()
    let stored = StoredHeaders.encode(headers)
    var prepared: [PreparedMessage<Message>] = []
    prepared.reserveCapacity(messages.count)
    for (index, message) in messages.enumerated() {
      let uniqueKey = uniqueKeys?[index]
      let payload: Data
      do {
        payload = try encoder.encode(message)
      } catch {
        throw .cannotEncode(reason: "\(error)")
      }
      prepared.append(
        PreparedMessage(
          message: message,
          payload: payload,
          partition: partition ?? partitionOfMessage?(message),
          // A message with a not-before time or a unique key is never merged, nor merged
          // into: its key names it, and stays with what was appended under it.
          entity: deliverAfter == nil && uniqueKey == nil ? coalescing?.entity(message) : nil,
          headers: stored,
          notBefore: deliverAfter,
          uniqueKey: uniqueKey,
          uniqueFor: uniqueKey == nil ? nil : window
        )
      )
    }
    return prepared
  }

  /// The payload of a pending message with a new one folded in, or `nil` if it must be
  /// appended instead.
  ///
  /// The rule every store follows: a message whose delivery ever began (`attempts > 0`, here
  /// or in a process that died or stopped since) may have reached the receiver under its
  /// identifier, and is never changed; nor is one the store marks as being delivered, one that
  /// no longer decodes, or one the merge closure declines.
  ///
  /// - Parameters:
  ///   - prepared: The message being appended.
  ///   - pending: The newest pending message's stored payload.
  ///   - attempts: How many deliveries of it began.
  ///   - delivering: Whether the store knows it is being delivered right now.
  /// - Returns: The merged payload, or `nil`.
  package func merge(
    _ prepared: PreparedMessage<Message>,
    into pending: Data,
    attempts: Int,
    delivering: Bool = false
  ) -> Data? {
    guard let coalescing, attempts == 0, !delivering,
      let old = try? JSONDecoder().decode(Message.self, from: pending),
      let merged = coalescing.merge(old, prepared.message)
    else { return nil }
    return try? Self.encoder().encode(merged)
  }

  /// A stored payload as the message, or why it no longer decodes (the reason its dead letter
  /// gives).
  ///
  /// - Parameter payload: The stored JSON.
  /// - Returns: The message, or the reason.
  package static func decode(_ payload: Data) -> Result<Message, DecodingFailure> {
    do {
      return .success(try JSONDecoder().decode(Message.self, from: payload))
    } catch {
      return .failure(
        DecodingFailure(reason: "the message no longer decodes as \(Message.self): \(error)")
      )
    }
  }
}

/// Why a stored payload no longer decodes as the outbox's message type.
package struct DecodingFailure: Error, Sendable {
  /// The reason, as a dead letter records it.
  package let reason: String
}

/// Headers as stores keep them: a JSON object of strings, keys sorted, or nothing.
package enum StoredHeaders {
  /// Headers as stored; `nil` when there are none.
  ///
  /// - Parameter headers: The headers.
  /// - Returns: Their JSON text, or `nil`.
  package static func encode(_ headers: [String: String]) -> String? {
    guard !headers.isEmpty else { return nil }
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    guard let data = try? encoder.encode(headers) else { return nil }
    return String(decoding: data, as: UTF8.self)
  }

  /// Headers as read; a missing or unreadable column gives none (headers are advisory: a
  /// message is delivered without them rather than not at all).
  ///
  /// - Parameter text: The stored JSON text.
  /// - Returns: The headers.
  package static func decode(_ text: String?) -> [String: String] {
    guard let text, let data = text.data(using: .utf8),
      let headers = try? JSONDecoder().decode([String: String].self, from: data)
    else { return [:] }
    return headers
  }
}
