import Dispatch
import OrderlyCore
import OrderlyTestSupport
import Synchronization
import Testing

/// Synchronous detached jobs keep every contract of the async ones: the runner only calls them
/// without an async frame.
@Suite("Synchronous detached jobs", .timeLimit(.minutes(2)))
struct SynchronousJobTests {
  @Test(
    "sync and async jobs from one producer run in the order enqueued, never overlapping",
    arguments: QueueKind.allCases
  )
  func orderWithAsyncJobs(kind: QueueKind) async throws {
    let queue = kind.make(name: "mixed")
    let log = OrderedRecorder<Int>()
    let active = ActiveCounter()
    let overlaps = OrderedRecorder<Int>()
    for index in 0..<300 {
      switch index % 3 {
      case 0:
        queue.enqueueDetachedSynchronously {
          if active.enter() != 1 { overlaps.record(index) }
          log.record(index)
          active.leave()
        }
      case 1:
        // An async job that suspends in the middle: the next (synchronous) job must not start
        // while it is suspended.
        queue.enqueueDetached {
          if active.enter() != 1 { overlaps.record(index) }
          await Task.yield()
          log.record(index)
          active.leave()
        }
      default:
        queue.enqueue {
          if active.enter() != 1 { overlaps.record(index) }
          await Task.yield()
          log.record(index)
          active.leave()
        }
      }
    }
    try await queue.waitUntilIdle()
    #expect(log.values == Array(0..<300))
    #expect(overlaps.values.isEmpty)
  }

  @Test("a plain closure picks the synchronous overload, an awaiting one the async overload")
  func overloadChoice() async throws {
    let queue = SerialQueue()
    let frames = OrderedRecorder<String>()
    // Both record whether they run inside a job of the queue; what tells them apart is only
    // that one compiles with an `await`: this test fails to build if either overload is lost.
    let plain: QueuedTask<Int> = queue.enqueueDetached { 1 + 1 }
    let awaiting: QueuedTask<Int> = queue.enqueueDetached {
      await Task.yield()
      frames.record("async ran")
      return 3
    }
    #expect(try await plain.value == 2)
    #expect(try await awaiting.value == 3)
    #expect(frames.values == ["async ran"])
  }

  @Test("results and errors reach the awaiter; a failed job does not stop the queue")
  func resultsAndErrors() async throws {
    let queue = SerialQueue()
    let value = queue.enqueueDetached { "forty-two" }
    let failing = queue.enqueueDetached { () throws -> Int in throw TestError(code: 7) }
    let after = queue.enqueueDetached { 43 }
    #expect(try await value.value == "forty-two")
    await #expect(throws: TestError(code: 7)) { try await failing.value }
    #expect(try await after.value == 43)
    // A job that ended long ago still gives its result.
    #expect(try await value.value == "forty-two")
  }

