// The code the OrderlyOutboxCore documentation shows, compiled by `swift build` (with no trait:
// the module needs none); docs-gen copies each sample into its `orderly:sample` region.
// sample: outbox-core-any-store, outbox-core-audit-on
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

// sample: outbox-core-audit-on
/// Starts delivery with the audit trail on, kept 3 days, whichever store the app chose.
func startAudited<O: DurableOutbox<NoteEdit>>(
  _ outbox: O,
  options: O.Options,
  send: @escaping @Sendable (Envelope<NoteEdit>) async throws -> Void
) throws {
  var options = options
  options.audit = OutboxAuditOptions(isOn: true, retention: .seconds(3 * 24 * 3600))
  try outbox.start(options, deliver: .each(send))
}
// end sample
