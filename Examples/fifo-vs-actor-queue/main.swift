// The queue library's counter: an actor counts calls sent from synchronous code, and each call checks it
// sees the count it expects. Sent with plain Task {} calls at mixed priorities, they arrive out
// of order; through an ActorQueue or a SerialQueue they arrive in order. Then one job that
// suspends shows the difference between the two queues: ActorQueue orders starts only,
// SerialQueue orders starts and ends.
import OrderlyCore

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
// slow call; job 2 does not suspend at all.
actor Journal {
  private(set) var lines: [String] = []

  func write(_ line: String) { lines.append(line) }
}

/// A slow call job 1 awaits: 50 ms, long enough for job 2 to run meanwhile if it may.
func slowCall() async {
  try? await Task.sleep(for: .milliseconds(50))
}

print("")
print("ActorQueue, two jobs (job 1 suspends on a 50 ms call; job 2 never suspends):")
let journal = Journal()
let queue = ActorQueue<Journal>(name: "journal")
queue.enqueue(on: journal) { journal in
  journal.write("start 1 slow")
  await slowCall()
  journal.write("finish 1 slow")
}
queue.enqueue(on: journal) { journal in
  journal.write("start 2 quick")
  journal.write("finish 2 quick")
}
try await queue.waitUntilIdle()
for line in await journal.lines { print("  \(line)") }
print("  (job 2 starts while job 1 is suspended: starts in order, ends not)")

print("SerialQueue, the same two jobs:")
let fifoJournal = Journal()
let fifo = SerialQueue(name: "journal")
fifo.enqueue {
  await fifoJournal.write("start 1 slow")
  await slowCall()
  await fifoJournal.write("finish 1 slow")
}
fifo.enqueue {
  await fifoJournal.write("start 2 quick")
  await fifoJournal.write("finish 2 quick")
}
try await fifo.waitUntilIdle()
for line in await fifoJournal.lines { print("  \(line)") }
print("  (job 2 waits for job 1 to end: starts and ends in order)")
