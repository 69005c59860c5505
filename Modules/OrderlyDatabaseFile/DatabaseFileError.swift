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
  /// Another connection held the file's lock for longer than the busy timeout.
  case busy(path: String, waited: Duration)
}
