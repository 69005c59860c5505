// Unique keys: an append that names a key a pending message already holds appends nothing.

public import Foundation

/// What an append with a unique key did: stored the message, or found the key held and
/// stored nothing.
///
/// ```swift
/// switch try await outbox.append(order, uniqueKey: "order-\(order.id)") {
/// case .appended(let id): log("queued \(id)")
/// case .duplicate(let id): log("already queued as \(id)")
/// }
/// ```
public enum UniqueAppend: Sendable, Hashable, CustomStringConvertible {
  /// The message was stored under this identifier.
  case appended(UUID)
  /// Nothing was stored: the key is held by the message with this identifier (pending, or
  /// appended within the window the append gave).
  case duplicate(of: UUID)

  /// The identifier of the message that holds the key: the new one, or the one found.
  public var id: UUID {
    switch self {
    case .appended(let id), .duplicate(of: let id): id
    }
  }

  /// Whether this append stored its message.
  public var wasAppended: Bool {
    if case .appended = self { return true }
    return false
  }

  /// `appended <id>` or `duplicate of <id>`.
  public var description: String {
    switch self {
    case .appended(let id): "appended \(id)"
    case .duplicate(let id): "duplicate of \(id)"
    }
  }
}

/// The rule every store keeps for unique keys: which keys are accepted, and which messages are
/// never merged.
///
/// A key is held while a message appended with it is pending (not yet delivered, not a dead
/// letter) and, when the append gave a window, until the window has passed since that append,
/// delivered or not. A store enforces it with a unique index, never by reading first and
/// writing after.
package enum UniqueKeys {
  /// The longest key, in UTF-8 bytes.
  package static let maximumLength = 200

  /// Checks the keys and the window of an append.
  ///
  /// - Parameters:
  ///   - keys: One per message (`nil` for a message without one).
  ///   - messages: How many messages the append has.
  ///   - window: How long a key stays held after its append; `nil` for while it is pending.
  /// - Throws: ``OutboxError/invalidUniqueKey(_:)`` saying what is wrong.
  package static func check(
    _ keys: [String?],
    messages: Int,
    window: Duration?
  ) throws(OutboxError) {
    guard keys.count == messages else {
      throw .invalidUniqueKey(
        "\(keys.count) unique keys were given for \(messages) messages; give one per message "
          + "(nil for a message without one)"
      )
    }
    for key in keys {
      guard let key else { continue }
      guard !key.isEmpty else {
        throw .invalidUniqueKey("a unique key is empty; give a non-empty string, or nil for none")
      }
      guard key.utf8.count <= maximumLength else {
        throw .invalidUniqueKey(
          "the unique key '\(key.prefix(40))...' is \(key.utf8.count) bytes long; the longest "
            + "is \(maximumLength) bytes (use a hash of a longer key)"
        )
      }
    }
    if let window {
      guard window > .zero else {
        throw .invalidUniqueKey(
          "the window \(window) is not longer than zero; give a positive duration, or nil to "
            + "hold the key while its message is pending"
        )
      }
      guard window <= .seconds(maximumWindowSeconds) else {
        throw .invalidUniqueKey(
          "the window \(window) is longer than \(maximumWindowSeconds / 86_400) days, the "
            + "longest accepted"
        )
      }
    }
  }

  /// The longest window, in seconds (ten years).
  package static let maximumWindowSeconds: Int64 = 10 * 365 * 86_400

  /// A window in seconds, as stores keep it.
  ///
  /// - Parameter window: The window.
  /// - Returns: Its length in seconds, fractions included.
  package static func seconds(_ window: Duration) -> Double {
    let (seconds, attoseconds) = window.components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
