import Foundation
import OrderlyCore
import OrderlyRepository
import Synchronization

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
      let shown = ShellSession.escaped(
        command.count > 40 ? String(command.prefix(40)) + "…" : command
      )
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
      let shown = ShellSession.escaped(word.count > 20 ? String(word.prefix(20)) + "…" : word)
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
/// while a slow command runs, and each answer or error prints in its line's place. Ctrl-C stops
/// reading and lets the accepted commands finish; a second Ctrl-C cancels those not started yet
/// and names them.
final class ShellSession: Sendable {
  /// How a session ended.
  enum Outcome: Equatable {
    /// The input ended or `quit` was typed, and every line succeeded.
    case finished
    /// The input ended or `quit` was typed, and at least one line failed.
    case someLinesFailed
    /// Ctrl-C stopped the session.
    case interrupted
  }

  private let repository: NotesRepository
  private let lines = SerialQueue(name: "shell")
  private let interactive = isatty(STDIN_FILENO) == 1
  /// Whether any line failed, to set the exit status.
  private let failures = Mutex(false)
  /// Accepted commands that have not ended, by line number, as typed.
  private let unfinished = Mutex<[Int: String]>([:])

  init(repository: NotesRepository) {
    self.repository = repository
  }

  func run() async -> Outcome {
    if interactive {
      write("Orderly notes shell. Type 'help' for the commands, 'quit' to leave.\n")
      prompt()
    }
    let (inputs, continuation) = InputReader.lines()
    var number = 0
    var interrupts = 0
    var stopping = false
    for await input in inputs {
      if case .interrupted(let count) = input {
        interrupts = count
        let waiting = unfinished.withLock(announcingTo: self) { $0.count }
        if count == 1 && waiting > 0 {
          Self.writeError(
            "interrupted: finishing the \(Self.count(waiting, "command")) already typed "
              + "(Ctrl-C again to stop at once)"
          )
        } else if count > 1 {
          lines.cancelAll()
        }
        if !stopping || count > 1 { drain(into: continuation) }
        stopping = true
        continue
      }
      if case .drained = input { break }
      if stopping { continue }
      let text: String
      switch input {
      case .text(let line): text = line
      case .endOfInput, .drained, .interrupted:
        stopping = true
        drain(into: continuation)
        continue
      case .tooLong(let bytes):
        number += 1
        report(
          location(number) + "the line is too long (\(bytes) bytes; the limit is "
            + "\(InputReader.limit))"
        )
        continue
      case .invalidUTF8:
        number += 1
        report(location(number) + "the line is not valid UTF-8 text")
        continue
      }
      number += 1
      let line: ShellLine?
      do {
        line = try ShellLine.parse(text)
      } catch {
        report(location(number) + error.message)
        continue
      }
      guard let line else {
        if interactive { prompt() }
        continue
      }
      if line == .quit {
        stopping = true
        drain(into: continuation)
        continue
      }
      enqueue(line, text: text, number: number)
    }
    let notApplied = unfinished.withLock(announcingTo: self) { $0 }.sorted { $0.key < $1.key }
    if !notApplied.isEmpty {
      Self.writeError("stopped by Ctrl-C; not applied:")
      for (line, text) in notApplied {
        Self.writeError("  " + location(line) + Self.escaped(text), prefix: "")
      }
    }
    if interactive { write("\n") }
    if interrupts > 0 { return .interrupted }
    return failures.withLock(announcingTo: self) { $0 } ? .someLinesFailed : .finished
  }

  /// `line 3: ` in a script; nothing for a person typing, who sees the line they just typed.
  private func location(_ number: Int) -> String {
    interactive ? "" : "line \(number): "
  }

  /// Puts a marker job in line that says when every job before it has ended.
  private func drain(into continuation: AsyncStream<InputLine>.Continuation) {
    lines.enqueueDetached { continuation.yield(.drained) }
  }

