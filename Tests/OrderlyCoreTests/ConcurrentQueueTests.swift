import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

/// Counts jobs running at once and remembers the most seen.
///
/// Test helpers lock with `withLock(announcingTo:)` like the library: ThreadSanitizer cannot see
/// `Mutex` on Linux and would report their state as racy.
final class PeakCounter: Sendable {
  private let state = Mutex((current: 0, peak: 0))

  func enter() {
    state.withLock(announcingTo: self) { state in
      state.current += 1
      state.peak = max(state.peak, state.current)
    }
  }

  func leave() {
    state.withLock(announcingTo: self) { $0.current -= 1 }
  }

  var current: Int { state.withLock(announcingTo: self) { $0.current } }
  var peak: Int { state.withLock(announcingTo: self) { $0.peak } }
}

/// A count shared by escaping closures.
final class SharedCount: Sendable {
  private let value = Atomic<Int>(0)

  func increment() {
    value.add(1, ordering: .relaxed)
  }

  var count: Int { value.load(ordering: .relaxed) }
}

@Suite("ConcurrentQueue")
struct ConcurrentQueueTests {
  @Test("at most `limit` jobs run at once, and they are admitted in enqueue order")
  func limitAndStartOrder() async throws {
    let queue = ConcurrentQueue(name: "pool", limit: 3)
    let events = queue.events
    let started = OrderedRecorder<Int>()
    let counter = PeakCounter()
    let release = Gate()
    for index in 0..<12 {
      queue.enqueueDetached {
        counter.enter()
        started.record(index)
        try? await release.wait()
        counter.leave()
      }
    }
    try await release.waitForWaiters(3)
    #expect(queue.runningCount == 3)
    #expect(queue.pendingCount == 9)
    #expect(Set(started.values) == [0, 1, 2])
    release.open()
    try await queue.waitUntilIdle()
    #expect(started.values.sorted() == Array(0..<12))
    #expect(counter.peak == 3)
    // Admission (the `started` event, under the queue's lock) follows enqueue order exactly.
    // The jobs' own first lines run concurrently, so two jobs admitted one after another may
    // record in either order.
    var admitted: [JobID] = []
    for await event in events {
      if case .started = event.kind { admitted.append(event.jobID) }
      if admitted.count == 12 { break }
    }
    #expect(admitted == admitted.sorted())
  }

  @Test("jobs end in any order; a slot freed by a later job goes to the next in line")
  func endsOutOfOrder() async throws {
    let queue = ConcurrentQueue(limit: 2)
    let log = OrderedRecorder<String>()
    let slow = Gate()
    let slowJob = queue.enqueue {
      try await slow.wait()
      log.record("slow ended")
    }
    queue.enqueue { log.record("fast ended") }
    let third = queue.enqueue { log.record("third ran") }
    try await third.value
    #expect(log.values == ["fast ended", "third ran"])
    slow.open()
    try await slowJob.value
    #expect(log.values == ["fast ended", "third ran", "slow ended"])
  }

  @Test(
    "a barrier waits for running jobs, runs alone, then the line goes on",
    arguments: [false, true]
  )
  func barrier(waiting: Bool) async throws {
    let queue = ConcurrentQueue(name: "barrier", limit: 3)
    let log = OrderedRecorder<String>()
    let counter = PeakCounter()
    let release = Gate()
    for index in 0..<3 {
      queue.enqueueDetached {
        try await release.wait()
        log.record("before \(index)")
      }
    }
    let barrierRan = Gate()
    let barrierWork: @Sendable () async -> Void = {
      counter.enter()
      log.record("barrier (alone: \(queue.runningCount == 1))")
      await Task.yield()
      counter.leave()
      barrierRan.open()
    }
    let barrierTask: Task<Void, any Error>
    if waiting {
      barrierTask = Task { try await queue.enqueueBarrierAndWait(operation: barrierWork) }
    } else {
      let handle = queue.enqueueBarrier(operation: barrierWork)
      barrierTask = Task { try await handle.value }
    }
    // The barrier is in line before these only once its task has run; wait for that.
    while queue.pendingCount < 1 { await Task.yield() }
    let after = (0..<3).map { index in
      queue.enqueueDetached {
        counter.enter()
        log.record("after \(index)")
        counter.leave()
      }
    }
    #expect(queue.pendingCount == 4)
    release.open()
    try await barrierTask.value
    for job in after { try await job.value }
    let values = log.values
    #expect(Set(values.prefix(3)) == ["before 0", "before 1", "before 2"])
    #expect(values[3] == "barrier (alone: true)")
    #expect(Set(values.suffix(3)) == ["after 0", "after 1", "after 2"])
  }

  @Test("a barrier cancelled before it starts leaves the line; the jobs behind it go on")
  func cancelledBarrier() async throws {
    let queue = ConcurrentQueue(limit: 2)
    let release = Gate()
    let running = queue.enqueueDetached { try await release.wait() }
    let barrier = queue.enqueueBarrier { () -> Void in Issue.record("the cancelled barrier ran") }
    let after = queue.enqueueDetached { "after" }
    #expect(queue.pendingCount == 2)
    barrier.cancel()
    // With the barrier gone, the free slot goes to the job behind it at once.
    #expect(try await after.value == "after")
    #expect(await endsCancelled(barrier))
    release.open()
    try await running.value
  }

