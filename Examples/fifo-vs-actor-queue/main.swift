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

// Start order and end order: job 1 suspends halfway (awaiting a signal that job 2 sends).
actor Journal {
  private(set) var lines: [String] = []
  private var signal: CheckedContinuation<Void, Never>?
  private var signalled = false

  func write(_ line: String) { lines.append(line) }

  func waitForSignal() async {
    if signalled { return }
    await withCheckedContinuation { signal = $0 }
  }

  func sendSignal() {
    signalled = true
    signal?.resume()
    signal = nil
  }
}

print("")
print("Job 1 suspends until job 2 signals it:")
let journal = Journal()
let queue = ActorQueue<Journal>(name: "journal")
queue.enqueue(on: journal) { journal in
  journal.write("job 1 starts")
  await journal.waitForSignal()
  journal.write("job 1 ends")
}
queue.enqueue(on: journal) { journal in
  journal.write("job 2 starts")
  journal.sendSignal()
  journal.write("job 2 ends")
}
try await queue.waitUntilIdle()
print("  ActorQueue:  " + (await journal.lines).joined(separator: ", "))
print("  (job 2 starts while job 1 is suspended: starts in order, ends not)")

let fifoJournal = Journal()
let fifo = SerialQueue(name: "journal")
fifo.enqueue {
  await fifoJournal.write("job 1 starts")
  await fifoJournal.sendSignal()  // on a SerialQueue, job 1 cannot wait for job 2: it would hang
  await fifoJournal.write("job 1 ends")
}
fifo.enqueue {
  await fifoJournal.write("job 2 starts")
  await fifoJournal.write("job 2 ends")
}
try await fifo.waitUntilIdle()
print("  SerialQueue: " + (await fifoJournal.lines).joined(separator: ", "))
print("  (job 2 waits for job 1 to end: starts and ends in order)")
