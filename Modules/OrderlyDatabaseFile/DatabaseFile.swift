// Compiled with the SQLite trait (on by default); see Package.swift.
#if SQLite
import Foundation
import GRDBSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The check a database file passes before anything opens it for writing: Orderly's notes
/// database and its outbox both use it.
///
/// Refusing a file must leave it exactly as found, side files included, so the check never
/// opens a file in a way that could write to it or beside it:
/// - the file's type, permissions and header are read with plain file calls (a FIFO is never
///   opened, so it cannot block);
/// - with no side file beside it, its tables are read with SQLite's `immutable` flag, which
///   takes no lock and creates no `-wal`, `-shm` or `-journal` file;
/// - with side files, which a running program or a killed one left, the main file alone is read
///   as immutable first: if it already holds the schema's tables, the file is taken (opening it
///   then recovers what the side files hold). Otherwise the file and its side files are copied
///   to a private folder and read there, where SQLite may recover them: even a read-only
///   connection writes the `-shm` index (or creates it), so the originals are never opened.
///
/// A file that the check accepts is then opened read-write, and SQLite itself completes what a
/// killed process left half done.
package enum DatabaseFile {
  /// The files SQLite keeps beside a database.
  package static let sideSuffixes = ["-journal", "-wal", "-shm"]

  /// The longest file name a database can have: its side files need room for `-journal`.
  package static let maximumNameLength = Int(NAME_MAX) - "-journal".utf8.count

  /// Checks the path, and the file at it if there is one.
  ///
  /// - Parameters:
  ///   - path: The database file.
  ///   - busyTimeout: How long to wait for another connection's lock while reading.
  ///   - schema: What the file must hold: its tables and applied migrations are checked with
  ///     ``DatabaseSchema/problem(tables:applied:)``.
  /// - Returns: Whether a file was there.
  /// - Throws: ``DatabaseFileError`` naming the cause; nothing was written.
  package static func check(_ path: String, busyTimeout: Duration, schema: DatabaseSchema)
    throws(DatabaseFileError) -> Bool
  {
    try checked(path, busyTimeout: busyTimeout, schema: schema) != nil
  }

  /// Checks a file that must already hold the schema's tables: for a tool that inspects or
  /// repairs a database (`orderly outbox`), which must never create one where it finds none.
  ///
  /// - Parameters:
  ///   - path: The database file.
  ///   - busyTimeout: How long to wait for another connection's lock while reading.
  ///   - schema: What the file must hold.
  /// - Throws: ``DatabaseFileError`` naming the cause: no file, an empty file, a database
  ///   without the schema's tables, or any refusal of ``check(_:busyTimeout:schema:)``; nothing
  ///   was written.
  package static func checkExisting(_ path: String, busyTimeout: Duration, schema: DatabaseSchema)
    throws(DatabaseFileError)
  {
    guard let tables = try checked(path, busyTimeout: busyTimeout, schema: schema) else {
      throw .cannotOpen(path: path, reason: "there is no file at this path")
    }
    guard let tables else {
      throw .refused(path: path, reason: "it is an empty file, not \(schema.kind)")
    }
    if tables.isDisjoint(with: schema.tables) {
      let shown = tables.isEmpty ? "none" : tables.sorted().joined(separator: ", ")
      throw .refused(
        path: path,
        reason: "it is an SQLite database without \(schema.kind) (its tables: \(shown))"
      )
    }
  }

  /// Checks the path and the file at it: `nil` when there is no file; otherwise the file's
  /// tables, `nil` inside when the file is empty.
  private static func checked(_ path: String, busyTimeout: Duration, schema: DatabaseSchema)
    throws(DatabaseFileError) -> Set<String>??
  {
    if path.isEmpty { throw .cannotOpen(path: path, reason: "the path is empty") }
    if path.unicodeScalars.contains("\0") {
      throw .cannotOpen(path: path, reason: "the path contains a NUL character")
    }
    var info = stat()
    guard stat(path, &info) == 0 else {
      let code = errno
      guard code == ENOENT else { throw .cannotOpen(path: path, reason: describe(errno: code)) }
      try checkNewFile(path)
      return .none
    }
    switch info.st_mode & S_IFMT {
    case S_IFREG: break
    case S_IFDIR: throw .cannotOpen(path: path, reason: "it is a folder")
    case S_IFIFO: throw .cannotOpen(path: path, reason: "it is a FIFO, not a regular file")
    case S_IFCHR, S_IFBLK: throw .cannotOpen(path: path, reason: "it is a device, not a file")
    case S_IFSOCK: throw .cannotOpen(path: path, reason: "it is a socket, not a regular file")
    default: throw .cannotOpen(path: path, reason: "it is not a regular file")
    }
    guard access(path, R_OK) == 0 else {
      throw .cannotOpen(path: path, reason: "the file cannot be read (permission denied)")
    }
    var tables: Set<String>?
    if info.st_size > 0 {
      tables = try checkContents(path, busyTimeout: busyTimeout, schema: schema)
    }
    if info.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH) == 0 || access(path, W_OK) != 0 {
      throw .cannotOpen(
        path: path,
        reason: "the file is read-only; make it writable (chmod u+w) to use it"
      )
    }
    try checkFolderIsWritable(of: path)
    return .some(tables)
  }

  /// Removes the database and its side files, for a file the failed open created.
  package static func remove(_ path: String) {
    for suffix in [""] + sideSuffixes { unlink(path + suffix) }
  }

  // MARK: - A new file

  private static func checkNewFile(_ path: String) throws(DatabaseFileError) {
    let url = URL(fileURLWithPath: path)
    let name = url.lastPathComponent
    if name.utf8.count > maximumNameLength {
      throw .cannotOpen(
        path: path,
        reason: "the file name is too long (\(name.utf8.count) bytes; at most "
          + "\(maximumNameLength), so that SQLite can keep its side files beside it)"
      )
    }
    let folder = url.deletingLastPathComponent().path
    var info = stat()
    guard stat(folder, &info) == 0 else {
      let code = errno
      if code == ENOENT {
        throw .cannotOpen(path: path, reason: "its folder \(folder) does not exist")
      }
      throw .cannotOpen(path: path, reason: "its folder \(folder): \(describe(errno: code))")
    }
    guard info.st_mode & S_IFMT == S_IFDIR else {
      throw .cannotOpen(path: path, reason: "\(folder) is not a folder")
    }
    try checkFolderIsWritable(of: path)
  }

  private static func checkFolderIsWritable(of path: String) throws(DatabaseFileError) {
    let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
    if access(folder, W_OK | X_OK) != 0 {
      throw .cannotOpen(
        path: path,
        reason: "its folder \(folder) is not writable, and SQLite keeps files beside the database"
      )
    }
  }

  // MARK: - An existing file

  /// Checks what the file holds, again when the file changed while it was being checked.
  ///
  /// Another process may be writing the file meanwhile (a second shell on the same notes file,
  /// creating it): its journal can vanish between being listed and being copied, or the header
  /// can be read before its first page is written. A refusal then describes a state that is
  /// already gone, so the check starts over while the file or its side files keep changing,
  /// until `busyTimeout` has passed (the time it would wait for that process's lock anyway).
  /// A refusal of a file that stayed the same is final.
  private static func checkContents(_ path: String, busyTimeout: Duration, schema: DatabaseSchema)
    throws(DatabaseFileError) -> Set<String>
  {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: busyTimeout)
    while true {
      let before = FileState(path)
      do {
        return try checkContentsOnce(path, busyTimeout: busyTimeout, schema: schema)
      } catch {
        guard FileState(path) != before, clock.now < deadline else { throw error }
      }
    }
  }

  /// What can be seen of a database and its side files without opening them: whether each is
  /// there, its size and when it last changed.
  private struct FileState: Equatable {
    var files: [[Int64]] = []

    init(_ path: String) {
      for suffix in [""] + DatabaseFile.sideSuffixes {
        var info = stat()
        guard stat(path + suffix, &info) == 0 else {
          files.append([])
          continue
        }
        #if canImport(Darwin)
        let changed = info.st_mtimespec
        #else
        let changed = info.st_mtim
        #endif
        files.append([
          Int64(info.st_size), Int64(info.st_ino), Int64(changed.tv_sec), Int64(changed.tv_nsec),
        ])
      }
    }
  }

  private static func checkContentsOnce(
    _ path: String,
    busyTimeout: Duration,
    schema: DatabaseSchema
  ) throws(DatabaseFileError) -> Set<String> {
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw .cannotOpen(path: path, reason: "the file cannot be read (permission denied?)")
    }
    let header = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
    let size = (try? handle.seekToEnd()) ?? 0
    try? handle.close()
    let sides = sideSuffixes.filter { FileManager.default.fileExists(atPath: path + $0) }
    // With a journal or a WAL beside it, the file may be mid-transaction (its first page not
    // written yet): only SQLite, rolling that back, can say what it holds.
    if sides.isEmpty {
      guard header.starts(with: Array("SQLite format 3\0".utf8)) else {
        throw .refused(path: path, reason: "it is not an SQLite file")
      }
      if let expected = expectedSize(header: header), size < expected {
        throw .damaged(
          path: path,
          reason: "it is damaged: it holds \(size) bytes, and its header says \(expected)"
        )
      }
    }
    let contents: (tables: Set<String>, applied: Set<String>)
    do {
      contents = try readContents(
        of: path,
        sides: sides,
        busyTimeout: busyTimeout,
        schema: schema
      )
    } catch {
      throw error.fileError(path: path, busyTimeout: busyTimeout)
    }
    if let problem = schema.problem(tables: contents.tables, applied: contents.applied) {
      throw .refused(path: path, reason: problem)
    }
    return contents.tables
  }

  /// The file size the header promises, when the header says it is current (SQLite's file
  /// format, section 1.3: the page size at offset 16, the page count at 28, valid when the
  /// change counter at 24 equals the number at 92).
  private static func expectedSize(header: [UInt8]) -> UInt64? {
    guard header.count >= 100 else { return nil }
    func number(at offset: Int, bytes: Int) -> UInt64 {
      header[offset..<offset + bytes].reduce(0) { $0 << 8 | UInt64($1) }
    }
    guard number(at: 24, bytes: 4) == number(at: 92, bytes: 4) else { return nil }
    let pageSize = number(at: 16, bytes: 2)
    return (pageSize == 1 ? 65_536 : pageSize) * number(at: 28, bytes: 4)
  }

  private static func readContents(
    of path: String,
    sides: [String],
    busyTimeout: Duration,
    schema: DatabaseSchema
  ) throws(SQLiteFailure) -> (tables: Set<String>, applied: Set<String>) {
    if sides.isEmpty {
      // Nothing is writing it (a writer keeps a side file), so it can be read as immutable.
      return try SQLiteReader.contents(
        of: "file:" + uriEscaped(path) + "?immutable=1",
        flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
        busyTimeout: busyTimeout
      )
    }
    // The main file alone, as of its last checkpoint: a file of ours that a running or killed
    // process left side files beside shows its migrations table there, and is taken.
    let checkpointed = try? SQLiteReader.contents(
      of: "file:" + uriEscaped(path) + "?immutable=1",
      flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
      busyTimeout: busyTimeout
    )
    if let checkpointed, checkpointed.tables.contains(DatabaseSchema.migrationsTable),
      schema.problem(tables: checkpointed.tables, applied: checkpointed.applied) == nil
    {
      return checkpointed
    }
    // Anything else is read from a private copy, so that refusing it touches nothing.
    return try readCopy(of: path, sides: sides, busyTimeout: busyTimeout)
  }

  /// Reads a copy of the database and its side files, which SQLite may recover (roll back a hot
  /// journal, replay a WAL) without touching the original.
  private static func readCopy(of path: String, sides: [String], busyTimeout: Duration)
    throws(SQLiteFailure) -> (tables: Set<String>, applied: Set<String>)
  {
    let folder = FileManager.default.temporaryDirectory
      .appendingPathComponent("orderly-check-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: folder) }
    let copy = folder.appendingPathComponent("database.sqlite").path
    do {
      try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
      for suffix in [""] + sides {
        try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
      }
    } catch {
      throw SQLiteFailure(code: SQLITE_CANTOPEN, message: "cannot copy it to check it: \(error)")
    }
    return try SQLiteReader.contents(
      of: copy,
      flags: SQLITE_OPEN_READWRITE,
      busyTimeout: busyTimeout
    )
  }

  private static func uriEscaped(_ path: String) -> String {
    var allowed = CharacterSet.urlPathAllowed
    allowed.remove(charactersIn: "?#%")
    return path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
  }

  package static func describe(errno code: Int32) -> String {
    switch code {
    case EACCES, EPERM: "permission denied"
    case ENOTDIR: "a part of the path is not a folder"
    case ENAMETOOLONG: "the path is too long"
    case ELOOP: "the path has a loop of symbolic links"
    default: String(cString: strerror(code))
    }
  }
}

