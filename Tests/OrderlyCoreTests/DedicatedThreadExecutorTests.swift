import Dispatch
import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The thread the current code runs on, comparable across tasks.
private func currentThread() -> pthread_t { pthread_self() }

/// The executor's thread, found by running a task on it.
private func thread(of executor: DedicatedThreadExecutor) async -> pthread_t {
  await Task.detached(executorPreference: executor) { currentThread() }.value
}

private final class Threads: Sendable {
  private let seen = Mutex<[pthread_t]>([])
  func record() {
    let thread = currentThread()
    seen.withLock { $0.append(thread) }
  }
  var all: [pthread_t] { seen.withLock { $0 } }
}

@Suite("DedicatedThreadExecutor and queues that run on it", .timeLimit(.minutes(1)))
struct DedicatedThreadExecutorTests {
  static let executor = DedicatedThreadExecutor(name: "tests", threads: 1)

  @Test("detached, enqueue and enqueueAndWait jobs run on the executor's thread, in order")
  func jobsRunOnTheExecutor() async throws {
    let queue = SerialQueue(name: "on-thread", executor: Self.executor)
    let home = await thread(of: Self.executor)
    let threads = Threads()
    let order = OrderedRecorder<Int>()
    for index in 0..<50 {
      queue.enqueueDetached {
        threads.record()
        order.record(index)
      }
    }
    try await queue.enqueue { @Sendable () async in
      threads.record()
      order.record(50)
    }.value
    try await queue.enqueueAndWait { @Sendable () async in
      threads.record()
      order.record(51)
    }
    #expect(order.values == Array(0...51))
    #expect(threads.all.count == 52)
    #expect(threads.all.allSatisfy { pthread_equal($0, home) != 0 })
  }

  @Test("jobs that block their thread leave the cooperative pool free")
  func blockingJobsDoNotStarveThePool() async throws {
    // Two jobs block two threads until a task on the cooperative pool lets them go. On the
    // pool itself (two threads on a two-core machine) nothing could run to let them go.
    let blocking = DedicatedThreadExecutor(name: "blocking", threads: 2)
    defer { blocking.shutdown() }
    let queue = ConcurrentQueue(name: "blocking", limit: 2, executor: blocking)
    let release = DispatchSemaphore(value: 0)
    let started = AsyncSemaphore(value: 0)
    let jobs = (0..<2).map { _ in
      queue.enqueueDetached {
        started.signal()
        release.wait()
      }
    }
    await started.wait()
    await started.wait()
    // The pool is free: this task runs, and lets the jobs go.
    await Task.detached {
      release.signal()
      release.signal()
    }.value
    for job in jobs { try await job.value }
  }

  @Test("KeyedSerialQueue and ConcurrentQueue keep their contracts on an executor")
  func otherQueues() async throws {
    let keyed = KeyedSerialQueue<Int>(executor: Self.executor)
    let order = OrderedRecorder<String>()
    for key in 0..<3 {
      for index in 0..<5 { keyed.enqueueDetached(forKey: key) { order.record("\(key).\(index)") } }
    }
    try await keyed.waitUntilIdle()
    for key in 0..<3 {
      #expect(order.values.filter { $0.hasPrefix("\(key).") } == (0..<5).map { "\(key).\($0)" })
    }
    let concurrent = ConcurrentQueue(limit: 2, executor: Self.executor)
    let value = try await concurrent.enqueueBarrier { 42 }.value
    #expect(value == 42)
  }

  @Test("shutdown runs what was enqueued, then work enqueued later still runs")
  func shutdown() async throws {
    let executor = DedicatedThreadExecutor(name: "short-lived")
    let queue = SerialQueue(executor: executor)
    let ran = OrderedRecorder<Int>()
    for index in 0..<10 { queue.enqueueDetached { ran.record(index) } }
    try await queue.waitUntilIdle()
    executor.shutdown()
    executor.shutdown()  // a second call does nothing
    #expect(try await queue.enqueueDetached { 7 }.value == 7)
    #expect(ran.values == Array(0..<10))
  }

  @Test("a job enqueued after shutdown runs on the cooperative pool, never inside its enqueuer")
  func afterShutdownNotInline() async throws {
    let executor = DedicatedThreadExecutor(name: "stopped")
    executor.shutdown()
    // The job waits for its creator to have returned from `Task(...)`. Run inline, inside the
    // creator's call, it would wait for itself: the deadline turns that into a failure.
    let creatorReturned = DispatchSemaphore(value: 0)
    let task = Task(executorPreference: executor) { () -> Bool in
      creatorReturned.wait(timeout: .now() + .seconds(30)) == .success
    }
    creatorReturned.signal()
    let ranAfterCreatorReturned = await task.value
    #expect(ranAfterCreatorReturned)
    // And a queue on the stopped executor keeps running its jobs, in order.
    let queue = SerialQueue(executor: executor)
    let ran = OrderedRecorder<Int>()
    for index in 0..<5 { queue.enqueueDetached { ran.record(index) } }
    try await queue.waitUntilIdle()
    #expect(ran.values == Array(0..<5))
  }
}
