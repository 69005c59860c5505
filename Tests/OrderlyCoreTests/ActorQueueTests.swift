import OrderlyCore
import OrderlyTestSupport
import Testing

/// An actor whose jobs record what they see, for the ActorQueue tests.
actor Ledger {
  private(set) var entries: [String] = []
  private(set) var count = 0

  func append(_ entry: String) {
    entries.append(entry)
  }

  func increment() -> Int {
    count += 1
    return count
  }
}

private let priorities: [TaskPriority] = [.low, .high, .medium, .background, .userInitiated]

@Suite("ActorQueue")
struct ActorQueueTests {
  @Test("jobs start in enqueue order on the actor, whatever their priorities")
  func startOrderAcrossPriorities() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    for index in 0..<100 {
      queue.enqueue(on: ledger, priority: priorities[index % priorities.count]) { ledger in
        ledger.append("\(index)")
      }
    }
    try await queue.waitUntilIdle()
    #expect(await ledger.entries == (0..<100).map { "\($0)" })
  }

  @Test("the queue library's counter: every increment sees the count it expects")
  func counter() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    let mismatches = OrderedRecorder<Int>()
    for expected in 1...100 {
      queue.enqueue(on: ledger, priority: priorities[expected % priorities.count]) { ledger in
        if ledger.increment() != expected { mismatches.record(expected) }
      }
    }
    try await queue.waitUntilIdle()
    #expect(mismatches.values.isEmpty)
  }

  @Test("a suspended job lets the next one start: starts are ordered, ends are not")
  func reentrant() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    let release = Gate()
    let first = queue.enqueue(on: ledger) { ledger in
      ledger.append("first started")
      try await release.wait()
      ledger.append("first ended")
    }
    let second = queue.enqueue(on: ledger) { ledger in
      ledger.append("second ran")
    }
    try await second.value
    release.open()
    try await first.value
    #expect(await ledger.entries == ["first started", "second ran", "first ended"])
  }

  @Test("the code before a job's first suspension runs before the next job starts")
  func firstSegmentIsAtomic() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    for index in 0..<20 {
      queue.enqueue(on: ledger) { ledger in
        ledger.append("\(index) a")
        ledger.append("\(index) b")
        await Task.yield()
        ledger.append("\(index) after suspension")
      }
    }
    try await queue.waitUntilIdle()
    let entries = await ledger.entries.filter { !$0.hasSuffix("after suspension") }
    #expect(entries == (0..<20).flatMap { ["\($0) a", "\($0) b"] })
  }

  @Test("a job may await its own queue without deadlock")
  func awaitsOwnQueue() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    let result = try await queue.enqueue(on: ledger) { ledger in
      let later = queue.enqueue(on: ledger) { _ in "later job" }
      let inner = try await queue.enqueueAndWait(on: ledger) { _ in "nested wait" }
      return "\(inner), \(try await later.value)"
    }.value
    #expect(result == "nested wait, later job")
  }

  @Test("a pending job cancelled never runs; cancelAll reaches running and pending jobs")
  func cancellation() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>()
    let gate = Gate()
    let running = queue.enqueue(on: ledger) { _ in try await gate.wait() }
    try await gate.waitForWaiters(1)
    let blocker = queue.enqueue(on: ledger) { _ in try await Gate().wait() }
    let pending = queue.enqueue(on: ledger) { ledger in ledger.append("pending ran") }
    pending.cancel()
    #expect(await endsCancelled(pending))
    queue.cancelAll()
    #expect(await endsCancelled(running))
    #expect(await endsCancelled(blocker))
    try await queue.waitUntilIdle()
    #expect(await ledger.entries.isEmpty)
  }

  @Test("waitUntilIdle waits for suspended jobs to end; inside a job it throws reentrantWait")
  func waitUntilIdle() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>(name: "actor")
    let release = Gate()
    queue.enqueue(on: ledger) { ledger in
      try await release.wait()
      ledger.append("ended")
    }
    try await release.waitForWaiters(1)
    #expect(queue.runningCount == 1 && !queue.isIdle)
    let waiter = Task { try await queue.waitUntilIdle() }
    release.open()
    try await waiter.value
    #expect(await ledger.entries == ["ended"])
    await #expect(throws: QueueError.reentrantWait(queue: "actor")) {
      try await queue.enqueue(on: ledger) { _ in try await queue.waitUntilIdle() }.value
    }
  }

  @Test("the queue keeps no actor alive; a pending job keeps its actor until it has run")
  func actorLifetime() async throws {
    let queue = ActorQueue<Ledger>()
    weak var weakLedger: Ledger?
    let gate = Gate()
    queue.enqueue(on: Ledger()) { _ in try await gate.wait() }
    do {
      let ledger = Ledger()
      weakLedger = ledger
      queue.enqueue(on: ledger) { ledger in ledger.append("ran") }
    }
    #expect(weakLedger != nil)  // held by its pending job
    gate.open()
    try await queue.waitUntilIdle()
    #expect(weakLedger == nil)  // the job ran and let go; the queue never held it
  }

  @Test("8 producers × 400 jobs with random cancellation: each producer's starts in order")
  func stress() async throws {
    let ledger = Ledger()
    let queue = ActorQueue<Ledger>(name: "stress")
    let ended = SharedCount()
    await withTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(producer) &+ 7)
          var handles: [QueuedTask<Void>] = []
          for index in 0..<400 {
            let priority = priorities[Int.random(in: 0..<priorities.count, using: &generator)]
            handles.append(
              queue.enqueue(on: ledger, priority: priority) { ledger in
                ledger.append("\(producer):\(index)")
                await Task.yield()
              }
            )
            if Int.random(in: 0..<10, using: &generator) == 0 {
              handles.randomElement(using: &generator)?.cancel()
            }
          }
          for handle in handles {
            _ = await handle.result
            ended.increment()
          }
        }
      }
    }
    try await queue.waitUntilIdle()
    #expect(ended.count == 3_200)
    let entries = await ledger.entries
    for producer in 0..<8 {
      let indices = entries.compactMap { entry -> Int? in
        let parts = entry.split(separator: ":")
        return parts[0] == "\(producer)" ? Int(parts[1]) : nil
      }
      #expect(indices == indices.sorted())
    }
    #expect(queue.isIdle)
  }
}

@Suite("MainActorQueue")
struct MainActorQueueTests {
  @Test("jobs start on the main actor in enqueue order, whatever their priorities")
  func startOrder() async throws {
    let queue = MainActorQueue()
    let log = OrderedRecorder<Int>()
    for index in 0..<100 {
      queue.enqueue(priority: priorities[index % priorities.count]) {
        MainActor.assertIsolated()
        log.record(index)
      }
    }
    try await queue.waitUntilIdle()
    #expect(log.values == Array(0..<100))
  }

  @Test("enqueueAndWait from a job of the same queue does not deadlock")
  func nested() async throws {
    let queue = MainActorQueue.shared
    let value = try await queue.enqueue {
      try await queue.enqueueAndWait { 21 } * 2
    }.value
    #expect(value == 42)
  }

  @Test("a suspended job lets the next one start")
  func reentrant() async throws {
    let queue = MainActorQueue()
    let log = OrderedRecorder<String>()
    let release = Gate()
    let first = queue.enqueue {
      log.record("first started")
      try await release.wait()
      log.record("first ended")
    }
    try await queue.enqueue { log.record("second ran") }.value
    release.open()
    try await first.value
    #expect(log.values == ["first started", "second ran", "first ended"])
  }
}