  @Test("raising the limit starts waiting jobs at once; lowering it stops nothing that runs")
  func changeLimit() async throws {
    let queue = ConcurrentQueue(limit: 1)
    let release = Gate()
    let counter = PeakCounter()
    for _ in 0..<6 {
      queue.enqueueDetached {
        counter.enter()
        try? await release.wait()
        counter.leave()
      }
    }
    try await release.waitForWaiters(1)
    queue.setLimit(4)
    #expect(queue.limit == 4)
    try await release.waitForWaiters(4)
    #expect(queue.runningCount == 4 && queue.pendingCount == 2)
    queue.setLimit(2)
    #expect(queue.runningCount == 4)  // nothing stopped
    release.open()
    try await queue.waitUntilIdle()
    #expect(counter.peak == 4)
  }

  @Test("limit 0 pauses the queue until the limit is raised")
  func paused() async throws {
    let queue = ConcurrentQueue(limit: 0)
    let job = queue.enqueue { 42 }
    await Task.yield()
    #expect(queue.pendingCount == 1 && queue.runningCount == 0)
    queue.setLimit(1)
    #expect(try await job.value == 42)
  }

  @Test("lowering the limit holds new starts until fewer than the limit run")
  func lowerLimitHoldsStarts() async throws {
    let queue = ConcurrentQueue(limit: 3)
    let gates = (0..<3).map { _ in Gate() }
    let started = Gate()
    for gate in gates {
      queue.enqueueDetached { try await gate.wait() }
    }
    let next = queue.enqueueDetached { started.open() }
    queue.setLimit(1)
    gates[0].open()
    gates[1].open()
    // Two ended; one still runs, which is the new limit: the next job must still wait.
    while queue.runningCount > 1 { await Task.yield() }
    #expect(!started.isOpen && queue.pendingCount == 1)
    gates[2].open()
    try await next.value
  }

  @Test("cancelAll cancels every running job and every pending one")
  func cancelAll() async throws {
    let queue = ConcurrentQueue(limit: 2)
    let running = (0..<2).map { _ in queue.enqueue { try await Gate().wait() } }
    let pending = (0..<3).map { _ in
      queue.enqueueDetached { () -> Void in Issue.record("a pending job ran") }
    }
    while queue.runningCount < 2 { await Task.yield() }
    queue.cancelAll()
    for job in running + pending { #expect(await endsCancelled(job)) }
    try await queue.waitUntilIdle()
    #expect(try await queue.enqueue { "usable" }.value == "usable")
  }

  @Test("waitUntilIdle waits for every earlier job, whichever ends last")
  func waitUntilIdle() async throws {
    let queue = ConcurrentQueue(limit: 3)
    let gates = (0..<3).map { _ in Gate() }
    for gate in gates { queue.enqueueDetached { try await gate.wait() } }
    let waiter = Task { try await queue.waitUntilIdle() }
    gates[2].open()
    gates[0].open()
    try await gates[1].waitForWaiters(1)
    #expect(!queue.isIdle)
    gates[1].open()
    try await waiter.value
    #expect(queue.isIdle)
  }

  @Test("waiting on the queue from inside one of its jobs throws reentrantWait for any limit")
  func reentrancy() async throws {
    let queue = ConcurrentQueue(name: "pool", limit: 4)
    await #expect(throws: QueueError.reentrantWait(queue: "pool")) {
      try await queue.enqueueAndWait {
        try await queue.enqueueAndWait {}
      }
    }
    await #expect(throws: QueueError.reentrantWait(queue: "pool")) {
      try await queue.enqueue { try await queue.enqueueBarrierAndWait {} }.value
    }
  }

  @Test("events show jobs overlapping and the barrier alone")
  func events() async throws {
    let queue = ConcurrentQueue(name: "ev", limit: 2)
    let events = queue.events
    let release = Gate()
    queue.enqueueDetached(name: "a") { try await release.wait() }
    queue.enqueueDetached(name: "b") { try await release.wait() }
    queue.enqueueBarrier(name: "barrier") {}
    try await release.waitForWaiters(2)
    release.open()
    try await queue.waitUntilIdle()
    var lines: [String] = []
    for await event in events {
      lines.append("\(event.jobName ?? "") \(event.kind)")
      if lines.count == 9 { break }
    }
    #expect(
      Array(lines.prefix(5)) == [
        "a enqueued", "a started", "b enqueued", "b started", "barrier enqueued",
      ]
    )
    #expect(Set(lines[5...6]) == ["a finished", "b finished"])
    #expect(Array(lines.suffix(2)) == ["barrier started", "barrier finished"])
  }
}

@Suite("ConcurrentQueue stress")
struct ConcurrentQueueStressTests {
  @Test("8 producers, limit 4, barriers and random cancellation: limit kept, barriers alone")
  func producersBarriersCancellation() async throws {
    let queue = ConcurrentQueue(name: "stress", limit: 4)
    let counter = PeakCounter()
    let barrierOverlaps = SharedCount()
    let ended = SharedCount()
    try await withThrowingTaskGroup(of: Void.self) { group in
      for producer in 0..<8 {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(producer))
          var handles: [QueuedTask<Void>] = []
          for index in 0..<500 {
            let handle: QueuedTask<Void>
            if index % 50 == 49 {
              handle = queue.enqueueBarrier {
                counter.enter()
                if counter.current != 1 { barrierOverlaps.increment() }
                await Task.yield()
                counter.leave()
              }
            } else {
              handle = queue.enqueueDetached {
                counter.enter()
                await Task.yield()
                counter.leave()
              }
            }
            handles.append(handle)
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
      try await group.waitForAll()
    }
    try await queue.waitUntilIdle()
    #expect(ended.count == 4_000)
    #expect(counter.peak <= 4)
    #expect(barrierOverlaps.count == 0)
    #expect(queue.isIdle && queue.pendingCount == 0 && queue.runningCount == 0)
  }
}
