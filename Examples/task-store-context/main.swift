// Two saves of one document under `.enqueue`, made by two different callers: each with its own
// request id (a task-local value, as a trace context or a dependency override is) and its own
// priority. The second waits in line behind the first, and must still run as its own caller
// made it, not as whichever task ended the first save.
import OrderlyTaskStore
import OrderlyTestSupport

/// The request id a caller works under, read by the save wherever it runs.
enum Request {
  @TaskLocal static var id = "none"
}

/// What a save saw when it ran.
func describe(_ label: String) -> String {
  "\(label) ran for request \(Request.id) at priority \(Task.currentPriority)"
}

@MainActor
func run() async throws {
  let store = TaskStore<String>()
  let firstHolds = Gate()
  print("Save 1: request A, priority high. It holds the document until the gate opens.")
  let first = Request.$id.withValue("A") {
    store.addTask(forKey: "document", policy: .enqueue, priority: .high) {
      () async throws -> String in
      try await firstHolds.wait()
      return describe("save 1")
    }
  }
  print("Save 2: request B, priority low, made while save 1 runs.")
  let second = Request.$id.withValue("B") {
    store.addTask(forKey: "document", policy: .enqueue, priority: .low) {
      describe("save 2")
    }
  }
  print(
    "  running: \(store.runningCount(forKey: "document")), waiting: \(store.queuedCount(forKey: "document"))"
  )
  print("")
  print("Save 1 ends (the gate opens); save 2 starts after it, as its own caller made it:")
  firstHolds.open()
  print("  " + (try await first.value))
  print("  " + (try await second.value))
}

try await run()
