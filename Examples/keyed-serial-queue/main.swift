// An editor saves documents as the user types: each keystroke batch enqueues a save of the
// document's latest version. Saves of one document must land in order (or an old version
// overwrites a newer one); saves of different documents may run side by side.
import OrderlyCore
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
