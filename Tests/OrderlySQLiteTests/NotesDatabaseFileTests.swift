import BuiltProducts
import Foundation
import GRDB
import OrderlyRepository
import OrderlySQLite
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Copies a database and its side files as they are while `body` runs inside an open write
/// transaction: what a process killed at that moment leaves behind.
private func killedMidTransaction(
  journalMode: String,
  copyTo destination: String,
  body: (Database) throws -> Void
) throws {
  let folder = try ScratchFolder()
  let source = folder.path("live.sqlite")
  var configuration = Configuration()
  configuration.prepareDatabase { db in
    // A tiny cache makes SQLite write the transaction's pages to the files before it commits.
    try db.execute(sql: "PRAGMA cache_size = 2")
  }
  let queue = try DatabaseQueue(path: source, configuration: configuration)
  _ = try queue.writeWithoutTransaction { db in
    try String.fetchOne(db, sql: "PRAGMA journal_mode = \(journalMode)")
  }
  try queue.writeWithoutTransaction { db in
    try db.inTransaction {
      try body(db)
      for suffix in ["", "-journal", "-wal", "-shm"]
      where FileManager.default.fileExists(atPath: source + suffix) {
        try FileManager.default.copyItem(atPath: source + suffix, toPath: destination + suffix)
      }
      return .rollback
    }
  }
}

/// The first migration's work, written slowly enough to reach the disk before it commits.
private func halfMigrate(_ db: Database) throws {
  try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
  try db.execute(
    sql: """
      CREATE TABLE note (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
      body TEXT NOT NULL, createdAt DOUBLE NOT NULL, updatedAt DOUBLE NOT NULL)
      """
  )
  for index in 0..<300 {
    try db.execute(
      sql: "INSERT INTO note (title, body, createdAt, updatedAt) VALUES (?, ?, 0, 0)",
      arguments: ["n\(index)", String(repeating: "x", count: 1_000)]
    )
  }
}

@Suite("Opening a notes file: killed first starts, bad paths, refused files left as found")
struct NotesDatabaseFileTests {
  // MARK: - A first start killed at every step

