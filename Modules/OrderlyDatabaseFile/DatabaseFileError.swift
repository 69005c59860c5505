// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import GRDB

/// Why a database file was refused before anything wrote to it.
///
/// ``DatabaseFile/check(_:busyTimeout:schema:)`` throws it; each module turns it into its own public error.
package enum DatabaseFileError: Error, Sendable, Equatable {
  /// The file could not be opened or created: a folder on its path does not exist or is not
  /// writable, it is a folder or not a regular file, its name is too long, or access is denied.
  case cannotOpen(path: String, reason: String)
  /// The file exists but does not hold what the schema expects: not SQLite, damaged, another
  /// program's database, or one written by a newer Orderly.
  case refused(path: String, reason: String)
  /// The file is an SQLite file, but damaged: shorter than its header says, or malformed.
  case damaged(path: String, reason: String)
  /// Another connection held the file's lock for longer than the busy timeout.
  case busy(path: String, waited: Duration)
}

extension DatabaseFileError {
  /// What an error from opening (or migrating) a database at `path` means, for errors that are
  /// not already the module's own: a lock held past the timeout, a file that is not SQLite or is
  /// damaged, or any other reason it cannot be opened.
  ///
  /// - Parameters:
  ///   - error: The error GRDB or SQLite threw.
  ///   - path: The database file, for the message.
  ///   - busyTimeout: How long the connection waited for a lock.
  package init(opening error: any Error, path: String, busyTimeout: Duration) {
    guard let error = error as? DatabaseError else {
      self = .cannotOpen(path: path, reason: "\(error)")
      return
    }
    switch error.resultCode {
    case .SQLITE_BUSY, .SQLITE_LOCKED: self = .busy(path: path, waited: busyTimeout)
    case .SQLITE_NOTADB: self = .refused(path: path, reason: "it is not an SQLite database")
    case .SQLITE_CORRUPT:
      self = .damaged(
        path: path,
        reason: "it is damaged (\(error.message ?? "SQLite error \(error.resultCode.rawValue)"))"
      )
    default:
      self = .cannotOpen(
        path: path,
        reason: error.message ?? "SQLite error \(error.resultCode.rawValue)"
      )
    }
  }
}
#endif
