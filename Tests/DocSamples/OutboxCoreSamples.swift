// The code the OrderlyOutboxCore documentation shows, compiled by `swift build` (with no trait:
// the module needs none); docs-gen copies each sample into its `orderly:sample` region.
// sample: outbox-core-any-store
import OrderlyOutboxCore
// end sample

/// A change the core samples record.
struct NoteEdit: Codable, Sendable {
  var noteID: Int
  var text: String
}

// sample: outbox-core-any-store
/// Records an edit, whichever store the app chose.
func record(_ edit: NoteEdit, in outbox: some DurableOutbox<NoteEdit>) async throws {
  try await outbox.append(edit, partition: "note-\(edit.noteID)")
}
// end sample
