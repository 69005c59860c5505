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

let scenario = NotesScenario(
  seed: 3,
  latency: .milliseconds(20) ... .milliseconds(380),
  failingCall: 5
)
let service = scenario.makeService()
let chain = Chain()

print("Task chaining: each call added to the chain in turn; call 5 fails.")
// Told on a story clock: each call takes its latency of the story's time, so the times are the
// same on every run. Every job's task exists from the moment it is added, waiting for the one
// before it: the picture draws that wait.
let story = StoryClock()
let clocked = NotesScenario(
  seed: scenario.seed,
  latency: scenario.latency,
  failingCall: scenario.failingCall,
  clock: story
).makeService()
let log = ActivityLog(clock: story)
let (ends, ended) = AsyncStream.makeStream(of: Void.self)
for call in 1...7 {
  await chain.add {
    defer { ended.yield() }
    try await clocked.perform(call, log: log)
  }
}
/// One call at a time sleeps on the clock: moves it to that call's end, seven times.
func tell(_ story: StoryClock, ends: AsyncStream<Void>) async throws {
  var endings = ends.makeAsyncIterator()
  for _ in 1...7 {
    try await story.advance(whenSleeping: 1)
    _ = await endings.next()
  }
}
try await tell(story, ends: ends)
await chain.waitForLast()
/// `[ 20 ms]`: a time on the story clock.
func stamp(_ elapsed: Duration?) -> String {
  let milliseconds = "\(Int((elapsed ?? .zero) / .milliseconds(1)))"
  return "[\(String(repeating: " ", count: max(0, 4 - milliseconds.count)))\(milliseconds) ms]"
}
// Each call but the first waited from the moment it was added (0 ms) until it started.
var lines: [(at: Duration, text: String)] = log.entries.map { ($0.elapsed ?? .zero, "\($0)") }
let waits = log.entries.filter { entry in
  guard case .start = entry.kind else { return false }
  return entry.call > 1
}
lines.insert(
  contentsOf: waits.map { (Duration.zero, "waiting \($0.call) \($0.operation)") },
  at: 1
)
for line in lines { print("  \(stamp(line.at)) \(line.text)") }
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
