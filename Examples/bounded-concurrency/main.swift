// The "run serially" answer's download manager with a concurrency cap: a task group that waits for one download
// to end before adding another once four are running. Then the same cap with a
// ConcurrentQueue(limit: 4), enqueued from synchronous code. Downloads are fake: each sleeps a
// fixed time and returns a size, so nothing touches the network.
// course: the queue
import OrderlyCore
import OrderlyCourse
import Synchronization

/// Counts downloads in flight, the most seen at once, and the order they started in.
final class Tracker: Sendable {
  private let state = Mutex((current: 0, peak: 0, starts: [Int]()))

  func begin(_ file: Int) {
    state.withLock { state in
      state.current += 1
      state.peak = max(state.peak, state.current)
      state.starts.append(file)
    }
  }

  func end() { state.withLock { $0.current -= 1 } }

  var peak: Int { state.withLock { $0.peak } }
  var starts: [Int] { state.withLock { $0.starts } }
}

/// A fake download: file n takes 10 + (n * 7 % 5) * 4 milliseconds and "returns" n KiB.
func download(_ file: Int, tracker: Tracker) async throws -> Int {
  tracker.begin(file)
  defer { tracker.end() }
  try await Task.sleep(for: .milliseconds(10 + (file * 7 % 5) * 4))
  return file * 1024
}

let files = Array(1...12)
let maxConcurrency = 4

print("12 downloads, at most \(maxConcurrency) at once.")
print("")
print("Task group with a counter (the “run serially” answer):")
let groupTracker = Tracker()
var total = 0
try await withThrowingTaskGroup(of: Int.self) { group in
  var count = 0
  for file in files {
    count += 1
    if count > maxConcurrency, let size = try await group.next() { total += size }
    group.addTask { try await download(file, tracker: groupTracker) }
  }
  for try await size in group { total += size }
}
print("  downloaded \(total / 1024) KiB; at most \(groupTracker.peak) at once")
// Child tasks start in whatever order the scheduler picks: this line changes from run to run.
print("  start order this run: \(groupTracker.starts) (a task group promises no order)")
print("  (needs an async context that owns the group; results come back in completion order)")

print("")
print("ConcurrentQueue(limit: \(maxConcurrency)):")
let queueTracker = Tracker()
let downloads = ConcurrentQueue(name: "downloads", limit: maxConcurrency)
let events = downloads.events
// Enqueued from synchronous code; each handle carries its own typed result.
let handles = files.map { file in
  downloads.enqueue(name: "\(file)") { try await download(file, tracker: queueTracker) }
}
var sizes: [Int] = []
for handle in handles { sizes.append(try await handle.value) }
print("  downloaded \(sizes.reduce(0, +) / 1024) KiB; at most \(queueTracker.peak) at once")
// The queue gives slots in enqueue order; its `started` events say so.
var admitted: [Int] = []
for await event in events {
  if case .started = event.kind, let name = event.jobName, let file = Int(name) {
    admitted.append(file)
  }
  if admitted.count == files.count { break }
}
print("  admission order: \(admitted == files ? "in order" : "out of order: \(admitted)")")
print("  results, in enqueue order: \(sizes.map { "\($0 / 1024)K" }.joined(separator: " "))")

downloads.setLimit(1)
print("  after setLimit(1) the same queue is serial: limit \(downloads.limit)")
// course end: the queue

// The same cap on the clock: each download takes a set time on a story clock, which moves to
// the next end once every download in flight waits on it, so every run prints the same times.
print("")
print("On the clock: 8 downloads through ConcurrentQueue(limit: \(maxConcurrency)):")
let story = StoryClock()
let clocked = ConcurrentQueue(name: "clocked", limit: maxConcurrency)
let durations = [40, 25, 55, 30, 20, 35, 10, 45]
let enqueuedAt = story.now
for (index, milliseconds) in durations.enumerated() {
  clocked.enqueue {
    // A download that starts later than it was enqueued waited in line for a free slot.
    if story.now > enqueuedAt { story.record(.waiting, index + 1, "download", at: enqueuedAt) }
    story.record(.start, index + 1, "download")
    let end = try await story.work(for: .milliseconds(milliseconds))
    story.record(.finish, index + 1, "download: \(milliseconds) ms", at: end)
  }
}
for ended in durations.indices {
  try await story.advance(whenSleeping: min(maxConcurrency, durations.count - ended))
}
try await clocked.waitUntilIdle()
for line in story.lines { print("  \(line)") }
print(
  "  (at most \(maxConcurrency) running at once: a waiting download starts the moment one ends)"
)
