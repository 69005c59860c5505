import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import OrderlyRepository
import OrderlyTestSupport
import Testing

@testable import OrderlySQLite

/// Another program's WAL database as a killed or running program leaves it: its `-wal` (and,
/// with `withShm`, its `-shm`) beside it, holding tables the main file does not have yet.
private func foreignWALDatabase(at path: String, withShm: Bool) throws {
  let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
  let live = folder.appendingPathComponent("live-\(UUID().uuidString).sqlite").path
  let pool = try DatabasePool(path: live)
  try pool.writeWithoutTransaction { db in
    try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
    try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY)")
    try db.execute(sql: "INSERT INTO users VALUES (1)")
  }
  // Copied while the connection is open: the -wal still holds the table.
  for suffix in ["", "-wal"] + (withShm ? ["-shm"] : []) {
    try FileManager.default.copyItem(atPath: live + suffix, toPath: path + suffix)
  }
  try pool.close()
  for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: live + suffix) }
}

@Suite("Notes store promises: refused files untouched, closed means closed")
struct NotesStorePromisesTests {
  @Test(
    "another program's WAL database is refused with its side files exactly as found",
    arguments: [false, true]
  )
  func foreignWALUntouched(withShm: Bool) async throws {
    let folder = try ScratchFolder()
    let path = folder.path("other.sqlite")
    try foreignWALDatabase(at: path, withShm: withShm)
    let before = try folder.snapshot()
    #expect(throws: SQLiteNotesError.self) { try SQLiteNotesService(path: path) }
    #expect(throws: OutboxError.self) { try Outbox<NoteMutation>(path: path) }
    #expect(throws: SQLiteNotesError.self) { try OfflineNotesService(path: path) }
    #expect(try folder.snapshot() == before)
  }

  @Test("an offline notes file is refused by the plain service, side files untouched")
  func offlineFileRefusedUntouched() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let offline = try OfflineNotesService(path: path)
    _ = try await offline.createNote(title: "t", body: "b")
    // Copied while open, as a running app leaves it.
    let copy = folder.path("copy.sqlite")
    for suffix in ["", "-wal", "-shm"]
    where FileManager.default.fileExists(atPath: path + suffix) {
      try FileManager.default.copyItem(atPath: path + suffix, toPath: copy + suffix)
    }
    try await offline.close()
    let before = try folder.snapshot()
    #expect(throws: SQLiteNotesError.self) { try SQLiteNotesService(path: copy) }
    #expect(try folder.snapshot() == before)
  }

  @Test("close() leaves no -wal or -shm behind, and the file alone holds every note")
  func closeLeavesNoSideFiles() async throws {
    let folder = try ScratchFolder()
    for offline in [false, true] {
      let path = folder.path("notes-\(offline).sqlite")
      if offline {
        let service = try OfflineNotesService(path: path)
        _ = try await service.createNote(title: "a", body: "b")
        try await service.close()
      } else {
        let service = try SQLiteNotesService(path: path)
        _ = try await service.createNote(title: "a", body: "b")
        try service.close()
      }
      #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
      #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
      let count = try await DatabaseQueue(path: path).read { db in
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM note")
      }
      #expect(count == 1)
    }
  }

  @Test("every call after close() throws closed(path:), through the repository too")
  func writesAfterClose() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let service = try SQLiteNotesService(path: path)
    let note = try await service.createNote(title: "a", body: "b")
    try service.close()
    try service.close()  // a second close does nothing
    let closed = SQLiteNotesError.closed(path: path)
    await #expect(throws: closed) { try await service.createNote(title: "c", body: "d") }
    await #expect(throws: closed) {
      try await service.updateNote(id: note.id, title: "c", body: "d")
    }
    await #expect(throws: closed) { try await service.deleteNote(id: note.id) }
    await #expect(throws: closed) { try await service.fetchNotes() }
    let repository = NotesRepository(service: service)
    do {
      _ = try await repository.create(title: "e", body: "f")
      Issue.record("a closed service stored a note")
    } catch {
      #expect("\(error)".contains("closed"), "\(error)")
      #expect(!"\(error)".contains("out of memory"), "\(error)")
    }

    let offlinePath = folder.path("offline.sqlite")
    let offline = try OfflineNotesService(path: offlinePath)
    try await offline.close()
    await #expect(throws: SQLiteNotesError.closed(path: offlinePath)) {
      try await offline.createNote(title: "c", body: "d")
    }
  }

  @Test("the notes store's writer syncs every commit (synchronous = FULL)")
  func synchronousFull() async throws {
    let folder = try ScratchFolder()
    let service = try SQLiteNotesService(path: folder.path("notes.sqlite"))
    let level = try await service.database.writeWithoutTransaction { db in
      try Int.fetchOne(db, sql: "PRAGMA synchronous")
    }
    #expect(level == 2)
    try service.close()
  }
}