  private func enqueue(_ line: ShellLine, text: String, number: Int) {
    unfinished.withLock(announcingTo: self) { $0[number] = text }
    let location = location(number)
    lines.enqueueDetached { [self] in
      // On a terminal, a command that takes more than a second says it is still running. A real
      // one-second wait on purpose: it is a message for the person at the terminal, on wall
      // time, not logic that tests drive (scripts never see it).
      let notice =
        interactive
        ? Task {
          try await Task.sleep(for: .seconds(1))
          Self.write("(still running: \(Self.escaped(text)))\n")
        } : nil
      let (output, failed) = await Self.execute(line, on: repository)
      notice?.cancel()
      // A command cancelled by a second Ctrl-C while it ran failed because of it: it stays
      // among those not applied, which the session names, and its error is not printed.
      if failed && Task.isCancelled { return }
      unfinished.withLock(announcingTo: self) { _ = $0.removeValue(forKey: number) }
      if failed {
        failures.withLock(announcingTo: self) { $0 = true }
        Self.writeError(location + output)
      } else if !output.isEmpty {
        Self.write(output + "\n")
      }
      if interactive { Self.write("orderly> ") }
    }
  }

  private func prompt() {
    lines.enqueueDetached { Self.write("orderly> ") }
  }

  private func report(_ message: String) {
    let interactive = interactive
    failures.withLock(announcingTo: self) { $0 = true }
    lines.enqueueDetached {
      Self.writeError(message)
      if interactive { Self.write("orderly> ") }
    }
  }

  private func write(_ text: String) { Self.write(text) }

  /// Writes to standard output; if it cannot be written (a full disk, a closed file), says so
  /// on standard error in one line and exits with status 1: answers that cannot be shown must
  /// not look like success.
  private static func write(_ text: String) {
    do {
      try FileHandle.standardOutput.write(contentsOf: Data(text.utf8))
    } catch {
      let reason = (error as NSError).underlyingReason
      writeError("cannot write to standard output (\(reason)); stopping")
      exit(1)
    }
  }

  private static func writeError(_ message: String, prefix: String = "error: ") {
    // Nothing is left to tell if standard error cannot be written either.
    try? FileHandle.standardError.write(contentsOf: Data("\(prefix)\(message)\n".utf8))
  }

  private static func count(_ number: Int, _ noun: String) -> String {
    number == 1 ? "1 \(noun)" : "\(number) \(noun)s"
  }

  /// The text with control characters escaped, so that what a user typed, or stored, can never
  /// move the cursor or recolour the terminal.
  static func escaped(_ text: String) -> String {
    NoteTextError.escapingControlCharacters(in: text)
  }

  /// Runs one command and returns its answer, or its error and `true`.
  private static func execute(_ line: ShellLine, on repository: NotesRepository) async -> (
    String, Bool
  ) {
    do {
      switch line {
      case .add(let title, let body):
        let note = try await repository.create(title: title, body: body)
        return ("added #\(note.id) \(escaped(note.title))", false)
      case .list:
        let notes = try await repository.notes()
        if notes.isEmpty { return ("(no notes)", false) }
        return (notes.map { "#\($0.id) \(escaped($0.title))" }.joined(separator: "\n"), false)
      case .show(let id):
        let note = try await repository.note(id: id)
        var text = "#\(note.id) \(escaped(note.title))"
        if !note.body.isEmpty { text += "\n  \(escaped(note.body))" }
        return (text, false)
      case .edit(let id, let title, let body):
        let note = try await repository.update(id: id, title: title, body: body)
        return ("updated #\(note.id) \(escaped(note.title))", false)
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
      return (escaped(error.description), true)
    }
  }
}

extension NSError {
  /// The POSIX reason behind a Foundation file error ("No space left on device"), or the
  /// error's own description.
  fileprivate var underlyingReason: String {
    if let posix = userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
      return String(cString: strerror(Int32(posix.code)))
    }
    if domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(code))) }
    return localizedDescription
  }
}