  @Test(
    "cancelled before it starts: it never runs, its awaiter resumes at once, the line goes on",
    arguments: QueueKind.allCases
  )
  func cancelBeforeStart(kind: QueueKind) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<Int>()
    let first = queue.enqueueDetachedSynchronously { ran.record(1) }
    let second = queue.enqueueDetachedSynchronously { ran.record(2) }
    let third = queue.enqueueDetachedSynchronously { ran.record(3) }
    #expect(queue.pendingCount == 3)
    second.cancel()
    #expect(second.isCancelled)
    #expect(queue.pendingCount == 2)
    // The queue is still held, so resuming here proves the awaiter did not wait for its turn.
    #expect(await endsCancelled(second))
    release.open()
    try await first.value
    try await third.value
    #expect(ran.values == [1, 3])
  }

  @Test(
    "cancelAll cancels the pending synchronous jobs; later ones run",
    arguments: QueueKind.allCases
  )
  func cancelAll(kind: QueueKind) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<Int>()
    var pending: [QueuedTask<Void>] = []
    for index in 0..<50 { pending.append(queue.enqueueDetachedSynchronously { ran.record(index) }) }
    queue.cancelAll()
    release.open()
    let later = queue.enqueueDetachedSynchronously { ran.record(99) }
    try await later.value
    for job in pending { #expect(await endsCancelled(job)) }
    #expect(ran.values == [99])
  }

  @Test("cancelled while it runs: the job sees Task.isCancelled, the next job does not")
  func cancelWhileRunning() async throws {
    // The job blocks its thread: on a thread of its own, not one of the cooperative pool's few.
    let executor = DedicatedThreadExecutor(name: "blocking-sync-job")
    defer { executor.shutdown() }
    let queue = SerialQueue(executor: executor)
    let started = Gate()
    let proceed = DispatchSemaphore(value: 0)
    let seen = OrderedRecorder<Bool>()
    let running = queue.enqueueDetached {
      started.open()
      // Blocks this job's thread until the test has cancelled it: a synchronous job cannot
      // suspend, and this is the only way to hold it while it runs.
      proceed.wait()
      seen.record(Task.isCancelled)
    }
    let next = queue.enqueueDetached { seen.record(Task.isCancelled) }
    try await started.wait()
    running.cancel()
    proceed.signal()
    try await running.value
    try await next.value
    #expect(seen.values == [true, false])
  }

  @Test("events: enqueued, started and finished or failed, in order, with names")
  func events() async throws {
    let queue = SerialQueue(name: "evented")
    var iterator = queue.events.makeAsyncIterator()
    queue.enqueueDetached(name: "one") {}
    queue.enqueueDetached(name: "two") { () throws in throw TestError(code: 1) }
    try await queue.waitUntilIdle()
    var seen: [String] = []
    while seen.count < 6, let event = await iterator.next() {
      let kind: String
      switch event.kind {
      case .enqueued: kind = "enqueued"
      case .started: kind = "started"
      case .finished: kind = "finished"
      case .failed: kind = "failed"
      case .cancelled: kind = "cancelled"
      }
      seen.append("\(kind) #\(event.jobID.rawValue) \(event.jobName ?? "-")")
    }
    #expect(
      seen == [
        "enqueued #1 one", "started #1 one", "enqueued #2 two",
        "finished #1 one", "started #2 two", "failed #2 two",
      ]
        || seen == [
          "enqueued #1 one", "enqueued #2 two", "started #1 one",
          "finished #1 one", "started #2 two", "failed #2 two",
        ]
        || seen == [
          "enqueued #1 one", "started #1 one", "finished #1 one",
          "enqueued #2 two", "started #2 two", "failed #2 two",
        ],
      "\(seen)"
    )
  }

  @Test("isCurrent: true in the job, false in a detached task it starts and after it ends")
  func isCurrent() async throws {
    let queue = SerialQueue()
    let other = SerialQueue()
    let seen = OrderedRecorder<String>()
    let spawned = Mutex<Task<Void, Never>?>(nil)
    let job = queue.enqueueDetached {
      seen.record("in job: \(queue.isCurrent), other: \(other.isCurrent)")
      let detached = Task.detached { seen.record("detached: \(queue.isCurrent)") }
      spawned.withLock { $0 = detached }
    }
    try await job.value
    await spawned.withLock { $0 }?.value
    #expect(!queue.isCurrent)
    #expect(seen.values == ["in job: true, other: false", "detached: false"])
  }

  @Test("a Task started in a sync job may wait on the queue: no false reentrancy error")
  func taskFromSyncJobMayWait() async throws {
    let queue = SerialQueue()
    let spawned = Mutex<Task<Int, any Error>?>(nil)
    let job = queue.enqueueDetached {
      let task = Task { try await queue.enqueueAndWait { 5 } }
      spawned.withLock { $0 = task }
    }
    try await job.value
    let task = try #require(spawned.withLock { $0 })
    #expect(try await task.value == 5)
  }

  @Test("a sync job on a queue of its own executor runs there, in order")
  func onDedicatedExecutor() async throws {
    let executor = DedicatedThreadExecutor(name: "sync-jobs")
    defer { executor.shutdown() }
    let queue = SerialQueue(executor: executor)
    let log = OrderedRecorder<Int>()
    for index in 0..<100 { queue.enqueueDetached { log.record(index) } }
    try await queue.waitUntilIdle()
    #expect(log.values == Array(0..<100))
  }

  @Test("KeyedSerialQueue: per-key order of sync and async jobs, with and without a key limit")
  func keyed() async throws {
    for limit in [nil, 2] as [Int?] {
      let queue = KeyedSerialQueue<Int>(limit: limit)
      let logs = (0..<4).map { _ in OrderedRecorder<Int>() }
      for index in 0..<200 {
        let key = index % 4
        let log = logs[key]
        if index.isMultiple(of: 5) {
          queue.enqueueDetached(forKey: key) {
            await Task.yield()
            log.record(index)
          }
        } else {
          queue.enqueueDetached(forKey: key) { log.record(index) }
        }
      }
      try await queue.waitUntilIdle()
      for key in 0..<4 {
        #expect(logs[key].values == Array(stride(from: key, to: 200, by: 4)), "limit \(limit ?? 0)")
      }
    }
  }

  @Test("ConcurrentQueue: sync jobs fill every slot, and the next waits for a slot to free")
  func concurrent() async throws {
    // The jobs block their threads: on threads of their own, not the cooperative pool's.
    let executor = DedicatedThreadExecutor(name: "blocking-sync-jobs", threads: 3)
    defer { executor.shutdown() }
    let queue = ConcurrentQueue(limit: 3, executor: executor)
    let starts = OrderedRecorder<Int>()
    let release = DispatchSemaphore(value: 0)
    let running = ActiveCounter()
    let counts = OrderedRecorder<Int>()
    // Three blocking jobs hold the three slots at once: the fourth can only run after one ends.
    var jobs: [QueuedTask<Void>] = []
    for index in 0..<4 {
      jobs.append(
        queue.enqueueDetached {
          starts.record(index)
          counts.record(running.enter())
          if index < 3 { release.wait() }
          running.leave()
        }
      )
    }
    // The first three are admitted in order and start at once, each on a thread of its own: which
    // of them records its start first is up to the threads, not the queue.
    try await starts.waitForCount(3)
    #expect(starts.values.sorted() == [0, 1, 2])
    // A job records its start before it counts itself running: wait until all three count, or a
    // released job could leave before the third enters (seen under ThreadSanitizer in CI).
    try await counts.waitForCount(3)
    for _ in 0..<3 { release.signal() }
    for job in jobs { try await job.value }
    #expect(starts.values.count == 4)
    #expect(starts.values.last == 3)
    #expect(counts.values.max() == 3)
  }

  @Test(
    "stress: 8 producers mix sync, async and enqueue jobs with random cancellation",
    .timeLimit(.minutes(3)),
    arguments: QueueKind.allCases
  )
  func stress(kind: QueueKind) async throws {
    struct Entry: Hashable {
      let producer: Int
      let sequence: Int
    }
    let producers = 8
    let jobsPerProducer = 2_000
    let queue = kind.make(name: "sync-stress")
    let log = OrderedRecorder<Entry>()
    let active = ActiveCounter()
    let overlaps = OrderedRecorder<Entry>()
    let handles = try await withThrowingTaskGroup(of: [(Entry, QueuedTask<Void>)].self) { group in
      for producer in 0..<producers {
        group.addTask {
          var generator = SeededGenerator(seed: UInt64(producer) &* 977 &+ 5)
          var handles: [(Entry, QueuedTask<Void>)] = []
          for sequence in 0..<jobsPerProducer {
            let entry = Entry(producer: producer, sequence: sequence)
            let handle: QueuedTask<Void>
            switch Int.random(in: 0..<10, using: &generator) {
            case 0:
              handle = queue.enqueueDetached {
                if active.enter() != 1 { overlaps.record(entry) }
                await Task.yield()
                log.record(entry)
                active.leave()
              }
            case 1:
              handle = queue.enqueue {
                if active.enter() != 1 { overlaps.record(entry) }
                log.record(entry)
                active.leave()
              }
            default:
              handle = queue.enqueueDetachedSynchronously {
                if active.enter() != 1 { overlaps.record(entry) }
                log.record(entry)
                active.leave()
              }
            }
            handles.append((entry, handle))
            if Int.random(in: 0..<12, using: &generator) == 0,
              let victim = handles.randomElement(using: &generator)
            {
              victim.1.cancel()
            }
            if Int.random(in: 0..<200, using: &generator) == 0 { queue.cancelAll() }
          }
          return handles
        }
      }
      var all: [(Entry, QueuedTask<Void>)] = []
      for try await handles in group { all += handles }
      return all
    }
    try await queue.waitUntilIdle()
    let ran = log.values
    #expect(overlaps.values.isEmpty)
    #expect(Set(ran).count == ran.count, "a job ran twice")
    // Per producer, the jobs that ran did so in the order they were enqueued.
    var last = Array(repeating: -1, count: producers)
    var inOrder = true
    for entry in ran {
      if entry.sequence <= last[entry.producer] { inOrder = false }
      last[entry.producer] = entry.sequence
    }
    #expect(inOrder)
    // A job ran exactly when its handle does not report a cancellation before it started.
    let ranSet = Set(ran)
    var mismatches = 0
    for (entry, handle) in handles {
      let cancelledBeforeStart = await endsCancelled(handle)
      if cancelledBeforeStart == ranSet.contains(entry) { mismatches += 1 }
    }
    #expect(mismatches == 0)
  }
}
