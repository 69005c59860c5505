// Messages arrive on a background thread, one after another, and each is handed to a
// @MainActor model from synchronous, nonisolated code, as a socket or delegate callback would.
// The common hop, Task { await model.show(message) } at the callback's priority, can reorder
// them; a MainActorQueue keeps them in arrival order.
import Dispatch
import OrderlyCore

@MainActor
final class ChatModel {
  private(set) var shown: [Int] = []

  func show(_ message: Int) {
    shown.append(message)
  }

  var verdict: String {
    let misplaced = zip(shown, shown.sorted()).filter { $0 != $1 }.count
    return misplaced == 0 ? "in order" : "out of order (\(misplaced) of \(shown.count) misplaced)"
  }
}

let priorities: [TaskPriority] = [.low, .high, .medium, .background, .userInitiated]
let plainModel = ChatModel()
let queuedModel = ChatModel()
let queue = MainActorQueue(name: "chat")

/// The callback a networking library would call on its own thread, in arrival order.
nonisolated func didReceive(_ message: Int) {
  let priority = priorities[message % priorities.count]
  Task(priority: priority) { await plainModel.show(message) }
  queue.enqueue(priority: priority) { queuedModel.show(message) }
}

// The "socket": a background thread delivering messages 1 to 30 in order.
await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
  DispatchQueue.global().async {
    for message in 1...30 { didReceive(message) }
    done.resume()
  }
}
try await queue.waitUntilIdle()
while plainModel.shown.count < 30 { await Task.yield() }

print("30 messages delivered in order from a background thread:")
// The plain hops' order changes from run to run; only whether it held is printed, so every
// run prints the same lines (run it a few times and print `plainModel.shown` to see them).
let plainHeld = plainModel.verdict == "in order"
print(
  "  Task { await model.show }:     "
    + (plainHeld ? "in order this time, by luck" : "out of order (a different order every run)")
)
print(
  "  MainActorQueue shows:           \(queuedModel.shown.prefix(12).map(String.init).joined(separator: " ")) ..."
)
print("    \(queuedModel.verdict)")

// Each job starts on the main actor in order; one that suspends lets the next one start.
print("")
print("A job that awaits lets the next one start, as an actor method would:")
let steps = MainActorQueue(name: "steps")
var lines: [String] = []
let first = steps.enqueue {
  lines.append("job 1 starts")
  try await steps.enqueueAndWait { lines.append("job 1 waits on its own queue: no deadlock") }
  lines.append("job 1 ends")
}
steps.enqueue { lines.append("job 2 runs") }
try await first.value
try await steps.waitUntilIdle()
for line in lines { print("  \(line)") }
