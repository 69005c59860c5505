// The queue library's counter: an actor counts calls sent from synchronous code, and each call checks it
// sees the count it expects. Sent with plain Task {} calls at mixed priorities, they arrive out
// of order; through an ActorQueue or a SerialQueue they arrive in order. Then one job that
// suspends shows the difference between the two queues: ActorQueue orders starts only,
// SerialQueue orders starts and ends.
import OrderlyCore
import OrderlyCourse

let priorities: [TaskPriority] = [.low, .high, .medium, .background, .userInitiated]

actor Counter {
  private(set) var count = 0
  private(set) var misses: [Int] = []

  func increment(expecting expected: Int) {
    count += 1
    if count != expected { misses.append(expected) }
  }

  func report(_ label: String) -> String {
    let verdict =
      misses.isEmpty ? "in order" : "out of order: \(misses.count) calls saw a wrong count"
    return "\(label) \(count) calls, \(verdict)"
  }
}

print("100 calls from synchronous code, priorities mixed (low, high, medium, ...):")

let plain = Counter()
var tasks: [Task<Void, Never>] = []
for call in 1...100 {
  tasks.append(
    Task(priority: priorities[call % priorities.count]) {
      await plain.increment(expecting: call)
    }
  )
}
for task in tasks { await task.value }
print("  " + (await plain.report("Task {} to the actor:    ")))

let viaActorQueue = Counter()
let actorQueue = ActorQueue<Counter>(name: "counter")
for call in 1...100 {
  actorQueue.enqueue(on: viaActorQueue, priority: priorities[call % priorities.count]) { counter in
    counter.increment(expecting: call)
  }
}
try await actorQueue.waitUntilIdle()
print("  " + (await viaActorQueue.report("ActorQueue<Counter>:     ")))

let viaSerialQueue = Counter()
let serialQueue = SerialQueue(name: "counter")
for call in 1...100 {
  serialQueue.enqueue(priority: priorities[call % priorities.count]) {
    await viaSerialQueue.increment(expecting: call)
  }
}
try await serialQueue.waitUntilIdle()
print("  " + (await viaSerialQueue.report("SerialQueue (FIFO):      ")))

// Start order and end order: the same two jobs on each queue. Job 1 suspends halfway, on a
// slow call; job 2 does not suspend at all. Each part is told on a story clock: the slow call
// takes 50 ms of the story's time, so every run prints the same times.
actor Journal {
  private var entries: [(at: StoryClock.Instant, line: String)] = []

  /// Writes `line` at `instant`, or at the story's current time.
  func write(_ line: String, at instant: StoryClock.Instant? = nil, on story: StoryClock) {
    entries.append((instant ?? story.now, line))
  }

  /// The lines, `[50 ms] finish 1 slow`, in the order of their times.
  var lines: [String] {
    let ordered = entries.indices.sorted { (entries[$0].at, $0) < (entries[$1].at, $1) }
    return ordered.map { index -> String in
      let entry = entries[index]
      return StoryClock.stamp(entry.at, width: 2) + " " + entry.line
    }
  }
}

/// A slow call job 1 awaits: 50 ms of the story's time.
///
/// Long enough for job 2 to run meanwhile if it may. Returns when it ended.
func slowCall(_ story: StoryClock) async -> StoryClock.Instant {
  (try? await story.work(for: .milliseconds(50))) ?? story.now
}

print("")
print("ActorQueue, two jobs (job 1 suspends on a 50 ms call; job 2 never suspends):")
let story = StoryClock()
let journal = Journal()
let queue = ActorQueue<Journal>(name: "journal")
queue.enqueue(on: journal) { journal in
  journal.write("start 1 slow", on: story)
  // At this await job 1 leaves the actor, which is free for the next job until the call ends.
  journal.write("suspended 1 slow: awaiting its 50 ms call, off the actor", on: story)
  let end = await slowCall(story)
  journal.write("resumed 1 slow", at: end, on: story)
  journal.write("finish 1 slow", at: end, on: story)
}
queue.enqueue(on: journal) { journal in
  journal.write("start 2 quick", on: story)
  journal.write("finish 2 quick", on: story)
}
// The story moves its clock each time every job the queue runs waits on it: job 2, which
// starts once job 1 suspends and never waits, has run by then.
try await story.advance(untilIdle: queue)
try await queue.waitUntilIdle()
for line in await journal.lines { print("  \(line)") }
print("  (job 2 starts while job 1 is suspended: starts in order, ends not)")

print("SerialQueue, the same two jobs:")
let fifoStory = StoryClock()
let fifoJournal = Journal()
let fifo = SerialQueue(name: "journal")
fifo.enqueue {
  await fifoJournal.write("start 1 slow", on: fifoStory)
  let end = await slowCall(fifoStory)
  await fifoJournal.write("finish 1 slow", at: end, on: fifoStory)
}
let enqueuedAt = fifoStory.now
fifo.enqueue {
  // Job 2 was in line from the moment it was enqueued until job 1 ended: its wait, drawn.
  if fifoStory.now > enqueuedAt {
    await fifoJournal.write("waiting 2 quick", at: enqueuedAt, on: fifoStory)
  }
  await fifoJournal.write("start 2 quick", on: fifoStory)
  await fifoJournal.write("finish 2 quick", on: fifoStory)
}
try await fifoStory.advance(whenSleeping: 1)
try await fifo.waitUntilIdle()
for line in await fifoJournal.lines { print("  \(line)") }
print("  (job 2 waits for job 1 to end: starts and ends in order)")
