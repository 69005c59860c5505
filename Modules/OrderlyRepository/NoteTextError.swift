/// Why a note's title or text cannot be stored as given.
///
/// Every ``NotesService`` must store exactly what it acknowledges, so text that a store would
/// change is refused before it reaches one: ``NotesRepository`` checks every title and body with
/// ``check(title:body:)``, and ``NotesError`` carries this error's description as its reason.
///
/// - A title must contain more than spaces, and is one line: no control characters at all
///   (no newline, tab, escape or NUL).
/// - A body may hold newlines, tabs and other control characters, but no NUL character:
///   SQLite, through GRDB, would cut the text at the first NUL.
public enum NoteTextError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The title is empty or only spaces.
  case emptyTitle
  /// The title holds a control character, such as a newline or an escape.
  case controlCharacterInTitle(Unicode.Scalar)
  /// The body holds a NUL character.
  case nulInBody

  /// Checks a title and a body before they are stored.
  ///
  /// - Parameters:
  ///   - title: The note's title.
  ///   - body: The note's text.
  /// - Throws: The first problem found: ``emptyTitle``, ``controlCharacterInTitle(_:)`` or
  ///   ``nulInBody``.
  public static func check(title: String, body: String) throws(NoteTextError) {
    if let control = title.unicodeScalars.first(where: { $0.properties.generalCategory == .control }
    ) {
      throw .controlCharacterInTitle(control)
    }
    if title.allSatisfy(\.isWhitespace) { throw .emptyTitle }
    if body.unicodeScalars.contains("\0") { throw .nulInBody }
  }

  /// What was wrong and what to do, as in
  /// `a title cannot contain a control character (U+0000, NUL); remove it`.
  public var description: String {
    switch self {
    case .emptyTitle:
      "a note needs a title (it was empty)"
    case .controlCharacterInTitle(let scalar):
      "a title cannot contain a control character (\(Self.name(of: scalar))); "
        + "a title is one line of text: remove it"
    case .nulInBody:
      "the text cannot contain a NUL character (U+0000): it would be cut there when stored; "
        + "remove it"
    }
  }

  /// The text with control characters and bidirectional controls written as escapes (`\n`,
  /// `\u{1B}`, `\u{202E}`), so that it stays on one line and a terminal shows it as it is
  /// instead of obeying it (a right-to-left override would show later characters reversed).
  ///
  /// - Parameter text: Text from a note, a path or a person's input.
  /// - Returns: The same text with every control character and bidirectional control escaped.
  public static func escapingControlCharacters(in text: String) -> String {
    var result = ""
    for scalar in text.unicodeScalars {
      if scalar.properties.generalCategory == .control || isBidirectionalControl(scalar) {
        result += scalar.escaped(asASCII: true)
      } else {
        result.unicodeScalars.append(scalar)
      }
    }
    return result
  }

  /// Whether the scalar reorders the text around it on a terminal.
  ///
  /// These are the bidirectional marks, embeddings, overrides and isolates (U+061C, U+200E,
  /// U+200F, U+202A to U+202E, U+2066 to U+2069). Printed as they are, they make shown text read
  /// differently from what is stored.
  private static func isBidirectionalControl(_ scalar: Unicode.Scalar) -> Bool {
    switch scalar.value {
    case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
    default: false
    }
  }

  private static func name(of scalar: Unicode.Scalar) -> String {
    let hex = String(scalar.value, radix: 16, uppercase: true)
    let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    let names: [UInt32: String] = [
      0x00: "NUL", 0x09: "tab", 0x0A: "newline", 0x0D: "carriage return", 0x1B: "escape",
      0x7F: "delete",
    ]
    return names[scalar.value].map { "\(code), \($0)" } ?? code
  }
}