  @Test("a file holding only GRDB's migrations table opens, and is completed")
  func onlyMigrationsTable() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    try await DatabaseQueue(path: path).writeWithoutTransaction { db in
      try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
    }
    let service = try SQLiteNotesService(path: path)
    let note = try await service.createNote(title: "after the crash", body: "")
    #expect(try await service.fetchNotes() == [note])
    try service.close()
  }

  @Test(
    "a first start killed inside its migration opens, rolled back and completed",
    arguments: ["DELETE", "WAL"]
  )
  func killedInsideMigration(journalMode: String) async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    try killedMidTransaction(journalMode: journalMode, copyTo: path, body: halfMigrate)
    let sides = ["-journal", "-wal"].filter { FileManager.default.fileExists(atPath: path + $0) }
    #expect(!sides.isEmpty, "the copy should hold the unfinished transaction")
    let service = try SQLiteNotesService(path: path)
    #expect(try await service.fetchNotes().isEmpty)
    _ = try await service.createNote(title: "completed", body: "")
    #expect(try await service.fetchNotes().map(\.title) == ["completed"])
    try service.close()
  }

  @Test("a first start killed after the database file was created, before any table, opens")
  func killedBeforeAnyTable() async throws {
    let folder = try ScratchFolder()
    let empty = folder.path("empty.sqlite")
    #expect(FileManager.default.createFile(atPath: empty, contents: Data()))
    let walOnly = folder.path("wal.sqlite")
    try killedMidTransaction(journalMode: "WAL", copyTo: walOnly) { _ in }
    for path in [empty, walOnly] {
      let service = try SQLiteNotesService(path: path)
      _ = try await service.createNote(title: "ok", body: "")
      #expect(try await service.fetchNotes().count == 1)
      try service.close()
    }
  }

  @Test("another program's file with a hot journal is refused, and left as found")
  func foreignHotJournal() throws {
    let folder = try ScratchFolder()
    // Another program's committed table, and its unfinished transaction in a hot journal.
    let committed = folder.path("committed.sqlite")
    try DatabaseQueue(path: committed).write { db in
      try db.execute(sql: "CREATE TABLE accounts (id INTEGER PRIMARY KEY)")
    }
    try killedMidTransactionOver(committed) { db in
      try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
      for index in 0..<300 {
        try db.execute(
          sql: "INSERT INTO users (name) VALUES (?)",
          arguments: [String(repeating: "u\(index)", count: 200)]
        )
      }
    }
    let before = try folder.snapshot()
    #expect(before.keys.contains("committed.sqlite-journal"))
    #expect {
      try SQLiteNotesService(path: committed)
    } throws: { error in
      (error as? SQLiteNotesError)?.description.contains("tables: accounts") == true
    }
    #expect(try folder.snapshot() == before)
  }

  // MARK: - Two connections on one file

  @Test("two services on one file write 400 notes each at once, and none is refused")
  func concurrentServices() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("shared.sqlite")
    let first = try SQLiteNotesService(path: path)
    let second = try SQLiteNotesService(path: path)
    try await withThrowingTaskGroup(of: Void.self) { group in
      for (name, service) in [("a", first), ("b", second)] {
        group.addTask {
          for index in 0..<400 {
            _ = try await service.createNote(title: "\(name)\(index)", body: "")
          }
        }
      }
      try await group.waitForAll()
    }
    #expect(try await first.fetchNotes().count == 800)
    try first.close()
    try second.close()
  }

  @Test("two services opening one new file at once are both accepted, round after round")
  func concurrentFirstOpens() async throws {
    // The second one's check can run while the first creates the file: its journal appears and
    // vanishes, its first page is written late. The check must see a state that holds still.
    let folder = try ScratchFolder()
    for round in 0..<300 {
      let path = folder.path("new-\(round).sqlite")
      let opened = try await withThrowingTaskGroup(of: SQLiteNotesService.self) { group in
        group.addTask { try SQLiteNotesService(path: path) }
        group.addTask {
          // Aims at the window: the file is there, the first one is still creating it.
          let clock = ContinuousClock()
          let giveUp = clock.now.advanced(by: .seconds(5))
          func creating() -> Bool {
            var info = stat()
            guard stat(path, &info) == 0, info.st_size > 0 else { return false }
            return access(path + "-journal", F_OK) == 0
          }
          while !creating(), access(path + "-wal", F_OK) != 0, clock.now < giveUp {
            await Task.yield()
          }
          return try SQLiteNotesService(path: path)
        }
        return try await group.reduce(into: []) { $0.append($1) }
      }
      _ = try await opened[0].createNote(title: "a", body: "")
      _ = try await opened[1].createNote(title: "b", body: "")
      let count = try await opened[0].fetchNotes().count
      #expect(count == 2, "round \(round)")
      for service in opened { try service.close() }
    }
  }

  @Test("a lock held past the busy timeout is reported as a busy database, not a failure")
  func lockHeldTooLong() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let service = try SQLiteNotesService(path: path, busyTimeout: .milliseconds(200))
    var configuration = Configuration()
    configuration.allowsUnsafeTransactions = true
    let holder = try DatabaseQueue(path: path, configuration: configuration)
    try holder.inDatabase { db in try db.execute(sql: "BEGIN IMMEDIATE") }
    await #expect(throws: SQLiteNotesError.busy(path: path, waited: .milliseconds(200))) {
      try await service.createNote(title: "waits", body: "")
    }
    try holder.inDatabase { db in try db.execute(sql: "ROLLBACK") }
    _ = try await service.createNote(title: "goes on", body: "")
    #expect(try await service.fetchNotes().map(\.title) == ["goes on"])
    let description = SQLiteNotesError.busy(path: path, waited: .seconds(5)).description
    #expect(description.contains("locked by another program") && description.contains("5 seconds"))
  }

  @Test("a closed service says so; the file opens again in a new one")
  func closing() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let service = try SQLiteNotesService(path: path)
    _ = try await service.createNote(title: "kept", body: "")
    try service.close()
    await #expect(throws: SQLiteNotesError.closed(path: path)) { try await service.fetchNotes() }
    #expect(try await SQLiteNotesService(path: path).fetchNotes().map(\.title) == ["kept"])
  }

  // MARK: - What is stored is what is acknowledged

  @Test("text that SQLite would cut is refused; what is returned is what is stored")
  func storedAsAcknowledged() async throws {
    let service = try SQLiteNotesService()
    await #expect(throws: NoteTextError.controlCharacterInTitle("\0")) {
      try await service.createNote(title: "a\0b", body: "")
    }
    await #expect(throws: NoteTextError.nulInBody) {
      try await service.createNote(title: "a", body: "before\0after")
    }
    #expect(try await service.fetchNotes().isEmpty)
    let body = "tab\there, escape \u{1B}[31m, line\nbreak, ünïcödé 🦊"
    let created = try await service.createNote(title: "fox 🦊", body: body)
    #expect(try await service.fetchNote(id: created.id) == created)
    #expect(created.body == body)
    let updated = try await service.updateNote(id: created.id, title: "fox", body: "b")
    #expect(try await service.fetchNote(id: created.id) == updated)
  }

  // MARK: - Bad paths: refused, named, the folder unchanged, nothing hangs

  @Test("a FIFO is refused at once, without opening it")
  func fifo() throws {
    let folder = try ScratchFolder()
    let path = folder.path("pipe")
    #expect(mkfifo(path, 0o600) == 0)
    let before = try folder.snapshot()
    #expect(
      throws: SQLiteNotesError.cannotOpen(path: path, reason: "it is a FIFO, not a regular file")
    ) {
      try SQLiteNotesService(path: path)
    }
    #expect(try folder.snapshot() == before)
  }

  @Test("a device such as /dev/null is refused, and nothing appears beside it")
  func device() throws {
    #expect(
      throws: SQLiteNotesError.cannotOpen(path: "/dev/null", reason: "it is a device, not a file")
    ) {
      try SQLiteNotesService(path: "/dev/null")
    }
    #expect(!FileManager.default.fileExists(atPath: "/dev/null-journal"))
    #expect(!FileManager.default.fileExists(atPath: "/dev/null-wal"))
  }

  @Test("a file name too long for SQLite's side files is refused before anything is created")
  func longName() throws {
    let folder = try ScratchFolder()
    for length in [248, 255] {
      let path = folder.path(String(repeating: "n", count: length))
      #expect {
        try SQLiteNotesService(path: path)
      } throws: { error in
        (error as? SQLiteNotesError)?.description.contains("the file name is too long") == true
      }
    }
    #expect(try folder.snapshot().isEmpty)
    // The longest name that fits works.
    let fits = folder.path(String(repeating: "n", count: 247))
    try SQLiteNotesService(path: fits).close()
  }

  @Test("a path with a newline gives a one-line message")
  func newlineInPath() throws {
    let folder = try ScratchFolder()
    let path = folder.path("no\nsuch") + "/notes.sqlite"
    do {
      _ = try SQLiteNotesService(path: path)
      Issue.record("opened \(path)")
    } catch {
      #expect(!error.description.contains("\n"))
      #expect(error.description.contains("no\\nsuch"))
    }
  }

  @Test("a read-only notes file is refused as read-only, and left as found")
  func readOnlyFile() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let service = try SQLiteNotesService(path: path)
    _ = try await service.createNote(title: "frozen", body: "")
    try service.close()
    #expect(chmod(path, 0o444) == 0)
    let before = try folder.snapshot()
    #expect {
      try SQLiteNotesService(path: path)
    } throws: { error in
      guard case .cannotOpen(_, let reason) = error as? SQLiteNotesError else { return false }
      return reason.contains("read-only")
    }
    #expect(try folder.snapshot() == before)
  }

  @Test("a notes file in a folder that is not writable is refused for that reason")
  func readOnlyFolder() async throws {
    // Root may write anywhere, so the folder's permissions cannot refuse anything then.
    guard getuid() != 0 else { return }
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    try SQLiteNotesService(path: path).close()
    #expect(chmod(folder.url.path, 0o555) == 0)
    let before = try folder.snapshot()
    #expect {
      try SQLiteNotesService(path: path)
    } throws: { error in
      (error as? SQLiteNotesError)?.description.contains("is not writable") == true
    }
    #expect(try folder.snapshot() == before)
  }

  @Test(
    "refused SQLite files are left exactly as found, side files included",
    arguments: ["wal-foreign", "newer", "truncated", "foreign-note-table"]
  )
  func refusedUntouched(kind: String) throws {
    let folder = try ScratchFolder()
    let path = folder.path("file.sqlite")
    switch kind {
    case "wal-foreign":
      let pool = try DatabasePool(path: path)
      try pool.write { db in try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY)") }
      try pool.close()
    case "newer":
      try DatabaseQueue(path: path).write { db in
        try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
        try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY)")
        try db.execute(
          sql: "INSERT INTO grdb_migrations VALUES ('create notes'), ('from the future')"
        )
      }
    case "truncated":
      let full = folder.path("full.sqlite")
      try DatabaseQueue(path: full).write { db in
        try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT)")
        for _ in 0..<50 {
          try db.execute(
            sql: "INSERT INTO note (text) VALUES (?)",
            arguments: [String(repeating: "t", count: 2_000)]
          )
        }
      }
      let data = try Data(contentsOf: URL(fileURLWithPath: full))
      try data.prefix(data.count / 2).write(to: URL(fileURLWithPath: path))
      try FileManager.default.removeItem(atPath: full)
    default:
      try DatabaseQueue(path: path).write { db in
        try db.execute(sql: "CREATE TABLE note (id INTEGER PRIMARY KEY, text TEXT)")
      }
    }
    let before = try folder.snapshot()
    #expect {
      try SQLiteNotesService(path: path)
    } throws: { error in
      guard case .notANotesDatabase(let errorPath, _) = error as? SQLiteNotesError else {
        return false
      }
      return errorPath == path
    }
    #expect(try folder.snapshot() == before)
  }
}

/// Like `killedMidTransaction`, over an existing database: the copy replaces it.
private func killedMidTransactionOver(_ path: String, body: (Database) throws -> Void) throws {
  let folder = try ScratchFolder()
  let copy = folder.path("copy.sqlite")
  try FileManager.default.copyItem(atPath: path, toPath: folder.path("source.sqlite"))
  var configuration = Configuration()
  configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA cache_size = 2") }
  let queue = try DatabaseQueue(path: folder.path("source.sqlite"), configuration: configuration)
  try queue.writeWithoutTransaction { db in
    try db.inTransaction {
      try body(db)
      let source = folder.path("source.sqlite")
      try FileManager.default.copyItem(atPath: source, toPath: copy)
      try FileManager.default.copyItem(atPath: source + "-journal", toPath: copy + "-journal")
      return .rollback
    }
  }
  try FileManager.default.removeItem(atPath: path)
  try FileManager.default.moveItem(atPath: copy, toPath: path)
  try FileManager.default.moveItem(atPath: copy + "-journal", toPath: path + "-journal")
}
