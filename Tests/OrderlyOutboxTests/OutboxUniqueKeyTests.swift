import BuiltProducts
import Foundation
import GRDB
import OrderlyOutbox
import OrderlyTestSupport
import Testing

@Suite("Outbox: unique keys in the app's database and in older files")
struct OutboxUniqueKeyTests {
  @Test("a unique key taken in the app's transaction is held exactly when it commits")
  func inOwnTransaction() async throws {
    let database = try DatabaseQueue()
    try await database.write { db in
      try db.execute(sql: "CREATE TABLE invoice (id INTEGER PRIMARY KEY, sent INTEGER)")
      try db.execute(sql: "INSERT INTO invoice (id, sent) VALUES (7, 0)")
    }
    let outbox = try Outbox<Change>(database: database)
    struct Undo: Error {}
    do {
      try await database.write { db in
        try db.execute(sql: "UPDATE invoice SET sent = 1 WHERE id = 7")
        let result = try outbox.append(Change("7", "rolled back"), uniqueKey: "invoice-7", in: db)
        #expect(result.wasAppended)
        throw Undo()
      }
    } catch is Undo {}
    // Rolled back: the key was never taken.
    let committed = try await database.write { db in
      try db.execute(sql: "UPDATE invoice SET sent = 1 WHERE id = 7")
      return try outbox.append(Change("7", "sent"), uniqueKey: "invoice-7", in: db)
    }
    #expect(committed.wasAppended)
    let again = try await outbox.append(Change("7", "sent again"), uniqueKey: "invoice-7")
    #expect(again == .duplicate(of: committed.id))
    let inside = try await database.write { db in
      try outbox.append(Change("7", "inside"), uniqueKey: "invoice-7", in: db)
    }
    #expect(inside == .duplicate(of: committed.id))
    #expect(outbox.pendingCount == 1)
    #expect(throws: OutboxError.self) {
      try database.write { db in try outbox.append(Change("7", "x"), uniqueKey: "", in: db) }
    }
  }

  @Test("an outbox file from before unique keys gains them when opened, its messages kept")
  func migratesOlderFile() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("outbox.sqlite")
    let first = try Outbox<Change>(path: path)
    try await first.append(Change("n", "old"))
    try await first.close()
    // Back to the schema before unique keys: no column, index or table, no record of them.
    let queue = try DatabaseQueue(path: path)
    try await queue.write { db in
      try db.execute(sql: "DROP INDEX outbox_message_unique")
      try db.execute(sql: "ALTER TABLE outbox_message DROP COLUMN uniqueKey")
      try db.execute(sql: "DROP TABLE outbox_unique_window")
      try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier LIKE 'orderly outbox 6%'")
    }
    try queue.close()

    let second = try Outbox<Change>(path: path)
    #expect(second.pendingCount == 1)
    let appended = try await second.append(Change("n", "new"), uniqueKey: "n-new")
    let duplicate = try await second.append(Change("n", "new"), uniqueKey: "n-new")
    #expect(appended.wasAppended && duplicate == .duplicate(of: appended.id))
    let seen = OrderedRecorder<String>()
    try second.start { seen.record($0.message.text) }
    try await second.waitUntilDelivered()
    try await second.close()
    #expect(seen.values == ["old", "new"])
  }
}
