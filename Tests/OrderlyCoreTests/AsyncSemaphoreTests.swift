import OrderlyCore
import OrderlyTestSupport
import Testing

@Suite("AsyncSemaphore")
struct AsyncSemaphoreTests {
  /// Waits until `count` tasks wait on the semaphore.
  private func waitForWaiters(_ semaphore: AsyncSemaphore, _ count: Int) async {
    while semaphore.waiterCount < count { await Task.yield() }
  }

  @Test("permits are taken without waiting until none is left; signal hands one on")
  func permits() async throws {
    let semaphore = AsyncSemaphore(value: 2)
    await semaphore.wait()
    try await semaphore.waitUnlessCancelled()
    #expect(semaphore.availablePermits == 0)
    let third = Task { await semaphore.wait() }
    await waitForWaiters(semaphore, 1)
    #expect(semaphore.signal() == true)  // it resumed the waiter
    await third.value
    #expect(semaphore.availablePermits == 0 && semaphore.waiterCount == 0)
    #expect(semaphore.signal() == false)  // nobody waited: the permit is kept
    #expect(semaphore.availablePermits == 1)
  }

  @Test("waiters get permits in the order they arrived")
  func fifo() async throws {
    let semaphore = AsyncSemaphore(value: 0)
    let order = OrderedRecorder<Int>()
    var tasks: [Task<Void, any Error>] = []
    for index in 0..<20 {
      tasks.append(
        Task {
          try await semaphore.waitUnlessCancelled()
          order.record(index)
        }
      )
      await waitForWaiters(semaphore, index + 1)
    }
    // One permit at a time: two waiters resumed together run their next lines in either order
    // on two threads, so only the one resumed by each signal shows which waiter got the permit.
    for handed in 1...20 {
      semaphore.signal()
      try await order.waitForCount(handed)
    }
    for task in tasks { try await task.value }
    #expect(order.values == Array(0..<20))
  }

  @Test("a waiter cancelled while waiting throws and takes no permit; the line keeps its order")
  func cancelWhileWaiting() async throws {
    let semaphore = AsyncSemaphore(value: 0)
    let order = OrderedRecorder<String>()
    let first = Task {
      try await semaphore.waitUnlessCancelled()
      order.record("first")
    }
    await waitForWaiters(semaphore, 1)
    let cancelled = Task {
      try await semaphore.waitUnlessCancelled()
      order.record("cancelled one ran")
    }
    await waitForWaiters(semaphore, 2)
    let last = Task {
      try await semaphore.waitUnlessCancelled()
      order.record("last")
    }
    await waitForWaiters(semaphore, 3)
    cancelled.cancel()
    await #expect(throws: CancellationError.self) { try await cancelled.value }
    #expect(semaphore.waiterCount == 2)
    // One permit at a time: the line's head takes it, and the last waits on. (Two at once would
    // resume both, and which records first is up to the scheduler.)
    semaphore.signal()
    try await first.value
    #expect(semaphore.waiterCount == 1)
    semaphore.signal()
    try await last.value
    #expect(order.values == ["first", "last"])
    semaphore.signal()
    #expect(semaphore.availablePermits == 1)
  }

  @Test("a task cancelled before it waits throws at once, even with permits free")
  func alreadyCancelled() async throws {
    let semaphore = AsyncSemaphore(value: 1)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      try await semaphore.waitUnlessCancelled()
    }
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(semaphore.availablePermits == 1)
  }

  @Test("wait() ignores cancellation: a cancelled waiter keeps its place and gets its permit")
  func waitIgnoringCancellation() async throws {
    let semaphore = AsyncSemaphore(value: 0)
    let order = OrderedRecorder<String>()
    let cancelled = Task {
      await semaphore.wait()
      order.record("cancelled waiter got its permit")
    }
    await waitForWaiters(semaphore, 1)
    let next = Task {
      await semaphore.wait()
      order.record("next")
    }
    await waitForWaiters(semaphore, 2)
    cancelled.cancel()
    #expect(semaphore.waiterCount == 2)
    #expect(semaphore.signal())
    try await order.waitForCount(1)
    #expect(semaphore.signal())
    await cancelled.value
    await next.value
    #expect(order.values == ["cancelled waiter got its permit", "next"])
    // Already cancelled before the call: it still takes a free permit.
    #expect(!semaphore.signal())
    let early = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      await semaphore.wait()
    }
    await early.value
    #expect(semaphore.availablePermits == 0)
  }

  @Test("withPermit returns the permit however the operation ends")
  func withPermit() async throws {
    let semaphore = AsyncSemaphore(value: 1)
    #expect(try await semaphore.withPermit { 5 } == 5)
    await #expect(throws: TestError(code: 1)) {
      try await semaphore.withPermit { throw TestError(code: 1) }
    }
    #expect(semaphore.availablePermits == 1)
  }

  @Test("8 tasks × 300 withPermit calls, value 3, random cancellation: never more than 3 inside")
  func stress() async throws {
    let semaphore = AsyncSemaphore(value: 3)
    let counter = PeakCounter()
    let finished = SharedCount()
    await withTaskGroup(of: Void.self) { group in
      for worker in 0..<8 {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(worker) &+ 100)
          for _ in 0..<300 {
            let cancelSoon = Int.random(in: 0..<8, using: &generator) == 0
            let task = Task {
              try await semaphore.withPermit {
                counter.enter()
                await Task.yield()
                counter.leave()
              }
            }
            if cancelSoon { task.cancel() }
            _ = await task.result
            finished.increment()
          }
        }
      }
    }
    #expect(finished.count == 2_400)
    #expect(counter.peak <= 3)
    #expect(semaphore.availablePermits == 3 && semaphore.waiterCount == 0)
  }
}
