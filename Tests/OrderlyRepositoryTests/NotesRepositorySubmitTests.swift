import Foundation
import OrderlyCore
import OrderlyRepository
import OrderlyTestSupport
import Testing

/// A request id carried as a task-local value, as tracing or dependency overrides are.
enum RequestContext {
  @TaskLocal static var id = "none"
}

/// A service that records, for each note it creates, the caller's task-local id and priority,
/// and holds its first create until `release` opens (so later calls wait in line).
final class ContextRecordingService: NotesService {
  let inner = InMemoryNotesService()
  let seen = OrderedRecorder<String>()
  let firstCreateStarted = Gate()
  let release = Gate()

  func fetchNotes() async throws -> [Note] { try await inner.fetchNotes() }
  func fetchNote(id: Note.ID) async throws -> Note? { try await inner.fetchNote(id: id) }
  func createNote(title: String, body: String) async throws -> Note {
    seen.record("\(title):\(RequestContext.id):\(Task.currentPriority)")
    // The repository runs one call at a time, so the count read here is this call's.
    if seen.count == 1 {
      firstCreateStarted.open()
      try await release.wait()
    }
    return try await inner.createNote(title: title, body: body)
  }
  func updateNote(id: Note.ID, title: String, body: String) async throws -> Note {
    try await inner.updateNote(id: id, title: title, body: body)
  }
  func deleteNote(id: Note.ID) async throws { try await inner.deleteNote(id: id) }
}

/// Submits three calls from synchronous, nonisolated code, in the order written.
private func submitThree(
  to repository: NotesRepository
) -> (NotesCall<Note>, NotesCall<Note>, NotesCall<[Note]>) {
  (
    repository.submit(.create(title: "milk")),
    repository.submit(.create(title: "eggs")),
    repository.submit(.notes)
  )
}

/// An actor that submits to a repository from its own isolation.
actor Submitter {
  func submit(_ repository: NotesRepository) -> (NotesCall<Note>, NotesCall<[Note]>) {
    (repository.submit(.create(title: "from an actor")), repository.submit(.notes))
  }
}

@Suite("NotesRepository.submit: a place in line at the call site, with the caller's context")
struct NotesRepositorySubmitTests {
  @Test("calls submitted from nonisolated code run in the order written, awaited in any order")
  func nonisolatedOrder() async throws {
    let repository = NotesRepository(service: InMemoryNotesService())
    let (milk, eggs, all) = submitThree(to: repository)
    // Awaited from detached tasks made in reverse order: the awaiting order changes nothing.
    let allTitles = Task.detached { try await all.value.map(\.title) }
    let eggsID = Task.detached { try await eggs.value.id }
    let milkID = Task.detached { try await milk.value.id }
    let titles = try await allTitles.value
    #expect(titles == ["milk", "eggs"])
    let ids = [try await milkID.value, try await eggsID.value]
    #expect(ids == [1, 2])
    let numbers: [Int] = [milk.number, eggs.number, all.number]
    #expect(numbers == [1, 2, 3])
    let operations = repository.log.entries.map(\.operation)
    #expect(
      operations == [.createNote, .createNote, .createNote, .createNote, .fetchNotes, .fetchNotes]
    )
  }

  @Test("calls submitted from a custom actor keep their order")
  func actorOrder() async throws {
    let repository = NotesRepository(service: InMemoryNotesService())
    let (created, all) = await Submitter().submit(repository)
    let titles = try await all.value.map(\.title)
    #expect(titles == ["from an actor"])
    #expect(try await created.value.id == 1)
  }

  @Test("a call waiting in line runs with its own caller's task-local values and priority")
  func callerContext() async throws {
    let service = ContextRecordingService()
    let repository = NotesRepository(service: service)
    let first = Task(priority: .high) {
      try await RequestContext.$id.withValue("first") {
        try await repository.create(title: "a")
      }
    }
    try await service.firstCreateStarted.wait()
    // Made while the first call holds the line: it waits, then must run as its caller would.
    let second = Task(priority: .utility) {
      RequestContext.$id.withValue("second") { repository.submit(.create(title: "b")) }
    }
    let call = await second.value
    service.release.open()
    _ = try await first.value
    // Not `call.value` from this task: a higher-priority awaiter would raise the call, as
    // awaiting a `Task` raises it.
    try await service.seen.waitForCount(2)
    let seen = service.seen.values
    #expect(seen == ["a:first:\(TaskPriority.high)", "b:second:\(TaskPriority.utility)"])
    _ = try await Task(priority: .utility) { try await call.value }.value
  }

  @Test("an async method's call waiting in line also keeps its caller's task-local values")
  func asyncMethodContext() async throws {
    let service = ContextRecordingService()
    let repository = NotesRepository(service: service)
    let first = Task {
      try await RequestContext.$id.withValue("first") { try await repository.create(title: "a") }
    }
    try await service.firstCreateStarted.wait()
    var events = repository.events.makeAsyncIterator()
    let second = Task {
      try await RequestContext.$id.withValue("second") { try await repository.create(title: "b") }
    }
    // The second call is in line before the first is let go.
    while let event = await events.next() {
      if case .enqueued = event.kind { break }
    }
    service.release.open()
    _ = try await first.value
    _ = try await second.value
    let seen = service.seen.values.map { $0.split(separator: ":").prefix(2).joined(separator: ":") }
    #expect(seen == ["a:first", "b:second"])
  }

  @Test("a submitted call cancelled before its turn never reaches the service")
  func cancelBeforeTurn() async throws {
    let service = ContextRecordingService()
    let repository = NotesRepository(service: service)
    let first = repository.submit(.create(title: "a"))
    try await service.firstCreateStarted.wait()
    let second = repository.submit(.create(title: "b"))
    second.cancel()
    service.release.open()
    _ = try await first.value
    await #expect(throws: NotesError.createNote(reason: "cancelled")) { try await second.value }
    #expect(service.seen.values.count == 1)
  }
}