/// An SQLite result code and message, from the check's own connection.
struct SQLiteFailure: Error {
  let code: Int32
  let message: String

  func fileError(path: String, busyTimeout: Duration) -> DatabaseFileError {
    switch code & 0xFF {
    case SQLITE_BUSY, SQLITE_LOCKED: .busy(path: path, waited: busyTimeout)
    case SQLITE_NOTADB: .refused(path: path, reason: "it is not an SQLite database")
    case SQLITE_CORRUPT:
      .damaged(path: path, reason: "it is damaged (\(message))")
    default: .cannotOpen(path: path, reason: message)
    }
  }
}

/// Reads a database's tables and applied migrations through SQLite's C API, which takes the
/// URI flags (`immutable`) that GRDB's connections do not.
enum SQLiteReader {
  static func contents(of filename: String, flags: Int32, busyTimeout: Duration)
    throws(SQLiteFailure) -> (tables: Set<String>, applied: Set<String>)
  {
    var connection: OpaquePointer?
    let opened = sqlite3_open_v2(filename, &connection, flags, nil)
    defer { sqlite3_close_v2(connection) }
    guard opened == SQLITE_OK, let connection else {
      throw failure(connection, code: opened)
    }
    sqlite3_extended_result_codes(connection, 1)
    sqlite3_busy_timeout(connection, Int32(busyTimeout / .milliseconds(1)))
    let tables = Set(
      try strings(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
        connection
      )
    )
    guard tables.contains(DatabaseSchema.migrationsTable) else { return (tables, []) }
    let applied = try strings(
      "SELECT identifier FROM \(DatabaseSchema.migrationsTable)",
      connection
    )
    return (tables, Set(applied))
  }

  private static func strings(_ sql: String, _ connection: OpaquePointer) throws(SQLiteFailure)
    -> [String]
  {
    var statement: OpaquePointer?
    let prepared = sqlite3_prepare_v2(connection, sql, -1, &statement, nil)
    defer { sqlite3_finalize(statement) }
    guard prepared == SQLITE_OK, let statement else {
      throw failure(connection, code: prepared)
    }
    var values: [String] = []
    while true {
      let step = sqlite3_step(statement)
      if step == SQLITE_DONE { return values }
      guard step == SQLITE_ROW else { throw failure(connection, code: step) }
      if let text = sqlite3_column_text(statement, 0) {
        values.append(String(cString: text))
      }
    }
  }

  private static func failure(_ connection: OpaquePointer?, code: Int32) -> SQLiteFailure {
    let extended = connection.map { sqlite3_extended_errcode($0) } ?? code
    let message = connection.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
    return SQLiteFailure(
      code: extended == 0 ? code : extended,
      message: message ?? String(cString: sqlite3_errstr(code))
    )
  }
}
#endif
