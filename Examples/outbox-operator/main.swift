// An operator finds the key an outbox is stuck on, and why, and fixes it without SQL, while
// the app keeps delivering: `orderly outbox` against the app's outbox file.
import Foundation
import OrderlyOperator
import OrderlyOutbox
import Synchronization

/// A change of a note, as the app sends it to its server.
struct NoteChange: Codable, Sendable {
  let note: Int
  let text: String
}

/// The server: it refuses titles longer than 40 characters until `acceptsLongTitles` is set
/// (a fix deployed on its side).
final class Server: Sendable {
  private let state = Mutex<(acceptsLongTitles: Bool, applied: [String])>((false, []))

  func apply(_ change: NoteChange) throws {
    try state.withLock { state in
      if change.text.count > 40, !state.acceptsLongTitles {
        throw PermanentDeliveryFailure("server said 422: title longer than 40 characters")
      }
      state.applied.append("note \(change.note): \(change.text)")
    }
  }

  func acceptLongTitles() { state.withLock { $0.acceptsLongTitles = true } }

  var applied: [String] { state.withLock { $0.applied } }
}

/// Runs `orderly outbox ARGUMENTS` as the operator types it, after a prompt line.
func run(_ arguments: String) async {
  print("$ orderly outbox \(arguments)")
  // A refusal goes where a terminal shows it: here, with the rest of the output.
  let status = await OutboxCommand.run(arguments.split(separator: " ").map(String.init)) {
    print($0)
  }
  print(status == 0 ? "" : "(exit status \(status))\n")
}

/// Waits until `condition` holds: a state the deliverer reaches, not a time.
func waitUntil(_ condition: () async throws -> Bool) async throws {
  while try await !condition() { try await Task.sleep(for: .milliseconds(10)) }
}

// The app's outbox, in a folder of its own; the operator works in that folder too.
let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("orderly-outbox-operator-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
guard FileManager.default.changeCurrentDirectoryPath(folder.path) else {
  FileHandle.standardError.write(Data("outbox-operator: cannot work in \(folder.path)\n".utf8))
  exit(1)
}

let server = Server()
let outbox = try Outbox<NoteChange>(path: "outbox.sqlite")
for change in [
  NoteChange(note: 7, text: "title: Groceries for the long weekend at the lake"),
  NoteChange(note: 8, text: "title: Trip"),
  NoteChange(note: 7, text: "text: milk, eggs"),
  NoteChange(note: 9, text: "title: Books"),
  NoteChange(note: 7, text: "text: milk, eggs, bread"),
  NoteChange(note: 8, text: "text: passports"),
] {
  try await outbox.append(change, partition: "note-\(change.note)")
}
// Note 7's line as the outbox tells it, for the picture at the end: its messages are #1, #3
// and #5 (the appends are numbered in order, across keys). A row per attempt: the title's
// first attempt (row 1), its two changes behind it (rows 2 and 3), the operator's retry (row 4).
let noteSeven: [Int64: String] = [
  1: "note 7 title (#1)", 3: "note 7 text (#3)", 5: "note 7 text (#5)",
]
let heard = Mutex<[String]>([])
let events = outbox.events
let listener = Task {
  var retried = false
  for await event in events {
    let sequence = event.sequence
    guard let what = noteSeven[sequence] else { continue }
    let row = sequence == 1 ? (retried ? 4 : 1) : sequence == 3 ? 2 : 3
    let label = "\(row) \(what)" + (row == 4 ? ", the operator's retry" : "")
    switch event {
    case .delivering: heard.withLock { $0.append("start \(label)") }
    case .delivered:
      heard.withLock { $0.append("finish \(label): delivered") }
      if sequence == 5 { return }
    case .deadLettered:
      retried = true
      heard.withLock { $0.append("error \(label): failed, refused (422), now a dead letter") }
    default: continue
    }
  }
}
try outbox.start(pollInterval: .milliseconds(50)) { envelope in
  try server.apply(envelope.message)
}
// Notes 8 and 9 are delivered; note 7 waits at its dead letter.
try await waitUntil {
  let counts = try await outbox.counts()
  return counts.deadLetters == 1 && counts.pending == 2 && server.applied.count == 3
}
// Keys are delivered side by side, so notes 8 and 9 may interleave: shown note by note.
print("The server applied:")
for line in server.applied.sorted(by: { $0.prefix(6) < $1.prefix(6) }) { print("  \(line)") }
print("")

// The operator: what is stuck, and why?
await run("status --database outbox.sqlite")
await run("keys --database outbox.sqlite")
await run("dead-letters --database outbox.sqlite")
let deadLetter = try await outbox.deadLetters()[0].id
await run("peek \(deadLetter.uuidString) --database outbox.sqlite --format text")
// A retry of a message that is not a dead letter is refused, and changes nothing.
let behind = try await outbox.keys().first { $0.partition == "note-7" }?.head?.uuidString ?? ""
await run("retry \(behind) --database outbox.sqlite")

// The server's team raises the limit; the operator puts the dead letter back at its place.
server.acceptLongTitles()
await run("retry \(deadLetter.uuidString) --database outbox.sqlite")
try await waitUntil { try await outbox.counts().pending == 0 }
print("The app, still running, delivered note 7 in order:")
for line in server.applied.dropFirst(3) { print("  \(line)") }
print("")
await run("status --database outbox.sqlite")
await outbox.stop()
try await outbox.close()

// #3 and #5 were in line behind #1 from their append, before delivery began.
await listener.value
print("Note 7's line, drawn: its three changes, the dead letter and the operator's retry:")
for line in ["waiting 2 note 7 text (#3)", "waiting 3 note 7 text (#5)"] + heard.withLock({ $0 }) {
  print("  \(line)")
}
print("  (the dead letter held note 7's line; retried, it and the two behind it went in order)")
