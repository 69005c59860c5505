// NotesRepository on an SQLite file (OrderlySQLite, through GRDB): calls fired as separate
// Task {} run in call order and are written to disk; the service is closed, and the file is
// reopened by a new one, as a new run of the app would, and the notes are still there.
// Any failure prints one line and exits with status 1.
import Foundation
import OrderlyRepository
import OrderlySQLite

let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-notes-sqlite-\(ProcessInfo.processInfo.processIdentifier)")
let path = folder.appendingPathComponent("notes.sqlite").path

@MainActor
func main() async throws {
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)

  print("First run: a new database at <temporary folder>/notes.sqlite")
  let service = try SQLiteNotesService(path: path)
  let repository = NotesRepository(service: service)
  // Each Task runs on the main actor until its call has a place in line, so the calls are
  // numbered in the order written.
  let tasks: [Task<Void, any Error>] = [
    Task { try await repository.create(title: "groceries", body: "milk, eggs") },
    Task { try await repository.create(title: "ideas") },
    Task { try await repository.create(title: "call the plumber") },
    Task { try await repository.update(id: 1, title: "groceries", body: "milk, eggs, bread") },
    Task { try await repository.delete(id: 2) },
    Task { try await repository.update(id: 2, title: "gone already") },
  ]
  for task in tasks { _ = await task.result }
  for entry in repository.log.entries { print("  \(entry)") }
  print("Verdict: \(repository.log.verdict)")
  try service.close()

  print("")
  print("Second run: the same file, opened by a new service")
  let reopened = NotesRepository(service: try SQLiteNotesService(path: path))
  for note in try await reopened.notes() {
    print("  note \(note.id): \(note.title)\(note.body.isEmpty ? "" : " (\(note.body))")")
  }

  print("")
  print("A file that is not a notes database is refused, and left as it was:")
  let text = folder.appendingPathComponent("shopping.txt")
  try Data("milk\n".utf8).write(to: text)
  do {
    _ = try SQLiteNotesService(path: text.path)
  } catch {
    print(
      "  " + error.description.replacingOccurrences(of: folder.path, with: "<temporary folder>")
    )
  }
  print(
    "  its contents afterwards: \(String(decoding: try Data(contentsOf: text), as: UTF8.self))",
    terminator: ""
  )
}

do {
  try await main()
  try? FileManager.default.removeItem(at: folder)
} catch {
  try? FileManager.default.removeItem(at: folder)
  FileHandle.standardError.write(Data("notes-sqlite: \(error)\n".utf8))
  exit(1)
}
