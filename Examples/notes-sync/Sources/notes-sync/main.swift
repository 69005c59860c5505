// An offline-first notes app and its server, across a real process boundary. The app edits its
// notes with no network: each change is stored in its SQLite file together with the mutation
// the server must apply. The app is then killed (SIGKILL) before it ever went online. It starts
// again, goes online, and its outbox sends the mutations to the server (Hummingbird, on
// loopback) over HTTP (AsyncHTTPClient), in the order they were made, each once.
//
//   notes-sync              the whole story (starts the app as a child process)
//   notes-sync app PATH     the app's offline session, on the notes file at PATH
//   notes-sync deliver PATH URL
//                           the app online: delivers its outbox to the server at URL, printing
//                           `delivered N` after each, and waits to be killed (for the tests)
import Foundation
import NotesSyncClient
import NotesSyncServer
import OrderlyOutbox
import OrderlyRepository
import OrderlySQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Written straight to the file descriptor, so the parent reads each line as it is made.
func say(_ line: String) {
  FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The app's offline session: six edits, then it waits to be killed.
func offlineSession(path: String) async throws {
  let notes = try OfflineNotesService(path: path)
  let repository = NotesRepository(service: notes)
  let groceries = try await repository.create(title: "groceries", body: "milk")
  say("  create note \(groceries.id): groceries")
  let ideas = try await repository.create(title: "ideas")
  say("  create note \(ideas.id): ideas")
  _ = try await repository.update(id: groceries.id, title: "groceries", body: "milk, eggs")
  say("  edit note \(groceries.id): milk, eggs")
  let plumber = try await repository.create(title: "call the plumber")
  say("  create note \(plumber.id): call the plumber")
  _ = try await repository.update(id: ideas.id, title: "ideas", body: "an outbox")
  say("  edit note \(ideas.id): an outbox")
  try await repository.delete(id: plumber.id)
  say("  delete note \(plumber.id)")
  say(
    "  (6 edits, \(notes.outbox.pendingCount) mutations waiting: edits of a note not sent yet fold into it)"
  )
  say("ready")
  while true { try await Task.sleep(for: .seconds(60)) }
}

/// The app online: delivers its outbox, then waits to be killed.
func deliverSession(path: String, url: String) async throws {
  let notes = try OfflineNotesService(path: path)
  let events = notes.outbox.events
  try notes.outbox.start(deliver: NotesSyncClient(baseURL: url).deliver)
  for await event in events {
    if case .delivered(_, let sequence) = event { say("delivered \(sequence)") }
  }
}

/// Starts the app's offline session in a child process, prints what it says, and kills it.
func runAndKillApp(path: String) throws {
  let process = Process()
  process.executableURL = Bundle.main.executableURL
  process.arguments = ["app", path]
  let output = Pipe()
  process.standardOutput = output
  try process.run()
  var received = Data()
  while !String(decoding: received, as: UTF8.self).contains("ready\n") {
    let chunk = output.fileHandleForReading.availableData
    if chunk.isEmpty { break }
    received.append(chunk)
  }
  for line in String(decoding: received, as: UTF8.self).split(separator: "\n")
  where line != "ready" {
    print(line)
  }
  kill(process.processIdentifier, SIGKILL)
  process.waitUntilExit()
  print("The app is killed (SIGKILL) before it ever went online.")
}

func story() async throws {
  let folder = FileManager.default.temporaryDirectory
    .appendingPathComponent("orderly-notes-sync-\(ProcessInfo.processInfo.processIdentifier)")
  try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
  defer { try? FileManager.default.removeItem(at: folder) }
  let path = folder.appendingPathComponent("notes.sqlite").path

  let store = NotesStore()
  let server = try await NotesSyncServer.start(store: store)
  print("The server listens on loopback; it holds no notes.")
  print("")
  print("The app, offline, edits its notes; each change is stored with its mutation:")
  try runAndKillApp(path: path)

  print("")
  let notes = try OfflineNotesService(path: path)
  print("The app starts again: \(notes.outbox.pendingCount) mutations wait in its outbox.")
  print("It goes online; the outbox delivers them in order:")
  let client = NotesSyncClient(baseURL: server.baseURL)
  let events = notes.outbox.events
  try notes.outbox.start(deliver: client.deliver)
  var iterator = events.makeAsyncIterator()
  var delivered = 0
  let waiting = notes.outbox.pendingCount
  // Each delivery's start and end, in the order heard, for the picture below.
  var heard: [(sequence: Int64, ended: Bool)] = []
  while delivered < waiting, let event = await iterator.next() {
    if case .delivered(_, let sequence) = event {
      delivered += 1
      heard.append((sequence, true))
    }
    if case .delivering(_, let sequence, _) = event {
      heard.append((sequence, false))
      continue
    }
    print("  \(event)")
  }
  try await notes.outbox.waitUntilDelivered()

  print("")
  print("The server applied, in order:")
  let applied = await store.log
  for mutation in applied { print("  \(mutation)") }

  // The same deliveries, drawn: the n-th message delivered is the n-th mutation applied.
  print("")
  print("Drawn: each mutation waited in the outbox, on disk, across the kill, until delivered:")
  let order = heard.filter(\.ended).map(\.sequence)
  func label(_ sequence: Int64) -> String {
    guard let index = order.firstIndex(of: sequence), applied.indices.contains(index) else {
      return "mutation"
    }
    return String("\(applied[index])".prefix { $0 != ":" })
  }
  for sequence in order { print("  waiting #\(sequence) \(label(sequence))") }
  for (sequence, ended) in heard {
    print("  \(ended ? "delivered" : "delivering") #\(sequence) \(label(sequence))")
  }
  print("  (stored offline before the kill; sent after the restart, in order, one at a time)")
  let local = Dictionary(
    uniqueKeysWithValues: try await notes.fetchNotes().map {
      ($0.id, NoteText(title: $0.title, body: $0.body))
    }
  )
  let remote = try await client.notes()
  print("")
  print("The server's notes:")
  for (id, note) in remote.sorted(by: { $0.key < $1.key }) {
    print("  note \(id): \(note.title) (\(note.body))")
  }
  print(
    remote == local
      ? "Server and app agree: \(remote.count) notes."
      : "Server and app DISAGREE: server \(remote), app \(local)"
  )
  try await notes.close()
  await server.stop()
  if remote != local { exit(1) }
}

let arguments = CommandLine.arguments
do {
  if arguments.count == 3, arguments[1] == "app" {
    try await offlineSession(path: arguments[2])
  } else if arguments.count == 4, arguments[1] == "deliver" {
    try await deliverSession(path: arguments[2], url: arguments[3])
  } else if arguments.count == 1 {
    try await story()
  } else {
    FileHandle.standardError.write(Data("usage: notes-sync [app PATH | deliver PATH URL]\n".utf8))
    exit(64)
  }
} catch {
  FileHandle.standardError.write(Data("notes-sync: \(error)\n".utf8))
  exit(1)
}
