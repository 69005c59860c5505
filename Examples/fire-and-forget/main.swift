// Work that needs nothing back (a log line, a metric, a model fed from callbacks) goes through
// `execute`: no handle, no result, the cost of a closure in a list, and still the queue's one
// order with every other kind of job.
import OrderlyCore
import Synchronization

let log = SerialQueue(name: "log")

print("Callbacks hand lines to the log with execute: no handle, no result, in order.")
for note in 1...3 {
  log.execute { print("  log: saved note \(note)") }
}
log.enqueueDetached { print("  log: a detached job keeps its place among them") }
log.execute { print("  log: inside the closure, isCurrent is \(log.isCurrent)") }
try await log.waitUntilIdle()

// A busy job: once it runs, it waits until the queue's jobs are cancelled. What happens from
// here is written to `lines`, each line after what it follows has happened.
let lines = Mutex<[String]>([])
let (started, start) = AsyncStream.makeStream(of: Void.self)
let (never, _) = AsyncStream.makeStream(of: Void.self)
log.enqueueDetached {
  lines.withLock { $0.append("start 1 busy job") }
  start.yield()
  for await _ in never {}
  lines.withLock { $0.append("cancelled 1 busy job: cancelAll() ended its wait") }
}
for await _ in started { break }
for note in 4...6 {
  lines.withLock { $0.append("waiting \(note - 2) saved note \(note)") }
  log.execute { lines.withLock { $0.append("start \(note - 2) saved note \(note)") } }
}
print("Behind a busy job, \(log.pendingCount) lines wait; cancelAll() drops them unrun:")
log.cancelAll()
log.execute {
  lines.withLock { $0 += ["start 5 after cancelAll", "finish 5 after cancelAll: it runs"] }
}
try await log.waitUntilIdle()
// cancelAll() took the three lines out of line the moment it was called, before the busy job
// (its task cancelled) ended: each never started.
var drawn = lines.withLock { $0 }
let dropped = (4...6).filter { note in !drawn.contains("start \(note - 2) saved note \(note)") }
let afterWaits = (drawn.lastIndex { $0.hasPrefix("waiting") } ?? 0) + 1
drawn.insert(
  contentsOf: dropped.map { "dropped \($0 - 2) saved note \($0): cancelAll() took it out, unrun" },
  at: afterWaits
)
for line in drawn { print("  \(line)") }
print("  (the lines in line never run; the one enqueued after cancelAll() does)")
