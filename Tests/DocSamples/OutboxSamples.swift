// The code the OrderlyOutbox documentation shows, compiled by `swift build`; docs-gen copies
// each sample into its `orderly:sample` region.
#if SQLite
import Foundation
// sample: outbox-in-transaction
import GRDB
// end sample
// sample: outbox-overview, outbox-in-transaction
import OrderlyOutbox
// end sample

/// What the samples send to.
struct NotesAPI: Sendable {
  func send(_ change: some Sendable, idempotencyKey: UUID) async throws {}
}

func outboxOverview(folder: String, api: NotesAPI) async throws {
  // sample: outbox-overview
  struct NoteChange: Codable, Sendable {
    var noteID: Int
    var text: String
  }

  let outbox = try Outbox<NoteChange>(path: folder + "/outbox.sqlite")
  try await outbox.append(NoteChange(noteID: 7, text: "milk, eggs"))
  try outbox.start { envelope in
    try await api.send(envelope.message, idempotencyKey: envelope.id)
  }
  // end sample
}

/// The message of the samples, outside a function.
struct NoteChange: Codable, Sendable {
  var noteID: Int
  var text: String
}

func outboxInTransaction(database: DatabasePool) async throws {
  let outbox = try Outbox<NoteChange>(database: database)
  // sample: outbox-in-transaction
  try await database.write { db in
    try db.execute(sql: "UPDATE note SET text = ? WHERE id = ?", arguments: ["milk", 7])
    try outbox.append(NoteChange(noteID: 7, text: "milk"), in: db)
  }
  // end sample
}
#endif
