import BuiltProducts
import Foundation
import OrderlyOutbox
import OrderlyRepository
import OrderlySQLite
import OrderlyTestSupport
import Testing

@Suite("OfflineNotesService: local writes and their mutations, stored together")
struct OfflineNotesServiceTests {
  @Test("each change is stored locally and appended to the outbox; edits of a pending note merge")
  func changesBecomeMutations() async throws {
    let folder = try ScratchFolder()
    let service = try OfflineNotesService(path: folder.path("notes.sqlite"))
    let a = try await service.createNote(title: "a", body: "")
    _ = try await service.updateNote(id: a.id, title: "a2", body: "x")
    let b = try await service.createNote(title: "b", body: "")
    try await service.deleteNote(id: b.id)
    #expect(service.outbox.pendingCount == 3)
    let sent = OrderedRecorder<NoteMutation>()
    try service.outbox.start { envelope in sent.record(envelope.message) }
    try await service.outbox.waitUntilDelivered()
    #expect(
      sent.values == [
        .create(id: a.id, title: "a2", body: "x"), .create(id: b.id, title: "b", body: ""),
        .delete(id: b.id),
      ]
    )
    try await service.close()
  }

  @Test("a change that fails appends nothing")
  func failedChange() async throws {
    let folder = try ScratchFolder()
    let service = try OfflineNotesService(path: folder.path("notes.sqlite"))
    await #expect(throws: (any Error).self) {
      try await service.updateNote(id: 42, title: "nobody", body: "")
    }
    await #expect(throws: (any Error).self) {
      try await service.createNote(title: "bad\u{0}", body: "")
    }
    #expect(service.outbox.pendingCount == 0)
    try await service.close()
  }

  @Test("pending mutations survive a relaunch; a plain notes file opens and gains an outbox")
  func relaunch() async throws {
    let folder = try ScratchFolder()
    let path = folder.path("notes.sqlite")
    let plain = try SQLiteNotesService(path: path)
    let old = try await plain.createNote(title: "before", body: "")
    try plain.close()

    let first = try OfflineNotesService(path: path, mergesEdits: false)
    _ = try await first.updateNote(id: old.id, title: "one", body: "")
    _ = try await first.updateNote(id: old.id, title: "two", body: "")
    try await first.close()

    let second = try OfflineNotesService(path: path)
    #expect(second.outbox.pendingCount == 2)
    #expect(try await second.fetchNotes().map(\.title) == ["two"])
    try await second.close()
    #expect(throws: SQLiteNotesError.self) { try SQLiteNotesService(path: path) }
  }

  @Test("merging: an edit folds into a creation or an edit, never into or over a deletion")
  func merging() {
    let create = NoteMutation.create(id: 1, title: "a", body: "")
    let update = NoteMutation.update(id: 1, title: "b", body: "x")
    #expect(create.merging(update) == .create(id: 1, title: "b", body: "x"))
    #expect(
      update.merging(.update(id: 1, title: "c", body: "")) == .update(id: 1, title: "c", body: "")
    )
    #expect(update.merging(.delete(id: 1)) == nil)
    #expect(NoteMutation.delete(id: 1).merging(create) == nil)
    #expect(create.merging(.update(id: 2, title: "b", body: "")) == nil)
    var notes: [Note.ID: NoteText] = [:]
    #expect(create.apply(to: &notes) && !create.apply(to: &notes))
    #expect(update.apply(to: &notes) && notes[1] == NoteText(title: "b", body: "x"))
    #expect(NoteMutation.delete(id: 1).apply(to: &notes) && notes.isEmpty)
  }
}
