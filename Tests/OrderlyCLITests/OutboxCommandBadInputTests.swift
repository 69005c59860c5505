import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import OrderlySQLite
import Testing

/// Runs `orderly outbox ARGUMENTS` and checks that it failed with `status`, said `expected` on
/// standard error, printed nothing on standard output, and left the folder byte for byte as it
/// was.
private func refuses(
  _ arguments: [String],
  in folder: ScratchFolder,
  status: Int32,
  saying expected: [String],
  sourceLocation: SourceLocation = #_sourceLocation
) async throws {
  let before = try folder.snapshot()
  let result = try await orderly(["outbox"] + arguments)
  #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
  for words in expected {
    #expect(result.stderr.contains(words), "\(result.stderr)", sourceLocation: sourceLocation)
  }
  #expect(result.stdout.isEmpty, "\(result.stdout)", sourceLocation: sourceLocation)
  let after = try folder.snapshot()
  #expect(after == before, "the folder changed", sourceLocation: sourceLocation)
}

/// An outbox file with one dead letter (`dead`) and one pending message (`pending`), closed.
private func outboxFile(in folder: ScratchFolder) async throws -> (
  path: String, dead: UUID, pending: UUID
) {
  let path = folder.path("outbox.sqlite")
  let outbox = try Outbox<String>(path: path)
  let dead = try await outbox.append("poison", partition: "a")
  let pending = try await outbox.append("fine", partition: "b")
  try await outbox.pause(partition: "b")
  try outbox.start { envelope in
    if envelope.message == "poison" { throw PermanentDeliveryFailure("rejected") }
  }
  let deadline = ContinuousClock.now + .seconds(120)
  while try await outbox.counts().deadLetters == 0, ContinuousClock.now < deadline {
    try await Task.sleep(for: .milliseconds(20))
  }
  await outbox.stop()
  try await outbox.close()
  return (path, dead, pending)
}

@Suite("orderly outbox: bad input is refused and changes nothing")
struct OutboxCommandBadInputTests {
  @Test("a path with no file, an empty file, a folder")
  func notAFile() async throws {
    let folder = try ScratchFolder()
    try await refuses(
      ["status", "--database", folder.path("missing.sqlite")],
      in: folder,
      status: 1,
      saying: ["missing.sqlite", "there is no file at this path"]
    )
    try Data().write(to: folder.url.appendingPathComponent("empty.sqlite"))
    try await refuses(
      ["keys", "--database", folder.path("empty.sqlite")],
      in: folder,
      status: 1,
      saying: ["empty.sqlite", "empty file, not an Orderly outbox"]
    )
    try FileManager.default.createDirectory(
      atPath: folder.path("a-folder"),
      withIntermediateDirectories: false
    )
    try await refuses(
      ["dead-letters", "--database", folder.path("a-folder")],
      in: folder,
      status: 1,
      saying: ["a-folder", "it is a folder"]
    )
  }

  @Test("another program's database, a notes database, an SQLite file without tables, a text file")
  func notAnOutbox() async throws {
    let folder = try ScratchFolder()
    let other = try DatabaseQueue(path: folder.path("other.sqlite"))
    try await other.write { try $0.execute(sql: "CREATE TABLE invoices (id INTEGER)") }
    try other.close()
    try await refuses(
      ["status", "--database", folder.path("other.sqlite")],
      in: folder,
      status: 1,
      saying: ["another program's SQLite database", "invoices"]
    )
    let notes = try SQLiteNotesService(path: folder.path("notes.sqlite"))
    try notes.close()
    try await refuses(
      ["keys", "--database", folder.path("notes.sqlite")],
      in: folder,
      status: 1,
      saying: ["notes.sqlite", "not an Orderly outbox"]
    )
    let bare = try DatabaseQueue(path: folder.path("bare.sqlite"))
    try await bare.write { try $0.execute(sql: "PRAGMA user_version = 1") }
    try bare.close()
    try await refuses(
      ["status", "--database", folder.path("bare.sqlite")],
      in: folder,
      status: 1,
      saying: ["without an Orderly outbox"]
    )
    try Data("hello\n".utf8).write(to: folder.url.appendingPathComponent("text.sqlite"))
    try await refuses(
      ["status", "--database", folder.path("text.sqlite")],
      in: folder,
      status: 1,
      saying: ["not an SQLite file"]
    )
  }

  @Test("an outbox written by a newer Orderly")
  func newerSchema() async throws {
    let folder = try ScratchFolder()
    let (path, _, _) = try await outboxFile(in: folder)
    let database = try DatabaseQueue(path: path)
    try await database.write {
      try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('orderly outbox 99: the future')")
    }
    try database.close()
    try await refuses(
      ["status", "--database", path],
      in: folder,
      status: 1,
      saying: ["newer version of Orderly", "orderly outbox 99"]
    )
  }

  @Test("an unknown id, a retry or drop of a message that is not a dead letter, an unknown key")
  func unknownThings() async throws {
    let folder = try ScratchFolder()
    let (path, dead, pending) = try await outboxFile(in: folder)
    let unknown = UUID()
    try await refuses(
      ["retry", unknown.uuidString, "--database", path],
      in: folder,
      status: 1,
      saying: ["no message \(unknown.uuidString)", "dead-letters"]
    )
    try await refuses(
      ["peek", unknown.uuidString, "--database", path],
      in: folder,
      status: 1,
      saying: ["no message \(unknown.uuidString)"]
    )
    try await refuses(
      ["retry", pending.uuidString, "--database", path],
      in: folder,
      status: 1,
      saying: ["pending in key b", "not a dead letter"]
    )
    try await refuses(
      ["drop", pending.uuidString, "--database", path],
      in: folder,
      status: 1,
      saying: ["not a dead letter"]
    )
    try await refuses(
      ["pause", "no-such-key", "--database", path],
      in: folder,
      status: 1,
      saying: ["no key no-such-key", "orderly outbox keys"]
    )
    try await refuses(
      ["resume", "a", "--database", path],
      in: folder,
      status: 1,
      saying: ["key a is not paused"]
    )
    try await refuses(
      ["pause", "b", "--database", path],
      in: folder,
      status: 1,
      saying: ["key b is already paused"]
    )
    // The dead letter is still there to be retried.
    let retried = try await orderly(["outbox", "retry", dead.uuidString, "--database", path])
    #expect(retried.status == 0, "\(retried.stderr)")
  }

  @Test("usage errors exit 64: no outbox named, both named, an id that is not one")
  func usage() async throws {
    let folder = try ScratchFolder()
    let (path, _, _) = try await outboxFile(in: folder)
    try await refuses(["status"], in: folder, status: 64, saying: ["--database PATH", "--url URL"])
    try await refuses(
      ["status", "--database", path, "--url", "postgresql://u@localhost/db"],
      in: folder,
      status: 64,
      saying: ["cannot be used together"]
    )
    try await refuses(
      ["retry", "not-an-id", "--database", path],
      in: folder,
      status: 64,
      saying: ["not-an-id"]
    )
    #if !Postgres
    // Built without the Postgres trait: one line saying how to get it.
    try await refuses(
      ["status", "--url", "postgresql://u@localhost/db"],
      in: folder,
      status: 64,
      saying: [
        "--url needs the Postgres trait", "swift run --traits SQLite,Postgres orderly outbox",
      ]
    )
    #endif
    try await refuses(
      ["keys", "--format", "yaml", "--database", path],
      in: folder,
      status: 64,
      saying: ["yaml"]
    )
  }
}
