// Usage: notes-sqlite-probe PATH TITLE
// Creates a note titled TITLE in the notes database at PATH through NotesRepository, prints
// `created ID` once the call has returned, then waits to be killed.
import Foundation
import OrderlyRepository
import OrderlySQLite

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
  FileHandle.standardError.write(Data("usage: notes-sqlite-probe PATH TITLE\n".utf8))
  exit(64)
}
do {
  let repository = NotesRepository(service: try SQLiteNotesService(path: arguments[1]))
  let note = try await repository.create(title: arguments[2])
  // Written straight to the file descriptor: no buffer stands between the line and the reader.
  FileHandle.standardOutput.write(Data("created \(note.id)\n".utf8))
  while true { try await Task.sleep(for: .seconds(60)) }
} catch {
  FileHandle.standardError.write(Data("notes-sqlite-probe: \(error)\n".utf8))
  exit(1)
}
