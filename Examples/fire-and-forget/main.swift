// Work that needs nothing back (a log line, a metric, a model fed from callbacks) goes through
// `execute`: no handle, no result, the cost of a closure in a list, and still the queue's one
// order with every other kind of job.
import OrderlyCore

let log = SerialQueue(name: "log")

print("Callbacks hand lines to the log with execute: no handle, no result, in order.")
for note in 1...3 {
  log.execute { print("  log: saved note \(note)") }
}
log.enqueueDetached { print("  log: a detached job keeps its place among them") }
log.execute { print("  log: inside the closure, isCurrent is \(log.isCurrent)") }
try await log.waitUntilIdle()

// A busy job: once it runs, it waits until the queue's jobs are cancelled.
let (started, start) = AsyncStream.makeStream(of: Void.self)
let (never, _) = AsyncStream.makeStream(of: Void.self)
log.enqueueDetached {
  start.yield()
  for await _ in never {}
  print("  log: the busy job ends, cancelled")
}
for await _ in started { break }
for note in 4...6 {
  log.execute { print("  log: saved note \(note)") }
}
print("Behind a busy job, \(log.pendingCount) lines wait.")
print("cancelAll() drops them unrun; a line enqueued afterwards runs:")
log.cancelAll()
log.execute { print("  log: after cancelAll") }
try await log.waitUntilIdle()
