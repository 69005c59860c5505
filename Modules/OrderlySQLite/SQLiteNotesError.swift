/// Why a notes database could not be opened.
///
/// Each case names the file and the cause, and the file is left as it was.
public enum SQLiteNotesError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The file could not be opened or created: a folder on its path does not exist, it is a
  /// folder, or access is denied.
  case cannotOpen(path: String, reason: String)
  /// The file exists but is not an Orderly notes database: not SQLite at all, another program's
  /// SQLite database, or one written by a newer Orderly.
  case notANotesDatabase(path: String, reason: String)

  /// The file the error is about.
  public var path: String {
    switch self {
    case .cannotOpen(let path, _), .notANotesDatabase(let path, _): path
    }
  }

  /// What went wrong and what to do about it.
  public var description: String {
    switch self {
    case .cannotOpen(let path, let reason):
      "cannot open the notes database at \(path): \(reason). Check that its folder exists and "
        + "is writable, or choose another path."
    case .notANotesDatabase(let path, let reason):
      "\(path) is not an Orderly notes database: \(reason). The file was left untouched; "
        + "choose another path."
    }
  }
}
