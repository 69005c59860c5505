public import Foundation

/// A note: a title, a body, and when it was created and last changed.
public struct Note: Sendable, Codable, Identifiable, Hashable {
  /// A note's identifier: a positive number, assigned by the service that creates the note.
  public typealias ID = Int64

  /// The note's identifier, unique within its service.
  public let id: ID
  /// The note's title.
  public var title: String
  /// The note's text; may be empty.
  public var body: String
  /// When the note was created.
  public let createdAt: Date
  /// When the note was last changed; equal to ``createdAt`` until the first update.
  public var updatedAt: Date

  /// Creates a note value.
  ///
  /// Services create notes; this initializer is for services and tests.
  ///
  /// - Parameters:
  ///   - id: The note's identifier.
  ///   - title: The title.
  ///   - body: The text.
  ///   - createdAt: When it was created.
  ///   - updatedAt: When it was last changed; defaults to `createdAt`.
  public init(id: ID, title: String, body: String, createdAt: Date, updatedAt: Date? = nil) {
    self.id = id
    self.title = title
    self.body = body
    self.createdAt = createdAt
    self.updatedAt = updatedAt ?? createdAt
  }

  /// `note 3: todo`: the note as the activity log and the demo show it.
  public var summary: String { "note \(id): \(title)" }

  /// `1 note`, `3 notes`.
  ///
  /// - Parameter count: How many notes.
  /// - Returns: The count with the noun in the right number.
  public static func count(_ count: Int) -> String {
    count == 1 ? "1 note" : "\(count) notes"
  }
}
