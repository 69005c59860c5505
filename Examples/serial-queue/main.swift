// The same seven calls, each fired from synchronous code as a separate job, go through one
// SerialQueue: each starts only after the previous one has finished, so they end in order.
import OrderlyCore
import OrderlyCourse
import OrderlyRepository

print("SerialQueue: seven calls enqueued from synchronous code; call 5 fails.")
let scenario = NotesScenario(
  seed: 3,
  latency: .milliseconds(20) ... .milliseconds(380),
  failingCall: 5
)
let service = scenario.makeService()
let log = ActivityLog()
let queue = SerialQueue(name: "notes")

var jobs: [QueuedTask<String>] = []
for call in 1...7 {
  jobs.append(queue.enqueue { try await service.perform(call, log: log) })
}
try await queue.waitUntilIdle()
// Every call but the first was put in line behind call 1 when it was enqueued, and waited there
// for its turn: the dotted boxes of the picture.
var lines = log.entries.map { "\($0)" }
let waits = log.entries.filter { entry in
  guard case .start = entry.kind else { return false }
  return entry.call > 1
}
lines.insert(contentsOf: waits.map { "waiting \($0.call) \($0.operation)" }, at: 1)
for line in lines { print("  \(line)") }
print("Verdict: \(log.verdict)")

print("Typed results and errors reach the caller unchanged:")
print("  call 4's job returned \"\(try await jobs[3].value)\"")
do {
  _ = try await jobs[4].value
} catch let error as InjectedFailure {
  print("  call 5's job threw InjectedFailure: \(error)")
}
let count: Int = try await queue.enqueueAndWait { try await service.fetchNotes().count }
print("  enqueueAndWait returned an Int: \(count)")
print("  the queue went on: \(queue.isIdle ? "idle" : "busy"), \(queue.pendingCount) pending")
