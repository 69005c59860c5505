import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

@Suite("KeyedSerialQueue")
struct KeyedSerialQueueTests {
  @Test("one key's jobs run one at a time in order; another key runs meanwhile")
  func perKeyOrder() async throws {
    let queue = KeyedSerialQueue<String>()
    let log = OrderedRecorder<String>()
    let release = Gate()
    queue.enqueue(forKey: "a") {
      log.record("a1 started")
      try await release.wait()
      log.record("a1 ended")
    }
    let a2 = queue.enqueueDetached(forKey: "a") { log.record("a2 ran") }
    try await queue.enqueue(forKey: "b") { log.record("b ran") }.value
    #expect(log.values == ["a1 started", "b ran"])
    #expect(queue.pendingCount(forKey: "a") == 1 && queue.isBusy(forKey: "a"))
    release.open()
    try await a2.value
    #expect(log.values == ["a1 started", "b ran", "a1 ended", "a2 ran"])
  }

  @Test("a key's line is freed when its last job ends: 100,000 distinct keys leave nothing")
  func linesAreFreed() async throws {
    let queue = KeyedSerialQueue<Int>()
    var peak = 0
    for key in 0..<100_000 {
      try await queue.enqueueAndWait(forKey: key) {}
      peak = max(peak, queue.busyKeyCount)
    }
    #expect(peak == 0)
    for key in 0..<10_000 { queue.enqueueDetached(forKey: key) {} }
    try await queue.waitUntilIdle()
    // The last line frees itself just after its job ends; wait for that, never by sleeping.
    while queue.busyKeyCount > 0 { await Task.yield() }
    #expect(queue.isIdle)
  }

  @Test("a global limit caps jobs running across keys")
  func globalLimit() async throws {
    let queue = KeyedSerialQueue<Int>(limit: 2)
    #expect(queue.limit == 2)
    let counter = PeakCounter()
    let release = Gate()
    for key in 0..<6 {
      queue.enqueue(forKey: key) {
        counter.enter()
        try await release.wait()
        counter.leave()
      }
    }
    try await release.waitForWaiters(2)
    #expect(counter.current == 2)
    release.open()
    try await queue.waitUntilIdle()
    #expect(counter.peak == 2)
  }

  @Test("waiting on a job's own key throws reentrantWait; another key is fine")
  func reentrancy() async throws {
    let queue = KeyedSerialQueue<String>(name: "docs")
    let result = try await queue.enqueue(forKey: "a") {
      try await queue.enqueueAndWait(forKey: "b") { "other key" }
    }.value
    #expect(result == "other key")
    await #expect(throws: QueueError.reentrantWait(queue: "docs[a]")) {
      try await queue.enqueue(forKey: "a") {
        try await queue.enqueueAndWait(forKey: "a") {}
      }.value
    }
  }

  @Test("cancelAll(forKey:) cancels one key's jobs; cancelAll() every key's")
  func cancellation() async throws {
    let queue = KeyedSerialQueue<String>()
    let a = (0..<3).map { _ in queue.enqueue(forKey: "a") { try await Gate().wait() } }
    let b = (0..<3).map { _ in queue.enqueueDetached(forKey: "b") { try await Gate().wait() } }
    queue.cancelAll(forKey: "a")
    for job in a { #expect(await endsCancelled(job)) }
    #expect(queue.isBusy(forKey: "b"))
    queue.cancelAll()
    for job in b { #expect(await endsCancelled(job)) }
    try await queue.waitUntilIdle()
  }

  @Test("events name each key's line")
  func events() async throws {
    let queue = KeyedSerialQueue<String>(name: "k")
    let events = queue.events
    try await queue.enqueueAndWait(forKey: "x", name: "job") {}
    var lines: [String] = []
    for await event in events {
      lines.append(event.description)
      if lines.count == 3 { break }
    }
    #expect(lines == ["k[x] #1 (job) enqueued", "k[x] #1 (job) started", "k[x] #1 (job) finished"])
  }

  @Test("waitUntilIdle waits for every key's earlier jobs; a cancelled wait leaves at once")
  func waitUntilIdle() async throws {
    let queue = KeyedSerialQueue<Int>()
    let gates = (0..<3).map { _ in Gate() }
    for (key, gate) in gates.enumerated() { queue.enqueue(forKey: key) { try await gate.wait() } }
    let cancelled = Task { try await queue.waitUntilIdle() }
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    let waiter = Task { try await queue.waitUntilIdle() }
    for gate in gates.reversed() { gate.open() }
    try await waiter.value
    while !queue.isIdle { await Task.yield() }
  }
}

@Suite("KeyedSerialQueue stress")
struct KeyedSerialQueueStressTests {
  @Test("8 producers × 1,000 jobs over 40 keys, random cancellation: per-key order, no overlap")
  func stress() async throws {
    let queue = KeyedSerialQueue<Int>(name: "stress", limit: 6)
    let running = RunningPerKey()
    let overlaps = SharedCount()
    let log = OrderedRecorder<String>()
    let counter = PeakCounter()
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(producer) &+ 31)
          var handles: [QueuedTask<Void>] = []
          for index in 0..<1_000 {
            let key = Int.random(in: 0..<40, using: &generator)
            let work: @Sendable () async -> Void = {
              counter.enter()
              if running.enter(key) > 1 { overlaps.increment() }
              log.record("\(key):\(producer):\(index)")
              await Task.yield()
              running.leave(key)
              counter.leave()
            }
            handles.append(
              index.isMultiple(of: 2)
                ? queue.enqueue(forKey: key, operation: work)
                : queue.enqueueDetached(forKey: key, operation: work)
            )
            if Int.random(in: 0..<10, using: &generator) == 0 {
              handles.randomElement(using: &generator)?.cancel()
            }
          }
          for handle in handles { _ = await handle.result }
        }
      }
    }
    try await queue.waitUntilIdle()
    #expect(overlaps.count == 0)
    #expect(counter.peak <= 6)
    // For each key and producer, jobs ran in the order the producer enqueued them.
    var lastIndex: [String: Int] = [:]
    var outOfOrder = 0
    for entry in log.values {
      let parts = entry.split(separator: ":").map { Int($0) ?? -1 }
      let line = "\(parts[0]):\(parts[1])"
      if let last = lastIndex[line], last > parts[2] { outOfOrder += 1 }
      lastIndex[line] = parts[2]
    }
    #expect(outOfOrder == 0)
  }
}

/// How many jobs run per key, to catch two jobs of one key overlapping.
final class RunningPerKey: Sendable {
  private let counts = Mutex([Int: Int]())

  /// Counts a job in and returns how many jobs of the key run now, itself included.
  func enter(_ key: Int) -> Int {
    counts.withLock(announcingTo: self) { counts in
      counts[key, default: 0] += 1
      return counts[key, default: 0]
    }
  }

  func leave(_ key: Int) {
    counts.withLock(announcingTo: self) { $0[key, default: 0] -= 1 }
  }
}
