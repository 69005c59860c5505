// The same seven calls, each fired from synchronous code as a separate job, go through one
// SerialQueue: each starts only after the previous one has finished, so they end in order.
import OrderlyCore
import OrderlyExampleSupport

print("SerialQueue: seven calls enqueued from synchronous code; task 5 fails.")
let log = ScenarioLog()
let service = SlowNotesService(failing: [5])
let queue = SerialQueue(name: "notes")

for task in ScenarioTask.seven {
  queue.enqueue { await service.run(task, log: log) }
}
try await queue.waitUntilIdle()
print("Verdict: \(log.verdict)")

print("Typed results and errors reach the caller unchanged:")
let fetch = ScenarioTask(number: 8, operation: .fetchNotes, latency: .milliseconds(10))
let notes: String = try await queue.enqueueAndWait { try await service.perform(fetch) }
print("  task 8 returned \"\(notes)\"")

let update = ScenarioTask(number: 5, operation: .updateNote, latency: .milliseconds(10))
do {
  _ = try await queue.enqueue { try await service.perform(update) }.value
} catch let error as NotesServiceError {
  print("  task 5 threw NotesServiceError: \(error)")
}
print("  the queue went on: \(queue.isIdle ? "idle" : "busy"), \(queue.pendingCount) pending")
