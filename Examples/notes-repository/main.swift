// The notes screen's seven calls, each fired as its own Task {} against a slow in-memory notes service:
// first straight at the service, where they finish whenever their latency says; then through
// NotesRepository, whose SerialQueue makes them start and finish in the order they were made.
import Foundation
import OrderlyRepository

/// The notes screen's seven calls, numbered as the screen makes them.
let seven: [(call: Int, operation: NotesOperation)] = [
  (1, .fetchNotes), (2, .fetchNote), (3, .createNote), (4, .fetchNotes),
  (5, .updateNote), (6, .fetchNotes), (7, .deleteNote),
]

/// A service with seeded random latency (the same run every time) whose first update fails.
func slowService() -> InMemoryNotesService {
  InMemoryNotesService(
    notes: [
      Note(id: 1, title: "groceries", body: "milk", createdAt: .now),
      Note(id: 2, title: "ideas", body: "", createdAt: .now),
    ],
    latency: .random(.milliseconds(20) ... .milliseconds(150)),
    failures: [.call(1, of: .updateNote)],
    seed: 7
  )
}

/// Makes one call straight at the service and returns a summary of the answer.
func call(_ operation: NotesOperation, on service: InMemoryNotesService) async throws -> String {
  switch operation {
  case .fetchNotes: return "\(try await service.fetchNotes().count) notes"
  case .fetchNote: return "note 1: \(try await service.fetchNote(id: 1)?.title ?? "none")"
  case .createNote: return "note \(try await service.createNote(title: "todo", body: "").id): todo"
  case .updateNote:
    return "note \(try await service.updateNote(id: 1, title: "shopping", body: "").id)"
  case .deleteNote:
    try await service.deleteNote(id: 2)
    return "deleted note 2"
  }
}

/// Makes one call through the repository; the repository logs it.
///
/// It stays on the caller's actor until the call has its place in line, so calls made from
/// tasks on the main actor are numbered in the order those tasks run.
func call(
  _ operation: NotesOperation,
  on repository: NotesRepository,
  isolation: isolated (any Actor)? = #isolation
) async {
  switch operation {
  case .fetchNotes: _ = try? await repository.notes()
  case .fetchNote: _ = try? await repository.note(id: 1)
  case .createNote: _ = try? await repository.create(title: "todo")
  case .updateNote: _ = try? await repository.update(id: 1, title: "shopping")
  case .deleteNote: _ = try? await repository.delete(id: 2)
  }
}

func show(_ log: ActivityLog) {
  for entry in log.entries { print("  \(entry)") }
  print("Verdict: \(log.verdict)")
}

print("Straight at the service: seven Task {} calls, each logged around the call.")
let direct = slowService()
let directLog = ActivityLog()
var tasks: [Task<Void, Never>] = []
for (number, operation) in seven {
  tasks.append(
    Task {
      _ = try? await directLog.track(operation, call: number, summary: { $0 }) {
        try await call(operation, on: direct)
      }
    }
  )
}
for task in tasks { await task.value }
show(directLog)

print("")
print("Through NotesRepository: the same seven Task {} calls.")
let repository = NotesRepository(service: slowService())
tasks = []
for (_, operation) in seven {
  tasks.append(Task { await call(operation, on: repository) })
}
for task in tasks { await task.value }
show(repository.log)
