// Chaining each task on the previous one: every new Task first awaits the task before it.
// It keeps order, and shows what such a chain cannot do.
import OrderlyExampleSupport

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

let service = SlowNotesService(failing: [5])
let chain = Chain()

print("Task chaining: each call added to the chain in turn; task 5 fails.")
let log = ScenarioLog()
for task in ScenarioTask.seven {
  await chain.add { await service.run(task, log: log) }
}
await chain.waitForLast()
print("Verdict: \(log.verdict)")

print("Its limits:")
let errors = ScenarioLog(echo: false)
await chain.add { throw NotesServiceError(task: 9) }
await chain.add { errors.start(ScenarioTask(number: 10, operation: .fetchNotes, latency: .zero)) }
await chain.waitForLast()
print(
  "  - a job's error goes nowhere: task 9 threw, nobody heard, task 10 ran (\(errors.all.count) entry)"
)
print("  - add() returns nothing: no result to await, no handle to cancel one job")
print("  - add() is actor-isolated, so synchronous code must wrap it in Task {}, and those")
print("    tasks reach the chain in whatever order they get to run")
print("  - every job is a new Task that keeps the previous one alive until it has ended")
