// An offline-first app's writes, kept in an outbox and sent to a server in the order they were
// made: the server is unreachable for two attempts (retried with backoff), then refuses one
// message for good (a dead letter, which stops the line so nothing overtakes it); dropping the
// dead letter lets the rest through. The server is an in-memory fake.
import Foundation
import OrderlyOutbox
import OrderlyRepository
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

let outbox = try Outbox<NoteMutation>()
let server = FakeServer()
let events = outbox.events

/// Prints events until one matches.
///
/// The stream keeps what was not read yet for the next call.
func show(until last: (OutboxEvent) -> Bool) async {
  var iterator = events.makeAsyncIterator()
  while let event = await iterator.next() {
    print("  \(event)")
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
await show { $0.sequence == 5 }

print("")
print("Online: the first attempts fail, and are retried with backoff")
try outbox.start(
  retry: try RetryPolicy(initialDelay: .milliseconds(100), jitter: 0),
  onDeadLetter: .stopLine
) { envelope in
  try server.receive(envelope)
}
await show {
  if case .deadLettered = $0 { true } else { false }
}
// Returns once nothing is pending; throws at once if the line waits at the dead letter.
/// Whether the line waits at the dead letter: `waitUntilDelivered` returns once nothing is
/// pending, and throws at once when a line waits at a dead letter with messages behind it.
func lineWaitsAtDeadLetter() async throws -> Bool {
  do {
    try await outbox.waitUntilDelivered()
    return false
  } catch {
    guard case .lineStopped = error else { throw error }
    return true
  }
}
let lineWaits = try await lineWaitsAtDeadLetter()
if !lineWaits { await show { $0 == .delivered(id: $0.id, sequence: 5) } }

print("")
print("Pending: \(outbox.pendingCount), dead letters: \(outbox.deadLetterCount).")
if lineWaits {
  print("The line waits at the dead letter, so #4 and #5 cannot overtake #3.")
} else {
  print("The line went on past the dead letter: #4 and #5 were delivered while #3 waits aside.")
}
for letter in try await outbox.deadLetters() {
  print("Dropping dead letter #\(letter.sequence): \(letter.message.map { "\($0)" } ?? "?")")
  try await outbox.dropDeadLetter(id: letter.id)
}
if lineWaits { await show { $0 == .delivered(id: $0.id, sequence: 5) } }
try await outbox.waitUntilDelivered()

print("")
print("The server's notes:")
for (id, note) in server.notes.sorted(by: { $0.key < $1.key }) {
  print("  note \(id): \(note.title) (\(note.body.isEmpty ? "empty" : note.body))")
}
if server.notes.isEmpty { print("  none: note 1 was created, edited and deleted, in that order") }
