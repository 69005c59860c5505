import OrderlyCore
import OrderlyTestSupport
import Testing

@Suite("SerialQueue and ConcurrentQueue(limit: 1): cancellation")
struct SerialQueueCancellationTests {
  @Test(
    "cancelling a pending job's handle: it never runs and its awaiter resumes at once",
    arguments: QueueKind.allCases,
    [false, true]
  )
  func cancelPendingHandle(kind: QueueKind, detached: Bool) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<Int>()
    let job = detached ? queue.enqueueDetached { ran.record(1) } : queue.enqueue { ran.record(1) }
    let after = queue.enqueue { ran.record(2) }
    #expect(queue.pendingCount == 2)
    job.cancel()
    #expect(job.isCancelled)
    #expect(queue.pendingCount == 1)
    // The queue is still blocked, so resuming here proves the awaiter did not wait for its turn.
    #expect(await endsCancelled(job))
    release.open()
    try await after.value
    #expect(ran.values == [2])
  }

  @Test(
    "cancelling the task awaiting enqueueAndWait before its turn: it never runs",
    arguments: QueueKind.allCases
  )
  func cancelPendingEnqueueAndWait(kind: QueueKind) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<Int>()
    var events = queue.events.makeAsyncIterator()
    let caller = Task { try await queue.enqueueAndWait { ran.record(1) } }
    await events.skip(where: isEnqueued)
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }
    #expect(queue.pendingCount == 0)
    #expect(await events.skip(where: isCancelled)?.jobID == JobID(rawValue: 2))
    release.open()
    try await queue.waitUntilIdle()
    #expect(ran.values.isEmpty)
  }

  @Test(
    "an already-cancelled caller of enqueueAndWait does not run its job",
    arguments: QueueKind.allCases
  )
  func alreadyCancelledCaller(kind: QueueKind) async throws {
    let queue = kind.make()
    let ran = OrderedRecorder<Int>()
    let caller = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await queue.enqueueAndWait { ran.record(1) }
    }
    await #expect(throws: CancellationError.self) { try await caller.value }
    #expect(ran.values.isEmpty)
    #expect(queue.isIdle)
  }

  @Test(
    "a running job sees Task.isCancelled when its handle is cancelled",
    arguments: QueueKind.allCases,
    [false, true]
  )
  func runningJobSeesCancellation(kind: QueueKind, detached: Bool) async throws {
    let queue = kind.make()
    let started = Gate()
    let operation: @Sendable () async throws -> Bool = {
      started.open()
      try? await Gate().wait()  // waits until cancelled
      return Task.isCancelled
    }
    let job =
      detached ? queue.enqueueDetached(operation: operation) : queue.enqueue(operation: operation)
    try await started.wait()
    job.cancel()
    #expect(try await job.value)
  }

  @Test(
    "the caller's cancellation reaches a running enqueueAndWait job",
    arguments: QueueKind.allCases
  )
  func enqueueAndWaitSeesCallerCancellation(kind: QueueKind) async throws {
    let queue = kind.make()
    let started = Gate()
    let caller = Task {
      try await queue.enqueueAndWait {
        started.open()
        try? await Gate().wait()
        return Task.isCancelled
      }
    }
    try await started.wait()
    caller.cancel()
    #expect(try await caller.value)
  }

  @Test(
    "cancelAll cancels the running job and every pending one; the queue stays usable",
    arguments: QueueKind.allCases
  )
  func cancelAll(kind: QueueKind) async throws {
    let queue = kind.make()
    let started = Gate()
    let running = queue.enqueueDetached {
      started.open()
      try await Gate().wait()
    }
    try await started.wait()
    var events = queue.events.makeAsyncIterator()
    let pending = (0..<10).map { index in
      index.isMultiple(of: 2) ? queue.enqueue { index } : queue.enqueueDetached { index }
    }
    let waiter = Task { try await queue.enqueueAndWait { -1 } }
    await events.skip(to: 11, where: isEnqueued)
    queue.cancelAll()
    #expect(queue.pendingCount == 0)
    await #expect(throws: CancellationError.self) { try await running.value }
    for job in pending { #expect(await endsCancelled(job)) }
    await #expect(throws: CancellationError.self) { try await waiter.value }
    #expect(try await queue.enqueue { 99 }.value == 99)
    #expect(try await queue.enqueueDetached { 100 }.value == 100)
  }

  @Test(
    "cancelAll leaves a running enqueueAndWait job's caller uncancelled, and ends waiting ones",
    arguments: QueueKind.allCases
  )
  func cancelAllSparesCallersTask(kind: QueueKind) async throws {
    let queue = kind.make()
    let started = Gate()
    let release = Gate()
    let caller = Task { () async throws -> [Bool] in
      let insideAfterCancelAll = try await queue.enqueueAndWait {
        started.open()
        try await release.wait()
        return Task.isCancelled
      }
      // The rest of the caller's work, after the call returned.
      return [insideAfterCancelAll, Task.isCancelled]
    }
    try await started.wait()
    var events = queue.events.makeAsyncIterator()
    let waiter = Task { () async -> [Bool] in
      var threwCancellation = false
      do { try await queue.enqueueAndWait {} } catch {
        threwCancellation = error is CancellationError
      }
      return [threwCancellation, Task.isCancelled]
    }
    await events.skip(to: 1, where: isEnqueued)
    queue.cancelAll()
    let waited = await waiter.value
    #expect(waited == [true, false])
    release.open()
    let seen = try await caller.value
    #expect(seen == [false, false])
    #expect(try await queue.enqueue { 7 }.value == 7)
  }

  @Test(
    "a cancelled job's closure is released with no lock held: a deinit it runs may use the queue",
    .timeLimit(.minutes(1)),
    arguments: QueueKind.allCases
  )
  func closureReleasedOutsideTheLock(kind: QueueKind) async throws {
    let queue = kind.make()
    let recorder = OrderedRecorder<String>()
    /// Holds the queue with a running job until `release` opens.
    func holdQueue() async throws -> Gate {
      let started = Gate()
      let release = Gate()
      queue.enqueueDetached {
        started.open()
        try? await release.wait()
      }
      try await started.wait()
      return release
    }
    // Each closure holds the only reference to an object whose deinit uses the queue.
    var release = try await holdQueue()
    let detached = queue.enqueueDetached {
      [owner = UsesQueueOnDeinit(queue, recorder, "detached")] in _ = owner
    }
    let synchronous = queue.enqueueDetachedSynchronously {
      [owner = UsesQueueOnDeinit(queue, recorder, "synchronous")] in _ = owner
    }
    detached.cancel()
    synchronous.cancel()
    release.open()
    try await recorder.waitForCount(2)
    release = try await holdQueue()
    queue.execute { [owner = UsesQueueOnDeinit(queue, recorder, "execute")] in _ = owner }
    queue.cancelAll()  // drops the waiting `execute` closure unrun
    release.open()
    try await recorder.waitForCount(3)
    #expect(Set(recorder.values) == ["detached", "synchronous", "execute"])
    try await queue.waitUntilIdle()
  }

  @Test(
    "after a running detached job is cancelled, later detached jobs are not",
    arguments: QueueKind.allCases
  )
  func runnerRecoversFromCancellation(kind: QueueKind) async throws {
    let queue = kind.make()
    let started = Gate()
    let first = queue.enqueueDetached {
      started.open()
      try? await Gate().wait()
    }
    let second = queue.enqueueDetached { Task.isCancelled }
    try await started.wait()
    first.cancel()
    #expect(try await second.value == false)
  }

  @Test(
    "many cancelled pending jobs are swept from the line and the queue goes on",
    arguments: QueueKind.allCases
  )
  func cancelManyPending(kind: QueueKind) async throws {
    let release = Gate()
    let queue = try await busyQueue(kind, release: release)
    let ran = OrderedRecorder<Int>()
    let jobs = (0..<1_000).map { index in queue.enqueueDetached { ran.record(index) } }
    for (index, job) in jobs.enumerated() where index % 10 != 0 { job.cancel() }
    #expect(queue.pendingCount == 100)
    release.open()
    try await queue.waitUntilIdle()
    #expect(ran.values == Array(stride(from: 0, to: 1_000, by: 10)))
  }

  @Test("cancelling a job that has ended does nothing", arguments: QueueKind.allCases)
  func cancelAfterEnd(kind: QueueKind) async throws {
    let queue = kind.make()
    let job = queue.enqueue { 5 }
    #expect(try await job.value == 5)
    job.cancel()
    #expect(try await job.value == 5)
  }
}

/// An object whose deinit reads the queue's state and submits to it: run under the queue's
/// lock, both would wait for that lock forever.
final class UsesQueueOnDeinit: Sendable {
  let queue: TestQueue
  let recorder: OrderedRecorder<String>
  let label: String

  init(_ queue: TestQueue, _ recorder: OrderedRecorder<String>, _ label: String) {
    self.queue = queue
    self.recorder = recorder
    self.label = label
  }

  deinit {
    _ = queue.pendingCount
    queue.execute { [recorder, label] in recorder.record(label) }
  }
}
