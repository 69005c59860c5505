// An editor saves documents as the user types: each keystroke batch enqueues a save of the
// document's latest version. Saves of one document must land in order (or an old version
// overwrites a newer one); saves of different documents may run side by side.
// course: the queue
import OrderlyCore
import OrderlyCourse
import Synchronization

/// A fake store: version 1 of each document is slow to save, later versions are fast.
final class Store: Sendable {
  private let state = Mutex((saved: [String: Int](), running: 0, peak: 0))

  func save(_ document: String, version: Int) async throws {
    state.withLock { state in
      state.running += 1
      state.peak = max(state.peak, state.running)
    }
    try await Task.sleep(for: .milliseconds(version == 1 ? 40 : 5))
    state.withLock { state in
      state.saved[document] = version
      state.running -= 1
    }
  }

  var saved: [String: Int] { state.withLock { $0.saved } }
  var peak: Int { state.withLock { $0.peak } }
}

let documents = ["notes.md", "todo.txt", "plan.key"]

func report(_ store: Store) {
  for document in documents {
    let version = store.saved[document] ?? 0
    print("  \(document): saved version \(version)\(version == 3 ? "" : "  <- stale")")
  }
}

print("Three documents, three versions each, saves fired from synchronous code:")
print("")
print("Task { } per save:")
let plainStore = Store()
var tasks: [Task<Void, any Error>] = []
for version in 1...3 {
  for document in documents {
    tasks.append(Task { try await plainStore.save(document, version: version) })
  }
}
for task in tasks { try await task.value }
report(plainStore)

print("")
print("KeyedSerialQueue<String>, one line per document:")
let store = Store()
let saves = KeyedSerialQueue<String>(name: "saves")
for version in 1...3 {
  for document in documents {
    saves.enqueue(forKey: document) { try await store.save(document, version: version) }
  }
}
print("  lines in use while saving: \(saves.busyKeyCount)")
try await saves.waitUntilIdle()
report(store)
print("  documents saved side by side, at most: \(store.peak)")
while !saves.isIdle { await Task.yield() }
print("  lines in use afterwards: \(saves.busyKeyCount) (a key's line is freed when empty)")
// course end: the queue

// The lines on the clock: each save takes a set time on a story clock, which moves to the next
// end once every save in flight waits on it, so every run prints the same times.
print("")
print("On the clock: three saves of each document, one line per document:")
let story = StoryClock()
let clocked = KeyedSerialQueue<String>(name: "clocked")
let enqueuedAt = story.now
let times = ["notes.md": [20, 30, 25], "todo.txt": [35, 10, 40], "plan.key": [15, 45, 20]]
for version in 1...3 {
  for (index, document) in documents.enumerated() {
    // Numbered by document, so each document's saves are three rows together.
    let job = index * 3 + version
    let milliseconds = times[document]?[version - 1] ?? 10
    clocked.enqueue(forKey: document) {
      // A save that starts later than it was enqueued waited in its document's line.
      if story.now > enqueuedAt {
        story.record(.waiting, job, "\(document) v\(version)", at: enqueuedAt)
      }
      story.record(.start, job, "\(document) v\(version)")
      let end = try await story.work(for: .milliseconds(milliseconds))
      story.record(.finish, job, "\(document) v\(version): saved", at: end)
    }
  }
}
// One save in flight per document until a document's line is done: notes.md's ends first
// (75 ms), then plan.key's (80 ms), then todo.txt's (85 ms).
for inFlight in [3, 3, 3, 3, 3, 3, 3, 2, 1] { try await story.advance(whenSleeping: inFlight) }
try await clocked.waitUntilIdle()
for line in story.lines { print("  \(line)") }
print("  (each document's versions one after another; the three documents side by side)")
