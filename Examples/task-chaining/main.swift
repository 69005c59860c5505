// Chaining each task on the previous one: every new Task first awaits the task before it.
// It keeps order, and shows what such a chain cannot do.
import OrderlyCourse
import OrderlyRepository

actor Chain {
  private var previous: Task<Void, any Error>?

  func add(_ job: @escaping @Sendable () async throws -> Void) {
    // Capture the previous task now, and await it inside the new one, not before creating it.
    previous = Task { [previous] in
      _ = await previous?.result
      try await job()
    }
  }

  func waitForLast() async {
    _ = await previous?.result
  }
}

let service = NotesScenario(
  seed: 3,
  latency: .milliseconds(20) ... .milliseconds(380),
  failingCall: 5
).makeService()
let chain = Chain()

print("Task chaining: each call added to the chain in turn; call 5 fails.")
let log = ActivityLog()
for call in 1...7 {
  await chain.add { try await service.perform(call, log: log) }
}
await chain.waitForLast()
for entry in log.entries { print("  \(entry)") }
print("Verdict: \(log.verdict)")

print("Its limits:")
let heard = ActivityLog()
await chain.add { throw InjectedFailure(operation: .fetchNotes, call: 9) }
await chain.add { _ = try await service.perform(1, log: heard) }
await chain.waitForLast()
print(
  "  - a job's error goes nowhere: the job after the failing one ran "
    + "(\(heard.entries.count) log entries), and nobody heard of the failure"
)
print("  - add() returns nothing: no result to await, no handle to cancel one job")
print("  - add() is actor-isolated, so synchronous code must wrap it in Task {}, and those")
print("    tasks reach the chain in whatever order they get to run")
print("  - every job is a new Task that keeps the previous one alive until it has ended")
