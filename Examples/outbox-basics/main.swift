// An offline-first app's writes, kept in an outbox and sent to a server in the order they were
// made: the server is unreachable for two attempts (retried with backoff), then refuses one
// message for good (a dead letter, which stops the line so nothing overtakes it); dropping the
// dead letter lets the rest through. The server is an in-memory fake that takes 20 ms to answer.
// Time is a manual clock, moved on by the code that prints the events: every run prints the
// same times, and the backoff waits (100 ms, then 200 ms) are exact. The outbox is a real file
// (in a temporary folder, removed at the end): the app is closed after the offline changes and
// opened again, and the changes are still there.
import Foundation
import OrderlyOutbox
import OrderlyRepository
import OrderlyTestSupport
import Synchronization

/// The server could not be reached.
struct Unreachable: Error, CustomStringConvertible {
  var description: String { "the server is unreachable" }
}

/// A server that holds notes and applies mutations by their identifier, once each.
final class FakeServer: Sendable {
  private struct State {
    var notes: [Note.ID: NoteText] = [:]
    var applied: Set<UUID> = []
    var unreachableAttempts = 2
  }
  private let state = Mutex(State())

  var notes: [Note.ID: NoteText] { state.withLock { $0.notes } }

  @Sendable func receive(_ envelope: Envelope<NoteMutation>) throws {
    try state.withLock { state in
      if state.unreachableAttempts > 0 {
        state.unreachableAttempts -= 1
        throw Unreachable()
      }
      guard state.applied.insert(envelope.id).inserted else { return }
      guard envelope.message.apply(to: &state.notes) else {
        state.applied.remove(envelope.id)
        throw PermanentDeliveryFailure("404: the server has no note \(envelope.message.noteID)")
      }
    }
  }
}

let clock = ManualClock()
// A file of its own, as an app keeps one in its Application Support folder.
let folder = FileManager.default.temporaryDirectory
  .appendingPathComponent("outbox-basics-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let path = folder.appendingPathComponent("outbox.sqlite").path
var outbox = try Outbox<NoteMutation>(path: path, clock: clock)
let server = FakeServer()
var events = outbox.events

/// `[120 ms]`: a time on the clock, as the events are printed with it.
func stamp(_ time: Duration) -> String {
  let milliseconds = "\(Int(time / .milliseconds(1)))"
  return "[\(String(repeating: " ", count: max(0, 3 - milliseconds.count)))\(milliseconds) ms]"
}

/// How long the server takes to answer, on the clock.
let serverTime = Duration.milliseconds(20)

/// Prints events, each with the clock's time, until one matches; moves the clock on past each
/// attempt (the server's 20 ms) and each backoff wait, once the outbox is asleep on it.
///
/// The stream keeps what was not read yet for the next call.
@MainActor func show(until last: (OutboxEvent) -> Bool) async throws {
  var iterator = events.makeAsyncIterator()
  while let event = await iterator.next() {
    print("  \(stamp(clock.now.offset)) \(event)")
    switch event {
    case .delivering:
      try await clock.waitForSleepers(1)
      clock.advance(by: serverTime)
    case .retrying(_, _, _, let delay, _):
      try await clock.waitForSleepers(1)
      clock.advance(by: delay)
    default: break
    }
    if last(event) { return }
  }
}

print("Offline: five changes, each on disk before its append returns")
for (index, mutation): (Int, NoteMutation) in [
  .create(id: 1, title: "groceries", body: "milk"),
  .update(id: 1, title: "groceries", body: "milk, eggs"),
  .update(id: 7, title: "a note made on another device", body: ""),
  .create(id: 2, title: "ideas", body: ""),
  .delete(id: 1),
].enumerated() {
  try await outbox.append(mutation)
  // A new outbox numbers its messages from 1, in the order they are appended.
  print("  #\(index + 1) \(mutation)")
}
try await show { $0.sequence == 5 }

print("")
print("The app is closed, and opened again on the same file:")
try await outbox.close()
outbox = try Outbox<NoteMutation>(path: path, clock: clock)
events = outbox.events
print("  Pending: \(outbox.pendingCount), each in the order it was made")

print("")
print("Online: the first attempts fail, and are retried with backoff")
try outbox.start(
  retry: try RetryPolicy(initialDelay: .milliseconds(100), jitter: 0),
  onDeadLetter: .stopLine
) { envelope in
  try await clock.sleep(for: serverTime)
  try server.receive(envelope)
}
// One line: the head goes first, every later message waits behind it, as the picture draws.
for sequence in stride(from: 2, through: outbox.pendingCount, by: 1) {
  print("  \(stamp(clock.now.offset)) waiting #\(sequence): in line behind #\(sequence - 1)")
}
// The dead letter's event says whether the line waits at it.
var lineWaits = false
try await show {
  guard case .deadLettered(_, _, _, let lineStopped) = $0 else { return false }
  lineWaits = lineStopped
  return true
}
if !lineWaits { try await show { $0 == .delivered(id: $0.id, sequence: 5) } }

// Still the same run, indented: the picture draws #4 and #5 waiting until the drop.
print("  Pending: \(outbox.pendingCount), dead letters: \(outbox.deadLetterCount).")
if lineWaits {
  print("  The line waits at the dead letter, so #4 and #5 cannot overtake #3.")
} else {
  print("  The line went on past the dead letter: #4 and #5 were delivered while #3 waits aside.")
}
for letter in try await outbox.deadLetters() {
  let message = letter.message.map { "\($0)" } ?? "?"
  print("  \(stamp(clock.now.offset)) Dropping dead letter #\(letter.sequence): \(message)")
  try await outbox.dropDeadLetter(id: letter.id)
}
if lineWaits { try await show { $0 == .delivered(id: $0.id, sequence: 5) } }
try await outbox.waitUntilDelivered()

print("")
print("The server's notes:")
for (id, note) in server.notes.sorted(by: { $0.key < $1.key }) {
  print("  note \(id): \(note.title) (\(note.body.isEmpty ? "empty" : note.body))")
}
if server.notes.isEmpty { print("  none: note 1 was created, edited and deleted, in that order") }

try await outbox.close()
try FileManager.default.removeItem(at: folder)
