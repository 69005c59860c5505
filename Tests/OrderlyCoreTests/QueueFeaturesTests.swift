import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

/// A type that enqueues work calling its own methods without writing `self.`, as `Task {}`
/// allows: this file compiling is the test of implicit self capture.
private final class Model: Sendable {
  let queue = SerialQueue(name: "model")
  let concurrent = ConcurrentQueue(name: "model-concurrent", limit: 2)
  let keyed = KeyedSerialQueue<Int>(name: "model-keyed")
  let coalescing = CoalescingQueue(name: "model-coalescing")
  let count = SharedCount()

  func bump() { count.increment() }

  func work() async throws {
    queue.enqueue { bump() }
    queue.enqueueDetached { bump() }
    concurrent.enqueue { bump() }
    concurrent.enqueueDetached { bump() }
    concurrent.enqueueBarrier { bump() }
    keyed.enqueue(forKey: 1) { bump() }
    keyed.enqueueDetached(forKey: 1) { bump() }
    try await coalescing.enqueue { bump() }.value
    try await queue.waitUntilIdle()
    try await concurrent.waitUntilIdle()
    try await keyed.waitUntilIdle()
  }
}

@Suite("Queue features: implicit self, isCurrent, coalescing")
struct QueueFeaturesTests {
  @Test("enqueue closures capture self implicitly, like Task {}")
  func implicitSelf() async throws {
    let model = Model()
    try await model.work()
    #expect(model.count.count == 8)
  }

  @Test("isCurrent: inside a job, its child tasks and Task {}; not outside, not detached")
  func isCurrent() async throws {
    let queue = SerialQueue(name: "q")
    let other = SerialQueue(name: "other")
    #expect(!queue.isCurrent)
    let seen = try await queue.enqueue { () async -> [Bool] in
      async let child = queue.isCurrent
      let inherited = await Task { queue.isCurrent }.value
      let detached = await Task.detached { queue.isCurrent }.value
      return [queue.isCurrent, await child, inherited, detached, other.isCurrent]
    }.value
    #expect(seen == [true, true, true, false, false])
    #expect(try await queue.enqueueDetached { queue.isCurrent }.value)
    #expect(try await queue.enqueueAndWait { queue.isCurrent })
    // Inside a job, the assertions pass (outside, they would stop the test process).
    try await queue.enqueueAndWait {
      queue.assertOnQueue("the model runs on its queue")
      queue.preconditionOnQueue()
    }
    let keyed = KeyedSerialQueue<String>()
    #expect(try await keyed.enqueueAndWait(forKey: "a") { keyed.isCurrent(forKey: "a") })
    #expect(try await keyed.enqueueAndWait(forKey: "a") { !keyed.isCurrent(forKey: "b") })
    let concurrent = ConcurrentQueue(limit: 2)
    #expect(try await concurrent.enqueueAndWait { concurrent.isCurrent })
    #expect(!concurrent.isCurrent)
  }

  @Test("CoalescingQueue: the newest waiting job replaces the older; the running one is kept")
  func coalescing() async throws {
    let queue = CoalescingQueue(name: "refresh")
    let ran = OrderedRecorder<String>()
    let started = Gate()
    let release = Gate()
    let first = queue.enqueue {
      ran.record("first")
      started.open()
      try await release.wait()
    }
    try await started.wait()
    let second = queue.enqueue { ran.record("second") }
    let third = queue.enqueue { ran.record("third") }
    let fourth = queue.enqueue { () -> String in
      ran.record("fourth")
      return "latest"
    }
    #expect(queue.pendingCount == 1)
    release.open()
    try await first.value
    await #expect(throws: QueueError.superseded(queue: "refresh")) { try await second.value }
    await #expect(throws: QueueError.superseded(queue: "refresh")) { try await third.value }
    #expect(try await fourth.value == "latest")
    #expect(ran.values == ["first", "fourth"])
    #expect(queue.isIdle)
    // Idle again: the next job runs at once, nothing to replace.
    #expect(try await queue.enqueue { 5 }.value == 5)
  }

  @Test("CoalescingQueue: enqueued back to back on an idle queue, the first and the last run")
  func coalescingFromIdle() async throws {
    let queue = CoalescingQueue(name: "refresh")
    let ran = OrderedRecorder<String>()
    let handles = ["s", "sw", "swi", "swift"].map { query in
      queue.enqueue { ran.record(query) }
    }
    var outcomes: [String] = []
    for handle in handles {
      switch await handle.result {
      case .success: outcomes.append("ran")
      case .failure(let error as QueueError) where error == .superseded(queue: "refresh"):
        outcomes.append("superseded")
      case .failure(let error): outcomes.append("\(error)")
      }
    }
    #expect(outcomes == ["ran", "superseded", "superseded", "ran"])
    #expect(ran.values == ["s", "swift"])
  }

  @Test("CoalescingQueue: 16 producers × 200 jobs; every job runs or is superseded, one at a time")
  func coalescingStress() async throws {
    let queue = CoalescingQueue()
    let counter = PeakCounter()
    let outcomes = await withTaskGroup(of: (ran: Int, superseded: Int).self) { group in
      for _ in 0..<16 {
        group.addTask {
          var ran = 0
          var superseded = 0
          for _ in 0..<200 {
            let job = queue.enqueue {
              counter.enter()
              await Task.yield()
              counter.leave()
            }
            switch await job.result {
            case .success: ran += 1
            case .failure(let error as QueueError) where error == .superseded(queue: queue.name):
              superseded += 1
            case .failure: break
            }
          }
          return (ran, superseded)
        }
      }
      return await group.reduce(into: [(ran: Int, superseded: Int)]()) { $0.append($1) }
    }
    let ran = outcomes.map(\.ran).reduce(0, +)
    let superseded = outcomes.map(\.superseded).reduce(0, +)
    #expect(ran + superseded == 3_200)
    #expect(counter.peak == 1)
    #expect(queue.isIdle)
  }

  @Test(
    "CoalescingQueue: a job that has begun is never cancelled or superseded by a newer enqueue"
  )
  func coalescingNeverTouchesTheRunningJob() async throws {
    let queue = CoalescingQueue()
    let touched = OrderedRecorder<Int>()
    let total = await withTaskGroup(of: Int.self) { group in
      for producer in 0..<8 {
        group.addTask {
          var began = 0
          for index in 0..<1_500 {
            let id = producer * 10_000 + index
            let job = queue.enqueue { () -> Bool in
              // Yields let a newer enqueue race the job's first steps.
              await Task.yield()
              await Task.yield()
              return Task.isCancelled
            }
            switch await job.result {
            case .success(let sawCancellation):
              began += 1
              if sawCancellation { touched.record(id) }
            case .failure: break
            }
          }
          return began
        }
      }
      return await group.reduce(0, +)
    }
    #expect(total > 0)
    #expect(touched.values.isEmpty)
    #expect(queue.isIdle)
  }

  @Test("AsyncSemaphore.signal says whether it resumed a waiter")
  func signalResult() async throws {
    let semaphore = AsyncSemaphore(value: 0)
    #expect(!semaphore.signal())
    await semaphore.wait()
    let waiter = Task { await semaphore.wait() }
    while semaphore.waiterCount == 0 { await Task.yield() }
    #expect(semaphore.signal())
    await waiter.value
  }
}
