import BuiltProducts
import Foundation
import GRDB
import OrderlyRepository
import OrderlySQLite
import Testing

@Suite("SQLiteNotesService")
struct SQLiteNotesServiceTests {
  @Test("create, read, update, delete, in memory and on a file", arguments: [false, true])
  func crud(onFile: Bool) async throws {
    let folder = try ScratchFolder()
    let service =
      onFile ? try SQLiteNotesService(path: folder.path("notes.sqlite")) : try SQLiteNotesService()
    let repository = NotesRepository(service: service)
    let milk = try await repository.create(title: "milk", body: "2 litres")
    let eggs = try await repository.create(title: "eggs")
    #expect((milk.id, eggs.id) == (1, 2))
    let changed = try await repository.update(id: milk.id, title: "oat milk", body: "1 litre")
    #expect(changed.title == "oat milk" && changed.createdAt == milk.createdAt)
    #expect(try await repository.note(id: eggs.id).title == "eggs")
    try await repository.delete(id: eggs.id)
    #expect(try await repository.notes().map(\.title) == ["oat milk"])
  }

  @Test("unknown ids map to their operation's NotesError through the repository")
  func unknownIDs() async throws {
    let repository = NotesRepository(service: try SQLiteNotesService())
    await #expect(throws: NotesError.fetchNote(id: 9, reason: "no note with id 9")) {
      try await repository.note(id: 9)
    }
    await #expect(throws: NotesError.updateNote(id: 9, reason: "no note with id 9")) {
      try await repository.update(id: 9, title: "x")
    }
    await #expect(throws: NotesError.deleteNote(id: 9, reason: "no note with id 9")) {
      try await repository.delete(id: 9)
    }
  }

  @Test("notes persist across reopening, in WAL mode")
  func persistence() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    do {
      let repository = NotesRepository(service: try SQLiteNotesService(path: path))
      try await repository.create(title: "kept", body: "across runs")
      #expect(FileManager.default.fileExists(atPath: path + "-wal"))
    }
    let reopened = NotesRepository(service: try SQLiteNotesService(path: path))
    let notes = try await reopened.notes()
    #expect(notes.map(\.title) == ["kept"] && notes.first?.body == "across runs")
    let mode = try await DatabaseQueue(path: path).read { db in
      try String.fetchOne(db, sql: "PRAGMA journal_mode")
    }
    #expect(mode == "wal")
  }

  @Test("a write that returned survives SIGKILL of the process right after")
  func durabilityAfterKill() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    for round in 1...3 {
      let probe = try BuiltProducts.Running(
        "notes-sqlite-probe",
        arguments: [path, "note \(round)"]
      )
      // Read until the probe says the write returned, then kill it at once.
      let said = await probe.readLines(1)
      probe.send(SIGKILL)
      let ended = await probe.finish()
      #expect(ended.reason == .uncaughtSignal)
      #expect(said == ["created \(round)"])
    }
    let notes = try await SQLiteNotesService(path: path).fetchNotes()
    #expect(notes.map(\.title) == ["note 1", "note 2", "note 3"])
  }

  @Test("a folder that does not exist gives a clear error naming the path")
  func missingFolder() throws {
    let folder = try ScratchFolder()
    let path = folder.path("no/such/folder/notes.sqlite")
    do {
      _ = try SQLiteNotesService(path: path)
      Issue.record("opened a database in a missing folder")
    } catch {
      guard case .cannotOpen(let errorPath, _) = error else {
        Issue.record("unexpected error \(error)")
        return
      }
      #expect(errorPath == path)
      #expect(error.description.hasPrefix("cannot open the notes database at \(path): "))
    }
    #expect(!FileManager.default.fileExists(atPath: folder.path("no")))
  }

  @Test("a folder in place of the file gives a clear error")
  func folderAsFile() throws {
    let folder = try ScratchFolder()
    #expect(throws: SQLiteNotesError.cannotOpen(path: folder.url.path, reason: "it is a folder")) {
      try SQLiteNotesService(path: folder.url.path)
    }
  }

  @Test("a file that is not SQLite is refused and left byte for byte as it was")
  func notSQLite() throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.txt")
    let contents = Data("shopping list: milk, eggs\n".utf8)
    try contents.write(to: URL(fileURLWithPath: path))
    #expect(
      throws: SQLiteNotesError.notANotesDatabase(path: path, reason: "it is not an SQLite file")
    ) { try SQLiteNotesService(path: path) }
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == contents)
    #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
  }

  @Test("another program's SQLite database is refused and left as it was")
  func otherDatabase() throws {
    let folder = try ScratchFolder()
    let path = folder.path("app.sqlite")
    try DatabaseQueue(path: path).write { db in
      try db.execute(sql: "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    }
    let before = try Data(contentsOf: URL(fileURLWithPath: path))
    do {
      _ = try SQLiteNotesService(path: path)
      Issue.record("opened another program's database")
    } catch {
      #expect(
        error
          == .notANotesDatabase(
            path: path,
            reason: "it is another program's SQLite database (tables: users)"
          )
      )
      #expect(error.description.contains("The file was left untouched"))
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
  }

  @Test("an empty file is taken as a new database")
  func emptyFile() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("empty.sqlite")
    #expect(FileManager.default.createFile(atPath: path, contents: Data()))
    let service = try SQLiteNotesService(path: path)
    _ = try await service.createNote(title: "first", body: "")
    #expect(try await service.fetchNotes().count == 1)
  }
}
