import Foundation
import OrderlyCore
import OrderlyRepository

/// A parsed shell command.
enum ShellLine: Equatable {
  case add(title: String, body: String)
  case list
  case show(Note.ID)
  case edit(Note.ID, title: String, body: String)
  case remove(Note.ID)
  case help
  case quit

  static let usage = [
    "add TITLE [BODY]", "list", "show ID", "edit ID TITLE [BODY]", "rm ID", "help", "quit",
  ]

  /// A line the shell cannot run, with what to do instead.
  struct Problem: Error {
    let message: String
  }

  /// Parses a line; `nil` for a blank line.
  ///
  /// Words are separated by spaces; quote a word with spaces in `"..."` or `'...'`. A title is
  /// one word; the body is every word after it.
  static func parse(_ line: String) throws(Problem) -> ShellLine? {
    let words = try split(line)
    guard let command = words.first else { return nil }
    let arguments = Array(words.dropFirst())
    switch command.lowercased() {
    case "add":
      guard let title = arguments.first else {
        throw Problem(message: "add needs a title (usage: add TITLE [BODY])")
      }
      return .add(title: title, body: arguments.dropFirst().joined(separator: " "))
    case "list", "ls":
      try noArguments(command, arguments)
      return .list
    case "show":
      return .show(try id(command, arguments, usage: "show ID"))
    case "edit":
      let id = try id(command, arguments, usage: "edit ID TITLE [BODY]", more: true)
      guard arguments.count >= 2 else {
        throw Problem(message: "edit needs a new title (usage: edit ID TITLE [BODY])")
      }
      return .edit(id, title: arguments[1], body: arguments.dropFirst(2).joined(separator: " "))
    case "rm", "delete":
      return .remove(try id(command, arguments, usage: "rm ID"))
    case "help", "?":
      try noArguments(command, arguments)
      return .help
    case "quit", "exit":
      try noArguments(command, arguments)
      return .quit
    default:
      let shown = command.count > 40 ? String(command.prefix(40)) + "…" : command
      throw Problem(message: "unknown command '\(shown)' (type 'help' for the commands)")
    }
  }

  private static func noArguments(_ command: String, _ arguments: [String]) throws(Problem) {
    if !arguments.isEmpty { throw Problem(message: "\(command) takes no arguments") }
  }

  private static func id(
    _ command: String,
    _ arguments: [String],
    usage: String,
    more: Bool = false
  ) throws(Problem) -> Note.ID {
    guard let word = arguments.first else {
      throw Problem(message: "\(command) needs a note id (usage: \(usage))")
    }
    if !more && arguments.count > 1 {
      throw Problem(message: "\(command) takes one note id (usage: \(usage))")
    }
    guard let id = Note.ID(word), id > 0 else {
      let shown = word.count > 20 ? String(word.prefix(20)) + "…" : word
      throw Problem(message: "'\(shown)' is not a note id (ids are whole numbers, like 3)")
    }
    return id
  }

  private static func split(_ line: String) throws(Problem) -> [String] {
    var words: [String] = []
    var current = ""
    var quote: Character?
    var inWord = false
    for character in line {
      if let open = quote {
        if character == open {
          quote = nil
        } else {
          current.append(character)
        }
      } else if character == "\"" || character == "'" {
        quote = character
        inWord = true
      } else if character.isWhitespace {
        if inWord { words.append(current) }
        current = ""
        inWord = false
      } else {
        current.append(character)
        inWord = true
      }
    }
    if quote != nil { throw Problem(message: "a quote is not closed") }
    if inWord { words.append(current) }
    return words
  }
}

/// Reads commands, runs each through the repository in the order typed, and prints answers in
/// that order.
///
/// Every line, good or bad, is put on one `SerialQueue` without waiting, so reading goes on
/// while a slow command runs, and each answer or error prints in its line's place.
final class ShellSession: Sendable {
  private let repository: NotesRepository
  private let lines = SerialQueue(name: "shell")
  private let interactive = isatty(STDIN_FILENO) == 1

  init(repository: NotesRepository) {
    self.repository = repository
  }

  func run() async {
    if interactive {
      write("Orderly notes shell. Type 'help' for the commands, 'quit' to leave.\n")
      prompt()
    }
    var number = 0
    for await input in InputReader.lines() {
      number += 1
      // Scripts get line numbers in errors; a person typing sees the line they just typed.
      let location = interactive ? "" : "line \(number): "
      let line: ShellLine?
      switch input {
      case .text(let text):
        do {
          line = try ShellLine.parse(text)
        } catch {
          report(location + error.message)
          continue
        }
      case .tooLong(let bytes):
        report(
          location + "the line is too long (\(bytes) bytes; the limit is \(InputReader.limit))"
        )
        continue
      case .invalidUTF8:
        report(location + "the line is not valid UTF-8 text")
        continue
      }
      guard let line else {
        if interactive { prompt() }
        continue
      }
      if line == .quit { break }
      lines.enqueueDetached { [repository, interactive] in
        let (output, failed) = await Self.execute(line, on: repository)
        if failed {
          Self.writeError(location + output)
        } else if !output.isEmpty {
          Self.write(output + "\n")
        }
        if interactive { Self.write("orderly> ") }
      }
    }
    try? await lines.waitUntilIdle()
    if interactive { write("\n") }
  }

  private func prompt() {
    lines.enqueueDetached { Self.write("orderly> ") }
  }

  private func report(_ message: String) {
    let interactive = interactive
    lines.enqueueDetached {
      Self.writeError(message)
      if interactive { Self.write("orderly> ") }
    }
  }

  private func write(_ text: String) { Self.write(text) }

  private static func write(_ text: String) {
    FileHandle.standardOutput.write(Data(text.utf8))
  }

  private static func writeError(_ message: String) {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
  }

  /// Runs one command and returns its answer, or its error and `true`.
  private static func execute(_ line: ShellLine, on repository: NotesRepository) async -> (
    String, Bool
  ) {
    do {
      switch line {
      case .add(let title, let body):
        let note = try await repository.create(title: title, body: body)
        return ("added #\(note.id) \(note.title)", false)
      case .list:
        let notes = try await repository.notes()
        if notes.isEmpty { return ("(no notes)", false) }
        return (notes.map { "#\($0.id) \($0.title)" }.joined(separator: "\n"), false)
      case .show(let id):
        let note = try await repository.note(id: id)
        var text = "#\(note.id) \(note.title)"
        if !note.body.isEmpty { text += "\n  \(note.body)" }
        return (text, false)
      case .edit(let id, let title, let body):
        let note = try await repository.update(id: id, title: title, body: body)
        return ("updated #\(note.id) \(note.title)", false)
      case .remove(let id):
        try await repository.delete(id: id)
        return ("deleted #\(id)", false)
      case .help:
        return (
          "Commands:\n" + ShellLine.usage.map { "  \($0)" }.joined(separator: "\n")
            + "\nQuote words with spaces: add \"buy milk\" two litres", false
        )
      case .quit:
        return ("", false)
      }
    } catch {
      return (error.description, true)
    }
  }
}
