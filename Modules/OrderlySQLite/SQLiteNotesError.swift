// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import OrderlyDatabaseFile
import OrderlyRepository

/// Why a notes database could not be opened or used.
///
/// Each case names the file and the cause. When opening fails, the file is left as it was,
/// side files (`-wal`, `-shm`, `-journal`) included, and a file the failed call created is
/// removed again.
public enum SQLiteNotesError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The file could not be opened or created: a folder on its path does not exist or is not
  /// writable, it is a folder or not a regular file, its name is too long, or access is denied.
  case cannotOpen(path: String, reason: String)
  /// The file exists but is not an Orderly notes database: not SQLite at all, damaged, another
  /// program's SQLite database, or one written by a newer Orderly.
  case notANotesDatabase(path: String, reason: String)
  /// Another connection held the database's lock for longer than the service's busy timeout.
  case busy(path: String, waited: Duration)
  /// The service was closed with ``SQLiteNotesService/close()``; open a new one.
  case closed(path: String)

  /// The file the error is about.
  public var path: String {
    switch self {
    case .cannotOpen(let path, _), .notANotesDatabase(let path, _), .busy(let path, _),
      .closed(let path):
      path
    }
  }

  /// What went wrong and what to do about it, on one line.
  public var description: String {
    let shown = Self.escaped(path)
    switch self {
    case .cannotOpen(_, let reason):
      return "cannot open the notes database at \(shown): \(Self.escaped(reason)). Check that "
        + "its folder exists and is writable, or choose another path."
    case .notANotesDatabase(_, let reason):
      return "\(shown) is not an Orderly notes database: \(Self.escaped(reason)). The file was "
        + "left untouched; choose another path."
    case .busy(_, let waited):
      return "the notes database at \(shown) is locked by another program or connection, "
        + "which held it for more than \(waited.formatted); try again once it is done."
    case .closed:
      return "the notes database at \(shown) was closed; open it again with a new service."
    }
  }

  /// The file check's refusal, as a notes error.
  init(_ error: DatabaseFileError) {
    switch error {
    case .cannotOpen(let path, let reason): self = .cannotOpen(path: path, reason: reason)
    case .refused(let path, let reason), .damaged(let path, let reason):
      self = .notANotesDatabase(path: path, reason: reason)
    case .busy(let path, let waited): self = .busy(path: path, waited: waited)
    }
  }

  /// The text with control characters escaped, so a message stays on one line.
  static func escaped(_ text: String) -> String {
    NoteTextError.escapingControlCharacters(in: text)
  }
}

extension Duration {
  /// `5 seconds`, `1.5 seconds`, `250 ms`.
  fileprivate var formatted: String {
    let milliseconds = self / .milliseconds(1)
    if milliseconds < 1_000 { return "\(Int(milliseconds.rounded())) ms" }
    let seconds = (milliseconds / 100).rounded() / 10
    let text = seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)"
    return text + (seconds == 1 ? " second" : " seconds")
  }
}
#endif
